//! `cargo xtask bench video`: frames/s decoding short H.264 clips (360p and 720p, resized to
//! 224x224 RGB) with spdl-io's `load_video` on two threads, next to SPDL 0.8's
//! `spdl.io.load_video` with the same settings, in one run (`spdl-io`'s `video_bench` example,
//! which alternates the two sides).
//!
//! The clips are cut once with the `ffmpeg` command line into `~/.cache/spdl-corpus/video-clips`
//! (outside the repository) from `../shared/data/videos/bigbuckbunny.mp4` when it exists, else
//! from the clip bundled with the tests (looped). The peer runs from the bench venv that
//! `cargo xtask bench images` creates (`~/.cache/spdl-bench/venv`, SPDL 0.8); without it only
//! spdl-rs is measured. Writes `bench/results/video.md`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cmd::{cargo_release, have_program, home, repo_root, Cmd};

/// Arguments of `cargo xtask bench video`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Rounds, alternating spdl-rs and SPDL 0.8 (the best round of each is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Passes over the clips per round.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Clips per resolution.
    #[arg(long, default_value_t = 8)]
    clips: usize,
}

/// (name tag, width, height) of the two clip sets.
const SIZES: &[(&str, u32, u32)] = &[("360", 640, 360), ("720", 1280, 720)];

/// The source video: the shared Big Buck Bunny excerpt, else the bundled test clip.
fn source() -> PathBuf {
    let root = repo_root();
    let shared = root.join("../shared/data/videos/bigbuckbunny.mp4");
    if shared.exists() {
        return shared;
    }
    root.join("crates/spdl-io/tests/fixtures/media/clips/bbb_320x180_bframes.mp4")
}

/// Cuts `n` clips of 1.2 s per size (H.264, 2 B-frames, GOP 30) unless already there.
fn make_clips(dir: &Path, n: usize) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let src = source();
    for &(tag, w, h) in SIZES {
        for i in 0..n {
            let out = dir.join(format!("bbb{tag}_{i}.mp4"));
            if out.exists() {
                continue;
            }
            let start = format!("{:.1}", i as f64 * 1.5);
            Cmd::new("ffmpeg")
                .args([
                    "-y",
                    "-loglevel",
                    "error",
                    "-stream_loop",
                    "-1",
                    "-ss",
                    &start,
                    "-i",
                ])
                .arg(&src)
                .args(["-t", "1.2", "-an", "-vf", &format!("scale={w}:{h}")])
                .args(["-c:v", "libx264", "-preset", "fast", "-crf", "23"])
                .args(["-bf", "2", "-g", "30"])
                .arg(&out)
                .run()?;
        }
    }
    Ok(())
}

pub(crate) fn run(a: &Args) -> Result<()> {
    crate::setup::system()?; // FFmpeg's libraries and command line
    if !have_program("ffmpeg") {
        bail!("the ffmpeg command line is needed to cut the clips: apt-get install ffmpeg");
    }
    let dir = home().join(".cache/spdl-corpus/video-clips");
    make_clips(&dir, a.clips)?;
    let python = home().join(".cache/spdl-bench/venv/bin/python");
    let peer = Cmd::new(&python).args(["-c", "import spdl.io"]).succeeds();
    if !peer {
        eprintln!(
            "bench video: no SPDL 0.8 in {} (run `cargo xtask bench images` once): spdl-rs only",
            python.display()
        );
    }
    let mut cmd = cargo_release("run", "spdl-io")
        .args(["--features", "decode-ffmpeg"])
        .args(["--example", "video_bench", "--"])
        .arg(&dir)
        .args([
            "--reps",
            &a.reps.to_string(),
            "--rounds",
            &a.rounds.to_string(),
        ]);
    if peer {
        cmd = cmd.arg("--python").arg(&python);
    }
    eprintln!("$ {}", cmd.display());
    let Some(table) = cmd.stdout().filter(|t| !t.trim().is_empty()) else {
        bail!("the video benchmark printed nothing (run the command above to see why)");
    };
    print!("{table}");
    let out = repo_root().join("bench/results/video.md");
    let text = format!(
        "# bench video\n\n`cargo xtask bench video` ({} clips per size, {} rounds x {} reps, 2 threads, \
         resize to 224x224 RGB), {}:\n\n```text\n{}```\n",
        a.clips,
        a.rounds,
        a.reps,
        date(),
        table
    );
    std::fs::write(&out, text).with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!("bench video: wrote {}", out.display());
    Ok(())
}

fn date() -> String {
    Cmd::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .stdout()
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}
