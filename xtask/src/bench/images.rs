//! `cargo xtask bench images`: the whole image pipeline, spdl-rs against its peers (SPDL 0.8,
//! PyTorch's DataLoader, the decoder's limits), driven by `bench/images.py`.
//!
//! This module prepares and starts it: the corpus, the release `spdl` binary, the bench venv
//! `~/.cache/spdl-bench/venv` (created once, outside the repository: torch from PyPI is ~5 GB),
//! the `spdl_rs` wheel installed into it; then the harness with the flags given here. A peer
//! whose packages do not install is passed to the harness as skipped (with pip's reason); the
//! run goes on. dataloader-rs needs Python >= 3.13: it gets its own venv
//! (`~/.cache/spdl-bench/venv313`) from a `python3.13` on `PATH`, or is skipped. `--smoke` (CI) measures spdl-rs only, on the bundled photos, one round, and
//! needs no venv: it uses the test venv (`target/spdl-venv`) when it has `spdl_rs`.
//!
//! `--corpus large` runs the large-photo tables (`cargo xtask corpus --large`: 300 JPEGs, long
//! side 1,600-4,000 px, built if missing) into `bench/results/images_large.*`: 2 threads,
//! DataLoader `num_workers` 2 and 4, the configurations eval, train and train_f32 (train
//! normalized, where TurboLoader's `train_aug` runs), the large-photo goals under each table.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cmd::{cargo_release, corpus, home, repo_root, Cmd};
use crate::{setup, wheel};

/// Arguments of `cargo xtask bench images`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The corpus folder, or `large` [default: the one `cargo xtask corpus` builds, 2,000
    /// JPEGs]. `large`: the large-photo corpus (`cargo xtask corpus --large`, built if
    /// missing), with the large-photo defaults and goals, written to
    /// `bench/results/images_large.*`.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Rounds (the table shows the median, min and max).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Comma-separated systems [default: all; with `--corpus large`: spdl_cli,
    /// spdl_rs_native, spdl08_batch, torch_dataloader, turboloader, limit_decode,
    /// limit_transform]. All: spdl_cli, spdl_rs_native, spdl_rs_pyfunc, spdl08_batch,
    /// spdl08_image, torch_dataloader, dataloader_rs, turboloader, limit_decode,
    /// limit_transform.
    #[arg(long)]
    systems: Option<String>,
    /// Comma-separated configurations: eval, train, eval_f32, train_f32 [default:
    /// eval,train,eval_f32; with `--corpus large`: eval,train,train_f32].
    #[arg(long)]
    configs: Option<String>,
    /// Thread counts of the pipelines [default: 1,2,4; with `--corpus large`: 2].
    #[arg(long)]
    threads: Option<String>,
    /// DataLoader `num_workers` values [default: 0,1,2,4; with `--corpus large`: 2,4].
    #[arg(long)]
    workers: Option<String>,
    /// Only the first N images of the corpus (quick validation runs).
    #[arg(long)]
    limit: Option<usize>,
    /// Skip the cross-system pixel check.
    #[arg(long)]
    no_check: bool,
    /// Reuse the venv and the installed wheel as they are (no pip, no maturin).
    #[arg(long)]
    no_install: bool,
    /// Tiny run for CI: spdl-rs only, bundled photos, one round.
    #[arg(long)]
    smoke: bool,
}

/// The peers' packages, one pip call each so that one failing does not stop the others;
/// the systems each one serves are skipped when it fails.
const PEERS: &[(&str, &[&str], &[&str])] = &[
    (
        "spdl 0.8.0 + numpy, pillow, matplotlib",
        &["spdl==0.8.0", "numpy", "pillow", "matplotlib"],
        &["spdl08_batch", "spdl08_image"],
    ),
    (
        "torch + torchvision (about 5 GB, once)",
        &["torch", "torchvision"],
        &["torch_dataloader"],
    ),
    ("turboloader", &["turboloader"], &["turboloader"]),
];

/// `~/.cache/spdl-bench/venv` (outside the repository).
pub(super) fn bench_venv() -> PathBuf {
    home().join(".cache/spdl-bench/venv")
}

pub(super) fn py(venv: &Path) -> PathBuf {
    venv.join("bin/python")
}

/// Creates the venv once; installs each peer's packages unless already importable. Returns
/// `SYSTEM=REASON` for the systems whose packages failed.
pub(super) fn ensure_venv(venv: &Path) -> Result<Vec<String>> {
    if !py(venv).exists() {
        setup::venv()?; // makes sure python3-venv is installed
        Cmd::new("python3").args(["-m", "venv"]).arg(venv).run()?;
    }
    let mut skipped = Vec::new();
    for (what, packages, systems) in PEERS {
        let module = match packages[0] {
            "torch" => "torch, torchvision",
            "turboloader" => "turboloader",
            _ => "spdl.io, numpy, matplotlib",
        };
        if Cmd::new(py(venv))
            .args(["-c", &format!("import {module}")])
            .succeeds()
        {
            continue;
        }
        eprintln!("bench images: installing {what} into {}", venv.display());
        let ok = Cmd::new(py(venv))
            .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
            .args(*packages)
            .run();
        if let Err(e) = ok {
            for s in *systems {
                skipped.push(format!(
                    "{s}=pip install {} failed: {e:#}",
                    packages.join(" ")
                ));
            }
        }
    }
    Ok(skipped)
}

/// The `spdl_rs` wheel the tests use (`spdl-rs-ffmpeg`, `cargo xtask wheel`), installed into
/// `venv`.
pub(super) fn install_wheel(venv: &Path) -> Result<()> {
    let wheel = wheel::build_test()?;
    // Either distribution may be there from an earlier build; both hold the `spdl_rs` package.
    Cmd::new(py(venv))
        .args([
            "-m",
            "pip",
            "uninstall",
            "--disable-pip-version-check",
            "-q",
            "-y",
        ])
        .args(["spdl-rs", "spdl-rs-ffmpeg"])
        .run()?;
    Cmd::new(py(venv))
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
        .args(["--force-reinstall", "--no-deps"])
        .arg(&wheel)
        .run()
}

/// A Python >= 3.13 on this machine (dataloader-rs 0.2.0 has no wheel for older ones).
fn python313() -> Option<PathBuf> {
    for name in ["python3.13", "python3.14", "python3.15"] {
        if Cmd::new(name).args(["-c", "pass"]).succeeds() {
            return Some(PathBuf::from(name));
        }
    }
    None
}

/// `~/.cache/spdl-bench/venv313` with dataloader-rs, Pillow and NumPy: its Python, or
/// `SYSTEM=REASON` when it cannot be made.
fn ensure_venv313(install: bool) -> std::result::Result<PathBuf, String> {
    let venv = home().join(".cache/spdl-bench/venv313");
    let check = || {
        Cmd::new(py(&venv))
            .args(["-c", "import dataloader_rs, PIL, numpy"])
            .succeeds()
    };
    if check() {
        return Ok(py(&venv));
    }
    if !install {
        return Err("dataloader_rs=not installed (run without --no-install)".into());
    }
    let Some(host) = python313() else {
        return Err(
            "dataloader_rs=dataloader-rs 0.2.0 requires Python >= 3.13; none found on PATH".into(),
        );
    };
    let made = if py(&venv).exists() {
        Ok(())
    } else {
        Cmd::new(host).args(["-m", "venv"]).arg(&venv).run()
    };
    made.and_then(|()| {
        Cmd::new(py(&venv))
            .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
            .args(["dataloader-rs", "pillow", "numpy"])
            .run()
    })
    .map_err(|e| format!("dataloader_rs=pip install dataloader-rs failed: {e:#}"))?;
    Ok(py(&venv))
}

/// The large-photo corpus `cargo xtask corpus --large` builds (300 JPEGs).
fn large_corpus() -> Result<PathBuf> {
    let dir = home().join(".cache/spdl-corpus/large-300");
    if !dir.join("MANIFEST.tsv").exists() {
        eprintln!(
            "bench images: building the large-photo corpus in {} (once, `cargo xtask corpus --large`)",
            dir.display()
        );
    }
    // Checks the manifest and returns at once when the corpus is complete.
    cargo_release("run", "xtask-corpus")
        .args(["--", "--large"])
        .run()?;
    if !dir.is_dir() {
        anyhow::bail!("the large-photo corpus {} was not built", dir.display());
    }
    Ok(dir)
}

/// What `--corpus large` changes: the defaults of the other flags, the goals and the file
/// names.
struct Preset {
    systems: Option<&'static str>,
    configs: &'static str,
    threads: &'static str,
    workers: &'static str,
    stem: Option<&'static str>,
    goals: &'static str,
}

const DEFAULT: Preset = Preset {
    systems: None,
    configs: "eval,train,eval_f32",
    threads: "1,2,4",
    workers: "0,1,2,4",
    stem: None,
    goals: "default",
};

const LARGE: Preset = Preset {
    systems: Some("spdl_cli,spdl_rs_native,spdl08_batch,torch_dataloader,turboloader,limit_decode,limit_transform"),
    configs: "eval,train,train_f32",
    threads: "2",
    workers: "2,4",
    stem: Some("images_large"),
    goals: "large",
};

fn is_large(corpus: Option<&PathBuf>) -> bool {
    corpus.is_some_and(|c| c.as_os_str() == "large")
}

/// The command line as typed, for the results file.
fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo xtask {}", args.join(" "))
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let root = repo_root();
    let large = !args.smoke && is_large(args.corpus.as_ref());
    let preset = if large { &LARGE } else { &DEFAULT };
    let corpus = if args.smoke {
        root.join("data/samples")
    } else if large {
        large_corpus()?
    } else {
        corpus(args.corpus.as_ref())?
    };
    cargo_release("build", "spdl-cli").run()?;

    let mut skips = Vec::new();
    let mut python313 = None;
    let python = if args.smoke {
        // CI: no bench venv; the test venv has spdl_rs after `cargo xtask test`.
        let test_py = setup::venv_bin("python");
        if test_py.exists() {
            test_py
        } else {
            PathBuf::from("python3")
        }
    } else {
        let venv = bench_venv();
        if !args.no_install {
            skips = ensure_venv(&venv)?;
            if let Err(e) = install_wheel(&venv) {
                eprintln!("bench images: spdl_rs wheel not installed ({e:#}); the spdl_rs Python systems will be skipped if it is missing");
            }
        }
        // dataloader-rs's own venv only when it is among the systems.
        let systems = args.systems.as_deref().or(preset.systems);
        if systems.is_none_or(|s| s.split(',').any(|n| n == "dataloader_rs")) {
            match ensure_venv313(!args.no_install) {
                Ok(p) => python313 = Some(p),
                Err(reason) => skips.push(reason),
            }
        }
        py(&venv)
    };

    let mut cmd = Cmd::new(&python)
        .arg(root.join("bench/images.py"))
        .arg("--python")
        .arg(&python)
        .arg("--spdl")
        .arg(root.join("target/release/spdl"))
        .arg("--corpus")
        .arg(&corpus)
        .args(["--rounds", &args.rounds.to_string()])
        .args([
            "--configs",
            args.configs.as_deref().unwrap_or(preset.configs),
        ])
        .args([
            "--threads",
            args.threads.as_deref().unwrap_or(preset.threads),
        ])
        .args([
            "--workers",
            args.workers.as_deref().unwrap_or(preset.workers),
        ])
        .args(["--goals", preset.goals])
        .args(["--command", &command_line()]);
    if let Some(stem) = preset.stem {
        cmd = cmd.args(["--stem", stem]);
    }
    if let Some(p) = &python313 {
        cmd = cmd.arg("--python-dataloader-rs").arg(p);
    }
    if let Some(s) = args.systems.as_deref().or(preset.systems) {
        cmd = cmd.args(["--systems", s]);
    }
    if let Some(n) = args.limit {
        cmd = cmd.args(["--limit", &n.to_string()]);
    }
    if args.no_check {
        cmd = cmd.arg("--no-check");
    }
    if args.smoke {
        cmd = cmd.arg("--smoke");
    }
    for s in &skips {
        cmd = cmd.arg("--skip").arg(s);
    }
    cmd.run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_is_the_name_not_a_folder_called_large_elsewhere() {
        assert!(is_large(Some(&PathBuf::from("large"))));
        assert!(!is_large(Some(&PathBuf::from("/data/large"))));
        assert!(!is_large(Some(&PathBuf::from("./large"))));
        assert!(!is_large(None));
    }

    #[test]
    fn large_preset_runs_the_goal_rows() {
        let systems = LARGE.systems.unwrap_or_default();
        for s in [
            "spdl_cli",
            "spdl_rs_native",
            "torch_dataloader",
            "turboloader",
            "limit_decode",
        ] {
            assert!(systems.split(',').any(|n| n == s), "{s}");
        }
        assert!(LARGE.configs.split(',').any(|c| c == "train_f32"));
        assert_eq!(LARGE.threads, "2");
        assert_eq!(LARGE.stem, Some("images_large"));
        // The default run keeps writing images.md with its own targets.
        assert_eq!(DEFAULT.stem, None);
        assert_eq!(DEFAULT.goals, "default");
    }

    #[test]
    fn every_peer_system_is_a_harness_system() {
        let harness = std::fs::read_to_string(repo_root().join("bench/images.py")).unwrap();
        for (_, _, systems) in PEERS {
            for s in *systems {
                assert!(harness.contains(&format!("System(\"{s}\"")), "{s}");
            }
        }
        for s in LARGE.systems.unwrap_or_default().split(',') {
            assert!(harness.contains(&format!("System(\"{s}\"")), "{s}");
        }
    }
}
