//! Time of `load_video` with `FrameSelection::Indices` near the start, the
//! middle and the end of one long file, and of `Step` (not a timed test).
//!
//! ```text
//! cargo run --release -p spdl-io --features decode-ffmpeg --example video_index_bench -- \
//!     FILE [--reps N]
//! ```
//!
//! The file is read into memory first; each line is the best of `N` runs
//! (default 5). Make a 5-minute 360p H.264 clip with e.g.
//! `ffmpeg -stream_loop 56 -i bigbuckbunny.mp4 -t 300 -an -vf scale=640:360
//! -c:v libx264 -preset veryfast -crf 23 -bf 2 long360.mp4`.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use spdl_io::video::frame_timestamps;
use spdl_io::{load_video, FrameSelection, MediaSource, VideoOptions};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut reps = 5usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().context("--reps N")?.parse()?,
            _ => file = Some(a),
        }
    }
    let file = file.context("usage: video_index_bench FILE [--reps N]")?;
    let bytes = std::fs::read(&file)?;
    let src = || MediaSource::bytes(&file, &bytes);
    let n = frame_timestamps(src(), 1)?.len();
    println!("{file}: {n} frames");
    let cases: Vec<(String, FrameSelection)> = vec![
        (
            "indices=[10, 11]".into(),
            FrameSelection::Indices(vec![10, 11]),
        ),
        (
            format!("indices=[{}, {}]", n / 2, n / 2 + 1),
            FrameSelection::Indices(vec![n / 2, n / 2 + 1]),
        ),
        (
            format!("indices=[{}, {}]", n - 300, n - 299),
            FrameSelection::Indices(vec![n - 300, n - 299]),
        ),
        (
            format!("indices=[{}]", n - 1),
            FrameSelection::Indices(vec![n - 1]),
        ),
        (format!("step={}", n / 8), FrameSelection::Step(n / 8)),
    ];
    for (name, selection) in cases {
        let opts = VideoOptions {
            selection,
            ..Default::default()
        };
        let mut best = Duration::MAX;
        let mut frames = 0;
        for _ in 0..reps {
            let t = Instant::now();
            let v = load_video(src(), &opts)?;
            best = best.min(t.elapsed());
            frames = v.shape[0];
        }
        println!(
            "{name:<24} {frames:>3} frames  {:>8.1} ms",
            best.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
