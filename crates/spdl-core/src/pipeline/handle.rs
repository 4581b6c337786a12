//! A built pipeline: the consumer's handle, the scheduler thread, epochs, state and shutdown.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use futures_core::Stream;

use crate::error::{Error, ErrorKind, Result};
use crate::exec::block_on::block_on_until;
use crate::exec::pool::WorkerPool;
use crate::exec::queue::{QueueMeter, QueueRx};
use crate::exec::spawned::SpawnedTask;
use crate::exec::spin::spin_until;
use crate::progress::Progress;
use crate::stage::failures::{Failures, SampleFailure};
use crate::stage::source::StartEpoch;
use crate::stage::{Ids, Msg};
use crate::stats::{PipelineStats, StageMeter};

type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The scheduler thread: owns a current-thread tokio runtime that runs every stage task, and
/// the worker pool. Stopping it aborts the tasks, then joins the workers.
pub(crate) struct Runtime {
    shutdown: Arc<Mutex<Option<tokio::sync::oneshot::Sender<()>>>>,
    thread: Option<JoinHandle<()>>,
    /// The scheduler's and the workers' thread ids.
    threads: Vec<ThreadId>,
}

impl Runtime {
    pub(crate) fn start(
        tasks: Vec<Task>,
        pool: WorkerPool,
        stages: Vec<Arc<StageMeter>>,
        queues: Vec<Arc<QueueMeter>>,
        report_interval: Option<Duration>,
    ) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            // Before the scheduler sleeps, it looks for a moment for tasks woken from other
            // threads (a lane's result, the consumer taking an item): they land in the
            // runtime's global queue (see `exec::spin`).
            .on_thread_park(|| {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    let metrics = rt.metrics();
                    spin_until(|| metrics.global_queue_depth() > 0);
                }
            })
            .build()
            .map_err(|e| {
                Error::new(ErrorKind::Stopped, format!("cannot start the runtime: {e}"))
            })?;
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let mut threads = pool.thread_ids();
        let thread = std::thread::Builder::new()
            .name("spdl-scheduler".into())
            .spawn(move || {
                rt.block_on(async move {
                    let mut running: Vec<SpawnedTask<()>> =
                        tasks.into_iter().map(SpawnedTask::spawn).collect();
                    if let Some(every) = report_interval {
                        running.push(SpawnedTask::spawn(report_stats(every, stages, queues)));
                    }
                    // Stages run until the pipeline is stopped or dropped; then every task is
                    // aborted by dropping its handle.
                    let _ = shutdown_rx.await;
                    drop(running);
                });
                drop(rt);
                // Workers finish the op they are running (ops cannot be interrupted) and exit.
                drop(pool);
            })
            .map_err(|e| {
                Error::new(
                    ErrorKind::Stopped,
                    format!("cannot start the scheduler: {e}"),
                )
            })?;
        threads.push(thread.thread().id());
        Ok(Runtime {
            shutdown: Arc::new(Mutex::new(Some(shutdown_tx))),
            thread: Some(thread),
            threads,
        })
    }

    /// Stops the scheduler and joins it (it joins the workers). From the scheduler or a worker
    /// thread it only asks for the stop: joining would wait for the calling thread itself.
    fn stop(&mut self, on_own_thread: bool) {
        request_shutdown(&self.shutdown);
        if on_own_thread {
            return; // dropping the handle detaches the scheduler, which ends on its own
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn request_shutdown(shutdown: &Mutex<Option<tokio::sync::oneshot::Sender<()>>>) {
    let tx = shutdown.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(tx) = tx {
        let _ = tx.send(());
    }
}

/// Stops a [`Pipeline`] from anywhere, without blocking: from an op, a hook or another thread
/// (get one with [`Pipeline::stop_handle`]). Cheap to clone.
///
/// [`StopHandle::stop`] aborts every stage (an op running at that moment finishes its call);
/// the consumer then gets [`ErrorKind::Stopped`] once the items already in the sink are
/// taken. The threads are joined by [`Pipeline::stop`] or when the pipeline is dropped.
#[derive(Clone)]
pub struct StopHandle {
    shutdown: Arc<Mutex<Option<tokio::sync::oneshot::Sender<()>>>>,
    threads: Arc<[ThreadId]>,
}

impl StopHandle {
    /// Asks the pipeline to stop and returns at once. Idempotent.
    pub fn stop(&self) {
        request_shutdown(&self.shutdown);
    }

    /// Whether the calling thread is one of the pipeline's own: its scheduler, a worker or its
    /// source thread (where a blocking stop would wait for itself).
    pub fn is_engine_thread(&self) -> bool {
        self.threads.contains(&std::thread::current().id())
    }
}

async fn report_stats(every: Duration, stages: Vec<Arc<StageMeter>>, queues: Vec<Arc<QueueMeter>>) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let stats = PipelineStats {
            stages: stages.iter().map(|s| s.snapshot()).collect(),
            queues: queues.iter().map(|q| q.snapshot()).collect(),
        };
        tracing::info!("pipeline stats:\n{stats}");
    }
}

/// Where the consumer is in the epoch cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No epoch running; the next call starts epoch `Pipeline::epoch`.
    Idle,
    /// An epoch is running.
    Running,
    /// The pipeline stopped (failure budget exceeded, `stop()`): no more items.
    Stopped,
}

/// A running pipeline: iterate it epoch by epoch from the training loop's thread
/// ([`Pipeline::iter`]), or as a `Stream` from async code ([`Pipeline::stream`]).
///
/// Dropping it (or calling [`Pipeline::stop`]) aborts every stage, lets each worker finish
/// the op it is running, and joins every thread.
///
/// ```
/// use spdl_core::{Op, PipelineBuilder, StageConfig};
///
/// let mut pipeline = PipelineBuilder::source(|epoch| (0..4u64).map(move |i| epoch * 10 + i))
///     .pipe(Op::blocking(|n: u64| Ok(Some(n + 1))), StageConfig::named("inc"))
///     .build(2)?;
/// for epoch in 0..2u64 {
///     let mut got: Vec<u64> = pipeline.iter().collect::<Result<_, _>>()?;
///     got.sort_unstable(); // the default order is completion order
///     assert_eq!(got, (1..5).map(|i| epoch * 10 + i).collect::<Vec<_>>());
/// }
/// assert_eq!(pipeline.stats().stages[1].name, "inc");
/// # Ok::<(), spdl_core::Error>(())
/// ```
pub struct Pipeline<T> {
    sink: QueueRx<Msg<T>>,
    runtime: Runtime,
    commands: Option<crossbeam_channel::Sender<StartEpoch>>,
    source_thread: Option<JoinHandle<()>>,
    meters: Meters,
    phase: Phase,
    epoch: u64,
    progress: Progress,
    /// Positions to skip in the next epoch started (from `load_state_dict`).
    resume: Option<Progress>,
    /// Prefetch the next epoch (`Some(true)`) or not (`None`, `Some(false)`: the default).
    /// Epochs before this one are prefetched (0: none).
    prefetch_epochs: u64,
    /// Epochs started by the consumer so far.
    epochs_started: u64,
    /// The epoch the source is producing ahead of the consumer, if any.
    prefetched: Option<u64>,
    stop_handle: StopHandle,
}

/// What the consumer has received so far: enough to resume the epoch in a fresh process with
/// no repeat and no skip (mirrors torchdata's `StatefulDataLoader.state_dict()`).
///
/// Its size does not grow with the epoch: a watermark plus the positions done out of order
/// above it (at most about the number of items in flight).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineState {
    /// The epoch in progress (or the next one, if the last epoch was finished).
    pub epoch: u64,
    /// Every source position below this one is done.
    pub done_below: u64,
    /// Done positions above `done_below`, ascending.
    pub done_above: Vec<u64>,
}

/// What a pipeline reports from: the counters of every stage and queue (source first) and the
/// failure accounting of the whole run.
pub(crate) struct Meters {
    pub(crate) stages: Vec<Arc<StageMeter>>,
    pub(crate) queues: Vec<Arc<QueueMeter>>,
    pub(crate) failures: Arc<Failures>,
}

impl<T: Send + 'static> Pipeline<T> {
    pub(crate) fn new(
        sink: QueueRx<Msg<T>>,
        runtime: Runtime,
        commands: Option<crossbeam_channel::Sender<StartEpoch>>,
        source_thread: Option<JoinHandle<()>>,
        meters: Meters,
    ) -> Self {
        let mut threads = runtime.threads.clone();
        threads.extend(source_thread.as_ref().map(|t| t.thread().id()));
        let stop_handle = StopHandle {
            shutdown: runtime.shutdown.clone(),
            threads: threads.into(),
        };
        Pipeline {
            sink,
            runtime,
            commands,
            source_thread,
            meters,
            phase: Phase::Idle,
            epoch: 0,
            progress: Progress::new(),
            resume: None,
            prefetch_epochs: 0,
            epochs_started: 0,
            prefetched: None,
            stop_handle,
        }
    }

    /// Whether the next epoch is prefetched (see [`crate::PipelineBuilder::prefetch_epochs`]).
    pub(crate) fn set_prefetch_epochs(&mut self, before: u64) {
        self.prefetch_epochs = before;
    }

    /// A handle that stops this pipeline without blocking, usable from anywhere (an op, a
    /// hook, another thread); see [`StopHandle`].
    pub fn stop_handle(&self) -> StopHandle {
        self.stop_handle.clone()
    }

    /// An iterator over the items of the current epoch, starting the next epoch if none is
    /// running. It ends (`None`) at the end of the epoch. Dropping it mid-epoch does not stop
    /// the pipeline: the next `iter()` goes on with the same epoch.
    ///
    /// After a failure budget is exceeded, the items already produced come first, then one
    /// `Err` ([`ErrorKind::TooManyFailures`], naming the stage, the count and the last
    /// errors), then the iterator ends for good.
    pub fn iter(&mut self) -> EpochIter<'_, T> {
        EpochIter { pipeline: self }
    }

    /// The current epoch's items as a `Stream`, for async consumers (same rules as
    /// [`Pipeline::iter`]).
    pub fn stream(&mut self) -> EpochStream<'_, T> {
        EpochStream { pipeline: self }
    }

    /// Starts the next epoch now, if none is running (iterating does it too). Lets the source
    /// and stages fill the queues before the first item is asked for.
    ///
    /// With [`crate::PipelineBuilder::prefetch_epochs`]`(true)`, the source goes on with the
    /// following epoch as soon as this one's source is exhausted: its first items load while the
    /// consumer takes this epoch's tail (no bubble at the boundary). Items still reach the
    /// consumer epoch by epoch, with `Ok(None)` exactly between two epochs.
    pub fn start(&mut self) {
        if self.phase != Phase::Idle {
            return;
        }
        // `load_state_dict` refuses a resume once the epoch is prefetched, so a prefetched
        // epoch always starts from its first position.
        let done = self.resume.take().unwrap_or_default();
        self.progress = done.clone();
        self.epochs_started += 1;
        // Off unless asked for: the stats are running counters, so with the next epoch loading
        // they would mix its failures into this epoch's.
        let prefetch_next = self.epoch + 1 < self.prefetch_epochs;
        let started = self.commands.as_ref().is_some_and(|c| {
            c.send(StartEpoch {
                epoch: self.epoch,
                done,
                prefetch_next,
            })
            .is_ok()
        });
        self.prefetched = prefetch_next.then_some(self.epoch + 1);
        self.phase = if started {
            Phase::Running
        } else {
            Phase::Stopped
        };
    }

    /// Takes the next item of the current epoch (starting one if idle), waiting at most
    /// `timeout` (forever if `None`). `Ok(None)` marks the end of the epoch.
    ///
    /// # Errors
    /// [`ErrorKind::Timeout`] if no item came in time (the pipeline goes on; call again);
    /// [`ErrorKind::TooManyFailures`] once, after the last item, if a budget was exceeded;
    /// [`ErrorKind::Stopped`] if the pipeline was stopped.
    pub fn next_item(&mut self, timeout: Option<Duration>) -> Result<Option<T>> {
        self.start();
        loop {
            if self.phase == Phase::Stopped {
                return Err(Error::new(ErrorKind::Stopped, "the pipeline is stopped"));
            }
            let msg = match timeout {
                None => self.sink.blocking_recv(),
                // Waits on this thread, without the runtime's timer: `StopHandle::stop` may
                // shut the runtime down meanwhile.
                Some(d) => match block_on_until(self.sink.recv(), Some(Instant::now() + d)) {
                    Some(m) => m,
                    None => {
                        return Err(Error::new(
                            ErrorKind::Timeout,
                            format!("no item within {:.3} s", d.as_secs_f64()),
                        ))
                    }
                },
            };
            match self.on_msg(msg) {
                Some(r) => return r,
                None => continue,
            }
        }
    }

    /// Handles one message from the sink: `Some` to return to the consumer, `None` to go on.
    fn on_msg(&mut self, msg: Option<Msg<T>>) -> Option<Result<Option<T>>> {
        match msg {
            Some(Msg::Item(ids, item)) => {
                self.mark(&ids);
                Some(Ok(Some(item)))
            }
            Some(Msg::Skip(ids)) => {
                self.mark(&ids);
                None
            }
            Some(Msg::EndOfEpoch) => {
                self.phase = Phase::Idle;
                self.epoch += 1;
                self.progress = Progress::new();
                Some(Ok(None))
            }
            None => {
                self.phase = Phase::Stopped;
                Some(Err(self.meters.failures.take_abort().unwrap_or_else(
                    || Error::new(ErrorKind::Stopped, "the pipeline stopped"),
                )))
            }
        }
    }

    fn mark(&mut self, ids: &Ids) {
        ids.for_each(|p| self.progress.mark(p));
    }

    /// The epoch in progress, or the next one if none is running.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What the consumer has received so far (see [`PipelineState`]).
    pub fn state_dict(&self) -> PipelineState {
        PipelineState {
            epoch: self.epoch,
            done_below: self.progress.watermark(),
            done_above: self.progress.done_above(),
        }
    }

    /// Resumes from a [`PipelineState`]: the next epoch started is `state.epoch`, and the source
    /// skips the positions already done, before any stage sees them (nothing is decoded again).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] if an epoch is already running, or if the next epoch is
    /// already being prefetched and `state` is not its start (load a state before the first
    /// epoch, in a fresh pipeline).
    pub fn load_state_dict(&mut self, state: &PipelineState) -> Result<()> {
        if self.phase != Phase::Idle {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "load_state_dict must be called before the epoch starts",
            ));
        }
        if let Some(ahead) = self.prefetched {
            let at_start =
                state.epoch == ahead && state.done_below == 0 && state.done_above.is_empty();
            if at_start {
                return Ok(()); // exactly where the prefetched epoch starts
            }
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "load_state_dict: epoch {ahead} is already being prefetched from its start; load a state (epoch {}) before the first epoch, in a fresh pipeline",
                    state.epoch
                ),
            ));
        }
        self.epoch = state.epoch;
        self.resume = Some(Progress::from_parts(
            state.done_below,
            state.done_above.iter().copied(),
        ));
        Ok(())
    }

    /// A snapshot of every stage's and queue's statistics.
    pub fn stats(&self) -> PipelineStats {
        PipelineStats {
            stages: self.meters.stages.iter().map(|s| s.snapshot()).collect(),
            queues: self.meters.queues.iter().map(|q| q.snapshot()).collect(),
        }
    }

    /// The most recent failures (up to 5), oldest first, each naming its stage and position.
    pub fn last_errors(&self) -> Vec<String> {
        self.meters.failures.last_errors()
    }

    /// Every failed sample, typed, in the order the stages recorded them: a channel beside the
    /// items, to read while iterating (`try_iter()`) or after an epoch. Each receiver returned
    /// shares one queue (a report goes to one reader). At most
    /// [`FAILURE_REPORTS`](crate::FAILURE_REPORTS) wait unread; past that a failure is still
    /// counted in the stage's statistics and in [`Pipeline::unreported_failures`], but not
    /// queued, so a pipeline whose failures nobody reads keeps bounded memory.
    pub fn failures(&self) -> crossbeam_channel::Receiver<SampleFailure> {
        self.meters.failures.reports()
    }

    /// Failures that were not queued for [`Pipeline::failures`] because its queue was full.
    pub fn unreported_failures(&self) -> u64 {
        self.meters.failures.unreported()
    }

    /// The error that stopped the pipeline (a failure budget exceeded) if the consumer has not
    /// received it yet; taking it means it will not be returned by `next_item` (SPDL 0.8's
    /// `stop()` raises such an unobserved failure once).
    pub fn take_unobserved_failure(&mut self) -> Option<Error> {
        self.meters.failures.take_abort()
    }

    /// Stops every stage and joins every thread. Idempotent; dropping the pipeline does it too.
    ///
    /// Called from one of the pipeline's own threads (an op on a worker, the source's iterator,
    /// the scheduler), it cannot wait for that thread: it stops every stage and returns without
    /// joining; the threads then end on their own (a later `stop()` from another thread, or
    /// the drop, joins what is left).
    pub fn stop(&mut self) {
        self.phase = Phase::Stopped;
        shut_down(self);
    }
}

fn shut_down<T>(p: &mut Pipeline<T>) {
    let own = p.stop_handle.is_engine_thread();
    p.commands = None;
    p.sink.close();
    p.runtime.stop(own);
    if own {
        return;
    }
    if let Some(t) = p.source_thread.take() {
        let _ = t.join();
    }
}

impl<T> Drop for Pipeline<T> {
    fn drop(&mut self) {
        shut_down(self);
    }
}

/// Iterator over one epoch; see [`Pipeline::iter`].
pub struct EpochIter<'a, T> {
    pipeline: &'a mut Pipeline<T>,
}

impl<T: Send + 'static> Iterator for EpochIter<'_, T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        if self.pipeline.phase == Phase::Stopped {
            return None;
        }
        self.pipeline.next_item(None).transpose()
    }
}

impl<'a, T: Send + 'static> IntoIterator for &'a mut Pipeline<T> {
    type Item = Result<T>;
    type IntoIter = EpochIter<'a, T>;

    fn into_iter(self) -> EpochIter<'a, T> {
        self.iter()
    }
}

/// Stream over one epoch; see [`Pipeline::stream`].
pub struct EpochStream<'a, T> {
    pipeline: &'a mut Pipeline<T>,
}

impl<T: Send + 'static> Stream for EpochStream<'_, T> {
    type Item = Result<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<T>>> {
        let p = &mut *self.pipeline;
        if p.phase == Phase::Stopped {
            return Poll::Ready(None);
        }
        p.start();
        loop {
            let msg = match p.sink.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(m) => m,
            };
            if let Some(r) = p.on_msg(msg) {
                return Poll::Ready(r.transpose());
            }
        }
    }
}
