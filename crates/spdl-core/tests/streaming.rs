//! `Op::flat_map_iter` passes each output on as the iterator yields it, and stopping or
//! dropping a pipeline from one of its own threads neither panics nor hangs.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spdl_core::{Aggregator, ErrorKind, Op, Pipeline, PipelineBuilder, StageConfig};

use common::{in_order, outputs};

#[test]
fn outputs_move_on_before_the_call_ends() {
    // The iterator yields its second output only once the consumer has the first: an op that
    // collected its outputs first would never finish (it gives up after 20 s with an error).
    let (seen_tx, seen_rx) = mpsc::channel::<()>();
    let seen_rx = Arc::new(Mutex::new(seen_rx));
    let mut pipeline = PipelineBuilder::source(|_| 0..1u32)
        .pipe(
            Op::flat_map_iter(move |_x: u32| {
                let seen = seen_rx.clone();
                Ok((0..3u32).map(move |i| {
                    if i == 1 {
                        let got = seen.lock().unwrap().recv_timeout(Duration::from_secs(20));
                        got.map_err(|_| "the first output never reached the consumer")?;
                    }
                    Ok(i * 10)
                }))
            }),
            StageConfig::named("gen"),
        )
        .build(1)
        .unwrap();
    let first = pipeline.next_item(None).unwrap();
    assert_eq!(first, Some(0));
    seen_tx.send(()).unwrap();
    let rest: Vec<u32> = outputs(&mut pipeline);
    assert_eq!(rest, vec![10, 20]);
    let stats = pipeline.stats();
    let gen = &stats.stages[1]; // 0 is the source
    assert_eq!((gen.items_in, gen.items_out, gen.failures), (1, 3, 0));
}

/// `x` yields `x % 4` outputs `100 * x + i`; input 7 fails after its first two outputs.
fn demux(
    x: u64,
) -> Result<impl Iterator<Item = Result<u64, spdl_core::BoxError>>, spdl_core::BoxError> {
    Ok((0..x % 4).map(move |i| {
        if x == 7 && i == 2 {
            return Err("seven fails at its third output".into());
        }
        Ok(100 * x + i)
    }))
}

#[test]
fn input_order_counts_and_failures() {
    let mut pipeline = PipelineBuilder::source(|_| 0..20u64)
        .pipe(Op::flat_map_iter(demux), in_order("demux", 4))
        .build(3)
        .unwrap();
    let got: Vec<u64> = outputs(&mut pipeline);
    let mut want = Vec::new();
    for x in 0..20u64 {
        let n = if x == 7 { 2 } else { x % 4 };
        want.extend((0..n).map(|i| 100 * x + i));
    }
    assert_eq!(got, want);
    let stats = pipeline.stats();
    let st = &stats.stages[1];
    assert_eq!(st.items_in, 20);
    assert_eq!(st.items_out, want.len() as u64);
    assert_eq!(st.failures, 1);
    assert_eq!(st.filtered, 5); // 0, 4, 8, 12, 16 yield nothing
    assert_eq!(st.tasks, 20);
    // Every position is accounted for at the end of the epoch.
    let state = pipeline.state_dict();
    assert_eq!((state.epoch, state.done_below), (1, 0));
}

#[test]
fn completion_order_gives_the_same_items() {
    let mut pipeline = PipelineBuilder::source(|_| 0..20u64)
        .pipe(
            Op::flat_map_iter(demux),
            StageConfig::named("demux").concurrency(3),
        )
        .pipe(
            Op::blocking(|x: u64| Ok(Some(x + 1))),
            StageConfig::named("plus_one").concurrency(2),
        )
        .build(2)
        .unwrap();
    for _epoch in 0..2 {
        let mut got: Vec<u64> = outputs(&mut pipeline);
        got.sort_unstable();
        let mut want = Vec::new();
        for x in 0..20u64 {
            let n = if x == 7 { 2 } else { x % 4 };
            want.extend((0..n).map(|i| 100 * x + i + 1));
        }
        assert_eq!(got, want);
    }
}

#[test]
fn an_endless_iterator_is_held_back_by_the_consumer() {
    // One worker shared with a blocking stage downstream: a call waiting for room must not hold
    // it, or the stage downstream could never run.
    let made = Arc::new(AtomicU64::new(0));
    let counter = made.clone();
    let mut pipeline = PipelineBuilder::source(|_| 0..1u64)
        .pipe(
            Op::flat_map_iter(move |_x: u64| {
                let counter = counter.clone();
                Ok((0u64..).map(move |i| {
                    counter.fetch_add(1, Ordering::Relaxed);
                    Ok(i)
                }))
            }),
            StageConfig::named("endless"),
        )
        .pipe(
            Op::blocking(|x: u64| Ok(Some(x * 2))),
            StageConfig::named("double"),
        )
        .sink(2)
        .build(1)
        .unwrap();
    let first: Vec<u64> = (0..50)
        .map(|_| pipeline.next_item(None).unwrap().unwrap())
        .collect();
    assert_eq!(first, (0..50).map(|i| 2 * i).collect::<Vec<_>>());
    std::thread::sleep(Duration::from_millis(200));
    // Taken, plus what the queues, the stages and the sink hold: a handful, not thousands.
    let ahead = made.load(Ordering::Relaxed) - 50;
    assert!(
        ahead <= 16,
        "the iterator ran {ahead} outputs ahead of the consumer"
    );
    pipeline.stop();
}

/// Runs a pipeline kept in `slot` whose op calls `act` with the slot at item 5; the consumer
/// takes items (releasing the lock between calls) until the pipeline is gone or stopped.
fn act_from_own_thread(act: fn(&Mutex<Option<Pipeline<u64>>>), aggregate: bool) -> Vec<u64> {
    let slot: Arc<Mutex<Option<Pipeline<u64>>>> = Arc::new(Mutex::new(None));
    let acted = Arc::new(AtomicBool::new(false));
    let (s, a) = (slot.clone(), acted.clone());
    let trigger = move |x: u64| {
        if x == 5 {
            act(&s);
            a.store(true, Ordering::SeqCst);
        }
    };
    let builder = PipelineBuilder::source(|_| 0..1_000_000u64);
    let builder = if aggregate {
        // An aggregator runs on the scheduler thread.
        struct Acting<F>(F);
        impl<F: FnMut(u64) + Send + 'static> Aggregator<u64> for Acting<F> {
            type Output = u64;
            fn push(&mut self, item: u64) -> Option<u64> {
                (self.0)(item);
                Some(item)
            }
            fn flush(&mut self) -> Option<u64> {
                None
            }
        }
        builder.aggregate_with(Acting(trigger))
    } else {
        builder.pipe(
            Op::blocking(move |x: u64| {
                trigger(x);
                Ok(Some(x))
            }),
            StageConfig::named("acting"),
        )
    };
    *slot.lock().unwrap() = Some(builder.sink(1).build(2).unwrap());
    let mut got = Vec::new();
    loop {
        let mut g = slot.lock().unwrap();
        let Some(p) = g.as_mut() else { break };
        match p.next_item(Some(Duration::from_millis(5))) {
            Ok(Some(x)) => got.push(x),
            Ok(None) => break,
            Err(e) if e.kind() == ErrorKind::Timeout => {}
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Stopped, "{e}");
                break;
            }
        }
    }
    // The op returns from `act` (a hang detector, not a timing claim).
    for _ in 0..2000 {
        if acted.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        acted.load(Ordering::SeqCst),
        "the op never returned from {act:?}"
    );
    // A stop from the consumer's thread now joins what is left.
    if let Some(mut p) = slot.lock().unwrap().take() {
        p.stop();
    }
    got
}

fn stop_it(slot: &Mutex<Option<Pipeline<u64>>>) {
    // The consumer releases the lock every few ms.
    slot.lock().unwrap().as_mut().unwrap().stop();
}

fn drop_it(slot: &Mutex<Option<Pipeline<u64>>>) {
    drop(slot.lock().unwrap().take());
}

fn stop_handle(slot: &Mutex<Option<Pipeline<u64>>>) {
    let handle = slot.lock().unwrap().as_ref().unwrap().stop_handle();
    assert!(handle.is_engine_thread());
    handle.stop();
}

#[test]
fn stop_from_a_worker_returns_and_stops() {
    let got = act_from_own_thread(stop_it, false);
    assert!(got.len() <= 8, "{got:?}"); // what was already on its way
    assert_eq!(got, (0..got.len() as u64).collect::<Vec<_>>());
}

#[test]
fn stop_from_the_scheduler_returns_and_stops() {
    let got = act_from_own_thread(stop_it, true);
    assert!(got.len() <= 8, "{got:?}");
}

#[test]
fn drop_from_a_worker_and_from_the_scheduler() {
    act_from_own_thread(drop_it, false);
    act_from_own_thread(drop_it, true);
}

#[test]
fn stop_handle_from_a_worker() {
    let got = act_from_own_thread(stop_handle, false);
    assert!(got.len() <= 8, "{got:?}");
    let p = PipelineBuilder::source(|_| 0..3u64).build(1).unwrap();
    assert!(!p.stop_handle().is_engine_thread());
}
