//! `cargo xtask test`: the whole gate, the one command CI runs (`.ci/run`).
//!
//! Steps, in order: setup; `cargo fmt --check`; `cargo xtask tidy` (see tidy.rs); clippy `-D warnings` with the default features
//! and again with the optional ones, then with each feature of each published crate alone
//! (features.rs); `cargo test` likewise; rustdoc with `-D warnings`; the
//! documentation site (`mkdocs build --strict`); then,
//! once `crates/spdl-py` has a `pyproject.toml`, the FFmpeg wheel into the venv, the portable
//! wheel into a fresh venv with no Rust toolchain (the README's example), the video wheel
//! (FFmpeg bundled) into another when `cargo xtask wheel --release` has built one (see
//! `wheel::check_video_wheel`), and pytest.
//! A failed step does not stop the others (except setup); the last line printed is always
//! `N passed, N failed`, and the exit status is non-zero if anything failed.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cmd::{self, path_with, repo_root, Cmd};
use crate::{docs, features, setup, wheel};

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Skip clippy and rustdoc (for local iterations; CI runs everything).
    #[arg(long)]
    quick: bool,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let mut report = Report::default();
    let has_python = repo_root().join("crates/spdl-py/pyproject.toml").exists();

    // Setup first: without it nothing else can run, so its failure ends the gate.
    let setup_ok = report.step("setup", || {
        setup::system()?;
        if has_python {
            setup::venv()?;
        }
        Ok(())
    });
    let optional = match features::optional() {
        Ok(f) => f,
        Err(e) => {
            report.failed("discover optional features", &e);
            Vec::new()
        }
    };
    if !setup_ok {
        report.finish();
    }

    // Environment shared by every cargo step, so that no step invalidates another's build.
    let mut env: Vec<(&str, OsString)> = Vec::new();
    if has_python {
        // pyo3 picks its interpreter from PYO3_PYTHON: the venv's, as maturin does below.
        env.push(("PYO3_PYTHON", setup::venv_bin("python").into()));
        // The CUDA tests load libnvjpeg from the venv's wheel (no GPU needed to load it).
        if let Some(dir) = setup::venv_nvjpeg_dir() {
            env.push(("SPDL_NVJPEG_PATH", dir.into()));
        }
    }
    if optional.iter().any(|f| f.ends_with("/source-s3")) {
        match setup::ensure_s3s_fs() {
            Ok(bin) => {
                let dir = bin.parent().unwrap_or(&bin).to_path_buf();
                env.push(("PATH", path_with(&dir)));
                env.push(("SPDL_S3S_FS", bin.into()));
            }
            Err(e) => report.failed("install s3s-fs", &e),
        }
    }
    let cargo = |args: &[&str]| {
        env.iter()
            .fold(cmd::cargo(), |c, (k, v)| c.env(k, v))
            .args(args)
    };
    let with_optional = format!("--features={}", optional.join(","));
    if optional.is_empty() {
        eprintln!("test: no optional features in the workspace yet; default features only");
    } else {
        eprintln!("test: optional features: {}", optional.join(" "));
    }

    report.run("fmt", cargo(&["fmt", "--all", "--", "--check"]));
    report.step("tidy", crate::tidy::run);
    if !args.quick {
        let clippy = ["clippy", "--workspace", "--all-targets"];
        report.run("clippy", cargo(&clippy).args(["--", "-D", "warnings"]));
        if !optional.is_empty() {
            report.run(
                "clippy, optional features",
                cargo(&clippy)
                    .arg(&with_optional)
                    .args(["--", "-D", "warnings"]),
            );
        }
    }
    if !args.quick {
        // Each feature of each published crate alone, so a user's one-feature build is
        // warning-free (lib and bins; the tests need the default features).
        report.step("clippy, each feature alone", || {
            let mut failed = Vec::new();
            for (package, feature) in features::each_alone()? {
                let mut clippy = cargo(&["clippy", "-q", "-p", &package, "--no-default-features"]);
                if let Some(f) = &feature {
                    clippy = clippy.args(["--features", f]);
                }
                if clippy.args(["--", "-D", "warnings"]).run().is_err() {
                    failed.push(format!(
                        "{package}/{}",
                        feature.as_deref().unwrap_or("(none)")
                    ));
                }
            }
            anyhow::ensure!(failed.is_empty(), "not clean alone: {}", failed.join(", "));
            Ok(())
        });
    }
    report.run("test", cargo(&["test", "--workspace"]));
    if !optional.is_empty() {
        report.run(
            "test, optional features",
            cargo(&["test", "--workspace", &with_optional]),
        );
    }
    if !args.quick {
        report.run(
            "doc",
            cargo(&["doc", "--workspace", "--no-deps"]).env("RUSTDOCFLAGS", "-D warnings"),
        );
    }
    // After `doc`, so that the site links the fresh rustdoc.
    report.step("docs site", || docs::build().map(|_| ()));
    if has_python {
        let installed = report.step("python wheel", || {
            let wheel = wheel::build_test()?;
            wheel::install(&wheel)
        });
        // The portable wheel, as a user gets it: built (the same crates as the test wheel but
        // FFmpeg, so mostly cached), audited, installed into a fresh venv without cargo on PATH,
        // and the README's example run with it.
        report.step("wheel in a fresh venv", || {
            let out = wheel::wheels_dir().join("release");
            let wheel = wheel::build(wheel::Variant::Base, &out)?;
            wheel::audit(&wheel)?;
            wheel::check_fresh_venv(&wheel)
        });
        // The video wheel (FFmpeg bundled) when `cargo xtask wheel --release` has built one:
        // its cold FFmpeg and Rust builds stay out of the gate, its check does not (a fresh
        // venv, FFmpeg only from the wheel, the same frames as the system-FFmpeg build above).
        match wheel::video_wheel() {
            Some(video) => {
                report.step("video wheel in a fresh venv", || {
                    wheel::audit(&video)?;
                    wheel::check_video_wheel(&video, installed)
                });
            }
            None => report.skipped(
                "video wheel in a fresh venv",
                "none built: cargo xtask wheel --release",
            ),
        }
        if installed {
            // The extension without features (spdl-cuda not linked; a debug build, about a
            // minute): test_no_cuda_build.py loads CPU batches with it and checks that the GPU
            // calls name the missing `cuda` feature (every wheel above has `cuda`).
            let no_cuda = repo_root().join("target/debug/libspdl_rs.so");
            report.run("spdl-py without cuda", cargo(&["build", "-p", "spdl-py"]));
            let pytest = Cmd::new(setup::venv_bin("python"))
                .env("SPDL_NO_CUDA_EXT", &no_cuda)
                .args(["-m", "pytest", "crates/spdl-py/tests", "-q"]);
            report.run("pytest", pytest);
        } else {
            report.skipped("pytest", "no wheel");
        }
    } else {
        eprintln!("test: no crates/spdl-py/pyproject.toml yet; no Python tests");
    }
    report.finish()
}

enum Outcome {
    Passed,
    Failed,
    Skipped(&'static str),
}

/// The steps run so far, printed as a table and a closing `N passed, N failed` line.
#[derive(Default)]
struct Report {
    rows: Vec<(String, Outcome, Duration)>,
}

impl Report {
    /// Runs one step; returns whether it passed.
    fn step(&mut self, name: &str, f: impl FnOnce() -> Result<()>) -> bool {
        eprintln!("\n==> {name}");
        let start = Instant::now();
        let result = f();
        let outcome = match &result {
            Ok(()) => Outcome::Passed,
            Err(e) => {
                eprintln!("==> {name}: FAILED: {e:#}");
                Outcome::Failed
            }
        };
        self.rows.push((name.to_string(), outcome, start.elapsed()));
        result.is_ok()
    }

    fn run(&mut self, name: &str, cmd: Cmd) -> bool {
        self.step(name, || cmd.run())
    }

    fn failed(&mut self, name: &str, error: &anyhow::Error) {
        eprintln!("==> {name}: FAILED: {error:#}");
        self.rows
            .push((name.to_string(), Outcome::Failed, Duration::ZERO));
    }

    fn skipped(&mut self, name: &str, why: &'static str) {
        self.rows
            .push((name.to_string(), Outcome::Skipped(why), Duration::ZERO));
    }

    /// Prints the summary and exits: 0 if every step passed, 1 otherwise.
    fn finish(&self) -> ! {
        let mut passed = 0;
        let mut failed = 0;
        println!("\ncargo xtask test:");
        for (name, outcome, took) in &self.rows {
            let secs = took.as_secs_f64();
            match outcome {
                Outcome::Passed => {
                    passed += 1;
                    println!("  ok       {name:<28} {secs:>7.1}s");
                }
                Outcome::Failed => {
                    failed += 1;
                    println!("  FAILED   {name:<28} {secs:>7.1}s");
                }
                Outcome::Skipped(why) => println!("  skipped  {name:<28} ({why})"),
            }
        }
        println!("{passed} passed, {failed} failed");
        std::process::exit(if failed == 0 { 0 } else { 1 });
    }
}
