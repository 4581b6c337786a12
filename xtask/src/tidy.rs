//! `cargo xtask tidy`: the checkable invariants of ARCHITECTURE.md, as plain checks over the
//! source tree (rust-analyzer's habit: tidy checks are ordinary code, run by the gate).
//!
//! - spdl-core depends only on the engine's small set of crates (no image, CUDA or Python);
//! - only spdl-py depends on PyO3;
//! - the layering between the workspace's crates ([`LAYERS`]): spdl-sources reads tar through
//!   spdl-tar, never spdl-io; spdl-tar needs nothing of the workspace but spdl-core; spdl-cli
//!   and spdl-py link spdl-cuda only behind their `cuda` feature (the CPU path never needs it);
//! - no task is spawned outside spdl-core's abort-on-drop wrapper (`exec/spawned.rs`);
//! - no module circle in any crate: at every level of a crate's module tree, the "uses"
//!   relation between sibling modules has no cycle (a child may use its parent freely).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cmd::{files_under, repo_root};

/// What spdl-core may depend on (normal dependencies): the engine and nothing else.
const CORE_DEPENDENCIES: &[&str] = &[
    "tokio",
    "crossbeam-channel",
    "futures-core",
    "futures-util",
    "tracing",
    "thiserror",
    // A compile-time derive (`Default` with per-field values); no code of its own at run time.
    "smart-default",
];

/// The only crate that may touch Python.
const PYTHON_CRATE: &str = "spdl-py";
const PYTHON_DEPENDENCIES: &[&str] = &["pyo3"];

/// Arrows between the workspace's crates (normal dependencies) that the layering forbids or
/// allows only as optional: `(crate, dependency, rule)`, `Forbidden` or `OptionalOnly`.
const LAYERS: &[(&str, &str, Layer)] = &[
    // Tar shards read through the shared tar crate, not spdl-io's internals or error kinds.
    ("spdl-sources", "spdl-io", Layer::Forbidden),
    // The tar crate is a leaf under spdl-io and spdl-sources.
    ("spdl-tar", "spdl-io", Layer::Forbidden),
    ("spdl-tar", "spdl-sources", Layer::Forbidden),
    // The GPU crate is off the CPU path: only behind the `cuda` feature.
    ("spdl-cli", "spdl-cuda", Layer::OptionalOnly),
    ("spdl-py", "spdl-cuda", Layer::OptionalOnly),
];

/// How a [`LAYERS`] arrow may exist.
#[derive(Clone, Copy)]
enum Layer {
    /// Not at all.
    Forbidden,
    /// Only as an optional dependency (behind a feature).
    OptionalOnly,
}

/// Text that spawns a task bypassing `SpawnedTask` (clippy bans the first two by path; these
/// catch the other spellings too).
const RAW_SPAWNS: &[&str] = &[
    "tokio::spawn(",
    "spawn_blocking(",
    "Handle::current().spawn(",
];
const SPAWN_WRAPPER: &str = "crates/spdl-core/src/exec/spawned.rs";

/// Module circles known and scheduled for removal: (crate dir, members as reported, why).
/// Like `#[expect]`, an entry that no longer matches a circle is itself a violation, so a
/// fixed circle cannot come back unnoticed and the list cannot go stale.
/// Empty: issue 13 broke the circles of plain Rust paths, issue 34 those that following
/// `$crate::` in macros and reading the Python package found. A new entry needs a reason.
const KNOWN_CIRCLES: &[(&str, &str, &str)] = &[];

/// Runs every check and prints each violation; fails if there is any.
pub(crate) fn run() -> Result<()> {
    let problems = check(&repo_root())?;
    for p in &problems {
        eprintln!("tidy: {p}");
    }
    if !problems.is_empty() {
        bail!("{} tidy violation(s)", problems.len());
    }
    eprintln!(
        "tidy: dependency rules, spawn rule and module graphs are clean ({} known circle(s) tolerated, see KNOWN_CIRCLES)",
        KNOWN_CIRCLES.len()
    );
    Ok(())
}

/// All violations in the workspace at `root`, as messages.
pub(crate) fn check(root: &Path) -> Result<Vec<String>> {
    let mut problems = dependency_rules(root)?;
    let mut known_seen = vec![false; KNOWN_CIRCLES.len()];
    let mut found = python_cycles(root)?;
    for krate in crate_dirs(root)? {
        let src = krate.join("src");
        problems.extend(spawn_rule(root, &src)?);
        found.extend(module_cycles(root, &src)?);
    }
    for (krate, members, message) in found {
        match KNOWN_CIRCLES
            .iter()
            .position(|(k, m, _)| *k == krate && *m == members)
        {
            Some(i) => {
                known_seen[i] = true;
                eprintln!("tidy: known (tolerated) {message}");
            }
            None => problems.push(message),
        }
    }
    for ((krate, members, why), seen) in KNOWN_CIRCLES.iter().zip(known_seen) {
        if !seen {
            problems.push(format!(
                "KNOWN_CIRCLES lists {krate} [{members}] ({why}), which no longer exists: remove the entry"
            ));
        }
    }
    Ok(problems)
}

/// The workspace's crates under `crates/`.
fn crate_dirs(root: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .context("reading crates/")?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file() && p.join("src").is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

fn dependency_rules(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for pkg in crate::features::workspace_packages(root)? {
        let name = pkg["name"].as_str().unwrap_or_default();
        for dep in pkg["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let normal = dep["kind"].is_null();
            if name == "spdl-core" && normal && !CORE_DEPENDENCIES.contains(&dep_name) {
                problems.push(format!(
                    "spdl-core depends on `{dep_name}`; the engine may only use {CORE_DEPENDENCIES:?}"
                ));
            }
            let optional = dep["optional"].as_bool().unwrap_or(false);
            for (krate, target, layer) in LAYERS {
                if name != *krate || dep_name != *target || !normal {
                    continue;
                }
                match layer {
                    Layer::Forbidden => problems.push(format!(
                        "{name} depends on `{dep_name}`; the layering forbids it (see LAYERS)"
                    )),
                    Layer::OptionalOnly if !optional => problems.push(format!(
                        "{name} always depends on `{dep_name}`; it may only behind a feature (see LAYERS)"
                    )),
                    Layer::OptionalOnly => {}
                }
            }
            if name != PYTHON_CRATE && PYTHON_DEPENDENCIES.contains(&dep_name) {
                problems.push(format!(
                    "{name} depends on `{dep_name}`; only {PYTHON_CRATE} touches Python"
                ));
            }
        }
    }
    Ok(problems)
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = files_under(dir)?;
    files.retain(|path| path.extension().is_some_and(|e| e == "rs"));
    Ok(files)
}

fn spawn_rule(root: &Path, src: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for file in rust_files(src)? {
        let rel = file.strip_prefix(root).unwrap_or(&file);
        if rel == Path::new(SPAWN_WRAPPER) {
            continue;
        }
        let text = std::fs::read_to_string(&file)?;
        for (n, line) in code_lines(&text) {
            if let Some(s) = RAW_SPAWNS.iter().find(|s| line.contains(*s)) {
                problems.push(format!(
                    "{}:{n}: `{s}` outside {SPAWN_WRAPPER}: use SpawnedTask",
                    rel.display()
                ));
            }
        }
    }
    Ok(problems)
}

/// Lines with their 1-based numbers, comments removed, up to the first `#[cfg(test)]` at the
/// start of a line (unit tests may reach anywhere).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| !l.starts_with("#[cfg(test)]"))
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or_default()))
}

/// A module's path inside its crate: `["decode", "registry"]`; the crate root is `[]`.
type ModPath = Vec<String>;

fn module_path(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: ModPath = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Finds cycles among sibling modules, at every level of the crate at `src`: for each, the
/// crate's folder, the members joined by `, `, and the message.
fn module_cycles(root: &Path, src: &Path) -> Result<Vec<(String, String, String)>> {
    let files = rust_files(src)?;
    let modules: BTreeSet<ModPath> = files.iter().map(|f| module_path(src, f)).collect();
    let mut uses = Vec::new();
    for file in &files {
        let from = module_path(src, file);
        let rel = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let text = std::fs::read_to_string(file)?;
        for (n, line) in code_lines(&text) {
            for path in referenced_paths(line, &from) {
                let to = deepest_module(&modules, &path);
                uses.push((from.clone(), to, format!("{rel}:{n}")));
            }
        }
    }
    let krate = src.parent().unwrap_or(src);
    Ok(circles(&label(root, krate), uses))
}

/// The circles among sibling modules, given every use `(from, to, where)`: each as
/// `(label, members, message)`.
fn circles(label: &str, uses: Vec<(ModPath, ModPath, String)>) -> Vec<(String, String, String)> {
    // parent -> sibling -> sibling it uses, with one piece of evidence per edge.
    let mut edges: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for (from, to, at) in uses {
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            continue; // one contains the other: parent and child may use each other
        }
        edges
            .entry(from[..common].to_vec())
            .or_default()
            .entry(from[common].clone())
            .or_default()
            .entry(to[common].clone())
            .or_insert(at);
    }
    let mut problems = Vec::new();
    for (parent, graph) in &edges {
        for group in cycles(graph) {
            let steps: Vec<String> = group
                .iter()
                .flat_map(|a| graph[a].iter().map(move |(b, at)| (a, b, at)))
                .filter(|(_, b, _)| group.contains(b))
                .map(|(a, b, at)| format!("{a} -> {b} ({at})"))
                .collect();
            let at = if parent.is_empty() {
                "the root".to_string()
            } else {
                parent.join("::")
            };
            let members = group.join(", ");
            let message = format!(
                "module circle in {label} under {at} among {members}: {}",
                steps.join(", ")
            );
            problems.push((label.to_string(), members, message));
        }
    }
    problems
}

fn label(root: &Path, dir: &Path) -> String {
    dir.strip_prefix(root).unwrap_or(dir).display().to_string()
}

/// The Python package, checked like a crate: in each package, sibling modules (files and
/// subpackages) import each other in one direction only, imports inside functions included.
const PYTHON_PACKAGE: &str = "crates/spdl-py/python/spdl_rs";

fn python_cycles(root: &Path) -> Result<Vec<(String, String, String)>> {
    let pkg = root.join(PYTHON_PACKAGE);
    if !pkg.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = files_under(&pkg)?;
    files.retain(|p| p.extension().is_some_and(|e| e == "py"));
    // `pipeline/_build.py` is `pipeline::_build`; `pipeline/__init__.py` is `pipeline`.
    let module_of = |file: &Path| -> ModPath {
        let rel = file.strip_prefix(&pkg).unwrap_or(file).with_extension("");
        let mut path: ModPath = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if path.last().is_some_and(|l| l == "__init__") {
            path.pop();
        }
        path
    };
    let modules: BTreeSet<ModPath> = files.iter().map(|f| module_of(f)).collect();
    let mut uses = Vec::new();
    for file in &files {
        let from = module_of(file);
        // Relative imports start from the module's package (a package's own for `__init__`).
        let package = if file.ends_with("__init__.py") {
            from.clone()
        } else {
            parent_of(&from)
        };
        let rel = label(root, file);
        let text = std::fs::read_to_string(file)?;
        for (n, statement) in python_imports(&text) {
            for path in python_imported(&statement, &package) {
                let to = deepest_module(&modules, &path);
                uses.push((from.clone(), to, format!("{rel}:{n}")));
            }
        }
    }
    Ok(circles(PYTHON_PACKAGE, uses))
}

/// Each `import` / `from ... import` statement (at any indentation, parenthesized lists
/// joined), with its 1-based line.
fn python_imports(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let code = line.split('#').next().unwrap_or("").trim();
        if !(code.starts_with("from ") || code.starts_with("import ")) {
            continue;
        }
        let mut statement = code.to_string();
        while statement.contains('(') && !statement.contains(')') {
            let Some((_, more)) = lines.next() else { break };
            statement.push(' ');
            statement.push_str(more.split('#').next().unwrap_or("").trim());
        }
        out.push((n + 1, statement));
    }
    out
}

/// The module paths (relative to the package root) a statement imports, from `package`.
fn python_imported(statement: &str, package: &ModPath) -> Vec<ModPath> {
    const ROOT: &str = "spdl_rs";
    let dotted = |s: &str| -> ModPath {
        s.split('.')
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect()
    };
    if let Some(rest) = statement.strip_prefix("import ") {
        return rest
            .split(',')
            .filter_map(|m| m.split_whitespace().next())
            .filter_map(|m| m.strip_prefix(ROOT))
            .map(dotted)
            .collect();
    }
    let Some(rest) = statement.strip_prefix("from ") else {
        return Vec::new();
    };
    let Some((source, names)) = rest.split_once(" import ") else {
        return Vec::new();
    };
    let source = source.trim();
    let base = if let Some(absolute) = source.strip_prefix(ROOT) {
        dotted(absolute)
    } else if source.starts_with('.') {
        let level = source.chars().take_while(|&c| c == '.').count();
        let mut base = package.clone();
        for _ in 1..level {
            base = parent_of(&base);
        }
        base.extend(dotted(&source[level..]));
        base
    } else {
        return Vec::new(); // another package
    };
    names
        .trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
        .split(',')
        .filter_map(|n| n.split_whitespace().next())
        .map(|name| {
            let mut path = base.clone();
            path.push(name.to_string()); // a submodule, or a name the deepest module defines
            path
        })
        .collect()
}

/// The longest prefix of `path` that names a module file of the crate.
fn deepest_module(modules: &BTreeSet<ModPath>, path: &[String]) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// Absolute module paths named on a line: `crate::a::b`, `super::c`, and the branches of
/// `use crate::{a::X, b::{Y, Z}}`.
fn referenced_paths(line: &str, from: &ModPath) -> Vec<ModPath> {
    let mut out = Vec::new();
    for (anchor, base) in [("crate::", Vec::new()), ("super::", parent_of(from))] {
        let mut rest = line;
        while let Some(i) = rest.find(anchor) {
            let before = rest[..i].chars().last();
            let tail = &rest[i + anchor.len()..];
            rest = tail;
            // `foo_crate::` is not this crate. `$crate::` in a macro is: counted as a use by the
            // module that defines the macro, since the macro carries the path wherever it goes.
            let macro_crate = anchor == "crate::" && before == Some('$');
            if !macro_crate && before.is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric()) {
                continue;
            }
            let mut base = base.clone();
            let mut tail = tail;
            // `super::super::x`
            while let Some(t) = tail.strip_prefix("super::") {
                base = parent_of(&base);
                tail = t;
            }
            expand(tail, &base, &mut out);
        }
    }
    out
}

fn parent_of(path: &[String]) -> ModPath {
    path[..path.len().saturating_sub(1)].to_vec()
}

/// Expands a path text (`a::b::X`, or `{a::X, b::{Y}}`) after `prefix` into full paths.
fn expand(text: &str, prefix: &ModPath, out: &mut Vec<ModPath>) {
    let mut path = prefix.clone();
    let mut rest = text.trim_start();
    loop {
        if let Some(inner) = rest.strip_prefix('{') {
            for branch in split_top_level(inner) {
                expand(branch, &path, out);
            }
            return;
        }
        let end = rest
            .find(|c: char| !(c == '_' || c.is_alphanumeric()))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        path.push(rest[..end].to_string());
        match rest[end..].strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out.push(path);
}

/// The comma-separated items of a brace group (up to its closing brace).
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0usize, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&text[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

/// The groups of modules that use each other in a circle (strongly connected components of
/// more than one module), each as its sorted member names.
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let reaches = |from: &String| {
        let mut seen: BTreeSet<&String> = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for next in graph.get(n).into_iter().flat_map(|m| m.keys()) {
                if seen.insert(next) {
                    stack.push(next);
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<&String>> =
        graph.keys().map(|k| (k, reaches(k))).collect();
    let mut groups: BTreeSet<Vec<String>> = BTreeSet::new();
    for (a, from_a) in &reach {
        let group: Vec<String> = from_a
            .iter()
            .filter(|b| *b != a && reach.get(*b).is_some_and(|r| r.contains(a)))
            .chain(std::iter::once(a))
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if group.len() > 1 {
            groups.insert(group);
        }
    }
    groups.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ModPath {
        s.split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn paths_on_a_line() {
        let from = p("decode::registry");
        let got = referenced_paths(
            "use crate::{error::{Error, Kind}, image::Image}; let x = super::sniff(b);",
            &from,
        );
        assert_eq!(
            got,
            vec![
                p("error::Error"),
                p("error::Kind"),
                p("image::Image"),
                p("decode::sniff")
            ]
        );
        assert_eq!(
            referenced_paths("$crate::x::Y; spdl_crate::y", &from),
            vec![p("x::Y")]
        );
    }

    #[test]
    fn python_imports_resolve_from_their_package() {
        let text = "import os\nfrom . import _build, _hooks\n\ndef f():\n    from ._pipeline import (\n        Pipeline,\n    )\n    from ..io import load\n    import spdl_rs.sources\n";
        let statements = python_imports(text);
        assert_eq!(statements.len(), 5);
        assert_eq!(
            statements[2],
            (5, "from ._pipeline import ( Pipeline, )".to_string())
        );
        let package = p("pipeline");
        let imported: Vec<ModPath> = statements
            .iter()
            .flat_map(|(_, s)| python_imported(s, &package))
            .collect();
        assert_eq!(
            imported,
            vec![
                p("pipeline::_build"),
                p("pipeline::_hooks"),
                p("pipeline::_pipeline::Pipeline"),
                p("io::load"),
                p("sources"),
            ]
        );
    }

    #[test]
    fn finds_a_circle_once() {
        let mut g: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        g.entry("a".into())
            .or_default()
            .insert("b".into(), "x".into());
        g.entry("b".into())
            .or_default()
            .insert("a".into(), "y".into());
        g.entry("b".into())
            .or_default()
            .insert("c".into(), "z".into());
        assert_eq!(cycles(&g), vec![vec!["a", "b"]]);
    }

    /// The workspace itself is tidy (the gate runs `cargo xtask tidy` too; this keeps
    /// `cargo test -p xtask` honest on its own).
    #[test]
    fn workspace_is_tidy() {
        let problems = check(&repo_root()).unwrap();
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
