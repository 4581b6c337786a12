//! Helpers shared by the engine's integration tests.
#![allow(dead_code, unreachable_pub)]

use spdl_core::{Error, ErrorKind, Op, Order, Pipeline, StageConfig};

/// A stage named `name` with `concurrency` workers that passes its outputs on in input order.
pub fn in_order(name: &str, concurrency: usize) -> StageConfig {
    StageConfig::named(name)
        .concurrency(concurrency)
        .order(Order::Input)
}

/// Every output of the pipeline's current epoch, none of them an error.
pub fn outputs<T: Send + 'static, C: FromIterator<T>>(p: &mut Pipeline<T>) -> C {
    p.iter().map(|r| r.unwrap()).collect()
}

/// A blocking op that fails (`sample X is bad`) on the items `bad` picks and passes the others
/// on.
pub fn fail_when(bad: impl Fn(u64) -> bool + Send + Sync + 'static) -> Op<u64, u64> {
    Op::blocking(move |x: u64| {
        if bad(x) {
            Err(format!("sample {x} is bad").into())
        } else {
            Ok(Some(x))
        }
    })
}

/// A blocking op that fails on every multiple of `k` (0 included).
pub fn fail_every(k: u64) -> Op<u64, u64> {
    fail_when(move |x| x % k == 0)
}

/// The outputs of the pipeline's current epoch until its end, and the error that ended it,
/// which must be a failure budget's naming `stage` (it comes last).
pub fn outputs_then_budget_error<T: Send + 'static>(
    p: &mut Pipeline<T>,
    stage: &str,
) -> (Vec<T>, Error) {
    let mut items = Vec::new();
    let mut err = None;
    for r in p.iter() {
        match r {
            Ok(x) => items.push(x),
            Err(e) => err = Some(e),
        }
    }
    let err = err.expect("the budget error comes last");
    assert_eq!(err.kind(), ErrorKind::TooManyFailures, "{err}");
    assert_eq!(err.stage(), Some(stage), "{err}");
    (items, err)
}
