//! With an endless source and a consumer that stops taking items, the number of items alive
//! stays at exactly the documented bound (see the crate docs, "Backpressure").

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use spdl_core::{Op, PipelineBuilder, StageConfig};

/// Items of one test alive now, and the most alive at once (each test counts its own: the
/// tests of this file run at the same time).
struct Count {
    alive: AtomicI64,
    peak: AtomicI64,
}

impl Count {
    const fn new() -> Self {
        Count {
            alive: AtomicI64::new(0),
            peak: AtomicI64::new(0),
        }
    }

    fn alive(&self) -> i64 {
        self.alive.load(Ordering::SeqCst)
    }
}

static STOPPED: Count = Count::new();
static FLOWING: Count = Count::new();

/// An item that counts itself in `Count` while it lives.
struct Tracked(&'static Count);

impl Tracked {
    fn new(count: &'static Count) -> Self {
        let alive = count.alive.fetch_add(1, Ordering::SeqCst) + 1;
        count.peak.fetch_max(alive, Ordering::SeqCst);
        Tracked(count)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn items_alive_are_bounded_by_queues_plus_concurrency() {
    let (blocking_c, blocking_q) = (2, 3);
    let (async_c, async_q) = (3, 2);
    let sink = 4;
    let mut pipeline =
        PipelineBuilder::source(|_| std::iter::repeat_with(|| Tracked::new(&STOPPED)))
            .pipe(
                Op::blocking(|t: Tracked| Ok(Some(t))),
                StageConfig::named("cpu")
                    .concurrency(blocking_c)
                    .queue_size(blocking_q),
            )
            .pipe(
                Op::future(|t: Tracked| async move { Ok(Some(t)) }),
                StageConfig::named("io")
                    .concurrency(async_c)
                    .queue_size(async_q),
            )
            .sink(sink)
            .build(2)
            .unwrap();
    for item in pipeline.iter().take(5) {
        drop(item.unwrap());
    }
    // source thread + queues + blocking admits 2c + async admits c + sink
    let bound = 1 + blocking_q + 2 * blocking_c + async_q + async_c + sink;
    let deadline = Instant::now() + Duration::from_secs(10);
    while STOPPED.alive() < bound as i64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Once full, it must stay there: sample for a while.
    for _ in 0..20 {
        assert_eq!(STOPPED.alive(), bound as i64);
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(pipeline);
    assert_eq!(
        STOPPED.alive(),
        0,
        "every item is freed when the pipeline is dropped"
    );
}

/// The bound holds at every moment, not only at rest: with items flowing through a group of
/// blocking stages whose lanes pass them on while the head admits more, and a consumer slower
/// than the pipeline, the most items alive at once never exceeds it (plus the one the
/// consumer holds).
#[test]
fn peak_alive_stays_within_the_bound_while_items_flow() {
    let (c, q, sink) = (4, 2, 2);
    let mut pipeline = PipelineBuilder::source(|_| (0..3000).map(|_| Tracked::new(&FLOWING)))
        .pipe(
            Op::blocking(|t: Tracked| {
                std::hint::black_box(&t);
                Ok(Some(t))
            }),
            StageConfig::named("a").concurrency(c).queue_size(q),
        )
        .pipe(
            Op::blocking(|t: Tracked| Ok(Some(t))),
            StageConfig::named("b").concurrency(c).queue_size(q),
        )
        .sink(sink)
        .build(2)
        .unwrap();
    for (i, item) in pipeline.iter().enumerate() {
        let item = item.unwrap();
        if i % 8 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        drop(item);
    }
    // source thread + its queue + the group's admission limits (2c each; the queue between
    // the grouped stages holds nothing) + sink + the consumer's item
    let bound = 1 + q + 2 * c + 2 * c + sink + 1;
    let peak = FLOWING.peak.load(Ordering::SeqCst);
    assert!(
        peak <= bound as i64,
        "peak {peak} items alive, bound {bound}"
    );
    drop(pipeline);
    assert_eq!(FLOWING.alive(), 0);
}
