//! spdl-core alone (no decoder, no I/O crate): a source, an async stage, a blocking stage that
//! drops some items, batches of 4. A failing item is counted and skipped; the epoch goes on.
use spdl_core::{Op, Order, PipelineBuilder, StageConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut pipeline = PipelineBuilder::source(|_epoch| 0..10u64) // each epoch: 0, 1, ..., 9
        .pipe(
            Op::future(|n| async move { Ok(Some(n * 2)) }), // async: run on the scheduler
            StageConfig::named("double").concurrency(8),
        )
        .pipe(
            Op::blocking(|n: u64| match n {
                6 => Err("six is not wanted".into()), // counted as a failure of "filter"
                n if n % 3 == 0 => Ok(None),          // dropped without a failure
                n => Ok(Some(n)),
            }),
            StageConfig::named("filter")
                .concurrency(2)
                .order(Order::Input),
        )
        .aggregate(4, false)
        .build(2)?; // 2 worker threads for blocking ops
    let batches = pipeline.iter().collect::<Result<Vec<Vec<u64>>, _>>()?;
    assert_eq!(batches, [vec![2, 4, 8, 10], vec![14, 16]]);
    assert_eq!(pipeline.stats().failures(), 1);
    println!("{batches:?}\n{}", pipeline.stats());
    Ok(())
}
