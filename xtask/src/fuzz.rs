//! `cargo xtask fuzz [--seconds N] [--target T]...`: every cargo-fuzz target in `fuzz/`, one
//! after the other, each for N seconds, seeded from the repository's test fixtures (and
//! `../shared/data/hard` when it is there). Prints seconds run and the outcome per target;
//! fails if any target found a crash (the input is in `fuzz/artifacts/TARGET/`).
//!
//! cargo-fuzz is installed on first use (`cargo xtask setup --cargo-fuzz` does it ahead). It
//! needs a nightly compiler: `cargo +nightly fuzz` when rustup has a nightly, else the stable
//! one with `RUSTC_BOOTSTRAP=1`. Not part of `cargo xtask test`: a cold sanitizer build of
//! libjpeg-turbo, image-rs and FFmpeg's bindings alone takes longer than the gate may grow.
//! The gate's smoke pass instead runs every seed through the targets' bodies on stable Rust
//! (`crates/spdl-fuzz-targets/tests/replay.rs`).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::cmd::{self, Cmd};

/// Arguments of `cargo xtask fuzz`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Seconds per target (libFuzzer `-max_total_time`).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Only these targets (default: all; `ffmpeg` only when FFmpeg's pkg-config files are
    /// found).
    #[arg(long = "target")]
    targets: Vec<String>,
}

/// The targets and their seeds, shared with the replay test of `spdl-fuzz-targets` (only
/// `std`, so xtask can compile the file without the crate's dependencies).
#[path = "../../crates/spdl-fuzz-targets/src/seeds.rs"]
#[allow(unreachable_pub)] // `pub` for the crate's users; private here
mod seeds;

use seeds::{fixture_files, Target, TARGETS};

pub(crate) fn run(args: &Args) -> Result<()> {
    let root = cmd::repo_root();
    crate::setup::ensure_cargo_fuzz()?;
    let nightly = Cmd::new("rustc").args(["+nightly", "--version"]).succeeds();
    let ffmpeg = Cmd::new("pkg-config")
        .args(["--exists", "libavformat"])
        .succeeds();
    let chosen: Vec<&Target> = if args.targets.is_empty() {
        TARGETS.iter().filter(|t| ffmpeg || !t.ffmpeg).collect()
    } else {
        let mut chosen = Vec::new();
        for name in &args.targets {
            match TARGETS.iter().find(|t| t.name == name) {
                Some(t) => chosen.push(t),
                None => bail!(
                    "no fuzz target {name:?}; the targets are: {}",
                    TARGETS
                        .iter()
                        .map(|t| t.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        chosen
    };
    let fixtures = fixture_files(&root);
    let mut results = Vec::new();
    for target in chosen {
        let corpus = root.join("fuzz/corpus").join(target.name);
        let seeds = root
            .join("fuzz/corpus")
            .join(format!("{}-seeds", target.name));
        let n = write_seeds(&root, target, &fixtures, &seeds)?;
        fs::create_dir_all(&corpus)
            .with_context(|| format!("cannot create {}", corpus.display()))?;
        eprintln!("fuzz {}: {n} seeds, {} s", target.name, args.seconds);
        let mut fuzz = cmd::cargo();
        if nightly {
            // The rustup proxy, told twice: `+nightly` for cargo, RUSTUP_TOOLCHAIN for the cargo
            // that cargo-fuzz starts (ours may carry RUSTUP_TOOLCHAIN=stable).
            fuzz = Cmd::new("cargo")
                .env("RUSTUP_TOOLCHAIN", "nightly")
                .arg("+nightly");
        } else {
            fuzz = fuzz.env("RUSTC_BOOTSTRAP", "1");
        }
        fuzz = fuzz.args(["fuzz", "run", target.name]);
        if ffmpeg {
            fuzz = fuzz.args(["--features", "decode-ffmpeg"]);
        }
        let mut limits = vec![
            format!("-max_total_time={}", args.seconds),
            "-rss_limit_mb=4096".to_owned(),
            "-timeout=60".to_owned(),
            "-print_final_stats=1".to_owned(),
        ];
        if target.quiet {
            limits.push("-close_fd_mask=2".to_owned());
        }
        if target.max_len > 0 {
            limits.push(format!("-max_len={}", target.max_len));
        }
        let fuzz = fuzz.arg(&corpus).arg(&seeds).arg("--").args(&limits);
        let start = Instant::now();
        let outcome = fuzz.run();
        results.push((target.name, start.elapsed().as_secs(), outcome));
    }
    println!("\ncargo xtask fuzz ({} s per target):", args.seconds);
    let mut failed = 0;
    for (name, secs, outcome) in &results {
        match outcome {
            Ok(()) => println!("  {name:<14} {secs:>6} s  no crash"),
            Err(e) => {
                failed += 1;
                println!("  {name:<14} {secs:>6} s  FAILED: {e:#} (see fuzz/artifacts/{name}/)");
            }
        }
    }
    if failed > 0 {
        bail!("{failed} fuzz target(s) failed");
    }
    Ok(())
}

/// Fills `dir` (emptied first) with the target's seeds; returns how many.
fn write_seeds(root: &Path, target: &Target, fixtures: &[PathBuf], dir: &Path) -> Result<usize> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let seeds = seeds::seeds(root, target, fixtures);
    for (n, (_, seed)) in seeds.iter().enumerate() {
        fs::write(dir.join(format!("seed-{:04}", n + 1)), seed)?;
    }
    Ok(seeds.len())
}
