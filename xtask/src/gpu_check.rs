//! `cargo xtask gpu-check`: the one short run to do on a machine with an NVIDIA GPU (under
//! 5 minutes): the CUDA tests, then `crates/spdl-cuda/examples/gpu_check.rs`, which measures
//! host-to-device GB/s (pinned pool, pageable memory, and torch's `pin_memory()` if a Python
//! with torch is given), decodes the photos with nvJPEG against the CPU decoder (mean absolute
//! difference), and nvJPEG images/s against torchvision's GPU decode; then, if the Python venv
//! exists (`target/spdl-venv`: nothing is downloaded here), the wheel with `cuda` and
//! `crates/spdl-py/tests/test_cuda.py` (its torch tests run if torch is installed in the venv).
//! Without a GPU every part reports "no CUDA driver" cleanly (the GPU tests are skipped with
//! the reason), so the script is tested on any machine.
//!
//! Every step's output also goes into one report, `target/gpu-check/report.md` (or
//! `--report PATH`): the machine, each step's status, the Rust GPU tests (spdl-cuda with
//! `cuda,decode-nvjpeg,decode-nvdec`), the measurements of the example (H2D GB/s pinned vs
//! pageable vs torch `pin_memory().cuda(non_blocking=True)`, nvJPEG images/s vs torchvision
//! `decode_jpeg(device="cuda")`, pixel MAD of nvJPEG against the CPU decoder), and the Python
//! GPU tests (`tests/test_cuda.py`: round trips and the DLPack stream-ordering test;
//! `tests/test_gpu.py`: nvJPEG against the CPU path, `transfer_tensor_h2d` / `d2h`, pinned
//! `cpu_storage`; NVDEC against FFmpeg's CPU decode, pixel MAD, in
//! `test_nvdec_matches_the_cpu_decoder`), with the reason of each skipped test. NVDEC
//! frames/s is not measured yet: the report says so instead of a figure.

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
    /// Skip the Python wheel and the Python GPU tests.
    #[arg(long)]
    no_python: bool,
    /// Where to write the report [default: target/gpu-check/report.md].
    #[arg(long)]
    report: Option<PathBuf>,
}

/// The report: one section per step, with its status and output.
struct Report {
    text: String,
    failed: Vec<String>,
}

impl Report {
    /// A section without a step to run (what is not measured, and why).
    fn note(&mut self, name: &str, text: &str) {
        println!("gpu-check: {name}: {text}");
        self.text.push_str(&format!("\n## {name}\n\n{text}\n"));
    }

    fn step(&mut self, name: &str, result: Result<String>) {
        let (status, body) = match result {
            Ok(out) => ("ok", out),
            Err(e) => {
                self.failed.push(name.to_string());
                ("FAILED", format!("{e:#}"))
            }
        };
        println!("gpu-check: {name}: {status}");
        self.text.push_str(&format!(
            "\n## {name}: {status}\n\n```text\n{}\n```\n",
            body.trim_end()
        ));
    }
}

/// Whether the NVIDIA kernel driver is loaded (what every GPU step needs).
fn nvidia_driver() -> Option<String> {
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .map(|v| v.lines().next().unwrap_or_default().to_string())
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
    let report_path = args
        .report
        .clone()
        .unwrap_or_else(|| root.join("target/gpu-check/report.md"));
    let driver = nvidia_driver();
    let machine = match &driver {
        Some(v) => format!("NVIDIA driver: {v}"),
        None => "no NVIDIA driver on this machine (/proc/driver/nvidia/version is absent): \
                 the GPU tests skip with their reason and the measurements report \"no CUDA \
                 driver\"; run `cargo xtask gpu-check` on a GPU machine for figures"
            .to_string(),
    };
    println!("gpu-check: {machine}");
    let mut report = Report {
        text: format!(
            "# spdl-rs GPU check\n\n{machine}\n\nphotos: {}\n",
            photos.display()
        ),
        failed: Vec::new(),
    };
    let features = ["--features", "cuda,decode-nvjpeg,decode-nvdec"];
    if !args.no_tests {
        report.step(
            "Rust GPU tests (cargo test -p spdl-cuda)",
            cargo()
                .args(["test", "-p", "spdl-cuda"])
                .args(features)
                .output(),
        );
    }
    report.step(
        "measurements (H2D GB/s, nvJPEG images/s and MAD vs CPU)",
        cargo_release("run", "spdl-cuda")
            .args(["--example", "gpu_check"])
            .args(features)
            .arg("--")
            .arg(&photos)
            .output(),
    );
    report.note(
        "NVDEC frames/s",
        "not measured yet; NVDEC's pixel MAD against FFmpeg's CPU decode is asserted (< 4) by \
         tests/test_gpu.py::test_nvdec_matches_the_cpu_decoder, and the streaming session \
         (init_buffer / streaming_decode_packets / flush) against the one-shot decode by \
         test_nvdec_streaming_equals_the_one_shot_decode, in the Python GPU tests step (first \
         run on a GPU: the NVDEC session has not run on hardware before)",
    );
    if !args.no_tests && !args.no_python {
        report.step("Python GPU tests", python_tests());
    }
    if let Some(dir) = report_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&report_path, &report.text)?;
    println!("gpu-check: report written to {}", report_path.display());
    if driver.is_none() {
        println!("gpu-check: {machine}");
    }
    if !report.failed.is_empty() {
        anyhow::bail!("gpu-check: failed steps: {}", report.failed.join(", "));
    }
    Ok(())
}

/// The wheel (with `cuda` and the GPU decoders) into the existing venv, then the Python GPU
/// tests, with the reason of every skip (`-rs`); skipped, with a line saying why, when there is
/// no venv (a GPU machine may have no network for pip).
fn python_tests() -> Result<String> {
    let python = setup::venv_bin("python");
    if !python.exists() || !repo_root().join("crates/spdl-py/pyproject.toml").exists() {
        return Ok(format!(
            "skipped: no venv at {} (run `cargo xtask setup` where pip works, and carry it)",
            setup::venv_dir().display()
        ));
    }
    let wheel = wheel::build_test()?;
    wheel::install(&wheel)?;
    Cmd::new(python)
        .args([
            "-m",
            "pytest",
            "crates/spdl-py/tests/test_cuda.py",
            "crates/spdl-py/tests/test_gpu.py",
            "-q",
            "-rs",
        ])
        .output()
}
