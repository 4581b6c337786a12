//! Every Rust snippet in the Markdown of the repository (README, docs site, crate READMEs) is one
//! of the examples in `tests/examples/`, word for word, so it compiles with the tests (cargo
//! builds a package's examples for `cargo test`); each example also runs here, through
//! `cargo run` as a reader would run it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the examples with the cargo running this test, and runs one from `dir`.
fn run_example(name: &str, dir: &Path) {
    let cargo = |args: &[&str]| {
        Command::new(env!("CARGO"))
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run cargo")
    };
    let out = cargo(&["run", "--quiet", "-p", "spdl-tests", "--example", name]);
    assert!(
        out.status.success(),
        "example {name} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Markdown files of the repository, outside build output and hidden folders.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a folder of the repository") {
        let path = entry.expect("read a folder entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            markdown_files(&path, out);
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The ```rust blocks of a Markdown text, each with the line it starts on.
fn rust_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut open, line.trim_start()) {
            (None, fence) if fence.starts_with("```rust") => open = Some((n + 1, String::new())),
            (Some(_), "```") => blocks.extend(open.take()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_rust_snippet_is_a_compiled_example() {
    let root = repo_root();
    let examples: Vec<(PathBuf, String)> = std::fs::read_dir(root.join("tests/examples"))
        .expect("tests/examples")
        .map(|e| e.expect("an example").path())
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read an example");
            (p, text)
        })
        .collect();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    let (mut snippets, mut strays) = (0, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a Markdown file");
        for (line, block) in rust_blocks(&text) {
            snippets += 1;
            if !examples.iter().any(|(_, example)| *example == block) {
                let name = file
                    .strip_prefix(&root)
                    .unwrap_or(file)
                    .display()
                    .to_string();
                strays.push(format!("{name}:{line}"));
            }
        }
    }
    assert!(
        strays.is_empty(),
        "these ```rust blocks are not word for word a file of tests/examples/, so nothing \
         compiles them: {strays:?}"
    );
    // The README's, the spdl-core one and the decoder plugin's at least.
    assert!(snippets >= 3, "only {snippets} Rust snippets found");
}

#[test]
fn every_example_runs() {
    // From the repository's root, where `data/samples` is, as the READMEs say.
    let root = repo_root();
    let mut names: Vec<String> = std::fs::read_dir(root.join("tests/examples"))
        .expect("tests/examples")
        .filter_map(|e| {
            let path = e.expect("an example").path();
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            (path.extension()? == "rs").then_some(stem)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 7, "examples: {names:?}");
    for name in names {
        run_example(&name, &root);
    }
}

/// The README's "Crates and features" table is the one list of every crate's features: each
/// feature a user may turn on (not the internal ones that others imply) is named in its
/// crate's row, so the table cannot drift from the Cargo.toml files.
#[test]
fn readme_feature_table_names_every_feature() {
    let internal = ["fetch", "remote", "image-rs", "fuzzing", "default"];
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo_root())
        .output()
        .expect("run cargo metadata");
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let mut missing = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().unwrap_or_default();
        let Some(row) = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
        else {
            continue;
        };
        for feature in package["features"]
            .as_object()
            .into_iter()
            .flat_map(|f| f.keys())
        {
            if !internal.contains(&feature.as_str()) && !row.contains(&format!("`{feature}`")) {
                missing.push(format!("{name}/{feature}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README's crate table lacks: {missing:?}"
    );
}

/// The three crate tables (README, ARCHITECTURE, the docs site's Rust page) each have a row for
/// every crate a user depends on: the published ones and the Python module's.
#[test]
fn crate_tables_name_every_crate() {
    let crates = [
        "spdl-core",
        "spdl-io",
        "spdl-sources",
        "spdl-tar",
        "spdl-cuda",
        "spdl-cli",
        "spdl-py",
        "spdl-testkit",
    ];
    for file in ["README.md", "ARCHITECTURE.md", "docs/api/rust.md"] {
        let text = std::fs::read_to_string(repo_root().join(file)).expect("read a doc");
        for name in crates {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("| `{name}` |"))),
                "{file}'s crate table has no row for {name}"
            );
        }
    }
}
