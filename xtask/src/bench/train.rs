//! `cargo xtask bench train`: a training loop fed by spdl_rs or by PyTorch's DataLoader (2
//! workers, persistent), the accelerator's step emulated by a GIL-free wait of 25 and 40 ms:
//! steps/s and the share of wall time spent waiting for data (`bench/train.py`, which writes
//! `bench/results/train.{md,json,png}`).
//!
//! It uses the bench venv of `cargo xtask bench images` (`~/.cache/spdl-bench/venv`, torch and
//! torchvision from PyPI, about 5 GB once) with the test wheel installed, and the corpus of
//! `cargo xtask corpus`.

use anyhow::{bail, Result};

use super::images;
use crate::cmd::{repo_root, Cmd};

/// Arguments of `cargo xtask bench train`.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    common: super::CorpusArgs,
    /// Epochs per run.
    #[arg(long, default_value_t = 2)]
    epochs: usize,
    /// Emulated accelerator step times, ms (comma-separated).
    #[arg(long, default_value = "25,40")]
    step_ms: String,
    /// Images per batch.
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    /// DataLoader `num_workers`.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Only the first N images of the corpus (quick runs).
    #[arg(long)]
    limit: Option<usize>,
    /// Reuse the venv and the installed wheel as they are (no pip, no maturin).
    #[arg(long)]
    no_install: bool,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let root = repo_root();
    let corpus = args.common.corpus()?;
    let venv = images::bench_venv();
    if !args.no_install {
        let skipped = images::ensure_venv(&venv)?;
        if skipped.iter().any(|s| s.starts_with("torch_dataloader=")) {
            bail!("torch did not install into {}: {skipped:?}", venv.display());
        }
        images::install_wheel(&venv)?;
    }
    let harness = Cmd::new(images::py(&venv)).arg(root.join("bench/train.py"));
    let mut cmd = args
        .common
        .pass_on(harness, &corpus)
        .args(["--epochs", &args.epochs.to_string()])
        .args(["--step-ms", &args.step_ms])
        .args(["--batch-size", &args.batch_size.to_string()])
        .args(["--workers", &args.workers.to_string()])
        .arg("--out")
        .arg(root.join("bench/results/train"));
    if let Some(n) = args.limit {
        cmd = cmd.args(["--limit", &n.to_string()]);
    }
    cmd.run()
}
