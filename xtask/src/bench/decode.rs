//! `cargo xtask bench decode`: `spdl load` against the decoder's limit (`spdl limit`: the same
//! files decoded and transformed from memory in a bare loop on all cores), in one run,
//! alternating the two so drift on a shared machine falls on both, each run a fresh process.
//! Writes a Markdown table to `bench/results/decode.md`.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::cmd::{cargo_release, files_under, repo_root, Cmd};

/// Arguments of `cargo xtask bench decode`.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    common: super::CorpusArgs,
    /// Tiny run on the bundled photos, one round (for CI).
    #[arg(long)]
    smoke: bool,
}

/// The transforms measured (`--transform` and the table's name for it), each then again
/// without region decode.
const TRANSFORMS: &[(&str, &str)] = &[
    ("eval", "eval (256, center crop 224)"),
    ("train", "train (random resized crop 224, flip)"),
];

/// The configurations in table order: a name and the flags of `spdl load` and `spdl limit`.
fn configs() -> Vec<(String, Vec<&'static str>)> {
    TRANSFORMS
        .iter()
        .flat_map(|&(transform, name)| {
            let flags = vec!["--transform", transform];
            let no_region = [flags.as_slice(), &["--no-region-decode"]].concat();
            [
                (name.to_owned(), flags),
                (format!("{transform}, no region decode"), no_region),
            ]
        })
        .collect()
}

/// Reads every file once so the first measured run does not pay for the disk.
fn warm_page_cache(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for path in files_under(dir)? {
        total += std::fs::read(&path)?.len() as u64;
    }
    Ok(total)
}

fn images_per_second(spdl: &Path, args: &[&str]) -> Result<f64> {
    let out = Cmd::new(spdl)
        .args(args)
        .arg("--json")
        .stdout()
        .context("run spdl")?;
    let v: serde_json::Value = serde_json::from_str(&out).context("parse spdl --json")?;
    if v["failed"].as_u64().unwrap_or(0) > 0 {
        bail!("spdl {} reported failures: {}", args.join(" "), v["failed"]);
    }
    v["images_per_second"]
        .as_f64()
        .context("images_per_second missing")
}

/// Median, min, max.
fn summary(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(|a, b| a.total_cmp(b));
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let root = repo_root();
    let (corpus, rounds) = if args.smoke {
        (root.join("data/samples"), 1)
    } else {
        (args.common.corpus()?, args.common.rounds.max(1))
    };
    cargo_release("build", "spdl-cli").run()?;
    let spdl = root.join("target/release/spdl");
    let bytes = warm_page_cache(&corpus)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let corpus_arg = corpus.display().to_string();
    let threads = args.common.threads.to_string();
    let cores_arg = cores.to_string();
    eprintln!("bench decode: {corpus_arg} ({:.1} MB), {rounds} round(s), load on {threads} threads, limit on {cores} cores", bytes as f64 / 1e6);

    let mut rows = Vec::new();
    for (name, flags) in configs() {
        let mut load = Vec::new();
        let mut limit = Vec::new();
        for _ in 0..rounds {
            // Alternate: load, limit, load, limit...
            let mut a: Vec<&str> = vec![
                "load",
                &corpus_arg,
                "--threads",
                &threads,
                "--batch-size",
                "32",
                "--size",
                "224",
            ];
            a.extend_from_slice(&flags);
            load.push(images_per_second(&spdl, &a)?);
            let mut b: Vec<&str> = vec![
                "limit",
                &corpus_arg,
                "--threads",
                &cores_arg,
                "--size",
                "224",
            ];
            b.extend_from_slice(&flags);
            limit.push(images_per_second(&spdl, &b)?);
        }
        let (lm, lmin, lmax) = summary(load);
        let (bm, bmin, bmax) = summary(limit);
        let row = format!(
            "| {} | {lm:.0} ({lmin:.0}–{lmax:.0}) | {bm:.0} ({bmin:.0}–{bmax:.0}) | {:.2} |",
            name,
            lm / bm
        );
        eprintln!("{row}");
        rows.push(row);
    }
    let table = format!(
        "| configuration | `spdl load`, {threads} threads: images/s, median (min–max) | limit, bare loop on {cores} cores | ratio |\n|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    let dir = root.join("bench/results");
    std::fs::create_dir_all(&dir)?;
    let text = format!(
        "# bench decode\n\nCorpus: `{corpus_arg}`, batch 32, 224x224 u8. Command: `cargo xtask bench decode{}`.\n\n{table}",
        if args.smoke { " --smoke" } else { "" }
    );
    std::fs::write(
        dir.join(if args.smoke {
            "decode-smoke.md"
        } else {
            "decode.md"
        }),
        &text,
    )?;
    println!("{table}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_each_transform_then_it_without_region_decode() {
        let configs = configs();
        let names: Vec<&str> = configs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "eval (256, center crop 224)",
                "eval, no region decode",
                "train (random resized crop 224, flip)",
                "train, no region decode",
            ]
        );
        assert_eq!(configs[0].1, ["--transform", "eval"]);
        assert_eq!(configs[3].1, ["--transform", "train", "--no-region-decode"]);
    }
}
