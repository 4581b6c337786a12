//! Epoch prefetching: the next epoch's items load while the current epoch ends, and the
//! consumer still sees exact epochs, exact boundaries and an exact `state_dict()`.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spdl_core::{ErrorKind, Op, Order, Pipeline, PipelineBuilder, PipelineState, StageConfig};

use common::{in_order, outputs};

const PER_EPOCH: u64 = 23;

/// Items of epoch `e`: `e * 100 + i`; the op drops multiples of 7 (a filter) and every stage
/// boundary (map, batch of 4 with a partial last batch, unbatch, map) sees the marker.
fn build(order: Order, prefetch: Option<bool>, calls: Arc<Mutex<Vec<u64>>>) -> Pipeline<u64> {
    let b = PipelineBuilder::source(move |epoch| {
        calls.lock().unwrap().push(epoch);
        (0..PER_EPOCH).map(move |i| epoch * 100 + i)
    })
    .pipe(
        Op::blocking(|x: u64| {
            // Uneven op times so completion order differs from input order.
            std::thread::sleep(Duration::from_micros((x * 37) % 200));
            Ok((x % 7 != 0).then_some(x))
        }),
        StageConfig::named("filter").concurrency(4).order(order),
    )
    .aggregate(4, false)
    .disaggregate()
    .pipe(
        Op::blocking(|x: u64| Ok(Some(x))),
        StageConfig::named("pass").concurrency(3).order(order),
    )
    // Room for a whole epoch in the sink: the source can finish an epoch whatever the consumer
    // has taken, so the tests can wait for the next epoch to be sourced.
    .sink(64);
    match prefetch {
        Some(on) => b.prefetch_epochs(on),
        None => b,
    }
    .build(3)
    .unwrap()
}

fn expected(epoch: u64) -> Vec<u64> {
    (0..PER_EPOCH)
        .map(|i| epoch * 100 + i)
        .filter(|x| x % 7 != 0)
        .collect()
}

/// Waits (without a time assertion: the limit only keeps a broken build from hanging) until
/// `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < give_up, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn prefetched_epochs_keep_exact_item_sets_and_boundaries() {
    for order in [Order::Input, Order::Completion] {
        for prefetch in [None, Some(false), Some(true)] {
            let calls = Arc::new(Mutex::new(Vec::new()));
            let mut p = build(order, prefetch, calls.clone());
            for epoch in 0..4 {
                assert_eq!(p.epoch(), epoch);
                let mut got: Vec<u64> = outputs(&mut p);
                if order == Order::Completion {
                    got.sort();
                }
                assert_eq!(got, expected(epoch), "{order:?} prefetch={prefetch:?}");
                assert_eq!(p.epoch(), epoch + 1);
                let state = p.state_dict();
                assert_eq!(
                    state,
                    PipelineState {
                        epoch: epoch + 1,
                        done_below: 0,
                        done_above: vec![]
                    },
                    "the boundary's state counts nothing of the prefetched epoch"
                );
            }
            // Never more than one epoch ahead of the consumer, each epoch sourced once.
            let seen = calls.lock().unwrap().clone();
            assert!(seen.len() <= 5, "{seen:?}");
            assert_eq!(seen[..4], [0, 1, 2, 3]);
        }
    }
}

#[test]
fn the_next_epoch_loads_while_the_current_one_ends() {
    let processed: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let counts = processed.clone();
    let mut p = PipelineBuilder::source(|epoch| (0..10u64).map(move |i| (epoch, i)))
        .pipe(
            Op::blocking(move |(e, i): (u64, u64)| {
                counts[e as usize].fetch_add(1, Ordering::SeqCst);
                Ok(Some((e, i)))
            }),
            in_order("count", 2).queue_size(16),
        )
        .sink(16)
        .prefetch_epochs(true)
        .build(2)
        .unwrap();
    let first: Vec<(u64, u64)> = (0..10)
        .map(|_| p.next_item(None).unwrap().unwrap())
        .collect();
    assert_eq!(first, (0..10).map(|i| (0, i)).collect::<Vec<_>>());
    // Epoch 0's last item is taken, its end not yet: epoch 1's items load meanwhile.
    wait_until("epoch 1 loads before epoch 0 ends", || {
        processed[1].load(Ordering::SeqCst) == 10
    });
    assert_eq!(p.epoch(), 0);
    assert_eq!(p.next_item(None).unwrap(), None, "exact boundary");
    assert_eq!(p.epoch(), 1);
    // Epoch 2 waits for the consumer to start epoch 1: the source is one epoch ahead at most.
    assert_eq!(processed[2].load(Ordering::SeqCst), 0);
    let second: Vec<(u64, u64)> = outputs(&mut p);
    assert_eq!(second, (0..10).map(|i| (1, i)).collect::<Vec<_>>());
    wait_until("epoch 2 loads once epoch 1 started", || {
        processed[2].load(Ordering::SeqCst) == 10
    });
}

#[test]
fn a_single_epoch_run_never_sources_a_second_epoch_by_default() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut p = build(Order::Input, None, calls.clone());
    let got: Vec<u64> = outputs(&mut p);
    assert_eq!(got, expected(0));
    drop(p);
    assert_eq!(*calls.lock().unwrap(), vec![0]);
}

#[test]
fn from_the_second_epoch_on_the_next_one_is_prefetched_when_asked() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut p = build(Order::Input, Some(true), calls.clone());
    assert_eq!(p.iter().count(), expected(0).len());
    let mut it = p.iter();
    let first = it.next().unwrap().unwrap();
    assert_eq!(first, expected(1)[0]);
    let c = calls.clone();
    wait_until("epoch 2 sourced while epoch 1 runs", move || {
        c.lock().unwrap().len() == 3
    });
    assert_eq!(*calls.lock().unwrap(), vec![0, 1, 2]);
    let rest: Vec<u64> = it.map(|r| r.unwrap()).collect();
    assert_eq!(rest, expected(1)[1..]);
}

#[test]
fn by_default_no_epoch_is_sourced_before_it_starts() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut p = build(Order::Input, None, calls.clone());
    for epoch in 0..3 {
        let got: Vec<u64> = outputs(&mut p);
        assert_eq!(got, expected(epoch));
        assert_eq!(*calls.lock().unwrap(), (0..=epoch).collect::<Vec<_>>());
    }
}

#[test]
fn state_dict_resumes_exactly_while_the_next_epoch_is_prefetched() {
    for order in [Order::Input, Order::Completion] {
        for take in [0usize, 5, 14] {
            // Epoch 0 done, `take` items of epoch 1 taken, epoch 2 loading behind it.
            let calls = Arc::new(Mutex::new(Vec::new()));
            let mut first = build(order, Some(true), calls.clone());
            assert_eq!(first.iter().count(), expected(0).len());
            first.start();
            let seen: Vec<u64> = first.iter().take(take).map(|r| r.unwrap()).collect();
            let c = calls.clone();
            wait_until("epoch 2 sourced", move || c.lock().unwrap().len() == 3);
            let state = first.state_dict();
            assert_eq!(state.epoch, 1);
            drop(first);

            let mut second = build(order, Some(true), Arc::new(Mutex::new(Vec::new())));
            second.load_state_dict(&state).unwrap();
            let rest: Vec<u64> = outputs(&mut second);
            let mut all: Vec<u64> = seen.iter().chain(rest.iter()).copied().collect();
            all.sort();
            assert_eq!(
                all,
                expected(1),
                "no repeat, no skip ({order:?}, take {take})"
            );
            // The following epoch, prefetched after a resumed one, is whole.
            let mut next: Vec<u64> = outputs(&mut second);
            next.sort();
            assert_eq!(next, expected(2));
        }
    }
}

#[test]
fn load_state_dict_at_a_prefetched_boundary() {
    let mut p = build(Order::Input, Some(true), Arc::new(Mutex::new(Vec::new())));
    assert_eq!(p.iter().count(), expected(0).len());
    // The state of the boundary itself is where the prefetched epoch starts: accepted.
    let boundary = p.state_dict();
    p.load_state_dict(&boundary).unwrap();
    // Any other state would need the prefetched items to be undone: refused, clearly.
    let other = PipelineState {
        epoch: 1,
        done_below: 3,
        done_above: vec![],
    };
    let err = p.load_state_dict(&other).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("prefetched"), "{err}");
    let got: Vec<u64> = outputs(&mut p);
    assert_eq!(got, expected(1));
}

#[test]
fn prefetch_off_never_sources_an_epoch_before_it_starts() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut p = build(Order::Completion, Some(false), calls.clone());
    for epoch in 0..3 {
        let mut got: Vec<u64> = outputs(&mut p);
        got.sort();
        assert_eq!(got, expected(epoch));
        // Every epoch so far ended at the consumer: the source has run exactly those.
        assert_eq!(*calls.lock().unwrap(), (0..=epoch).collect::<Vec<_>>());
    }
}

#[test]
fn prefetching_a_run_of_n_epochs_loads_nothing_past_the_last() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let source_calls = calls.clone();
    let mut p = PipelineBuilder::source(move |epoch| {
        source_calls.lock().unwrap().push(epoch);
        (0..PER_EPOCH).map(move |i| epoch * 100 + i)
    })
    .pipe(
        Op::blocking(|x: u64| Ok(Some(x))),
        StageConfig::named("pass")
            .concurrency(2)
            .order(Order::Input),
    )
    .sink(64)
    .prefetch_epochs_of(2)
    .build(2)
    .unwrap();
    let first: Vec<u64> = p.iter().map(|r| r.unwrap()).collect();
    assert_eq!(first, (0..PER_EPOCH).collect::<Vec<_>>());
    // Epoch 1 was sourced while epoch 0 ended.
    wait_until("epoch 1 is prefetched", || calls.lock().unwrap().len() == 2);
    let second: Vec<u64> = p.iter().map(|r| r.unwrap()).collect();
    assert_eq!(second, (0..PER_EPOCH).map(|i| 100 + i).collect::<Vec<_>>());
    // The run has two epochs: epoch 2 is never sourced.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(*calls.lock().unwrap(), [0, 1]);
    assert_eq!(p.stats().stages[1].items_in, 2 * PER_EPOCH);
}
