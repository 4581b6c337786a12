//! `cargo xtask wheel`: the Python wheel of `crates/spdl-py` (module `spdl_rs`, with FFmpeg video
//! and audio: feature `decode-ffmpeg`), built with maturin from the test venv into
//! `target/wheels`. `cargo xtask test` reuses [`build`] and [`install`].

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};

use crate::cmd::{repo_root, Cmd};
use crate::setup;

const MANIFEST: &str = "crates/spdl-py/Cargo.toml";

/// Cargo features of `spdl-py` in the wheel (and so in the Python tests):
/// - `cuda`: `ops.to_device`, `io.transfer_buffer`, `CUDABuffer`; CUDA is loaded at run time, so
///   this builds anywhere (the tests check the no-driver errors without a GPU);
/// - `decode-ffmpeg`: video/audio through the system FFmpeg (its dev packages come with
///   `setup::system`). That wheel links the system's FFmpeg libraries, so it gets this
///   machine's tag (`--compatibility linux`): for a manylinux tag maturin would try to bundle
///   FFmpeg's many shared libraries (with patchelf).
const FEATURES: &[&str] = &["cuda", "decode-ffmpeg"];

pub(crate) fn run() -> Result<()> {
    setup::system()?;
    setup::venv()?;
    let wheel = build()?;
    println!("{}", wheel.display());
    Ok(())
}

/// Builds the release wheel for the venv's Python; returns its path.
pub(crate) fn build() -> Result<PathBuf> {
    let root = repo_root();
    if !root.join("crates/spdl-py/pyproject.toml").exists() {
        bail!("crates/spdl-py/pyproject.toml does not exist yet: no wheel to build");
    }
    let out = root.join("target").join("wheels");
    // A little slack: some file systems round modification times.
    let started = SystemTime::now() - Duration::from_secs(2);
    Cmd::new(setup::venv_bin("maturin"))
        .args(["build", "--release", "-m", MANIFEST])
        .arg(format!("--features={}", FEATURES.join(",")))
        .args(["--compatibility", "linux", "-i"])
        .arg(setup::venv_bin("python"))
        .arg("-o")
        .arg(&out)
        .run()?;
    // The wheel just written: the newest `.whl` in the output folder.
    let newest = std::fs::read_dir(&out)
        .with_context(|| format!("cannot read {}", out.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "whl"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .filter(|(modified, _)| *modified >= started)
        .max();
    match newest {
        Some((_, path)) => Ok(path),
        None => bail!("maturin succeeded but wrote no wheel to {}", out.display()),
    }
}

/// Installs `wheel` into the venv in place of any previous build; its Python dependencies are
/// installed only if missing.
pub(crate) fn install(wheel: &std::path::Path) -> Result<()> {
    let file = wheel.file_name().unwrap_or_default().to_string_lossy();
    // A wheel's file name starts with its distribution name: `spdl_rs-0.1.0-cp311-...`.
    let dist = file.split('-').next().unwrap_or_default().to_string();
    let pip =
        || Cmd::new(setup::venv_bin("python")).args(["-m", "pip", "--disable-pip-version-check"]);
    pip().args(["uninstall", "-y", "-q", &dist]).run()?;
    pip().args(["install", "-q"]).arg(wheel).run()
}
