//! Helpers shared by the engine's integration tests.
#![allow(dead_code, unreachable_pub)]

use spdl_core::{Order, Pipeline, StageConfig};

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
