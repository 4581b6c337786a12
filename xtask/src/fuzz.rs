//! `cargo xtask fuzz [--seconds N] [--target T]...`: every cargo-fuzz target in `fuzz/`, one
//! after the other, each for N seconds, seeded from the repository's test fixtures (and
//! `../shared/data/hard` when it is there). Prints seconds run and the outcome per target;
//! fails if any target found a crash (the input is in `fuzz/artifacts/TARGET/`).
//!
//! cargo-fuzz needs a nightly compiler: `cargo +nightly fuzz` when rustup has a nightly,
//! else the stable one with `RUSTC_BOOTSTRAP=1`. Not part of `cargo xtask test`: a cold
//! sanitizer build of libjpeg-turbo, image-rs and FFmpeg's bindings alone takes longer than the
//! gate may grow.

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

/// A target and the fixture files that seed it.
struct Target {
    name: &'static str,
    /// File extensions (lower case) of the fixtures that seed it.
    extensions: &'static [&'static str],
    /// Bytes put in front of each seed (the target reads its parameters from there).
    prefix: &'static [u8],
    /// Close the target's stderr (libFuzzer keeps its own): FFmpeg logs an error line for
    /// nearly every mutated input. A crash input is still saved; rerun it to see the message.
    quiet: bool,
    /// libFuzzer `-max_len` (0: its own guess, the largest seed): decoders run far faster on
    /// small inputs under AddressSanitizer, and a cut file is as good a start as a whole one.
    max_len: usize,
}

const TARGETS: &[Target] = &[
    Target {
        name: "jpeg_markers",
        extensions: &["jpg", "jpeg"],
        prefix: &[],
        quiet: false,
        max_len: 0,
    },
    Target {
        name: "turbojpeg",
        extensions: &["jpg", "jpeg"],
        // RGB strict, region from the top-left corner over the whole image.
        prefix: &[0, 0, 0, 255, 255],
        quiet: false,
        max_len: 32768,
    },
    Target {
        name: "image_rs",
        extensions: &["png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff"],
        prefix: &[0],
        quiet: false,
        max_len: 32768,
    },
    Target {
        name: "ffmpeg",
        extensions: &[
            "mp4", "mkv", "avi", "mov", "webm", "wav", "mp3", "flac", "ogg",
        ],
        prefix: &[],
        quiet: false,
        max_len: 32768,
    },
    Target {
        name: "uri",
        extensions: &[],
        prefix: &[],
        quiet: false,
        max_len: 0,
    },
    Target {
        name: "list_file",
        extensions: &["txt"],
        prefix: &[],
        quiet: false,
        max_len: 0,
    },
    Target {
        name: "npy",
        extensions: &["npy"],
        prefix: &[],
        quiet: false,
        max_len: 0,
    },
    Target {
        name: "npz",
        extensions: &["npz"],
        prefix: &[],
        quiet: false,
        max_len: 0,
    },
    Target {
        name: "tar",
        extensions: &["tar"],
        prefix: &[],
        quiet: false,
        max_len: 0,
    },
    Target {
        name: "wav",
        extensions: &["wav"],
        // Window start 1 s, duration 2 s (the target's first two bytes).
        prefix: &[16, 16],
        quiet: false,
        max_len: 0,
    },
    Target {
        name: "filter_desc",
        extensions: &[],
        prefix: &[],
        quiet: true,
        max_len: 512,
    },
];

/// Fixture files larger than this are not seeds (libFuzzer works best on small inputs).
const MAX_SEED_BYTES: u64 = 128 << 10;

pub(crate) fn run(args: &Args) -> Result<()> {
    let root = cmd::repo_root();
    if !cmd::cargo().args(["fuzz", "--version"]).succeeds() {
        bail!("cargo-fuzz is not installed: run `cargo install cargo-fuzz`");
    }
    let nightly = Cmd::new("rustc").args(["+nightly", "--version"]).succeeds();
    let ffmpeg = Cmd::new("pkg-config")
        .args(["--exists", "libavformat"])
        .succeeds();
    let chosen: Vec<&Target> = if args.targets.is_empty() {
        TARGETS
            .iter()
            .filter(|t| ffmpeg || !matches!(t.name, "ffmpeg" | "filter_desc"))
            .collect()
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

/// Every file under the fixture folders: the repository's test fixtures and bundled samples,
/// and the shared hard cases next to the repository when present.
fn fixture_files(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join("data/samples"), root.join("fuzz/seeds")];
    if let Ok(crates) = fs::read_dir(root.join("crates")) {
        dirs.extend(crates.flatten().map(|c| c.path().join("tests/fixtures")));
    }
    dirs.push(root.join("../shared/data/hard"));
    let mut files = Vec::new();
    let mut stack: Vec<PathBuf> = dirs.into_iter().filter(|d| d.is_dir()).collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // `file_type` does not follow links: fixtures hold link loops on purpose.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() && entry.metadata().is_ok_and(|m| m.len() <= MAX_SEED_BYTES) {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    files
}

/// Fills `seeds` (emptied first) with the target's fixtures, prefixed; returns how many.
fn write_seeds(root: &Path, target: &Target, fixtures: &[PathBuf], seeds: &Path) -> Result<usize> {
    let _ = fs::remove_dir_all(seeds);
    fs::create_dir_all(seeds).with_context(|| format!("cannot create {}", seeds.display()))?;
    let own = root.join("fuzz/seeds").join(target.name);
    let mut n = 0;
    for path in fixtures {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        let wanted =
            path.starts_with(&own) || ext.is_some_and(|e| target.extensions.contains(&e.as_str()));
        if !wanted {
            continue;
        }
        let Ok(bytes) = fs::read(path) else {
            continue;
        };
        let mut seed = target.prefix.to_vec();
        seed.extend_from_slice(&bytes);
        n += 1;
        fs::write(seeds.join(format!("seed-{n:04}")), seed)?;
    }
    Ok(n)
}
