//! The sampler through a whole pipeline: the global order of an epoch does not depend on the
//! number of worker threads (1, 2, 4, 16) nor on the world size; with `Order::Input` each rank
//! receives exactly its sampler's order, with `Order::Completion` the same items; across ranks
//! every sample comes exactly once.

use std::time::Duration;

use spdl_core::{Op, Order, PipelineBuilder, StageConfig};
use spdl_sources::{DistInfo, Remainder, SampledIndex, Sampler, SamplerOptions};

const LEN: u64 = 203;
const THREADS: [usize; 4] = [1, 2, 4, 16];

/// A per-item delay of 0..150 µs drawn from the index, so items finish out of order.
fn delay(index: u64) -> Duration {
    Duration::from_micros(index.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57)
}

/// What rank `rank` of `world` receives of `epoch`, in arrival order, through a pipeline with
/// `threads` worker threads, a blocking stage and batches of 8.
fn run(rank: u64, world: u64, epoch: u64, threads: usize, order: Order) -> Vec<SampledIndex> {
    let mut pipeline = PipelineBuilder::source_iter(sampler(rank, world, epoch).iter())
        .pipe(
            Op::blocking(|s: SampledIndex| {
                std::thread::sleep(delay(s.index));
                Ok(Some(s))
            }),
            StageConfig::named("work").concurrency(threads).order(order),
        )
        .aggregate(8, false)
        .sink(2)
        .build(threads)
        .unwrap();
    pipeline.iter().flat_map(|b| b.unwrap()).collect()
}

/// Rank `rank` of `world`'s sampler over `LEN` samples (shuffled, seed 42, padded), at `epoch`.
fn sampler(rank: u64, world: u64, epoch: u64) -> Sampler {
    let options = SamplerOptions {
        shuffle: true,
        seed: 42,
        remainder: Remainder::Pad,
    };
    let mut s = Sampler::new(LEN, DistInfo::new(rank, world).unwrap(), options).unwrap();
    s.set_epoch(epoch);
    s
}

fn sampler_order(rank: u64, world: u64, epoch: u64) -> Vec<SampledIndex> {
    sampler(rank, world, epoch).iter().collect()
}

#[test]
fn global_order_is_the_same_for_any_thread_count() {
    for epoch in [0, 5] {
        // World size 1: the global order itself.
        let global = sampler_order(0, 1, epoch);
        for threads in THREADS {
            assert_eq!(
                run(0, 1, epoch, threads, Order::Input),
                global,
                "epoch {epoch}, {threads} threads"
            );
        }
        // Four ranks: each gets its strided slice of the same global order, whatever the
        // thread count; together every sample once (plus marked padding).
        let world = 4;
        let mut real = Vec::new();
        for rank in 0..world {
            let expected = sampler_order(rank, world, epoch);
            let strided: Vec<u64> = global
                .iter()
                .skip(rank as usize)
                .step_by(world as usize)
                .map(|s| s.index)
                .collect();
            let got_real: Vec<u64> = expected
                .iter()
                .filter(|s| !s.padded)
                .map(|s| s.index)
                .collect();
            assert_eq!(
                got_real, strided,
                "rank {rank} is not a slice of the global order"
            );
            for threads in THREADS {
                let got = run(rank, world, epoch, threads, Order::Input);
                assert_eq!(
                    got, expected,
                    "rank {rank}, epoch {epoch}, {threads} threads"
                );
            }
            real.extend(expected.iter().filter(|s| !s.padded).map(|s| s.index));
        }
        real.sort_unstable();
        assert_eq!(real, (0..LEN).collect::<Vec<_>>());
    }
}

#[test]
fn completion_order_delivers_the_same_items() {
    for threads in THREADS {
        let mut got = run(1, 3, 2, threads, Order::Completion);
        let mut expected = sampler_order(1, 3, 2);
        got.sort_by_key(|s| s.position);
        expected.sort_by_key(|s| s.position);
        assert_eq!(got, expected, "{threads} threads");
    }
}
