//! The builder: a typed chain of stage constructors, source first, materialized by
//! [`PipelineBuilder::build`] from the sink backwards (each stage creates its input queue and
//! hands the sending half to the stage before it).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use futures_core::Stream;

use super::handle::{Meters, Pipeline, Runtime};
use crate::error::{BoxError, Error, ErrorKind, Result};
use crate::exec::block_on::BlockingStream;
use crate::exec::pool::{Submitter, WorkerPool};
use crate::exec::queue::{passing_meter, queue, QueueMeter, QueueRx, QueueTx};
use crate::stage::account::Account;
use crate::stage::aggregate::{run_aggregate, run_disaggregate, Aggregator, Batcher};
use crate::stage::failures::Failures;
use crate::stage::fused::{self, Direct};
use crate::stage::map::MapStage;
use crate::stage::source::{run_source, BoxIter, SourceFn, StartEpoch};
use crate::stage::stream::{run_stream, BoxStream};
use crate::stage::{failure_budget_setters, FailureBudget, Msg, Op, OpKind, Order, StageConfig};
use crate::stats::StageMeter;

type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What the chain of stage constructors writes into while a pipeline is built.
pub(crate) struct BuildCtx {
    submitter: Submitter,
    /// Worker threads: a stage fuses into the one before it only with at least this concurrency.
    workers: usize,
    /// Whether adjacent blocking stages join one group ([`PipelineBuilder::fuse_stages`]).
    fuse: bool,
    failures: Arc<Failures>,
    /// Stages and queues, collected sink-first and reversed at the end.
    stages: Vec<Arc<StageMeter>>,
    queues: Vec<Arc<QueueMeter>>,
    tasks: Vec<Task>,
    source_thread: Option<JoinHandle<()>>,
    commands: Option<crossbeam_channel::Sender<StartEpoch>>,
    error: Option<Error>,
}

/// Where a stage sends its outputs: a queue, or (a blocking stage only) the fused stages after
/// it, which run on its lanes.
enum Downstream<T> {
    Queue(QueueTx<Msg<T>>),
    Fused(Direct<T>),
}

impl<T> Downstream<T> {
    /// The queue of a stage that no stage fuses into: only a blocking stage is offered a fused
    /// downstream (`PipelineBuilder::pipe` checks `blocking_tail`).
    fn queue(self) -> QueueTx<Msg<T>> {
        match self {
            Downstream::Queue(tx) => tx,
            Downstream::Fused(_) => {
                unreachable!("a fused downstream offered to a non-fusable stage")
            }
        }
    }
}

type Chain<T> = Box<dyn FnOnce(&mut BuildCtx, Downstream<T>) + Send + 'static>;

/// Builds a pipeline: a source, then stages, then a sink, as SPDL's `PipelineBuilder`.
///
/// Nothing runs until [`build`](PipelineBuilder::build), and no item is produced until the
/// first epoch is started by iterating the [`Pipeline`].
///
/// ```
/// use spdl_core::{Op, PipelineBuilder, StageConfig};
///
/// let mut pipeline = PipelineBuilder::source(|_epoch| 0..10u32)
///     .pipe(
///         Op::blocking(|x: u32| Ok((x % 2 == 0).then_some(x * 10))),
///         StageConfig::named("even").concurrency(2),
///     )
///     .aggregate(2, false)
///     .build(2)
///     .unwrap();
/// let mut all: Vec<u32> = pipeline.iter().map(|batch| batch.unwrap()).flatten().collect();
/// all.sort();
/// assert_eq!(all, vec![0, 20, 40, 60, 80]);
/// ```
pub struct PipelineBuilder<T> {
    chain: Chain<T>,
    stage_count: usize,
    /// Name of the last stage, to name the queue after it.
    last: String,
    sink_size: usize,
    max_failures: Option<FailureBudget>,
    report_interval: Option<Duration>,
    /// Epochs before this one are prefetched (0: none).
    prefetch_epochs: u64,
    /// The last stage is a blocking `pipe` with this concurrency and order: the next blocking
    /// stage with the same order may join its group.
    blocking_tail: Option<(usize, Order)>,
    /// Adjacent blocking stages pass items lane to lane (default); see
    /// [`fuse_stages`](Self::fuse_stages).
    fuse: bool,
}

impl<T: Send + 'static> PipelineBuilder<T> {
    /// Starts a pipeline from a function called once per epoch with the epoch number (0, 1,
    /// ...), returning that epoch's items; it runs on a thread of its own, so a slow iterator
    /// never blocks the stages. Use the epoch to reshuffle.
    pub fn source<F, I>(mut f: F) -> Self
    where
        F: FnMut(u64) -> I + Send + 'static,
        I: IntoIterator<Item = T>,
        I::IntoIter: Send + 'static,
    {
        Self::from_source_fn(Box::new(move |epoch| {
            Box::new(f(epoch).into_iter()) as BoxIter<T>
        }))
    }

    /// Starts a pipeline from one iterator: the first epoch yields its items, later ones none.
    pub fn source_iter<I>(iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: Send + 'static,
    {
        let mut once = Some(iter.into_iter());
        Self::from_source_fn(Box::new(move |_| match once.take() {
            Some(it) => Box::new(it) as BoxIter<T>,
            None => Box::new(std::iter::empty()),
        }))
    }

    /// Starts a pipeline from an async stream made for each epoch. The stream is polled on the
    /// source's own thread, so it may be slow without stalling the stages.
    pub fn source_stream<F, S>(mut f: F) -> Self
    where
        F: FnMut(u64) -> S + Send + 'static,
        S: Stream<Item = T> + Send + 'static,
    {
        Self::from_source_fn(Box::new(move |epoch| {
            Box::new(BlockingStream::new(Box::pin(f(epoch)))) as BoxIter<T>
        }))
    }

    fn from_source_fn(f: SourceFn<T>) -> Self {
        PipelineBuilder {
            chain: Box::new(move |ctx, output| {
                let meter = Arc::new(StageMeter::new("source".into(), 1));
                ctx.stages.push(meter.clone());
                let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
                let failures = ctx.failures.clone();
                match std::thread::Builder::new()
                    .name("spdl-source".into())
                    .spawn(move || run_source(f, cmd_rx, output.queue(), meter, failures))
                {
                    Ok(h) => {
                        ctx.source_thread = Some(h);
                        ctx.commands = Some(cmd_tx);
                    }
                    Err(e) => {
                        ctx.error = Some(Error::new(
                            ErrorKind::Stopped,
                            format!("cannot start the source thread: {e}"),
                        ))
                    }
                }
            }),
            stage_count: 1,
            last: "source".into(),
            sink_size: 3,
            max_failures: None,
            report_interval: None,
            prefetch_epochs: 0,
            blocking_tail: None,
            fuse: true,
        }
    }

    /// Appends a stage: `make` builds its task from its input queue and output sender.
    fn then<U: Send + 'static>(
        self,
        kind: &str,
        name: Option<String>,
        concurrency: usize,
        queue_size: usize,
        make: impl FnOnce(&BuildCtx, Arc<StageMeter>, QueueRx<Msg<T>>, QueueTx<Msg<U>>) -> Task
            + Send
            + 'static,
    ) -> PipelineBuilder<U> {
        let name = name.unwrap_or_else(|| format!("{kind}_{}", self.stage_count));
        let queue_name = format!("{}->{}", self.last, name);
        let stage_name = name.clone();
        self.extend(name, None, move |prev| {
            Box::new(move |ctx, output| {
                let meter = Arc::new(StageMeter::new(stage_name, concurrency));
                ctx.stages.push(meter.clone());
                let (tx, rx, qm) = queue(queue_name, queue_size);
                ctx.queues.push(qm);
                let task = make(ctx, meter, rx, output.queue());
                ctx.tasks.push(task);
                prev(ctx, Downstream::Queue(tx));
            })
        })
    }

    /// This builder with one more stage, `last`: `stage` wraps the chain so far; the settings
    /// carry over.
    fn extend<U: Send + 'static>(
        self,
        last: String,
        blocking_tail: Option<(usize, Order)>,
        stage: impl FnOnce(Chain<T>) -> Chain<U>,
    ) -> PipelineBuilder<U> {
        PipelineBuilder {
            chain: stage(self.chain),
            stage_count: self.stage_count + 1,
            last,
            sink_size: self.sink_size,
            max_failures: self.max_failures,
            report_interval: self.report_interval,
            prefetch_epochs: self.prefetch_epochs,
            blocking_tail,
            fuse: self.fuse,
        }
    }

    /// Adds a per-item stage running `op` with `config`'s concurrency, order, name and failure
    /// budget. Its input queue holds `queue_size` items (default: `concurrency`).
    ///
    /// A blocking op right after another blocking stage with the same order joins that stage's
    /// group (`stage::fused`; any other blocking op starts a group of its own): items pass
    /// from the lanes of one to the lanes of the next, and from the last lane to the next
    /// queue, without the scheduler thread; with the same concurrency too, and a concurrency of at
    /// least the worker count (so no parallelism is lost), it runs inline on the lanes of the
    /// stage before (fused). Outputs, order, statistics and failure accounting stay as they are
    /// unfused. There is no queue inside a group, so its `queue_size` bounds nothing (the
    /// queue's meter stays, with no wait); the group admits the sum of its stages' admission
    /// limits. [`fuse_stages`](Self::fuse_stages)`(false)` turns this off.
    pub fn pipe<U: Send + 'static>(self, op: Op<T, U>, config: StageConfig) -> PipelineBuilder<U> {
        let StageConfig {
            name,
            concurrency,
            order,
            max_failures,
            queue_size,
        } = config;
        let name = name.unwrap_or_else(|| format!("pipe_{}", self.stage_count));
        let blocking = matches!(op.kind, OpKind::Blocking(_));
        // After a blocking stage of the same order, a blocking op joins its group; with the
        // same concurrency too it runs inline on that stage's lanes (see below).
        let joins = blocking && self.blocking_tail.is_some_and(|(_, o)| o == order);
        let same_lanes = self.blocking_tail == Some((concurrency, order));
        let queue_size = queue_size.unwrap_or(concurrency);
        let queue_name = format!("{}->{}", self.last, name);
        let stage_name = name.clone();
        let blocking_tail = blocking.then_some((concurrency, order));
        self.extend(name, blocking_tail, move |prev| {
            Box::new(move |ctx, downstream: Downstream<U>| {
                let meter = Arc::new(StageMeter::new(stage_name, concurrency));
                ctx.stages.push(meter.clone());
                let account = Account {
                    meter,
                    budget: max_failures,
                    failures: ctx.failures.clone(),
                };
                match op.kind {
                    OpKind::Blocking(f) if joins && ctx.fuse => {
                        // Runs on the previous stage's lanes when that takes no parallelism
                        // away (fused), else on lanes of its own; items pass from lane to lane
                        // either way, and the queue between keeps its meter.
                        let own_lanes = (!(same_lanes && concurrency >= ctx.workers))
                            .then(|| (concurrency, ctx.submitter.clone()));
                        let next = match downstream {
                            Downstream::Fused(next) => next,
                            Downstream::Queue(tx) => {
                                let (next, task) = fused::tail(order == Order::Input, tx);
                                ctx.tasks.push(task);
                                next
                            }
                        };
                        let passed = passing_meter(queue_name, queue_size);
                        ctx.queues.push(passed.clone());
                        let direct = fused::follower(f, account, passed, next, own_lanes);
                        prev(ctx, Downstream::Fused(direct));
                    }
                    kind => {
                        let (tx, rx, qm) = queue(queue_name, queue_size);
                        ctx.queues.push(qm);
                        let (output, next) = match downstream {
                            // A blocking stage is a group of its own: its lanes pass their
                            // outputs on to the next queue without the scheduler thread.
                            Downstream::Queue(tx) if blocking && ctx.fuse => {
                                let (next, task) = fused::tail(order == Order::Input, tx);
                                ctx.tasks.push(task);
                                (None, Some(next))
                            }
                            Downstream::Queue(tx) => (Some(tx), None),
                            Downstream::Fused(next) => (None, Some(next)),
                        };
                        let stage = MapStage::new(
                            Op { kind },
                            concurrency,
                            order,
                            account,
                            ctx.submitter.clone(),
                            next.clone(),
                        );
                        let task: Task = match (output, next) {
                            (_, Some(next)) => Box::pin(stage.run_head(rx, next)),
                            (Some(output), None) => Box::pin(stage.run(rx, output)),
                            (None, None) => {
                                unreachable!("a stage has a queue or a fused downstream")
                            }
                        };
                        ctx.tasks.push(task);
                        prev(ctx, Downstream::Queue(tx));
                    }
                }
            })
        })
    }

    /// Adds a stream-to-stream stage: `f` is called once per epoch with that epoch's items and
    /// returns the outputs; it owns its concurrency (e.g. with `buffer_unordered`). An `Err`
    /// output counts as a failure of this stage.
    pub fn pipe_stream<U, F>(self, name: impl Into<String>, f: F) -> PipelineBuilder<U>
    where
        U: Send + 'static,
        F: FnMut(BoxStream<T>) -> BoxStream<std::result::Result<U, BoxError>> + Send + 'static,
    {
        self.pipe_stream_with(StageConfig::named(name), f)
    }

    /// [`pipe_stream`](Self::pipe_stream) with `config`'s name, failure budget and
    /// concurrency (reported in the stats; `f` owns the actual concurrency). The order setting
    /// does not apply: `f` decides the order of its outputs.
    pub fn pipe_stream_with<U, F>(self, config: StageConfig, f: F) -> PipelineBuilder<U>
    where
        U: Send + 'static,
        F: FnMut(BoxStream<T>) -> BoxStream<std::result::Result<U, BoxError>> + Send + 'static,
    {
        let budget = config.max_failures;
        self.then(
            "stream",
            config.name,
            config.concurrency,
            config.queue_size.unwrap_or(1),
            move |ctx, meter, input, output| {
                Box::pin(run_stream(
                    Box::new(f),
                    meter,
                    ctx.failures.clone(),
                    budget,
                    input,
                    output,
                ))
            },
        )
    }

    /// Groups items into `Vec`s of `size` (SPDL's `aggregate`); the last batch of an epoch may be
    /// shorter, or is dropped (its items counted as skipped) with `drop_last`.
    pub fn aggregate(self, size: usize, drop_last: bool) -> PipelineBuilder<Vec<T>> {
        self.aggregate_with(Batcher::new(size, drop_last))
    }

    /// Groups items with a custom [`Aggregator`].
    pub fn aggregate_with<A: Aggregator<T>>(self, agg: A) -> PipelineBuilder<A::Output> {
        self.then(
            "aggregate",
            None,
            1,
            1,
            move |_ctx, meter, input, output| Box::pin(run_aggregate(agg, meter, input, output)),
        )
    }

    /// Sets the sink's buffer size: items ready for the consumer (SPDL's `add_sink`, default 3).
    pub fn sink(mut self, buffer_size: usize) -> Self {
        self.sink_size = buffer_size.max(1);
        self
    }

    /// Epoch prefetching: once epoch `e`'s source is exhausted, epoch `e + 1`'s items start
    /// loading while the consumer takes `e`'s tail (the source is called for `e + 1` then, before
    /// the consumer asks for it). `true`: from the first epoch on; `false` (the default): never.
    /// Epoch boundaries and [`crate::Pipeline::state_dict`] stay exact either way, but
    /// [`crate::Pipeline::stats`] are running counters: once epoch `e + 1` loads they include
    /// its first items and failures, so per-epoch differences of them are no longer exact.
    pub fn prefetch_epochs(mut self, on: bool) -> Self {
        self.prefetch_epochs = if on { u64::MAX } else { 0 };
        self
    }

    /// [`prefetch_epochs`](Self::prefetch_epochs)`(true)` for a run of `epochs` epochs: no item
    /// of epoch `epochs` (one past the last) is loaded, so nothing is read, decoded or counted
    /// in the stats after the run's last epoch.
    pub fn prefetch_epochs_of(mut self, epochs: u64) -> Self {
        self.prefetch_epochs = epochs;
        self
    }

    failure_budget_setters!("in total (default: no limit)", "the source's");

    /// Whether adjacent blocking stages of the same order pass items from lane to lane, without
    /// the scheduler thread in between (default `true`; see [`pipe`](Self::pipe)). `false`
    /// gives every stage its own task and input queue, as a reference for comparisons, or to
    /// see how long items wait in each queue.
    pub fn fuse_stages(mut self, fuse: bool) -> Self {
        self.fuse = fuse;
        self
    }

    /// Logs the stats table through `tracing` (INFO) every `interval`.
    pub fn report_stats_interval(mut self, interval: Duration) -> Self {
        self.report_interval = Some(interval);
        self
    }

    /// Starts the threads: `num_threads` workers for blocking ops (at least 1), the scheduler
    /// thread and the source thread. No item is produced until the first epoch is iterated.
    ///
    /// # Errors
    /// [`ErrorKind::Stopped`] if a thread or the runtime cannot be started.
    pub fn build(self, num_threads: usize) -> Result<Pipeline<T>> {
        let pool = WorkerPool::new("spdl-worker", num_threads.max(1))?;
        let mut ctx = BuildCtx {
            submitter: pool.submitter(),
            workers: num_threads.max(1),
            fuse: self.fuse,
            failures: Arc::new(Failures::new(self.max_failures)),
            stages: Vec::new(),
            queues: Vec::new(),
            tasks: Vec::new(),
            source_thread: None,
            commands: None,
            error: None,
        };
        let (sink_tx, sink_rx, sink_meter) = queue(format!("{}->sink", self.last), self.sink_size);
        ctx.queues.push(sink_meter);
        (self.chain)(&mut ctx, Downstream::Queue(sink_tx));
        ctx.stages.reverse();
        ctx.queues.reverse();
        ctx.failures.set_stages(ctx.stages.clone());
        let runtime = match ctx.error.take() {
            Some(e) => Err(e),
            None => Runtime::start(
                std::mem::take(&mut ctx.tasks),
                pool,
                ctx.stages.clone(),
                ctx.queues.clone(),
                self.report_interval,
            ),
        };
        let runtime = match runtime {
            Ok(rt) => rt,
            Err(e) => {
                // Let the source thread see its command channel close, then reap it.
                ctx.commands = None;
                drop(sink_rx);
                if let Some(t) = ctx.source_thread.take() {
                    let _ = t.join();
                }
                return Err(e);
            }
        };
        let mut pipeline = Pipeline::new(
            sink_rx,
            runtime,
            ctx.commands,
            ctx.source_thread,
            Meters {
                stages: ctx.stages,
                queues: ctx.queues,
                failures: ctx.failures,
            },
        );
        pipeline.set_prefetch_epochs(self.prefetch_epochs);
        Ok(pipeline)
    }
}

impl<T: Send + 'static> PipelineBuilder<Vec<T>> {
    /// Splits each `Vec` back into items (SPDL's `disaggregate`).
    pub fn disaggregate(self) -> PipelineBuilder<T> {
        self.then(
            "disaggregate",
            None,
            1,
            1,
            move |_ctx, meter, input, output| Box::pin(run_disaggregate(meter, input, output)),
        )
    }
}
