//! # spdl-core: the pipeline engine of spdl-rs
//!
//! A pipeline is a source, a chain of stages and a sink, joined by bounded queues. Each stage
//! has its own concurrency; blocking ops run on a fixed pool of `num_threads` workers, async
//! ops on a scheduler thread's tokio runtime, and the consumer's thread only takes finished
//! items from the sink. This is the design of Meta's SPDL ("Scalable and Performant Data
//! Loading"), with no GIL anywhere.
//!
//! ```text
//! source thread -> [queue] -> stage 1 -> [queue] -> stage 2 -> ... -> [sink queue] -> consumer
//!                         (worker pool / runtime)
//! ```
//!
//! spdl-core knows nothing about images, CUDA or Python: items are any `Send` type.
//!
//! ```
//! use spdl_core::{Op, Order, PipelineBuilder, StageConfig};
//!
//! let mut pipeline = PipelineBuilder::source(|epoch| (0..8u64).map(move |i| i + 100 * epoch))
//!     .pipe(Op::blocking(|x: u64| Ok(Some(x * 2))), StageConfig::named("double").concurrency(4).order(Order::Input))
//!     .aggregate(4, false)
//!     .sink(2)
//!     .build(2)?;
//! for epoch in 0..2u64 {
//!     let batches: Vec<Vec<u64>> = pipeline.iter().collect::<Result<_, _>>()?;
//!     let first = 200 * epoch;
//!     assert_eq!(batches, vec![vec![first, first + 2, first + 4, first + 6], vec![first + 8, first + 10, first + 12, first + 14]]);
//! }
//! println!("{}", pipeline.stats());
//! # Ok::<(), spdl_core::Error>(())
//! ```
//!
//! ## Backpressure
//! With a consumer that stops taking items, the number of items alive in the pipeline is
//! bounded: 1 held by the source thread, plus each queue's capacity (a stage's input queue
//! holds `queue_size` items, by default its `concurrency`; aggregation stages 1; the sink
//! `sink(n)` items), plus each per-item stage's admitted
//! items (`2 x concurrency` for blocking ops, `concurrency` for async ops), plus, for an
//! aggregation of size `n`, `n - 1` items being grouped and one group being passed on.

pub mod buffer;
mod error;
mod exec;
mod pipeline;
mod progress;
mod stage;
mod stats;

pub use error::{BoxError, Error, ErrorKind, ErrorStatus, Result};
pub use exec::lanes::{after_report, call_seq};
pub use pipeline::{EpochIter, EpochStream, Pipeline, PipelineBuilder, PipelineState, StopHandle};
pub use progress::Progress;
pub use stage::failures::{SampleFailure, FAILURE_REPORTS};
pub use stage::source::BoxIter;
pub use stage::stream::BoxStream;
pub use stage::{Aggregator, Batcher, BoxFuture, FailureBudget, Op, OpResult, Order, StageConfig};
pub use stats::{PipelineStats, QueueStats, StageStats, TimeSummary};
