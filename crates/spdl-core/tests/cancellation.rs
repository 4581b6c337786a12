//! Dropping a pipeline mid-epoch (or calling `stop()`) ends every task and joins every
//! thread: after 1,000 build / take one / drop cycles the thread count and open file
//! descriptors are back where they were.

use std::time::{Duration, Instant};

use spdl_core::{Op, PipelineBuilder, StageConfig};

fn count_entries(dir: &str) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn build_take_one_drop_leaks_nothing() {
    let threads_before = count_entries("/proc/self/task");
    let fds_before = count_entries("/proc/self/fd");
    let mut teardowns = Vec::with_capacity(1000);
    for i in 0..1000u64 {
        let mut pipeline = PipelineBuilder::source(|_| 0u64..)
            .pipe(
                Op::blocking(|x: u64| Ok(Some(x + 1))),
                StageConfig::named("cpu").concurrency(4),
            )
            .pipe(
                Op::future(|x: u64| async move { Ok(Some(x)) }),
                StageConfig::named("io").concurrency(8),
            )
            .aggregate(4, false)
            .build(2)
            .unwrap();
        let first = pipeline.iter().next().unwrap().unwrap();
        assert_eq!(first.len(), 4);
        let t = Instant::now();
        if i % 2 == 0 {
            drop(pipeline);
        } else {
            pipeline.stop();
            assert!(pipeline.iter().next().is_none());
            drop(pipeline);
        }
        teardowns.push(t.elapsed());
    }
    assert_eq!(
        count_entries("/proc/self/task"),
        threads_before,
        "threads leaked"
    );
    assert_eq!(
        count_entries("/proc/self/fd"),
        fds_before,
        "file descriptors leaked"
    );
    teardowns.sort();
    let p50 = teardowns[500];
    let max = teardowns[999];
    eprintln!("teardown: p50 {p50:?}, max {max:?}");
    // A hang detector, not a speed claim: a stuck thread would take forever.
    assert!(max < Duration::from_secs(5), "teardown took {max:?}");
}
