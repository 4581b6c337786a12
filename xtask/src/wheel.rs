//! `cargo xtask wheel`: the Python wheels of `crates/spdl-py` (module `spdl_rs`), built with
//! maturin from the test venv. `cargo xtask test` reuses [`build`], [`install`] and
//! [`check_fresh_venv`].
//!
//! Two distributions, one Python package (install one of them):
//! - `spdl-rs` (`crates/spdl-py/pyproject.toml`): feature `cuda` (CUDA is loaded at run time, so
//!   it builds and installs anywhere); abi3 (one wheel for CPython 3.11 and later, see the pyo3
//!   dependency in `crates/spdl-py/Cargo.toml`); libjpeg-turbo linked statically. Installs with
//!   no Rust toolchain and no system package. `--release` links it with zig against glibc 2.28
//!   (`manylinux_2_28`); the test gate builds it natively (`manylinux_2_34` on Debian 12: the
//!   same code, without the gate paying for a second toolchain's full build) and installs that
//!   into a fresh venv.
//! - `spdl-rs-ffmpeg` (the same project built with the features `cuda`, `decode-ffmpeg`,
//!   `source-http` and `source-s3`, then renamed): video and audio, and tar shards read from
//!   HTTP(S) and S3 (`sources.TarShards`). It links the system's FFmpeg shared libraries (FFmpeg 5.1 on
//!   Debian 12: libavcodec59, libavformat59, libavutil57, libswscale6, libswresample4), so it gets
//!   this machine's `linux` tag and needs those libraries where it runs; bundling them with
//!   `auditwheel repair` would add every codec library Debian's FFmpeg links (x264, x265, dav1d,
//!   vpx, ...), many times the extension's size. The test gate installs this one for pytest, as
//!   the video tests need it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cmd::{repo_root, Cmd};
use crate::setup;

const MANIFEST: &str = "crates/spdl-py/Cargo.toml";

/// Arguments of `cargo xtask wheel`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Build both distributable wheels (`spdl-rs`, manylinux abi3; `spdl-rs-ffmpeg`) into
    /// `target/wheels/release`, check them with `auditwheel show`, install `spdl-rs` into a
    /// fresh venv with no Rust toolchain on PATH and run the README's example. Without it:
    /// only the FFmpeg wheel the tests use, into `target/wheels`.
    #[arg(long)]
    release: bool,
    /// With `--release`: link `spdl-rs` against this machine's glibc (a newer manylinux tag)
    /// instead of glibc 2.28 through zig (`pip install ziglang`, done here when missing).
    #[arg(long, requires = "release")]
    native: bool,
}

/// Which distribution to build (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Variant {
    /// `spdl-rs`: portable, no FFmpeg, linked against this machine's glibc (a manylinux tag of
    /// its version: `manylinux_2_34` on Debian 12).
    Base,
    /// `spdl-rs` linked by zig against glibc 2.28 (`manylinux_2_28`: also RHEL 8, Ubuntu 20.04),
    /// in its own target folder (`target/zig`: other compilers, so nothing is shared with the
    /// native builds; about 12 minutes the first time on 2 cores).
    BaseZig,
    /// `spdl-rs-ffmpeg`: with video and audio (linked to the system FFmpeg) and remote tar shards.
    Ffmpeg,
}

impl Variant {
    /// maturin's arguments beyond the pyproject's (which builds `spdl-rs`: features `cuda`,
    /// `decode-nvjpeg`, `decode-nvdec`, all loaded at run time).
    fn maturin_args(self) -> &'static [&'static str] {
        match self {
            Variant::Base => &[],
            Variant::BaseZig => &["--zig", "--compatibility", "manylinux_2_28"],
            Variant::Ffmpeg => &[
                "--features",
                "cuda,decode-nvjpeg,decode-nvdec,decode-ffmpeg,source-http,source-s3",
                "--compatibility",
                "linux",
            ],
        }
    }
}

pub(crate) fn run(args: &Args) -> Result<()> {
    setup::system()?;
    setup::venv()?;
    if !args.release {
        let wheel = build_test()?;
        println!("{}", wheel.display());
        return Ok(());
    }
    let out = wheels_dir().join("release");
    let mut built = Vec::new();
    let base = if args.native {
        Variant::Base
    } else {
        ensure_zig()?;
        Variant::BaseZig
    };
    for variant in [base, Variant::Ffmpeg] {
        let wheel = build(variant, &out)?;
        audit(&wheel)?;
        built.push(wheel);
    }
    check_fresh_venv(&built[0])?;
    println!("\nwheels:");
    for wheel in &built {
        let size = std::fs::metadata(wheel).map(|m| m.len()).unwrap_or(0);
        println!("  {:>6.1} MB  {}", size as f64 / 1e6, wheel.display());
    }
    Ok(())
}

/// `target/wheels`.
pub(crate) fn wheels_dir() -> PathBuf {
    repo_root().join("target").join("wheels")
}

/// The wheel the tests use (`spdl-rs-ffmpeg`, into `target/wheels`); returns its path.
pub(crate) fn build_test() -> Result<PathBuf> {
    build(Variant::Ffmpeg, &wheels_dir())
}

/// Builds the release wheel of `variant` into `out`; returns its path.
///
/// maturin builds from `crates/spdl-py/pyproject.toml` into a folder of its own (emptied first,
/// so the one wheel there is this build's); the FFmpeg wheel is then renamed `spdl-rs-ffmpeg`
/// by `xtask/py/rename_wheel.py` (maturin takes the Python package only from the folder of its
/// pyproject.toml, so a second pyproject.toml cannot share it).
pub(crate) fn build(variant: Variant, out: &Path) -> Result<PathBuf> {
    let root = repo_root();
    if !root.join("crates/spdl-py/pyproject.toml").exists() {
        bail!("crates/spdl-py/pyproject.toml does not exist yet: no wheel to build");
    }
    let staging = root.join("target").join("wheels-staging");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("cannot remove {}", staging.display()))?;
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut maturin = Cmd::new(setup::venv_bin("maturin"));
    if let Variant::BaseZig = variant {
        // maturin runs `python3 -m ziglang` from PATH: the venv's.
        let bin = setup::venv_dir().join("bin");
        maturin = maturin
            .env("PATH", crate::cmd::path_with(&bin))
            .env("CARGO_TARGET_DIR", root.join("target").join("zig"));
    }
    maturin
        .args(["build", "--release", "-m", MANIFEST])
        .args(variant.maturin_args())
        .arg("-i")
        .arg(setup::venv_bin("python"))
        .arg("-o")
        .arg(&staging)
        .run()?;
    let built: Vec<PathBuf> = std::fs::read_dir(&staging)
        .with_context(|| format!("cannot read {}", staging.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    let [wheel] = built.as_slice() else {
        bail!(
            "maturin wrote {} wheels to {}, not one",
            built.len(),
            staging.display()
        );
    };
    let path = match variant {
        Variant::Base | Variant::BaseZig => {
            let dest = out.join(wheel.file_name().unwrap_or_default());
            std::fs::rename(wheel, &dest).with_context(|| {
                format!("cannot move {} to {}", wheel.display(), dest.display())
            })?;
            dest
        }
        Variant::Ffmpeg => {
            let renamed = Cmd::new(setup::venv_bin("python"))
                .arg(root.join("xtask/py/rename_wheel.py"))
                .arg(wheel)
                .arg("spdl-rs-ffmpeg")
                .arg(out)
                .output()?;
            PathBuf::from(renamed.trim())
        }
    };
    std::fs::remove_dir_all(&staging).ok();
    Ok(path)
}

/// The zig toolchain from PyPI (`ziglang`, about 45 MB) in the test venv, unless it is there.
fn ensure_zig() -> Result<()> {
    let python = setup::venv_bin("python");
    if Cmd::new(&python)
        .args(["-m", "ziglang", "version"])
        .succeeds()
    {
        return Ok(());
    }
    // 0.13: the zig release maturin 1.x is tested with.
    Cmd::new(&python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg("ziglang>=0.13,<0.14")
        .run()
}

/// Installs `wheel` into the test venv in place of any previous build of either distribution
/// (they hold the same `spdl_rs` package); its Python dependencies are installed only if
/// missing.
pub(crate) fn install(wheel: &Path) -> Result<()> {
    let pip =
        || Cmd::new(setup::venv_bin("python")).args(["-m", "pip", "--disable-pip-version-check"]);
    pip()
        .args(["uninstall", "-y", "-q", "spdl-rs", "spdl-rs-ffmpeg"])
        .run()?;
    pip().args(["install", "-q"]).arg(wheel).run()
}

/// `auditwheel show`: which platform tag the wheel's binaries allow, and the libraries they
/// need from the system.
pub(crate) fn audit(wheel: &Path) -> Result<()> {
    Cmd::new(setup::venv_bin("python"))
        .args(["-m", "auditwheel", "show"])
        .arg(wheel)
        .run()
}

/// Installs `wheel` into a new venv (`target/wheel-check-venv`) from a process that cannot see
/// cargo or rustc (their folders left out of `PATH`, their environment variables removed, pip
/// told to take binaries only), then runs the first Python example of
/// `crates/spdl-py/README.md` there, from the repository root, as `test_readme.py` does, and
/// checks its output and that `spdl_rs.__version__` is the wheel's version.
pub(crate) fn check_fresh_venv(wheel: &Path) -> Result<()> {
    let root = repo_root();
    let venv = root.join("target").join("wheel-check-venv");
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .with_context(|| format!("cannot remove {}", venv.display()))?;
    }
    let path = path_without_rust();
    // The echoed commands below show only PATH's first entry: this is all of it.
    eprintln!("wheel check: PATH without cargo, rustc, rustup: {path:?}");
    let clean = |program: &Path| {
        [
            "CARGO",
            "CARGO_HOME",
            "RUSTUP_HOME",
            "RUSTUP_TOOLCHAIN",
            "RUSTC",
            "PYO3_PYTHON",
        ]
        .iter()
        .fold(Cmd::new(program), |c, k| c.env_remove(k))
        .env("PATH", &path)
    };
    // The test venv's interpreter makes the new venv: it exists wherever the gate runs.
    clean(&setup::venv_bin("python"))
        .args(["-m", "venv"])
        .arg(&venv)
        .run()?;
    let python = venv.join("bin").join("python");
    if clean(&python)
        .args([
            "-c",
            "import shutil, sys; sys.exit(shutil.which('cargo') is None)",
        ])
        .succeeds()
    {
        bail!("cargo is still on PATH for the fresh venv: {path:?}");
    }
    clean(&python)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "numpy",
        ])
        .arg(wheel)
        .run()?;

    let readme = root.join("crates/spdl-py/README.md");
    let text = std::fs::read_to_string(&readme)
        .with_context(|| format!("cannot read {}", readme.display()))?;
    let code = first_python_block(&text)
        .with_context(|| format!("no ```python block in {}", readme.display()))?;
    let out = clean(&python)
        .args(["-c", code])
        .output()
        .context("the README example")?;
    print!("{out}");
    if !out.contains("(8, 224, 224, 3) uint8") {
        bail!("the README example ran but did not print a (8, 224, 224, 3) uint8 batch");
    }

    let file = wheel.file_name().unwrap_or_default().to_string_lossy();
    let version = file.split('-').nth(1).unwrap_or_default();
    let got = clean(&python)
        .args(["-c", "import spdl_rs; print(spdl_rs.__version__)"])
        .output()?;
    if got.trim() != version {
        bail!(
            "spdl_rs.__version__ is {:?}, the wheel's version {version:?}",
            got.trim()
        );
    }
    eprintln!("wheel check: {file} installed and ran the README example without a Rust toolchain");
    Ok(())
}

/// `PATH` without the folders that hold `cargo`, `rustc` or `rustup`.
fn path_without_rust() -> std::ffi::OsString {
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    let kept = std::env::split_paths(&dirs).filter(|d| {
        !["cargo", "rustc", "rustup"]
            .iter()
            .any(|p| d.join(p).exists())
    });
    std::env::join_paths(kept).unwrap_or_default()
}

/// The body of the first fenced ```python block of a Markdown text.
fn first_python_block(markdown: &str) -> Option<&str> {
    let start = markdown.find("```python\n")? + "```python\n".len();
    let len = markdown[start..].find("```")?;
    Some(&markdown[start..start + len])
}
