//! Helpers shared by the engine's integration tests.
#![allow(dead_code, unreachable_pub)]

use spdl_core::{Error, Order, Pipeline, StageConfig};

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

/// The outputs of the pipeline's current epoch until its end, and the error that ended it
/// (a failure budget's comes last), if any.
pub fn outputs_then_error<T: Send + 'static>(p: &mut Pipeline<T>) -> (Vec<T>, Option<Error>) {
    let mut items = Vec::new();
    let mut err = None;
    for r in p.iter() {
        match r {
            Ok(x) => items.push(x),
            Err(e) => err = Some(e),
        }
    }
    (items, err)
}
