//! Video decode throughput: frames/s decoding short H.264 clips with resize to
//! 224x224 RGB, next to SPDL 0.8's `spdl.io.load_video` with the same settings
//! (not a timed test).
//!
//! ```text
//! cargo run --release -p spdl-io --features decode-ffmpeg --example video_bench -- \
//!     DIR [--reps N] [--rounds R] [--python /tmp/spdl-venv/bin/python3]
//! ```
//!
//! `DIR` holds `.mp4` clips whose names contain `360` or `720` (the group).
//! The clips are read into memory first, so only demux + decode + resize is
//! timed. Two settings, both using two threads in all:
//! - `2 workers x 1 decoder thread`: two clips decode at once (how a pipeline
//!   runs `load_video` as a blocking stage);
//! - `1 worker x 2 decoder threads`: one clip at a time, FFmpeg frame threads.
//!
//! With `--python`, runs `video_bench_spdl.py` (next to this file) on the same
//! clips in the same run and prints the ratio. The two sides alternate for
//! `--rounds` rounds (default 3) and the best round of each is reported, which
//! keeps a busy machine from favouring either side. Make clips with e.g.
//! `ffmpeg -ss 0 -i bigbuckbunny.mp4 -t 1.2 -an -vf scale=640:360 -c:v libx264
//! -preset fast -crf 23 -bf 2 -g 30 bbb360_0.mp4`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use spdl_io::{load_video, MediaSource, VideoOptions};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut dir = None;
    let mut reps = 3usize;
    let mut python = None;
    let mut rounds = 3usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().context("--reps N")?.parse()?,
            "--rounds" => rounds = args.next().context("--rounds R")?.parse()?,
            "--python" => python = Some(args.next().context("--python PATH")?),
            _ => dir = Some(PathBuf::from(a)),
        }
    }
    let dir = dir.context("usage: video_bench DIR [--reps N] [--python PATH]")?;
    let mut groups: BTreeMap<&str, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if !name.ends_with(".mp4") {
            continue;
        }
        let group = if name.contains("720") {
            "720p"
        } else if name.contains("360") {
            "360p"
        } else {
            continue;
        };
        groups
            .entry(group)
            .or_default()
            .push((name, std::fs::read(&path)?));
    }
    if groups.is_empty() {
        bail!("no *360*.mp4 / *720*.mp4 clips in {}", dir.display());
    }
    println!("{}", spdl_io::ffmpeg_versions());
    let modes = [
        ("2 workers x 1 decoder thread", 2, 1),
        ("1 worker x 2 decoder threads", 1, 2),
    ];
    // Best frames/s per (group, mode), for each side.
    let mut ours: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut theirs: BTreeMap<(String, String), f64> = BTreeMap::new();
    for round in 0..rounds.max(1) {
        for (group, clips) in &groups {
            for &(mode, workers, threads) in &modes {
                let fps = run(clips, reps, workers, threads)?;
                println!("round {round}: spdl-rs  {group}  {mode}: {fps:8.1} frames/s");
                let best = ours
                    .entry((group.to_string(), mode.to_string()))
                    .or_insert(0.0);
                *best = best.max(fps);
            }
        }
        if let Some(python) = &python {
            let script =
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/video_bench_spdl.py");
            let out = std::process::Command::new(python)
                .arg(&script)
                .arg(&dir)
                .args(["--reps", &reps.to_string()])
                .output()
                .context("running video_bench_spdl.py")?;
            if !out.status.success() {
                bail!(
                    "video_bench_spdl.py failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            // Lines: "GROUP<TAB>MODE<TAB>FPS".
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if let [group, mode, fps] = line.split('\t').collect::<Vec<_>>()[..] {
                    let fps: f64 = fps.parse()?;
                    println!("round {round}: SPDL 0.8 {group}  {mode}: {fps:8.1} frames/s");
                    let best = theirs
                        .entry((group.to_string(), mode.to_string()))
                        .or_insert(0.0);
                    *best = best.max(fps);
                }
            }
        }
    }
    let n: usize = groups.values().map(Vec::len).sum();
    println!("\nbest of {rounds} rounds, {n} clips x {reps} reps, 224x224 RGB bicubic:");
    for ((group, mode), fps) in &ours {
        match theirs.get(&(group.clone(), mode.clone())) {
            Some(t) => println!(
                "{group}  {mode}:  spdl-rs {fps:7.1}  SPDL 0.8 {t:7.1} frames/s  ratio {:.2}x",
                fps / t
            ),
            None => println!("{group}  {mode}:  spdl-rs {fps:7.1} frames/s"),
        }
    }
    Ok(())
}

/// Decodes every clip `reps` times on `workers` threads; frames per second.
fn run(clips: &[(String, Vec<u8>)], reps: usize, workers: usize, threads: usize) -> Result<f64> {
    let opts = VideoOptions {
        width: Some(224),
        height: Some(224),
        threads,
        ..Default::default()
    };
    // One warm-up pass.
    for (name, bytes) in clips {
        load_video(MediaSource::bytes(name, bytes), &opts)?;
    }
    let next = AtomicUsize::new(0);
    let frames = AtomicUsize::new(0);
    let jobs = clips.len() * reps;
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let j = next.fetch_add(1, Ordering::Relaxed);
                        if j >= jobs {
                            return Ok(());
                        }
                        let (name, bytes) = &clips[j % clips.len()];
                        let v = load_video(MediaSource::bytes(name, bytes), &opts)?;
                        frames.fetch_add(v.shape[0], Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| anyhow::anyhow!("worker panicked"))??;
        }
        Ok(())
    })?;
    Ok(frames.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
}
