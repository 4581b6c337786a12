//! `cargo xtask gpu-check`: the one short run to do on a machine with an NVIDIA GPU (under
//! 5 minutes): the CUDA tests, then `crates/spdl-cuda/examples/gpu_check.rs`, which measures
//! host-to-device GB/s (pinned pool, pageable memory, and torch's `pin_memory()` if a Python
//! with torch is given), decodes the photos with nvJPEG against the CPU decoder (mean absolute
//! difference), and nvJPEG images/s against torchvision's GPU decode; then, if the Python venv
//! exists (`target/spdl-venv`: nothing is downloaded here), the wheel with `cuda` and
//! `crates/spdl-py/tests/test_cuda.py` (its torch tests run if torch is installed in the venv).
//! Without a GPU every part reports "no CUDA driver" cleanly (the GPU tests are skipped with
//! the reason), so the script is tested on any machine.

use std::path::PathBuf;

use anyhow::Result;

use crate::cmd::{cargo, cargo_release, repo_root, Cmd};
use crate::{setup, wheel};

/// Arguments of `cargo xtask gpu-check`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Photos to decode [default: ../shared/data/photos, else data/samples].
    #[arg(long)]
    photos: Option<PathBuf>,
    /// Skip `cargo test -p spdl-cuda` (only the measurements).
    #[arg(long)]
    no_tests: bool,
    /// Skip the Python wheel and `tests/test_cuda.py`.
    #[arg(long)]
    no_python: bool,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let root = repo_root();
    let photos = args.photos.clone().unwrap_or_else(|| {
        let shared = root.join("../shared/data/photos");
        if shared.is_dir() {
            shared
        } else {
            root.join("data/samples")
        }
    });
    let features = ["--features", "cuda,decode-nvjpeg"];
    if !args.no_tests {
        cargo()
            .args(["test", "-p", "spdl-cuda"])
            .args(features)
            .run()?;
    }
    cargo_release("run", "spdl-cuda")
        .args(["--example", "gpu_check"])
        .args(features)
        .arg("--")
        .arg(photos)
        .run()?;
    if !args.no_tests && !args.no_python {
        python_tests()?;
    }
    Ok(())
}

/// The wheel (with `cuda`) into the existing venv, then the Python GPU tests; skipped, with a
/// line saying why, when there is no venv (a GPU machine may have no network for pip).
fn python_tests() -> Result<()> {
    let python = setup::venv_bin("python");
    if !python.exists() || !repo_root().join("crates/spdl-py/pyproject.toml").exists() {
        println!(
            "gpu-check: Python tests skipped: no venv at {} (run `cargo xtask setup` where pip \
             works, and carry it)",
            setup::venv_dir().display()
        );
        return Ok(());
    }
    let wheel = wheel::build_test()?;
    wheel::install(&wheel)?;
    Cmd::new(python)
        .args([
            "-m",
            "pytest",
            "crates/spdl-py/tests/test_cuda.py",
            "-q",
            "-rs",
        ])
        .run()
}
