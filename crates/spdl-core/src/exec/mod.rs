//! How a pipeline runs: the worker pool, the queues, the one spawn wrapper, failure accounting.

pub(crate) mod block_on;
pub(crate) mod lanes;
pub(crate) mod pool;
pub(crate) mod queue;
pub(crate) mod spawned;
pub(crate) mod spin;
