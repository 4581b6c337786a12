//! `cargo xtask setup`: install what a fresh Debian/Ubuntu machine lacks, and nothing else.
//!
//! Every part checks before it acts (`dpkg-query`, `cargo fmt --version`, a stamp file in the
//! venv), so on a machine that is already set up the whole command takes well under a second.
//!
//! - [`system`]: apt packages (native libraries and tools) and the rustfmt/clippy components;
//! - [`venv`]: the Python virtual environment for the binding tests, `target/spdl-venv`;
//! - [`ensure_s3s_fs`]: the local S3 server, installed only when a test needs it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};

use crate::cmd::{cargo, have_program, repo_root, Cmd};

/// System packages for every feature of the workspace (see `shared/ENVIRONMENT.md`).
const APT_PACKAGES: &[&str] = &[
    // Vendored libjpeg-turbo (turbojpeg crate).
    "cmake",
    "nasm",
    // FFmpeg (ffmpeg-next) and its bindgen.
    "pkg-config",
    "clang",
    "libclang-dev",
    "libavcodec-dev",
    "libavformat-dev",
    "libavutil-dev",
    "libswscale-dev",
    "libswresample-dev",
    "libavfilter-dev",
    "libavdevice-dev",
    // The `ffmpeg` command, to make test clips.
    "ffmpeg",
];

/// Programs checked instead where there is no dpkg (not Debian/Ubuntu): we cannot install
/// them, but we can say what is missing.
const PROGRAMS: &[&str] = &["cmake", "nasm", "pkg-config", "clang"];

/// What the test venv holds. Changing this list reinstalls it on the next setup.
/// `nvidia-nvjpeg-cu12` (about 5 MB) lets the CUDA tests load libnvjpeg without a GPU.
const PY_PACKAGES: &[&str] = &[
    "maturin>=1.16,<2",
    "auditwheel", // `auditwheel show` on the portable wheel (pure Python, with pyelftools)
    "numpy",
    "pytest",
    "pillow", // the reference decoder of test_io's pixel comparison
    "nvidia-nvjpeg-cu12",
];

/// Installed into the test venv after [`PY_PACKAGES`] where pip can (about 30 s, 650 MB with
/// pyarrow and pandas); where it cannot (no wheel for this Python), setup warns once (the stamp
/// is written anyway) and the tests that need it are skipped visibly. Ray Data runs
/// `crates/spdl-py/tests/test_ray.py`; JAX (CPU, about 100 MB with jaxlib and SciPy) runs
/// `examples/train_imagenet_jax.py` in `crates/spdl-py/tests/test_examples.py` (PyTorch, about
/// 5 GB from PyPI, is not installed: the PyTorch example's test is skipped unless it is).
const OPTIONAL_PY_PACKAGES: &[&str] = &["ray[data]", "jax"];

/// The pinned local S3 server (newer versions need a newer rustc).
const S3S_FS: &str = "s3s-fs@0.14.1";

/// The pinned fuzzing driver of `cargo xtask fuzz` (not needed by the gate).
const CARGO_FUZZ: &str = "cargo-fuzz@0.13.2";

/// Arguments of `cargo xtask setup`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Also install the local S3 server s3s-fs (normally installed when a test needs it).
    #[arg(long)]
    s3s_fs: bool,
    /// Also install cargo-fuzz (normally installed by the first `cargo xtask fuzz`).
    #[arg(long)]
    cargo_fuzz: bool,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    system()?;
    venv()?;
    if args.s3s_fs {
        ensure_s3s_fs()?;
    }
    if args.cargo_fuzz {
        ensure_cargo_fuzz()?;
    }
    eprintln!("setup: done");
    Ok(())
}

/// Native packages and Rust components: what building and linting the workspace needs.
pub(crate) fn system() -> Result<()> {
    apt_packages(APT_PACKAGES)?;
    rust_components()
}

/// Installs the apt packages among `packages` that are not installed yet.
pub(crate) fn apt_packages(packages: &[&str]) -> Result<()> {
    let Some(missing) = missing_debs(packages) else {
        let missing: Vec<&str> = PROGRAMS
            .iter()
            .copied()
            .filter(|p| !have_program(p))
            .collect();
        if !missing.is_empty() {
            bail!(
                "no dpkg here, so setup cannot install packages; install these (and the FFmpeg \
                 development libraries) with your package manager: {}",
                missing.join(" ")
            );
        }
        return Ok(());
    };
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!(
        "setup: installing missing apt packages: {}",
        missing.join(" ")
    );
    apt_install(&missing)
}

/// The packages of `packages` that dpkg does not list as installed; None without dpkg.
fn missing_debs(packages: &[&str]) -> Option<Vec<String>> {
    if !have_program("dpkg-query") {
        return None;
    }
    // Unknown packages go to stderr (and a non-zero exit); known ones print their status.
    let out = Cmd::new("dpkg-query")
        .args(["-W", "-f=${Package} ${db:Status-Status}\n"])
        .args(packages)
        .stdout()?;
    let installed: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, status)| *status == "installed")
        .map(|(name, _)| name)
        .collect();
    Some(
        packages
            .iter()
            .filter(|p| !installed.contains(p))
            .map(|p| p.to_string())
            .collect(),
    )
}

/// `apt-get install` as root, or through `sudo -n`; else fails with the command to run.
fn apt_install(packages: &[String]) -> Result<()> {
    let sudo = if is_root() {
        false
    } else if Cmd::new("sudo").args(["-n", "true"]).succeeds() {
        true
    } else {
        bail!(
            "setup needs these apt packages and is neither root nor allowed `sudo -n`; run:\n\n    \
             sudo apt-get update && sudo apt-get install -y --no-install-recommends {}\n",
            packages.join(" ")
        );
    };
    let apt = |args: &[&str]| {
        let cmd = if sudo {
            Cmd::new("sudo").args(["-n", "apt-get"])
        } else {
            Cmd::new("apt-get")
        };
        cmd.env("DEBIAN_FRONTEND", "noninteractive").args(args)
    };
    // Once per run: a fresh machine has no package lists yet.
    static UPDATED: AtomicBool = AtomicBool::new(false);
    if !UPDATED.swap(true, Ordering::SeqCst) {
        apt(&["update", "-q"]).run()?;
    }
    apt(&["install", "-y", "-q", "--no-install-recommends"])
        .args(packages)
        .run()
}

fn is_root() -> bool {
    Cmd::new("id")
        .arg("-u")
        .stdout()
        .is_some_and(|uid| uid.trim() == "0")
}

/// rustfmt and clippy, through rustup when they are missing.
fn rust_components() -> Result<()> {
    let missing: Vec<&str> = ["fmt", "clippy"]
        .into_iter()
        .filter(|sub| !cargo().args([*sub, "--version"]).succeeds())
        .map(|sub| if sub == "fmt" { "rustfmt" } else { "clippy" })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !have_program("rustup") {
        bail!("missing Rust components {missing:?} and no rustup to install them");
    }
    Cmd::new("rustup")
        .args(["component", "add"])
        .args(&missing)
        .run()
}

/// `target/spdl-venv`, ignored by git with the rest of `target/`.
pub(crate) fn venv_dir() -> PathBuf {
    repo_root().join("target").join("spdl-venv")
}

/// A program of the venv (`python`, `pip`, `maturin`, ...).
pub(crate) fn venv_bin(name: &str) -> PathBuf {
    venv_dir().join("bin").join(name)
}

/// Creates the test venv once and installs [`PY_PACKAGES`] into it; returns its directory.
/// A stamp file records what was installed, so later calls return at once.
pub(crate) fn venv() -> Result<PathBuf> {
    let dir = venv_dir();
    let python = venv_bin("python");
    let stamp = dir.join(".spdl-xtask-packages");
    let wanted = [PY_PACKAGES, OPTIONAL_PY_PACKAGES].concat().join("\n");
    if python.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&wanted) {
        return Ok(dir);
    }
    if !python.exists() {
        create_venv(&dir)?;
    }
    Cmd::new(&python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(PY_PACKAGES)
        .run()?;
    for package in OPTIONAL_PY_PACKAGES {
        let installed = Cmd::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .arg(package)
            .run();
        if let Err(e) = installed {
            eprintln!("setup: optional {package} not installed, its tests will be skipped: {e:#}");
        }
    }
    std::fs::write(&stamp, wanted).with_context(|| format!("cannot write {}", stamp.display()))?;
    Ok(dir)
}

fn create_venv(dir: &Path) -> Result<()> {
    // SPDL_PYTHON picks another interpreter (say python3.12); the default is python3.
    let host = std::env::var("SPDL_PYTHON").unwrap_or_else(|_| "python3".into());
    if !have_program(&host) && host == "python3" {
        apt_packages(&["python3", "python3-venv"])?;
    }
    let create = || Cmd::new(&host).args(["-m", "venv"]).arg(dir).run();
    if create().is_ok() {
        return Ok(());
    }
    // Debian ships `venv` without ensurepip unless python3-venv is installed.
    eprintln!("setup: venv creation failed; installing python3-venv and retrying");
    let _ = std::fs::remove_dir_all(dir);
    apt_packages(&["python3-venv"])?;
    create().context("cannot create the Python venv even with python3-venv installed")
}

/// Where tools built for the tests go: `~/.cache/spdl-tools` (outside the repository, so
/// they survive checkouts), else `target/spdl-tools`.
fn tools_root() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join("spdl-tools"),
        None => repo_root().join("target").join("spdl-tools"),
    }
}

/// The path of the `s3s-fs` binary, installing it first if needed (about 4 minutes, once).
/// Call it from commands whose tests need a local S3 server, not from `setup`.
pub(crate) fn ensure_s3s_fs() -> Result<PathBuf> {
    let root = tools_root();
    let bin = root.join("bin").join("s3s-fs");
    if bin.is_file() {
        return Ok(bin);
    }
    eprintln!("setup: installing {S3S_FS} (the local S3 server for tests; once)");
    cargo()
        .args([
            "install",
            S3S_FS,
            "--features",
            "binary",
            "--locked",
            "--root",
        ])
        .arg(&root)
        .run()?;
    if !bin.is_file() {
        bail!("cargo install succeeded but {} is missing", bin.display());
    }
    Ok(bin)
}

/// Makes `cargo fuzz` work, installing cargo-fuzz into cargo's own bin folder first if needed
/// (about 2 minutes, once). Call it from `cargo xtask fuzz`, not from the gate.
pub(crate) fn ensure_cargo_fuzz() -> Result<()> {
    if cargo().args(["fuzz", "--version"]).succeeds() {
        return Ok(());
    }
    eprintln!("setup: installing {CARGO_FUZZ} (cargo install {CARGO_FUZZ} --locked; once)");
    cargo()
        .args(["install", CARGO_FUZZ, "--locked"])
        .run()
        .with_context(|| format!("cannot install {CARGO_FUZZ}"))?;
    if !cargo().args(["fuzz", "--version"]).succeeds() {
        bail!("installed {CARGO_FUZZ}, but `cargo fuzz` still fails: is cargo's bin folder (~/.cargo/bin) on PATH?");
    }
    Ok(())
}

/// The folder of `libnvjpeg.so.*` from the venv's `nvidia-nvjpeg-cu12` wheel, if installed.
pub(crate) fn venv_nvjpeg_dir() -> Option<PathBuf> {
    let lib = venv_dir().join("lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|python| {
        let dir = python.path().join("site-packages/nvidia/nvjpeg/lib");
        dir.is_dir().then_some(dir)
    })
}
