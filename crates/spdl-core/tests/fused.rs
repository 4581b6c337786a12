//! Grouped blocking stages (adjacent blocking stages of the same order, `stage::fused`) deliver
//! what the same stages deliver unfused: outputs, order, epoch boundaries, statistics, failures,
//! budgets and resumable state. Each test builds the same chain in the three ways a group runs:
//! fused (the followers inline on the head's lanes: concurrency 4 at 2 workers), on lanes of
//! their own (concurrency 4 below 64 workers) and unfused (`fuse_stages(false)`).

mod common;

use spdl_core::{Op, Order, Pipeline, PipelineBuilder, StageConfig};

use common::{fail_when, outputs, outputs_then_budget_error};

/// How a chain is built: a name for messages, the worker count, and `fuse_stages`.
#[derive(Clone, Copy, Debug)]
struct Mode(&'static str, usize, bool);

const FUSED: Mode = Mode("fused", 2, true);
const OWN_LANES: Mode = Mode("own lanes", 64, true);
const UNFUSED: Mode = Mode("unfused", 2, false);
const MODES: [Mode; 3] = [FUSED, OWN_LANES, UNFUSED];

fn build<T: Send + 'static>(
    builder: PipelineBuilder<T>,
    Mode(_, workers, fuse): Mode,
) -> Pipeline<T> {
    builder.fuse_stages(fuse).build(workers).unwrap()
}

/// source -> x+1 -> flat_map to [x, x+1000] unless x % 7 == 0 (filtered) -> fails on x % 5 == 0
/// -> panics on x == 31 -> x*2, every stage at concurrency 4.
fn chain(order: Order, mode: Mode, epoch_len: u64) -> Pipeline<u64> {
    let cfg = |name: &str| StageConfig::named(name).concurrency(4).order(order);
    let builder =
        PipelineBuilder::source(move |epoch| (epoch * epoch_len)..((epoch + 1) * epoch_len))
            .pipe(Op::blocking(|x: u64| Ok(Some(x + 1))), cfg("inc"))
            .pipe(
                Op::flat_map(|x: u64| {
                    Ok(if x % 7 == 0 {
                        Vec::new()
                    } else {
                        vec![x, x + 1000]
                    })
                }),
                cfg("split"),
            )
            .pipe(fail_when(|x| x % 5 == 0), cfg("check"))
            .pipe(
                Op::blocking(|x: u64| {
                    assert_ne!(x, 31, "31 panics");
                    Ok(Some(x * 2))
                }),
                cfg("double"),
            );
    build(builder, mode)
}

/// What every source item becomes, in input order.
fn expected(items: std::ops::Range<u64>) -> Vec<u64> {
    items
        .map(|x| x + 1)
        .filter(|x| x % 7 != 0)
        .flat_map(|x| [x, x + 1000])
        .filter(|x| x % 5 != 0 && *x != 31)
        .map(|x| x * 2)
        .collect()
}

#[test]
fn fused_chains_deliver_exact_epochs_in_either_order() {
    for (order, len) in [(Order::Input, 200), (Order::Completion, 300)] {
        for mode in MODES {
            let mut p = chain(order, mode, len);
            for epoch in 0..3u64 {
                let mut got: Vec<u64> = outputs(&mut p);
                let mut want = expected(epoch * len..(epoch + 1) * len);
                if order == Order::Completion {
                    // Every item once, in any order.
                    got.sort_unstable();
                    want.sort_unstable();
                }
                assert_eq!(got, want, "{order:?}, epoch {epoch}, {}", mode.0);
            }
        }
    }
}

#[test]
fn fused_stages_keep_their_own_statistics_and_queues() {
    let counts = |mode| {
        let mut p = chain(Order::Input, mode, 500);
        assert_eq!(p.iter().count(), expected(0..500).len());
        let stats = p.stats();
        let stages: Vec<_> = stats
            .stages
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.items_in,
                    s.items_out,
                    s.filtered,
                    s.failures,
                )
            })
            .collect();
        let queues: Vec<_> = stats
            .queues
            .iter()
            .map(|q| (q.name.clone(), q.items))
            .collect();
        (stages, queues, p.last_errors().len())
    };
    let (stages, mut queues, errors) = counts(FUSED);
    let (unfused_stages, unfused_queues, unfused_errors) = counts(UNFUSED);
    assert_eq!((&stages, errors), (&unfused_stages, unfused_errors));
    // On lanes of their own, the group counts exactly as fused.
    assert_eq!(counts(OWN_LANES), (stages.clone(), queues.clone(), errors));
    // The queues fusing replaced count the messages that would have passed them; the group's
    // tail passes one skip per dropped source item where unfused stages pass one per dropped
    // intermediate output (a skip with no position): 843 against 930 into the sink.
    let sink = queues.pop().unwrap();
    assert_eq!(queues[..], unfused_queues[..4]);
    let per_source_item: usize = (0..500).map(|x| expected(x..x + 1).len().max(1)).sum();
    assert_eq!(sink.1, per_source_item as u64 + 1); // + the epoch marker
    assert_eq!(unfused_queues[4].1, 930);
    // inc: 500 in, 500 out; split: 500 in, 71 filtered (x+1 = 7k), 858 out; check: fails the
    // multiples of 5; double: one panic (31).
    assert_eq!(stages[1], ("inc".into(), 500, 500, 0, 0));
    assert_eq!(stages[2], ("split".into(), 500, 858, 71, 0));
    let fives = (1..=500u64)
        .filter(|x| x % 7 != 0)
        .flat_map(|x| [x, x + 1000])
        .filter(|x| x % 5 == 0)
        .count() as u64;
    assert_eq!(stages[3], ("check".into(), 858, 858 - fives, 0, fives));
    assert_eq!(
        stages[4],
        ("double".into(), 858 - fives, 858 - fives - 1, 0, 1)
    );
    let names: Vec<&str> = queues
        .iter()
        .chain([&sink])
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "source->inc",
            "inc->split",
            "split->check",
            "check->double",
            "double->sink"
        ]
    );
    // Messages through split->check: 858 outputs, 71 skips, the epoch marker.
    assert_eq!(queues[2].1, 858 + 71 + 1);
}

#[test]
fn a_follower_budget_stops_the_group_and_names_its_stage() {
    for mode in MODES {
        let builder = PipelineBuilder::source(|_| 0..1000u64)
            .pipe(
                Op::blocking(|x: u64| Ok(Some(x))),
                StageConfig::named("first")
                    .concurrency(2)
                    .order(Order::Input),
            )
            .pipe(
                fail_when(|x| x % 10 == 9),
                StageConfig::named("second")
                    .concurrency(2)
                    .order(Order::Input)
                    .max_failures(3),
            );
        let mut p = build(builder, mode);
        let (items, _) = outputs_then_budget_error(&mut p, "second");
        // In order, every item before the fourth failure (39) that is not a failure was
        // delivered.
        assert_eq!(
            &items[..36],
            &(0..39).filter(|x| x % 10 != 9).collect::<Vec<_>>()[..],
            "{}",
            mode.0
        );
        assert!(items.len() < 1000 - 100, "the group stopped taking input");
        assert!(
            p.last_errors()[0].contains("stage=second"),
            "{:?}",
            p.last_errors()
        );
    }
}

#[test]
fn fused_state_dict_resumes_exactly() {
    // One output per item (a flat-map's item counts as done only after its last output, so a
    // stop between two outputs of one item re-delivers the first, fused or not).
    for mode in MODES {
        let make = || {
            let cfg = |name: &str| StageConfig::named(name).concurrency(4).order(Order::Input);
            let builder = PipelineBuilder::source(|_| 0..400u64)
                .pipe(
                    Op::blocking(|x: u64| Ok((x % 7 != 0).then_some(x))),
                    cfg("filter"),
                )
                .pipe(Op::blocking(|x: u64| Ok(Some(x * 3))), cfg("triple"));
            build(builder, mode)
        };
        let mut first = make();
        let taken: Vec<u64> = first.iter().take(100).map(|r| r.unwrap()).collect();
        let state = first.state_dict();
        drop(first);
        let mut second = make();
        second.load_state_dict(&state).unwrap();
        let rest: Vec<u64> = second.iter().map(|r| r.unwrap()).collect();
        let all: Vec<u64> = taken.into_iter().chain(rest).collect();
        let want: Vec<u64> = (0..400).filter(|x| x % 7 != 0).map(|x| x * 3).collect();
        assert_eq!(
            all, want,
            "nothing lost, nothing twice, in order ({})",
            mode.0
        );
    }
}

#[test]
fn stages_of_different_concurrency_group_on_lanes_of_their_own() {
    // A slow stage at concurrency 1 between two at 3: each keeps its own concurrency (at most
    // one call of the middle op at once), and the items are exactly those unfused.
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    for order in [Order::Input, Order::Completion] {
        for mode in MODES {
            let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let (r, m) = (running.clone(), most.clone());
            let middle = Op::blocking(move |x: u64| {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(50));
                r.fetch_sub(1, Ordering::SeqCst);
                Ok((x % 3 != 0).then_some(x * 10))
            });
            let cfg = |name: &str, c: usize| StageConfig::named(name).concurrency(c).order(order);
            let builder = PipelineBuilder::source(|_| 0..300u64)
                .pipe(Op::blocking(|x: u64| Ok(Some(x + 1))), cfg("a", 3))
                .pipe(middle, cfg("b", 1))
                .pipe(Op::blocking(|x: u64| Ok(Some(x + 2))), cfg("c", 3));
            let mut p = build(builder, mode);
            let mut got: Vec<u64> = outputs(&mut p);
            let mut want: Vec<u64> = (1..=300u64)
                .filter(|x| x % 3 != 0)
                .map(|x| x * 10 + 2)
                .collect();
            if order == Order::Completion {
                got.sort_unstable();
                want.sort_unstable();
            }
            assert_eq!(got, want, "{order:?} {}", mode.0);
            assert_eq!(most.load(Ordering::SeqCst), 1, "{order:?} {}", mode.0);
            let stats = p.stats();
            let b = stats.stages.iter().find(|s| s.name == "b").unwrap();
            assert_eq!((b.items_in, b.filtered), (300, 100), "{order:?} {}", mode.0);
        }
    }
}
