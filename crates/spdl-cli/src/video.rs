//! `spdl load --video`: a folder of videos -> read -> decode a fixed-size clip per video
//! (FFmpeg, scaled inside the decode) -> batches of `[N, T, H, W, 3]` u8. Reports frames/s.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Result};
use spdl_core::{Op, PipelineBuilder, StageConfig};
use spdl_sources::{read_file, walk_dir_with, Extensions, WalkOptions};

use crate::report::Failure;
use crate::LoadArgs;

/// One decoded clip: `[T, H, W, 3]` u8.
struct Clip {
    data: Vec<u8>,
}

pub(crate) fn run(args: &LoadArgs) -> Result<ExitCode> {
    let Some(path) = args.path.clone() else {
        bail!("--video needs a PATH: a folder of video files");
    };
    let extensions = Extensions::new(["mp4", "mkv", "avi", "mov", "webm", "m4v"]);
    let walk = WalkOptions {
        include_hidden: args.include_hidden,
    };
    let list = walk_dir_with(&path, &extensions, &walk)?;
    crate::report::print_warnings(&list);
    if list.is_empty() {
        bail!(
            "no video files (mp4, mkv, avi, mov, webm, m4v) in {}",
            path.display()
        );
    }
    let (frames, size) = (args.frames.max(1), args.size as u32);
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let failures: Arc<Mutex<Vec<Failure>>> = Arc::default();
    let paths: Vec<_> = list.iter().map(|s| s.path.clone()).collect();
    let listed = paths.len() as u64 * args.epochs;
    let decode = {
        let failures = failures.clone();
        Op::blocking(move |p: std::path::PathBuf| {
            let decoded = read_file(&p)
                .map_err(|e| Failure::record(&failures, &p, e))
                .and_then(|bytes| {
                    let key = spdl_io::key_from_path(&p);
                    spdl_io::load_video_clip(
                        spdl_io::MediaSource::bytes(&key, &bytes),
                        frames,
                        size,
                        size,
                        1,
                    )
                    .map_err(|e| Failure::record(&failures, &p, e))
                })?;
            Ok(Some(Clip { data: decoded.data }))
        })
    };
    // Clips are stacked into one buffer per batch: [N, T, H, W, 3].
    let stack = Op::blocking(|clips: Vec<Clip>| {
        let mut out = Vec::with_capacity(clips.iter().map(|c| c.data.len()).sum());
        for c in &clips {
            out.extend_from_slice(&c.data);
        }
        Ok(Some((clips.len(), out)))
    });
    let mut pipeline = PipelineBuilder::source(move |_| paths.clone())
        .pipe(decode, StageConfig::named("decode").concurrency(threads))
        .aggregate(args.batch_size.max(1), false)
        .pipe(stack, StageConfig::named("collate"))
        .build(threads)?;
    let start = Instant::now();
    let (mut clips, mut batches) = (0u64, 0u64);
    let mut error = None;
    'epochs: for _ in 0..args.epochs {
        for batch in pipeline.iter() {
            match batch {
                Ok((n, _data)) => {
                    clips += n as u64;
                    batches += 1;
                }
                Err(e) => {
                    error = Some(e);
                    break 'epochs;
                }
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let stats = pipeline.stats();
    pipeline.stop();
    let failures = std::mem::take(&mut *failures.lock().unwrap_or_else(|e| e.into_inner()));
    let frames_per_second = (clips * frames as u64) as f64 / seconds;
    if args.json {
        crate::emit(&serde_json::to_string_pretty(&serde_json::json!({
            "source": path.display().to_string(),
            "clip_shape": [frames, size, size, 3],
            "listed": listed,
            "clips": clips,
            "failed": failures.len(),
            "batches": batches,
            "seconds": seconds,
            "clips_per_second": clips as f64 / seconds,
            "frames_per_second": frames_per_second,
            "failures": failures,
            "error": error.as_ref().map(|e| e.to_string()),
        }))?);
    } else {
        let mut text = format!(
            "spdl load --video: {}\n  {clips} clips of [{frames}, {size}, {size}, 3] u8 in {batches} batches, {threads} threads\n  {frames_per_second:.1} frames/s ({:.1} clips/s), {seconds:.3} s\n  delivered {clips} + failed {} = {} of {listed} listed\n",
            path.display(),
            clips as f64 / seconds,
            failures.len(),
            clips + failures.len() as u64,
        );
        for f in &failures {
            text.push_str(&format!("  {}\n", f.reason));
        }
        text.push_str(&format!("\n{stats}"));
        crate::emit(&text);
    }
    Ok(if error.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
