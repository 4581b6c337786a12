//! `spdl limit`: the decoder's own limit on a dataset. Reads every file into memory first, then
//! decodes and transforms them on `threads` threads in a bare loop (no pipeline, no batching), so
//! `spdl load` can be compared with the most this machine can do.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Result;
use spdl_io::SampleContext;
use spdl_sources::read_file;

use crate::load::{image_loader, list_dataset};
use crate::LimitArgs;

pub(crate) fn run(args: LimitArgs) -> Result<ExitCode> {
    let (dataset, shown) = list_dataset(&args.load)?;
    let threads = args
        .load
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let loader = image_loader(&args.load)?;
    // Unreadable files are counted as failed (and named), as `spdl load` does, not fatal.
    let mut unreadable = Vec::new();
    let files: Vec<(String, Vec<u8>)> = dataset
        .iter()
        .filter_map(|s| match read_file(&s.path) {
            Ok(bytes) => Some((spdl_io::key_from_path(&s.path), bytes)),
            Err(e) => {
                unreadable.push(e.to_string());
                None
            }
        })
        .collect();
    let bytes: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();

    let next = AtomicUsize::new(0);
    let (ok, failed) = (AtomicU64::new(0), AtomicU64::new(0));
    // Why each file failed, named once (first epoch); a lock only on the failure path.
    let reasons = std::sync::Mutex::new(Vec::new());
    let start = Instant::now();
    let epochs = args.load.epochs.max(1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= files.len() * epochs as usize {
                    break;
                }
                let (key, data) = &files[i % files.len()];
                let ctx = SampleContext {
                    key,
                    index: (i % files.len()) as u64,
                    epoch: (i / files.len()) as u64,
                };
                let loaded = if args.decode_only {
                    loader.decode_only(data, &ctx)
                } else {
                    loader.load(data, &ctx)
                };
                match loaded {
                    Ok(img) => {
                        std::hint::black_box(img);
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        if ctx.epoch == 0 {
                            let mut r = reasons.lock().unwrap_or_else(|p| p.into_inner());
                            r.push(e.to_string());
                        }
                    }
                }
            });
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let images = ok.load(Ordering::Relaxed);
    let mut reasons = reasons.into_inner().unwrap_or_else(|p| p.into_inner());
    reasons.sort();
    let report = serde_json::json!({
        "source": shown,
        "decode_only": args.decode_only,
        "threads": threads,
        "images": images,
        "failed": failed.load(Ordering::Relaxed),
        "unreadable": unreadable,
        "failures": reasons,
        "bytes_in_memory": bytes,
        "seconds": seconds,
        "images_per_second": images as f64 / seconds,
    });
    if args.load.json {
        crate::emit(&serde_json::to_string_pretty(&report)?);
    } else {
        crate::emit(&format!(
            "spdl limit: {shown}\n  {images} images decoded{} from memory on {threads} threads in {seconds:.3} s: {:.1} images/s ({} failed, {} not read)\n",
            if args.decode_only { "" } else { " + transformed" },
            images as f64 / seconds,
            failed.load(Ordering::Relaxed),
            unreadable.len()
        ));
        for reason in &unreadable {
            crate::emit(&format!("  not read: {reason}"));
        }
        for reason in &reasons {
            crate::emit(&format!("  failed: {reason}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}
