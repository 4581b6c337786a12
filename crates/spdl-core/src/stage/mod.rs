//! Stages: what runs between the source and the sink.
//!
//! Three op shapes, as in Vector's transforms:
//! - [`Op::blocking`] / [`Op::flat_map`]: a function per item, run on the fixed worker pool
//!   (CPU work: decode, resize); [`Op::flat_map_iter`] passes each output on as it is made;
//! - [`Op::future`]: an async function per item, run on the scheduler's runtime (I/O: HTTP, S3);
//! - [`crate::PipelineBuilder::pipe_stream`]: a stream-to-stream stage that owns its
//!   concurrency (batching, demuxing).
//!
//! plus [`crate::PipelineBuilder::aggregate`] / [`disaggregate`](crate::PipelineBuilder::disaggregate).

pub(crate) mod account;
pub(crate) mod aggregate;
pub(crate) mod failures;
pub(crate) mod fused;
pub(crate) mod map;
pub(crate) mod source;
pub(crate) mod stream;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use smart_default::SmartDefault;

use crate::error::BoxError;

pub use aggregate::{Aggregator, Batcher};

/// The message of a caught panic.
fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// An op's error, as the stage reports it.
fn op_error(e: BoxError) -> crate::error::Error {
    crate::error::Error::from_op(crate::error::ErrorKind::OpFailed, e)
}

/// What an op returns for one item: `Ok(Some(out))` passes `out` on, `Ok(None)` drops the item
/// (a filter, counted as filtered), `Err(e)` is a failure (counted, logged, the item dropped).
pub type OpResult<U> = Result<Option<U>, BoxError>;

/// A boxed future, `Send`, as async ops return.
pub type BoxFuture<U> = Pin<Box<dyn Future<Output = U> + Send + 'static>>;

/// Which positions in the epoch (0-based, in source order) an item stands for: one for a plain
/// item, several for a batch, none for all but the last output of a flat-map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Ids {
    #[default]
    None,
    One(u64),
    Many(Vec<u64>),
}

impl Ids {
    pub(crate) fn first(&self) -> Option<u64> {
        match self {
            Ids::None => None,
            Ids::One(p) => Some(*p),
            Ids::Many(v) => v.first().copied(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Ids::None => 0,
            Ids::One(_) => 1,
            Ids::Many(v) => v.len(),
        }
    }

    pub(crate) fn extend_into(self, out: &mut Vec<u64>) {
        match self {
            Ids::None => {}
            Ids::One(p) => out.push(p),
            Ids::Many(v) => out.extend(v),
        }
    }

    pub(crate) fn for_each(&self, mut f: impl FnMut(u64)) {
        match self {
            Ids::None => {}
            Ids::One(p) => f(*p),
            Ids::Many(v) => v.iter().copied().for_each(f),
        }
    }

    pub(crate) fn from_vec(v: Vec<u64>) -> Ids {
        match v.len() {
            0 => Ids::None,
            1 => Ids::One(v[0]),
            _ => Ids::Many(v),
        }
    }
}

/// What flows through the queues. `Skip` carries the positions of items that were filtered,
/// failed or dropped, so the consumer can account for every source item (resumable state,
/// `delivered + failed + filtered = listed`).
pub(crate) enum Msg<T> {
    Item(Ids, T),
    Skip(Ids),
    EndOfEpoch,
}

/// The order in which a stage passes its outputs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// As soon as each finishes (SPDL's `output_order="completion"`); the default: a slow item
    /// never holds up the others.
    #[default]
    Completion,
    /// In the order the items came in (SPDL's `output_order="input"`).
    Input,
}

/// How many failures a stage (or the whole pipeline) tolerates before it stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FailureBudget {
    /// Stop once more than this many items failed.
    Count(u64),
    /// Stop once the share of failed items exceeds this rate (0.0 to 1.0), checked only after
    /// [`FailureBudget::PROBATION`] items, so one early failure does not stop a run.
    Rate(f64),
}

impl FailureBudget {
    /// Items processed before a [`FailureBudget::Rate`] is checked.
    pub const PROBATION: u64 = 100;

    /// Whether `failures` out of `processed` items exceed this budget.
    pub fn exceeded(&self, failures: u64, processed: u64) -> bool {
        match *self {
            FailureBudget::Count(n) => failures > n,
            FailureBudget::Rate(r) => {
                processed >= Self::PROBATION && failures as f64 > r * processed as f64
            }
        }
    }
}

/// `max_failures(n)` and `max_failure_rate(rate)`, the two ways to set a [`FailureBudget`],
/// for a builder whose `max_failures` field holds it (a stage's or the pipeline's); `$counted`
/// says which failures count, `$whose` whose items the rate is of.
macro_rules! failure_budget_setters {
    ($counted:literal, $whose:literal) => {
        #[doc = concat!("Stops the pipeline once more than `n` items failed ", $counted, ".")]
        pub fn max_failures(mut self, n: u64) -> Self {
            self.max_failures = Some(FailureBudget::Count(n));
            self
        }

        #[doc = concat!(
            "Stops the pipeline once more than `rate` of ", $whose, " items failed (after 100 items)."
        )]
        pub fn max_failure_rate(mut self, rate: f64) -> Self {
            self.max_failures = Some(FailureBudget::Rate(rate));
            self
        }
    };
}
pub(crate) use failure_budget_setters;

/// Settings of one stage, with builder-style setters.
///
/// ```
/// use spdl_core::{Order, StageConfig};
/// let cfg = StageConfig::named("decode").concurrency(4).order(Order::Input).max_failures(10);
/// assert_eq!(cfg.get_concurrency(), 4);
/// ```
#[derive(Debug, Clone, SmartDefault)]
pub struct StageConfig {
    pub(crate) name: Option<String>,
    #[default(1)]
    pub(crate) concurrency: usize,
    #[default(Order::Completion)]
    pub(crate) order: Order,
    pub(crate) max_failures: Option<FailureBudget>,
    pub(crate) queue_size: Option<usize>,
}

impl StageConfig {
    /// Defaults with a name (used in stats, logs and errors).
    pub fn named(name: impl Into<String>) -> Self {
        StageConfig {
            name: Some(name.into()),
            ..Default::default()
        }
    }

    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Tasks in flight at most (default 1). Values below 1 are treated as 1.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Capacity of the stage's input queue in items (default: its concurrency).
    pub fn queue_size(mut self, n: usize) -> Self {
        self.queue_size = Some(n.max(1));
        self
    }

    /// The stage's concurrency.
    pub fn get_concurrency(&self) -> usize {
        self.concurrency
    }

    /// Output order (default [`Order::Completion`]).
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    failure_budget_setters!("in this stage", "this stage's");
}

/// Outputs of one op call.
pub(crate) enum Outputs<U> {
    None,
    One(U),
    Many(Vec<U>),
    /// One output of a streaming call, passed on while the call goes on.
    Part(U),
    /// A streaming call ended, after this many `Part`s.
    Streamed(u64),
}

type BlockingFn<T, U> = dyn Fn(T) -> Result<Outputs<U>, BoxError> + Send + Sync + 'static;
/// The outputs of one streaming call, pulled one at a time on the worker pool.
pub(crate) type PartIter<U> = Box<dyn Iterator<Item = Result<U, BoxError>> + Send + 'static>;
pub(crate) type StreamingFn<T, U> =
    dyn Fn(T) -> Result<PartIter<U>, BoxError> + Send + Sync + 'static;
type AsyncFn<T, U> = dyn Fn(T) -> BoxFuture<Result<Outputs<U>, BoxError>> + Send + Sync + 'static;

/// An op: what a stage does to each item. Build one with [`Op::blocking`], [`Op::flat_map`]
/// or [`Op::future`].
pub struct Op<T, U> {
    pub(crate) kind: OpKind<T, U>,
}

pub(crate) enum OpKind<T, U> {
    Blocking(Arc<BlockingFn<T, U>>),
    Streaming(Arc<StreamingFn<T, U>>),
    Async(Arc<AsyncFn<T, U>>),
}

impl<T: Send + 'static, U: Send + 'static> Op<T, U> {
    /// A blocking function, run on the pipeline's worker pool (`num_threads` threads).
    /// Use it for CPU work. Return `Ok(None)` to drop the item.
    ///
    /// ```
    /// use spdl_core::Op;
    /// let double = Op::blocking(|x: u32| Ok(Some(x * 2)));
    /// # let _ = double;
    /// ```
    pub fn blocking<F>(f: F) -> Self
    where
        F: Fn(T) -> OpResult<U> + Send + Sync + 'static,
    {
        Op {
            kind: OpKind::Blocking(Arc::new(move |t| {
                Ok(match f(t)? {
                    Some(u) => Outputs::One(u),
                    None => Outputs::None,
                })
            })),
        }
    }

    /// A blocking function giving any number of outputs per item (demuxing, splitting), run on
    /// the worker pool. An empty `Vec` counts as filtered.
    pub fn flat_map<F>(f: F) -> Self
    where
        F: Fn(T) -> Result<Vec<U>, BoxError> + Send + Sync + 'static,
    {
        Op {
            kind: OpKind::Blocking(Arc::new(move |t| Ok(Outputs::Many(f(t)?)))),
        }
    }

    /// A blocking function giving an iterator of outputs, each passed on as soon as the
    /// iterator yields it (a Python generator op, an endless demuxer); [`Op::flat_map`] passes
    /// them on only once the call returns.
    ///
    /// `f(item)` and each `next()` run as separate jobs on the worker pool, so a call never
    /// holds a worker while the stages downstream are backed up: the next output is asked for
    /// only when the stage has room for it. Up to `concurrency` calls run interleaved. An
    /// `Err` item fails the input item (the outputs already yielded stay passed on); nothing
    /// yielded counts as filtered; once the pipeline stops, the iterator is dropped unfinished.
    /// The input's position counts as done after its last output. With [`Order::Input`], the
    /// outputs of a call wait (in memory) until the calls before it have ended.
    ///
    /// ```
    /// use spdl_core::Op;
    /// let repeat = Op::flat_map_iter(|x: u32| Ok((0..x).map(Ok)));
    /// # let _ = repeat;
    /// ```
    pub fn flat_map_iter<F, I>(f: F) -> Self
    where
        F: Fn(T) -> Result<I, BoxError> + Send + Sync + 'static,
        I: IntoIterator<Item = Result<U, BoxError>>,
        I::IntoIter: Send + 'static,
    {
        Op {
            kind: OpKind::Streaming(Arc::new(move |t| {
                Ok(Box::new(f(t)?.into_iter()) as PartIter<U>)
            })),
        }
    }

    /// An async function, polled on the scheduler's runtime (tokio, current-thread). Use it for
    /// I/O; it must not block (blocking would stall every async stage). Its stage's
    /// concurrency is how many calls are in flight at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use spdl_core::{Op, Order, PipelineBuilder, StageConfig};
    ///
    /// // A slow "fetch": 8 in flight overlap their waits; Order::Input keeps source order.
    /// let fetch = Op::future(|n: u64| async move {
    ///     tokio::time::sleep(Duration::from_millis(5)).await;
    ///     Ok(Some(format!("object-{n}")))
    /// });
    /// let mut pipeline = PipelineBuilder::source(|_| 0..3u64)
    ///     .pipe(fetch, StageConfig::named("fetch").concurrency(8).order(Order::Input))
    ///     .build(1)?;
    /// let got: Vec<String> = pipeline.iter().collect::<Result<_, _>>()?;
    /// assert_eq!(got, ["object-0", "object-1", "object-2"]);
    /// # Ok::<(), spdl_core::Error>(())
    /// ```
    pub fn future<F, Fut>(f: F) -> Self
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = OpResult<U>> + Send + 'static,
    {
        Op {
            kind: OpKind::Async(Arc::new(move |t| {
                let fut = f(t);
                Box::pin(async move {
                    Ok(match fut.await? {
                        Some(u) => Outputs::One(u),
                        None => Outputs::None,
                    })
                })
            })),
        }
    }
}
