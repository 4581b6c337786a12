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

/// One random run: the items (a delay in µs and a fate each), the op stage's concurrency and
/// queue size, the sink's size, and whether the op is a future or a blocking call.
#[derive(Debug, Clone)]
struct Case {
    items: Vec<(u64, Fate)>,
    concurrency: usize,
    queue: usize,
    sink: usize,
    async_op: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u64..2000, fate()), 0..60),
        1usize..=16,
        1usize..=8,
        1usize..=8,
        any::<bool>(),
    )
        .prop_map(|(items, concurrency, queue, sink, async_op)| Case {
            items,
            concurrency,
            queue,
            sink,
            async_op,
        })
}

/// Runs `case` with both stages in `order`: the outputs, the op's failures and filtered items.
fn run(case: &Case, order: Order) -> (Vec<usize>, u64, u64) {
    let spec = case.items.clone();
    let op = move |(i, (delay_us, fate)): (usize, (u64, Fate))| -> spdl_core::OpResult<usize> {
        match fate {
            Fate::Pass => Ok(Some(i)),
            Fate::Filter => Ok(None),
            Fate::Fail => Err(format!("item {i} fails (delay {delay_us} us)").into()),
        }
    };
    let builder = PipelineBuilder::source_iter(spec.into_iter().enumerate());
    let cfg = StageConfig::named("op")
        .concurrency(case.concurrency)
        .queue_size(case.queue)
        .order(order);
    let builder = if case.async_op {
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
        .sink(case.sink)
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
    fn input_order_is_source_order_minus_dropped(case in case()) {
        let (out, failures, filtered) = run(&case, Order::Input);
        let items = &case.items;
        prop_assert_eq!(&out, &expected(items));
        prop_assert_eq!(failures, items.iter().filter(|(_, f)| matches!(f, Fate::Fail)).count() as u64);
        prop_assert_eq!(filtered, items.iter().filter(|(_, f)| matches!(f, Fate::Filter)).count() as u64);
    }

    #[test]
    fn completion_order_is_the_same_multiset(case in case()) {
        let (mut out, _, _) = run(&case, Order::Completion);
        out.sort_unstable();
        prop_assert_eq!(out, expected(&case.items));
    }
}
