//! `cargo xtask bench shards`: `bench/shards_cache.py` in one run. Part 1, in alternating
//! rounds: the corpus as single files and as tar shards from local disk, the shards over HTTP
//! (the bench's `file_server`) and S3 (s3s-fs), and single S3 objects, each remote one behind
//! the Rust `latency_proxy` (package `spdl-benches`) adding `--latency-ms` per request
//! (`spdl load`: images/s, and CPU per image of the loader, the server and the proxy). Part 2
//! (unless `--skip-cache`): training batches from the decoded cache, from the JPEGs and from
//! TurboLoader's cache (when it installs). Writes `bench/results/shards_cache.md`, or with
//! `--skip-cache` `bench/results/remote_vs_local.md`.
//!
//! Part 1 needs only `python3`; part 2 uses the bench venv of `cargo xtask bench images`
//! (`~/.cache/spdl-bench/venv`) with numpy, turboloader (optional) and the test wheel.

use std::path::PathBuf;

use anyhow::Result;

use super::images;
use crate::cmd::{cargo_release, repo_root, Cmd};
use crate::setup;

/// Arguments of `cargo xtask bench shards`.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    common: super::CorpusArgs,
    /// Latency added to every remote request (by the file server itself, or by the proxy
    /// for s3s-fs and the row that says so), ms.
    #[arg(long, default_value_t = 20.0)]
    latency_ms: f64,
    /// Only part 1 (shards vs files): no venv, no wheel.
    #[arg(long)]
    skip_cache: bool,
    /// 600 images and one round (well under a minute once built), written to
    /// `target/bench/remote_vs_local_smoke.md`.
    #[arg(long)]
    smoke: bool,
    /// Reuse the venv and the installed wheel as they are (no pip, no maturin).
    #[arg(long)]
    no_install: bool,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let root = repo_root();
    let corpus = args.common.corpus()?;
    let s3s_fs = setup::ensure_s3s_fs()?;
    cargo_release("build", "spdl-cli")
        .args(["--features", "source-http,source-s3"])
        .run()?;
    // The HTTP/S3 file server (which can delay its answers) and the latency proxy (pure Rust,
    // little CPU beside the loader).
    cargo_release("build", "spdl-benches").arg("--bins").run()?;
    let python = if args.skip_cache {
        PathBuf::from("python3")
    } else {
        let venv = images::bench_venv();
        if !args.no_install {
            if !images::py(&venv).exists() {
                setup::venv()?; // makes sure python3-venv is installed
                Cmd::new("python3").args(["-m", "venv"]).arg(&venv).run()?;
            }
            Cmd::new(images::py(&venv))
                .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
                .arg("numpy")
                .run()?;
            // Optional: the bench notes it as skipped when it does not import.
            let _ = Cmd::new(images::py(&venv))
                .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
                .arg("turboloader")
                .run();
            images::install_wheel(&venv)?;
        }
        images::py(&venv)
    };
    let harness = Cmd::new(python).arg(root.join("bench/shards_cache.py"));
    let mut cmd = args
        .common
        .pass_on(harness, &corpus)
        .arg("--spdl")
        .arg(root.join("target/release/spdl"))
        .arg("--s3s-fs")
        .arg(&s3s_fs)
        .arg("--bench-bins")
        .arg(root.join("target/release"))
        .args(["--latency-ms", &args.latency_ms.to_string()])
        .arg("--out")
        // Part 1 alone has a file of its own, so a quick run keeps part 2's figures; a smoke
        // run leaves the committed results alone.
        .arg(root.join(if args.smoke {
            "target/bench/remote_vs_local_smoke.md"
        } else if args.skip_cache {
            "bench/results/remote_vs_local.md"
        } else {
            "bench/results/shards_cache.md"
        }));
    if args.skip_cache {
        cmd = cmd.arg("--skip-cache");
    }
    if args.smoke {
        cmd = cmd.arg("--smoke");
    }
    cmd.run()
}
