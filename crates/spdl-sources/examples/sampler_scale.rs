//! Measures the sampler at ImageNet-1k scale (1,281,167 samples): permutation time, state size,
//! and resume time at the same and at a changed world size.
//!
//! Run: `cargo run --release -p spdl-sources --example sampler_scale`

use std::time::{Duration, Instant};

use spdl_sources::{merge_states, DistInfo, Remainder, Sampler, SamplerOptions};

const LEN: u64 = 1_281_167;
const OLD_WORLD: u64 = 8;
const NEW_WORLD: u64 = 6;
/// Items in flight in the pipeline when the checkpoint is taken (out-of-order window).
const WINDOW: u64 = 64;

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

type BoxError = Box<dyn std::error::Error>;

/// A sampler made by `make`, and how long making it and drawing its first item took.
fn timed_to_first(
    make: impl FnOnce() -> Result<Sampler, BoxError>,
) -> Result<(Sampler, Duration), BoxError> {
    let (made, t) = timed(|| {
        let s = make()?;
        std::hint::black_box(s.iter().next());
        Ok::<_, BoxError>(s)
    });
    Ok((made?, t))
}

fn main() -> Result<(), BoxError> {
    let options = SamplerOptions {
        shuffle: true,
        seed: 1234,
        remainder: Remainder::Pad,
    };
    let single = Sampler::new(LEN, DistInfo::single(), options)?;
    let (_, first) = timed(|| single.iter().next());
    println!("permutation of {LEN} samples (iter() to first item): {first:.2?}");

    // Every rank delivered 40% of its share in order, then every other item of a window of
    // WINDOW items that completed out of order.
    let mut ranks = Vec::new();
    for r in 0..OLD_WORLD {
        let mut s = Sampler::new(LEN, DistInfo::new(r, OLD_WORLD)?, options)?;
        let items: Vec<_> = s.iter().collect();
        let done = items.len() * 2 / 5;
        for item in &items[..done] {
            s.mark_delivered(item.position)?;
        }
        for item in items[done + 1..done + WINDOW as usize].iter().step_by(2) {
            s.mark_delivered(item.position)?;
        }
        ranks.push(s);
    }
    let states: Vec<_> = ranks.iter().map(Sampler::state).collect();
    let json = serde_json::to_string(&states[0])?;
    println!(
        "state of one rank ({} delivered, {} out of order): {} bytes of JSON",
        states[0].delivered,
        states[0].delivered_ahead.len(),
        json.len()
    );

    let (restored, t) = timed_to_first(|| Ok(Sampler::from_state(&serde_json::from_str(&json)?)?))?;
    println!(
        "resume, same world size (parse + from_state + first item): {t:.2?}; {} items left",
        restored.iter().len()
    );

    let (progress, t_merge) = timed(|| merge_states(&states));
    let progress = progress?;
    let progress_json = serde_json::to_string(&progress)?;
    println!(
        "merge of {OLD_WORLD} states: {t_merge:.2?}; epoch progress: {} bytes of JSON",
        progress_json.len()
    );
    let (resumed, t) = timed_to_first(|| {
        Ok(Sampler::resume(
            &progress,
            DistInfo::new(0, NEW_WORLD)?,
            Remainder::Pad,
        )?)
    })?;
    println!(
        "resume, {OLD_WORLD} -> {NEW_WORLD} ranks (resume + first item): {t:.2?}; {} items for rank 0",
        resumed.iter().len()
    );
    let resumed_state = serde_json::to_string(&resumed.state())?;
    println!(
        "state of a resharded rank: {} bytes of JSON",
        resumed_state.len()
    );
    Ok(())
}
