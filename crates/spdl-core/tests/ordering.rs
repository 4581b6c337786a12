//! Property tests: with random per-item delays, failures and filters, any concurrency and
//! queue size, `Input` order yields exactly the source order minus failed and filtered items,
//! `Completion` the same multiset; never a duplicate, never a lost item.

use std::time::Duration;

use proptest::prelude::*;
use spdl_core::{Op, Order, PipelineBuilder, StageConfig};

#[derive(Debug, Clone, Copy)]
enum Fate {
    Pass,
    Filter,
    Fail,
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![6 => Just(Fate::Pass), 1 => Just(Fate::Filter), 1 => Just(Fate::Fail)]
}

fn run(
    items: Vec<(u64, Fate)>,
    concurrency: usize,
    queue: usize,
    sink: usize,
    order: Order,
    async_op: bool,
) -> (Vec<usize>, u64, u64) {
    let spec = items.clone();
    let op = move |(i, (delay_us, fate)): (usize, (u64, Fate))| -> spdl_core::OpResult<usize> {
        match fate {
            Fate::Pass => Ok(Some(i)),
            Fate::Filter => Ok(None),
            Fate::Fail => Err(format!("item {i} fails (delay {delay_us} us)").into()),
        }
    };
    let builder = PipelineBuilder::source_iter(spec.into_iter().enumerate());
    let cfg = StageConfig::named("op")
        .concurrency(concurrency)
        .queue_size(queue)
        .order(order);
    let builder = if async_op {
        builder.pipe(
            Op::future(move |x: (usize, (u64, Fate))| async move {
                tokio::time::sleep(Duration::from_micros(x.1 .0)).await;
                op(x)
            }),
            cfg,
        )
    } else {
        builder.pipe(
            Op::blocking(move |x: (usize, (u64, Fate))| {
                std::thread::sleep(Duration::from_micros(x.1 .0));
                op(x)
            }),
            cfg,
        )
    };
    // A second stage in input order checks that skips keep their place downstream too.
    let mut pipeline = builder
        .pipe(
            Op::blocking(|i: usize| Ok(Some(i))),
            StageConfig::named("pass").concurrency(3).order(order),
        )
        .sink(sink)
        .build(4)
        .unwrap();
    let out: Vec<usize> = pipeline.iter().map(|r| r.unwrap()).collect();
    let stats = pipeline.stats();
    (out, stats.stages[1].failures, stats.stages[1].filtered)
}

fn expected(items: &[(u64, Fate)]) -> Vec<usize> {
    items
        .iter()
        .enumerate()
        .filter(|(_, (_, f))| matches!(f, Fate::Pass))
        .map(|(i, _)| i)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn input_order_is_source_order_minus_dropped(
        items in prop::collection::vec((0u64..2000, fate()), 0..60),
        concurrency in 1usize..=16,
        queue in 1usize..=8,
        sink in 1usize..=8,
        async_op in any::<bool>(),
    ) {
        let (out, failures, filtered) = run(items.clone(), concurrency, queue, sink, Order::Input, async_op);
        prop_assert_eq!(&out, &expected(&items));
        prop_assert_eq!(failures, items.iter().filter(|(_, f)| matches!(f, Fate::Fail)).count() as u64);
        prop_assert_eq!(filtered, items.iter().filter(|(_, f)| matches!(f, Fate::Filter)).count() as u64);
    }

    #[test]
    fn completion_order_is_the_same_multiset(
        items in prop::collection::vec((0u64..2000, fate()), 0..60),
        concurrency in 1usize..=16,
        queue in 1usize..=8,
        sink in 1usize..=8,
        async_op in any::<bool>(),
    ) {
        let (mut out, _, _) = run(items.clone(), concurrency, queue, sink, Order::Completion, async_op);
        out.sort_unstable();
        prop_assert_eq!(out, expected(&items));
    }
}
