//! The epoch bubble: how long a training loop waits for the first batch of a new epoch,
//! against its wait for a batch in mid-epoch.
//! `cargo run --release -p spdl-benches --example epoch_bubble`.
//!
//! A pipeline of `ITEMS` items per epoch through a CPU op of about `WORK_US` us per item
//! (2 workers, concurrency 2), batched by `BATCH`; the consumer spends `STEP_MS` ms per batch
//! (a training step that leaves the CPUs to the loader, as a GPU step does). Without epoch
//! prefetching (`prefetch_epochs(false)`: what every epoch did before) the source starts an
//! epoch only when the consumer asks for its first batch; with it, the next epoch's first
//! batches are ready when the current one ends. Prefetching is opt-in.

use std::hint::black_box;
use std::time::{Duration, Instant};

use spdl_core::{Op, Order, PipelineBuilder, StageConfig};

const ITEMS: u64 = 1024;
const BATCH: usize = 32;
const WORK_US: u64 = 60;
const STEP_MS: u64 = 8;
const EPOCHS: u64 = 4;

/// Busy CPU work for about `WORK_US` us (a stand-in for decoding one image).
fn work(x: u64) -> u64 {
    let until = Instant::now() + Duration::from_micros(WORK_US);
    let mut h = x;
    while Instant::now() < until {
        for _ in 0..64 {
            h = black_box(h.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    h
}

/// Per epoch: the wait for its first batch, and the median wait for the batches of its middle
/// half.
fn run(prefetch: Option<bool>) -> anyhow::Result<Vec<(Duration, Duration)>> {
    let b = PipelineBuilder::source(|_epoch| 0..ITEMS)
        .pipe(
            Op::blocking(|x: u64| Ok(Some(work(x)))),
            StageConfig::named("decode")
                .concurrency(2)
                .order(Order::Input),
        )
        .aggregate(BATCH, false)
        .sink(3);
    let b = match prefetch {
        Some(on) => b.prefetch_epochs(on),
        None => b,
    };
    let mut p = b.build(2)?;
    let mut out = Vec::new();
    for _ in 0..EPOCHS {
        let mut waits = Vec::new();
        loop {
            let t = Instant::now();
            let Some(batch) = p.next_item(None)? else {
                break;
            };
            waits.push(t.elapsed());
            black_box(batch);
            std::thread::sleep(Duration::from_millis(STEP_MS));
        }
        let first = waits[0];
        let n = waits.len();
        let mut middle = waits[n / 4..3 * n / 4].to_vec();
        middle.sort();
        out.push((first, middle[middle.len() / 2]));
    }
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{ITEMS} items per epoch, ~{WORK_US} us CPU each (2 workers), batches of {BATCH}, \
         a {STEP_MS} ms step per batch; {cpus} CPUs. Waits in ms.\n"
    );
    println!("| run | epoch | prefetched | first-batch wait | mid-epoch wait (median) | ratio |");
    println!("|---|---:|---|---:|---:|---:|");
    for prefetch in [Some(false), Some(true)] {
        let run_name = match prefetch {
            Some(true) => "prefetch_epochs(true)",
            _ => "prefetch_epochs(false) (the default)",
        };
        for (epoch, (first, mid)) in run(prefetch)?.into_iter().enumerate().skip(1) {
            let prefetched = prefetch == Some(true);
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "| {run_name} | {epoch} | {} | {:.3} | {:.3} | {:.1}x |",
                if prefetched { "yes" } else { "no (before)" },
                ms(first),
                ms(mid),
                ms(first) / ms(mid).max(1e-3)
            );
        }
    }
    Ok(())
}
