//! The native half of `spdl_rs.pipeline`: turns the stage list the Python `PipelineBuilder`
//! collected into a `spdl_core::Pipeline<Item>`, and serves items to the consumer with the GIL
//! released while it waits.
//!
//! Where Python code runs:
//! - the source's `__iter__`/`__next__`: on the source thread, GIL held per call;
//! - a function op: on a Rust worker thread, GIL held for the call only; a generator op: each
//!   `__next__` is one job on the workers, and each yielded value moves on at once;
//! - an async op: its coroutine runs on the pipeline's asyncio loop thread; the Rust stage
//!   submits it (`run_coroutine_threadsafe`) and awaits a done-callback on the scheduler's
//!   runtime, so no thread blocks on it;
//! - an async generator op: the same, one step at a time, in a stream stage that passes each
//!   yielded item on at once (`concurrency` generators interleaved);
//! - a custom aggregator (`pyaggregate`): `accumulate`/`flush` with the GIL, in order, in a
//!   stream stage (through the loop when the stage has task hooks);
//! - a native op (`spdl_rs.ops`): never, for native items, unless the stage has Python task
//!   hooks (then they run around each call).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_core::Stream;

use futures_util::StreamExt;
use pyo3::exceptions::{PyEOFError, PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use spdl_core::{
    Aggregator, Batcher, BoxStream, ErrorKind, FailureBudget, Op, Order, Pipeline, PipelineBuilder,
    StageConfig, StopHandle,
};

use crate::item::Item;
use crate::lock;
use crate::ops::NativeOp;
use crate::sources::SampleList;
use crate::stats::PipelineStats;
use crate::{fork_generation, with_gil};

type OpError = Box<dyn std::error::Error + Send + Sync>;

/// How many recent failures are kept to build `PipelineFailure`'s exception group.
const KEEP_FAILURES: usize = 16;

enum Failure {
    Py(Py<PyAny>),
    Native(String),
}

/// State shared by the stages of one pipeline and its handle.
#[derive(Default)]
struct Shared {
    failures: Mutex<VecDeque<Failure>>,
    /// The source's exception and the epoch it failed in (the next epoch may be prefetched
    /// while the consumer ends this one: its failure belongs to its own end).
    source_error: Mutex<Option<(u64, Py<PyAny>)>>,
}

impl Shared {
    fn push(&self, f: Failure) {
        let mut q = lock(&self.failures);
        if q.len() == KEEP_FAILURES {
            q.pop_front();
        }
        q.push_back(f);
    }

    /// Keeps a Python exception for the failure report; returns the error for the engine,
    /// `"TypeName: message"`.
    fn record_py(&self, py: Python<'_>, e: PyErr) -> OpError {
        let msg = describe_exc(py, &e);
        self.push(Failure::Py(e.into_value(py).into_any()));
        msg.into()
    }

    /// Keeps a native op's error for the failure report; returns it for the engine with its
    /// temporary/permanent status readable there (spdl-core reads the status of its own error
    /// through a box, not of spdl-io's, spdl-sources' or spdl-cuda's).
    fn record_native(&self, e: OpError) -> OpError {
        self.push(Failure::Native(e.to_string()));
        with_status(e)
    }

    fn take_failures(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        let q = std::mem::take(&mut *lock(&self.failures));
        q.into_iter()
            .map(|f| match f {
                Failure::Py(e) if e.bind(py).is_instance_of::<pyo3::exceptions::PyException>() => e,
                Failure::Py(e) => {
                    let repr = e.bind(py).repr().map(|r| r.to_string()).unwrap_or_default();
                    PyRuntimeError::new_err(repr).into_value(py).into_any()
                }
                Failure::Native(m) => PyRuntimeError::new_err(m).into_value(py).into_any(),
            })
            .collect()
    }
}

/// `e` as an spdl-core op error carrying its crate's status, when it is one of the workspace's.
fn with_status(e: OpError) -> OpError {
    use spdl_core::{Error, ErrorKind::OpFailed};
    let status = Error::from_boxed_status::<spdl_io::Error>(OpFailed, e)
        .or_else(|e| Error::from_boxed_status::<spdl_sources::Error>(OpFailed, e));
    #[cfg(feature = "cuda")]
    let status = status.or_else(|e| Error::from_boxed_status::<spdl_cuda::Error>(OpFailed, e));
    status.map_or_else(|e| e, |e| Box::new(e) as OpError)
}

fn describe_exc(py: Python<'_>, e: &PyErr) -> String {
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    format!("{ty}: {}", e.value(py))
}

/// `spdl_rs._errors.PipelineFailure(message, exceptions, stage)` as a `PyErr`.
fn pipeline_failure(
    py: Python<'_>,
    message: String,
    mut exceptions: Vec<Py<PyAny>>,
    stage: Option<&str>,
) -> PyErr {
    if exceptions.is_empty() {
        exceptions.push(
            PyRuntimeError::new_err(message.clone())
                .into_value(py)
                .into_any(),
        );
    }
    let made = (|| -> PyResult<PyErr> {
        let cls = py.import("spdl_rs._errors")?.getattr("PipelineFailure")?;
        let inst = cls.call1((message.clone(), PyList::new(py, exceptions)?, stage))?;
        Ok(PyErr::from_value(inst))
    })();
    made.unwrap_or_else(|e| e)
}

/// Groups items into `Item::List`s (SPDL's `aggregate`), natively.
struct ListBatcher(Batcher<Item>);

impl Aggregator<Item> for ListBatcher {
    type Output = Item;

    fn push(&mut self, item: Item) -> Option<Item> {
        self.0.push(item).map(Item::List)
    }

    fn flush(&mut self) -> Option<Item> {
        self.0.flush().map(Item::List)
    }
}

/// One epoch of a Python iterable, iterated on the source thread with the GIL per item.
struct PySource {
    epoch: u64,
    iterable: Arc<Py<PyAny>>,
    iter: Option<Py<PyAny>>,
    shared: Arc<Shared>,
    done: bool,
}

impl Iterator for PySource {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        if self.done {
            return None;
        }
        let out = with_gil(|py| {
            if self.iter.is_none() {
                match self.iterable.bind(py).try_iter() {
                    Ok(it) => self.iter = Some(it.into_any().unbind()),
                    Err(e) => return Err(e),
                }
            }
            let it = self.iter.as_ref().map(|i| i.bind(py).clone());
            let Some(it) = it else { return Ok(None) };
            match it.call_method0("__next__") {
                Ok(v) => Ok(Some(Item::from_py(v))),
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => Ok(None),
                Err(e) => Err(e),
            }
        });
        match out {
            Ok(Some(item)) => Some(item),
            Ok(None) => {
                self.done = true;
                self.iter = None;
                None
            }
            Err(e) => {
                self.done = true;
                with_gil(|py| {
                    tracing::error!("the source failed: {}", describe_exc(py, &e));
                    *lock(&self.shared.source_error) =
                        Some((self.epoch, e.into_value(py).into_any()));
                    self.iter = None;
                });
                None
            }
        }
    }
}

/// Sets a done-flag when the `concurrent.futures.Future` of an async op completes.
#[pyclass(frozen)]
struct DoneCallback {
    tx: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

#[pymethods]
impl DoneCallback {
    fn __call__(&self, _future: Bound<'_, PyAny>) {
        if let Some(tx) = lock(&self.tx).take() {
            let _ = tx.send(());
        }
    }
}

/// Cancels the coroutine if the Rust side stops waiting for it (pipeline stopped).
struct CancelOnDrop(Option<Py<PyAny>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(fut) = self.0.take() {
            with_gil(|py| {
                let _ = fut.bind(py).call_method0("cancel");
            });
        }
    }
}

fn output_of(out: Bound<'_, PyAny>) -> Option<Item> {
    if out.is_none() {
        None
    } else {
        Some(Item::from_py(out))
    }
}

/// Collects what an iterable yields.
fn drain(it: &Bound<'_, PyAny>) -> PyResult<Vec<Item>> {
    it.try_iter()?.map(|v| v.map(Item::from_py)).collect()
}

/// A generator op's outputs for one item, one `__next__` (GIL held for it) per output, on the
/// worker pool (`Op::flat_map_iter`); `None` values are skipped, as SPDL does. A generator left
/// unfinished (the pipeline stopped) is closed, so its `finally` blocks run.
struct PyGenerator {
    it: Option<Py<PyAny>>,
    shared: Arc<Shared>,
}

impl Iterator for PyGenerator {
    type Item = Result<Item, OpError>;

    fn next(&mut self) -> Option<Self::Item> {
        let it = self.it.as_ref()?;
        let out = with_gil(|py| loop {
            match it.bind(py).call_method0("__next__") {
                Ok(v) if v.is_none() => continue,
                Ok(v) => break Some(Ok(Item::from_py(v))),
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => break None,
                Err(e) => break Some(Err(self.shared.record_py(py, e))),
            }
        });
        if !matches!(out, Some(Ok(_))) {
            self.it = None; // ended or failed: nothing to close
        }
        out
    }
}

impl Drop for PyGenerator {
    fn drop(&mut self) {
        if let Some(it) = self.it.take() {
            with_gil(|py| {
                let it = it.bind(py);
                if it.hasattr("close").unwrap_or(false) {
                    let _ = it.call_method0("close");
                }
            });
        }
    }
}

/// Calls `f(arg)` (`None` when `arg` is `None`), which returns a `concurrent.futures.Future`
/// (a coroutine submitted to the pipeline's loop, or a future already done), and waits for its
/// result without blocking a thread. A Python exception is recorded for the failure report.
async fn call_future(
    f: Arc<Py<PyAny>>,
    arg: Option<Item>,
    shared: Arc<Shared>,
) -> Result<Py<PyAny>, OpError> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let submitted = with_gil(|py| -> Result<Py<PyAny>, OpError> {
        let arg = match arg {
            Some(item) => item.into_py(py).map_err(|e| shared.record_py(py, e))?,
            None => py.None(),
        };
        let fut = f
            .bind(py)
            .call1((arg,))
            .map_err(|e| shared.record_py(py, e))?;
        let cb = Bound::new(
            py,
            DoneCallback {
                tx: Mutex::new(Some(tx)),
            },
        )
        .map_err(|e| shared.record_py(py, e))?;
        fut.call_method1("add_done_callback", (cb,))
            .map_err(|e| shared.record_py(py, e))?;
        Ok(fut.unbind())
    })?;
    let mut guard = CancelOnDrop(Some(submitted));
    let _ = rx.await;
    let fut = guard.0.take().ok_or("async op lost its future")?;
    with_gil(|py| {
        fut.bind(py)
            .call_method0("result")
            .map(Bound::unbind)
            .map_err(|e| shared.record_py(py, e))
    })
}

/// Runs a stage's Python calls in the order the workers took their items, and reports them in
/// the order they finished, as SPDL's thread pool does.
///
/// Python's GIL is not fair: a worker that has just run one call and released the GIL usually
/// takes it back for its next item before a worker already waiting for it. And a worker that
/// wakes another (releasing the GIL, a condition variable) is often preempted by it on the spot,
/// before it has reported its result. In a `"completion"`-ordered stage with several workers
/// both reorder cheap calls far more than SPDL, whose FIFO executor starts calls in order and
/// reports each under the GIL (a 4-batch DataLoader came out reordered in about 1 run in 7,
/// against none in 300 with SPDL 0.8.0). Through the turnstile calls take the GIL in the order
/// the stage handed out their items ([`spdl_core::call_seq`], so a worker preempted right after
/// it took its item keeps its place) and return in the order they finished; a worker waiting
/// its turn looks (yielding its core) before it sleeps, so a turn passes without a wake-up in
/// the common case; a call lets the next one return only once its result has been handed on
/// ([`spdl_core::after_report`]), since a worker is often preempted by the one it wakes. Calls
/// that release the GIL still overlap. A place that never comes (an item dropped unrun at
/// shutdown) holds the line for at most [`TURN_GIVE_UP`].
#[derive(Default)]
struct Turnstile {
    /// The next call's place in line, for calls without a [`spdl_core::call_seq`].
    next: AtomicU64,
    /// The next place in the order of finishing (taken under the GIL).
    finished: AtomicU64,
    /// The place let through to the GIL.
    started: AtomicU64,
    /// The place let return.
    returned: AtomicU64,
    /// Workers asleep on `moved` (only after looking for [`TURN_SPIN`]).
    sleeping: AtomicUsize,
    sleep: Mutex<()>,
    moved: Condvar,
}

/// How long a worker looks for its turn before it sleeps: turns pass within microseconds unless
/// the worker before is descheduled.
const TURN_SPIN: Duration = Duration::from_micros(200);

/// How long a worker waits for the places before its own at most.
const TURN_GIVE_UP: Duration = Duration::from_millis(50);

impl Turnstile {
    /// `f` with the GIL, in turn. Only for threads that do not hold the GIL (stage ops run on
    /// the engine's workers): one that did would wait for a caller who waits for that GIL.
    fn run<R>(self: &Arc<Self>, f: impl for<'py> FnOnce(Python<'py>) -> R) -> R {
        let place =
            spdl_core::call_seq().unwrap_or_else(|| self.next.fetch_add(1, Ordering::SeqCst));
        let start = self.wait_for(place, Line::Start);
        let (out, done) = with_gil(|py| {
            drop(start); // the next caller may now wait for the GIL
            let out = f(py);
            (out, self.finished.fetch_add(1, Ordering::SeqCst))
        });
        let returned = self.wait_for(done, Line::Return);
        spdl_core::after_report(move || drop(returned));
        out
    }

    /// Waits until `counter` has passed the places before `place` (or for [`TURN_GIVE_UP`]);
    /// the returned guard moves it past `place`.
    fn wait_for(self: &Arc<Self>, place: u64, line: Line) -> Advance {
        let counter = self.counter(line);
        let at = Instant::now();
        let due = |c: &AtomicU64| c.load(Ordering::SeqCst) >= place;
        while !due(counter) {
            let waited = at.elapsed();
            if waited < TURN_SPIN {
                std::thread::yield_now();
                continue;
            }
            if waited >= TURN_GIVE_UP {
                break;
            }
            // Counted before the last look: `Advance` then sees a sleeper and wakes it.
            self.sleeping.fetch_add(1, Ordering::SeqCst);
            let guard = lock(&self.sleep);
            if !due(counter) {
                drop(
                    self.moved
                        .wait_timeout(guard, TURN_GIVE_UP - waited)
                        .unwrap_or_else(std::sync::PoisonError::into_inner),
                );
            }
            self.sleeping.fetch_sub(1, Ordering::SeqCst);
        }
        Advance(self.clone(), line, place)
    }

    fn counter(&self, line: Line) -> &AtomicU64 {
        match line {
            Line::Start => &self.started,
            Line::Return => &self.returned,
        }
    }
}

/// The two lines of a [`Turnstile`].
#[derive(Clone, Copy)]
enum Line {
    /// To the GIL.
    Start,
    /// Back out of the call.
    Return,
}

/// Dropped (also on unwinding): lets the next place of one [`Turnstile`] counter through.
struct Advance(Arc<Turnstile>, Line, u64);

impl Drop for Advance {
    fn drop(&mut self) {
        self.0
            .counter(self.1)
            .fetch_max(self.2 + 1, Ordering::SeqCst);
        if self.0.sleeping.load(Ordering::SeqCst) > 0 {
            let _guard = lock(&self.0.sleep);
            self.0.moved.notify_all();
        }
    }
}

/// `f` as a stage op of `kind`. With `fifo` (a `"completion"`-ordered stage with several
/// workers), function calls go through a [`Turnstile`].
fn py_op(kind: &str, f: Py<PyAny>, shared: Arc<Shared>, fifo: bool) -> PyResult<Op<Item, Item>> {
    let f = Arc::new(f);
    let turnstile = fifo.then(|| Arc::new(Turnstile::default()));
    Ok(match kind {
        "func" => Op::blocking(move |item: Item| {
            let call = |py: Python<'_>| {
                let arg = item.into_py(py).map_err(|e| shared.record_py(py, e))?;
                match f.bind(py).call1((arg,)) {
                    Ok(out) => Ok(output_of(out)),
                    Err(e) => Err(shared.record_py(py, e)),
                }
            };
            match &turnstile {
                Some(t) => t.run(call),
                None => with_gil(call),
            }
        }),
        // Each yielded value moves on at once (SPDL streams sync generators too).
        "gen" => Op::flat_map_iter(move |item: Item| {
            let it = with_gil(|py| {
                let arg = item.into_py(py).map_err(|e| shared.record_py(py, e))?;
                f.bind(py)
                    .call1((arg,))
                    .and_then(|g| g.try_iter())
                    .map(|it| it.into_any().unbind())
                    .map_err(|e| shared.record_py(py, e))
            })?;
            Ok(PyGenerator {
                it: Some(it),
                shared: shared.clone(),
            })
        }),
        // `f(item)` submits the coroutine to the loop thread and returns a
        // `concurrent.futures.Future` (see `spdl_rs.pipeline`).
        "async" => Op::future(move |item: Item| {
            let fut = call_future(f.clone(), Some(item), shared.clone());
            async move {
                let out = fut.await?;
                Ok(with_gil(|py| output_of(out.into_bound(py))))
            }
        }),
        other => return Err(PyValueError::new_err(format!("unknown op kind {other:?}"))),
    })
}

/// The items an async generator op yields for one input, each passed on as soon as it is
/// yielded. `start(item)` returns a stepper; `stepper(None)` returns a future of `(value,)`, or
/// of `None` once the generator is exhausted.
fn agen_items(
    start: Arc<Py<PyAny>>,
    item: Item,
    shared: Arc<Shared>,
) -> BoxStream<Result<Item, OpError>> {
    enum St {
        Start(Box<Item>),
        Running(Arc<Py<PyAny>>),
        Done,
    }
    let steps = futures_util::stream::unfold(St::Start(Box::new(item)), move |st| {
        let start = start.clone();
        let shared = shared.clone();
        async move {
            let stepper = match st {
                St::Done => return None,
                St::Running(s) => s,
                St::Start(item) => {
                    let made = with_gil(|py| -> Result<Py<PyAny>, OpError> {
                        let arg = (*item).into_py(py).map_err(|e| shared.record_py(py, e))?;
                        start
                            .bind(py)
                            .call1((arg,))
                            .map(Bound::unbind)
                            .map_err(|e| shared.record_py(py, e))
                    });
                    match made {
                        Ok(s) => Arc::new(s),
                        Err(e) => return Some((Err(e), St::Done)),
                    }
                }
            };
            match call_future(stepper.clone(), None, shared.clone()).await {
                Err(e) => Some((Err(e), St::Done)),
                Ok(out) => with_gil(|py| {
                    let out = out.into_bound(py);
                    if out.is_none() {
                        return None;
                    }
                    match out.get_item(0) {
                        Ok(v) => Some((Ok(Item::from_py(v)), St::Running(stepper))),
                        Err(e) => Some((Err(shared.record_py(py, e)), St::Done)),
                    }
                }),
            }
        }
    });
    Box::pin(steps)
}

/// A custom aggregator for one epoch: `accumulate(item)` and, at the end of the epoch,
/// `flush(None)` each return a future of the output or `None` (nothing to pass on). Items are
/// taken one at a time, in order.
fn aggregate_items(
    input: BoxStream<Item>,
    accumulate: Arc<Py<PyAny>>,
    flush: Option<Arc<Py<PyAny>>>,
    shared: Arc<Shared>,
) -> BoxStream<Result<Item, OpError>> {
    let acc_shared = shared.clone();
    let outputs =
        input.then(move |item| call_future(accumulate.clone(), Some(item), acc_shared.clone()));
    let last = futures_util::stream::once(async move {
        match flush {
            Some(f) => call_future(f, None, shared).await.map(Some),
            None => Ok(None),
        }
    });
    let all = outputs.map(|r| r.map(Some)).chain(last).filter_map(|r| {
        futures_util::future::ready(match r {
            Ok(Some(out)) => with_gil(|py| output_of(out.into_bound(py))).map(Ok),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        })
    });
    Box::pin(all)
}

/// Splits lists (SPDL's `disaggregate`): native lists without the GIL, Python iterables with it.
fn flatten_op(shared: Arc<Shared>, what: &'static str) -> Op<Item, Item> {
    Op::flat_map(move |item: Item| match item {
        Item::List(v) => Ok(v),
        Item::Py(obj) => with_gil(|py| drain(obj.bind(py)).map_err(|e| shared.record_py(py, e))),
        other => {
            Err(shared
                .record_native(format!("{what} expects a list, got {}", other.describe()).into()))
        }
    })
}

/// Runs a native op inside the stage's Python task hooks: `hooks.enter(None)` gives a context,
/// `hooks.exit(context, error_message_or_None)` closes it (and may raise to fail the item).
fn hooked_native(
    native: Py<NativeOp>,
    hooks: Arc<Py<PyAny>>,
    next_target: Option<Arc<crate::cuda::CudaTarget>>,
    shared: Arc<Shared>,
) -> Op<Item, Item> {
    Op::blocking(move |item: Item| {
        let ctx = with_gil(|py| {
            hooks
                .bind(py)
                .call_method1("enter", (py.None(),))
                .map(Bound::unbind)
                .map_err(|e| shared.record_py(py, e))
        })?;
        let out = native.get().apply_before(item, next_target.as_deref());
        let msg = out.as_ref().err().map(|e| e.to_string());
        with_gil(|py| {
            hooks
                .bind(py)
                .call_method1("exit", (ctx, msg))
                .map(|_| ())
                .map_err(|e| shared.record_py(py, e))
        })?;
        out.map_err(|e| shared.record_native(e))
    })
}

/// A failure budget as the Python stage record holds it
/// (`spdl_rs.pipeline._stage.MaxFailures`, whose `of` is the one check of `max_failures`):
/// a `count`, a `rate`, or neither (no limit).
#[derive(FromPyObject)]
pub(crate) struct MaxFailures {
    #[pyo3(attribute)]
    count: Option<u64>,
    #[pyo3(attribute)]
    rate: Option<f64>,
}

impl MaxFailures {
    /// The engine's budget; `None`: no limit.
    fn budget(&self) -> Option<FailureBudget> {
        match (self.count, self.rate) {
            (Some(n), _) => Some(FailureBudget::Count(n)),
            (None, Some(r)) => Some(FailureBudget::Rate(r)),
            (None, None) => None,
        }
    }
}

/// One stage as the Python builder records it (`spdl_rs.pipeline._stage.Stage`, read field
/// by field).
#[derive(FromPyObject)]
pub(crate) struct StageSpec {
    /// `func`, `gen`, `async`, `asyncgen`, `native`, `aggregate`, `pyaggregate`,
    /// `disaggregate`.
    #[pyo3(attribute)]
    kind: String,
    #[pyo3(attribute)]
    op: Py<PyAny>,
    #[pyo3(attribute)]
    name: String,
    #[pyo3(attribute)]
    concurrency: usize,
    /// `output_order="input"`.
    #[pyo3(attribute)]
    ordered: bool,
    /// `None`: the pipeline's budget applies; one with no limit makes the stage ignore it.
    #[pyo3(attribute)]
    max_failures: Option<MaxFailures>,
    /// `aggregate`: items per list.
    #[pyo3(attribute)]
    size: usize,
    #[pyo3(attribute)]
    drop_last: bool,
    /// `native`: the Python task hooks to run around each call, if any.
    #[pyo3(attribute)]
    hooks: Option<Py<PyAny>>,
    /// `pyaggregate`: called at the end of each epoch, if any.
    #[pyo3(attribute)]
    flush: Option<Py<PyAny>>,
}

/// Sink capacity standing for SPDL's `add_sink(0)` (unlimited).
const UNLIMITED_SINK: usize = 1 << 30;

/// Builds the native pipeline (internal; use `spdl_rs.pipeline.PipelineBuilder`).
#[pyfunction]
#[pyo3(signature = (source, stages, *, sink_size, num_threads, max_failures, report_stats_interval, prefetch_epochs=false))]
#[allow(clippy::too_many_arguments)] // one per keyword of the Python call it serves
pub(crate) fn build_pipeline(
    py: Python<'_>,
    source: Bound<'_, PyAny>,
    stages: Vec<StageSpec>,
    sink_size: usize,
    num_threads: usize,
    max_failures: Option<MaxFailures>,
    report_stats_interval: f64,
    prefetch_epochs: bool,
) -> PyResult<PyPipeline> {
    let shared = Arc::new(Shared::default());
    let mut b: PipelineBuilder<Item> = if let Ok(list) = source.cast::<SampleList>() {
        let samples = list.get().samples.clone();
        // Only when asked (`build(prefetch_epochs=True)`): the stats and the per-epoch failure
        // warning are pipeline-wide counters, which then count the next epoch's first items.
        PipelineBuilder::source(move |epoch| SampleList::items(&samples, epoch))
            .prefetch_epochs(prefetch_epochs)
    } else {
        let iterable = Arc::new(source.unbind());
        let shared = shared.clone();
        PipelineBuilder::source(move |epoch| PySource {
            epoch,
            iterable: iterable.clone(),
            iter: None,
            shared: shared.clone(),
            done: false,
        })
        // The iterable is iterated again each epoch, and the user may change what it yields
        // between epochs (a sampler's `set_epoch`): it is iterated before its epoch starts only
        // when asked (`build(prefetch_epochs=True)`).
        .prefetch_epochs(prefetch_epochs)
    };
    // A `collate` directly followed by a `to_device` writes into the device's pinned memory.
    let next_targets: Vec<_> = (0..stages.len())
        .map(|i| {
            let spec = stages.get(i + 1)?;
            if spec.kind != "native" || spec.hooks.is_some() {
                return None;
            }
            spec.op
                .bind(py)
                .cast::<NativeOp>()
                .ok()?
                .get()
                .cuda_target()
        })
        .collect();
    for (spec, next_target) in stages.into_iter().zip(next_targets) {
        let StageSpec {
            kind,
            op,
            name,
            concurrency,
            ordered,
            max_failures: stage_max,
            size,
            drop_last,
            hooks,
            flush,
        } = spec;
        let order = if ordered {
            Order::Input
        } else {
            Order::Completion
        };
        // A stage's "no limit" is a count no run reaches: it must not fall back to the
        // pipeline's budget.
        let stage_budget = stage_max.map(|m| m.budget().unwrap_or(FailureBudget::Count(u64::MAX)));
        let mut cfg = StageConfig::named(name.clone())
            .concurrency(concurrency.max(1))
            .order(order);
        match stage_budget {
            Some(FailureBudget::Count(n)) => cfg = cfg.max_failures(n),
            Some(FailureBudget::Rate(r)) => cfg = cfg.max_failure_rate(r),
            None => {}
        }
        b = match kind.as_str() {
            "aggregate" => b.aggregate_with(ListBatcher(Batcher::new(size.max(1), drop_last))),
            "pyaggregate" => {
                let accumulate = Arc::new(op);
                let flush = flush.map(Arc::new);
                let shared = shared.clone();
                b.pipe_stream_with(cfg, move |input| {
                    aggregate_items(input, accumulate.clone(), flush.clone(), shared.clone())
                })
            }
            "disaggregate" => b.pipe(
                flatten_op(shared.clone(), "disaggregate"),
                StageConfig::named(name),
            ),
            "native" => {
                let native: Py<NativeOp> = op.bind(py).cast::<NativeOp>()?.clone().unbind();
                let shared = shared.clone();
                // A failed transfer is the device's problem, not the sample's: unless the
                // stage was given a budget, the first one stops the pipeline.
                if stage_budget.is_none() && native.get().cuda_target().is_some() {
                    cfg = cfg.max_failures(0);
                }
                let op = match hooks {
                    Some(h) => hooked_native(native, Arc::new(h), next_target, shared),
                    None => Op::blocking(move |item: Item| {
                        native
                            .get()
                            .apply_before(item, next_target.as_deref())
                            .map_err(|e| shared.record_native(e))
                    }),
                };
                b.pipe(op, cfg)
            }
            "asyncgen" => {
                let start = Arc::new(op);
                let shared = shared.clone();
                let limit = concurrency.max(1);
                b.pipe_stream_with(cfg, move |input| {
                    let start = start.clone();
                    let shared = shared.clone();
                    Box::pin(
                        input
                            .map(move |item| agen_items(start.clone(), item, shared.clone()))
                            .flatten_unordered(limit),
                    )
                })
            }
            k => {
                let fifo = concurrency > 1 && !ordered;
                b.pipe(py_op(k, op, shared.clone(), fifo)?, cfg)
            }
        };
    }
    b = b.sink(if sink_size == 0 {
        UNLIMITED_SINK
    } else {
        sink_size
    });
    match max_failures.and_then(|m| m.budget()) {
        Some(FailureBudget::Count(n)) => b = b.max_failures(n),
        Some(FailureBudget::Rate(r)) => b = b.max_failure_rate(r),
        None => {}
    }
    if report_stats_interval > 0.0 {
        b = b.report_stats_interval(Duration::from_secs_f64(report_stats_interval));
    }
    let pipeline = py
        .detach(|| b.build(num_threads.max(1)))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(PyPipeline {
        stop_handle: pipeline.stop_handle(),
        inner: Mutex::new(Some(pipeline)),
        stopping: AtomicBool::new(false),
        generation: fork_generation(),
        shared,
        at_stop: Mutex::new(None),
    })
}

/// What one wait on the sink gave.
enum Step {
    Item(Item),
    EndOfEpoch,
    Timeout,
    /// Nothing yet; check for signals (Ctrl-C) and wait again.
    Pending,
    Stopped,
    Failed(spdl_core::Error),
}

/// The native pipeline (internal; use `spdl_rs.pipeline.Pipeline`).
#[pyclass(module = "spdl_rs._native", name = "_Pipeline")]
pub(crate) struct PyPipeline {
    inner: Mutex<Option<Pipeline<Item>>>,
    /// Stops the engine without the `inner` lock (which the consumer may hold while it waits).
    stop_handle: StopHandle,
    stopping: AtomicBool,
    /// The fork generation this pipeline was built in: after `fork()`, the child must not touch
    /// the parent's threads, locks or runtime.
    generation: u64,
    shared: Arc<Shared>,
    /// The figures at `stop()`, so that a stopped pipeline still answers.
    at_stop: Mutex<Option<AtStop>>,
}

/// What `get_stats()`, `last_errors()` and `state_dict()` answer after `stop()` (the last a
/// checkpoint taken after the loop's `auto_stop()` block).
struct AtStop {
    stats: spdl_core::PipelineStats,
    errors: Vec<String>,
    state: spdl_core::PipelineState,
}

impl PyPipeline {
    /// `running` of the pipeline, or `stopped` of what it left at `stop()`; `None` when
    /// neither is there (a forked child).
    fn running_or_stopped<R>(
        &self,
        running: impl FnOnce(&Pipeline<Item>) -> R,
        stopped: impl FnOnce(&AtStop) -> R,
    ) -> Option<R> {
        if let Some(r) = lock(&self.inner).as_ref().map(running) {
            return Some(r);
        }
        lock(&self.at_stop).as_ref().map(stopped)
    }

    fn forked(&self) -> bool {
        self.generation != fork_generation()
    }

    fn check_fork(&self) -> PyResult<()> {
        if self.forked() {
            return Err(PyRuntimeError::new_err(
                "this pipeline was built in a parent process before fork(); its threads do not exist in the child. Build a new pipeline in the child.",
            ));
        }
        Ok(())
    }

    /// The next message if one is ready now, else `None`. Never blocks and uses no timer: it
    /// runs with the GIL held, and a timer needs the scheduler thread, which may be waiting for
    /// the GIL (async ops).
    fn try_now(&self) -> Option<Step> {
        if self.stopping.load(Ordering::Acquire) {
            return None;
        }
        let mut g = self.inner.try_lock().ok()?;
        let p = g.as_mut()?;
        let epoch = p.epoch();
        let mut cx = Context::from_waker(Waker::noop());
        let polled = {
            let mut stream = p.stream();
            Pin::new(&mut stream).poll_next(&mut cx)
        };
        match polled {
            Poll::Pending => None,
            Poll::Ready(Some(Ok(item))) => Some(Step::Item(item)),
            Poll::Ready(Some(Err(e))) if e.kind() == ErrorKind::Stopped => Some(Step::Stopped),
            Poll::Ready(Some(Err(e))) => Some(Step::Failed(e)),
            Poll::Ready(None) if p.epoch() != epoch => Some(Step::EndOfEpoch),
            Poll::Ready(None) => Some(Step::Stopped),
        }
    }

    /// Waits for the next message for at most ~50 ms (then `Pending`: the caller checks for
    /// Ctrl-C, so a KeyboardInterrupt comes within ~50 ms), or until `deadline`.
    fn step(&self, deadline: Option<Instant>) -> Step {
        let until = Instant::now() + Duration::from_millis(50);
        loop {
            if self.stopping.load(Ordering::Acquire) {
                return Step::Stopped;
            }
            let mut g = lock(&self.inner);
            let Some(p) = g.as_mut() else {
                return Step::Stopped;
            };
            let limit = deadline.map_or(until, |d| d.min(until));
            let slice = limit
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50));
            match p.next_item(Some(slice)) {
                Ok(Some(item)) => return Step::Item(item),
                Ok(None) => return Step::EndOfEpoch,
                Err(e) if e.kind() == ErrorKind::Timeout => {
                    drop(g);
                    let now = Instant::now();
                    if deadline.is_some_and(|d| now >= d) {
                        return Step::Timeout;
                    }
                    if now >= until {
                        return Step::Pending;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Stopped => return Step::Stopped,
                Err(e) => return Step::Failed(e),
            }
        }
    }
}

#[pymethods]
impl PyPipeline {
    /// Starts the first epoch's source and stages (prefetching into the sink).
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        self.check_fork()?;
        py.detach(|| {
            if let Some(p) = lock(&self.inner).as_mut() {
                p.start();
            }
        });
        Ok(())
    }

    /// The next item. Raises `EOFError` at the end of an epoch or after `stop()`,
    /// `TimeoutError` when nothing came within `timeout` seconds, `PipelineFailure` when a
    /// failure budget was exceeded (after the items already produced) or the source failed.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        self.check_fork()?;
        let started = Instant::now();
        let deadline = match timeout {
            Some(t) if t.is_finite() => Some(started + Duration::from_secs_f64(t.max(0.0))),
            _ => None,
        };
        // Fast path: an item already waits in the sink. Take it without releasing the GIL, which
        // would cost a GIL hand-off (up to a switch interval) when other Python threads run.
        let mut ready = self.try_now();
        loop {
            let step = match ready.take() {
                Some(s) => s,
                None => py.detach(|| self.step(deadline)),
            };
            match step {
                Step::Item(item) => return item.into_py(py),
                Step::Pending => py.check_signals()?,
                Step::Timeout => {
                    return Err(PyTimeoutError::new_err(format!(
                        "The next item is not available after {:.1} sec.",
                        started.elapsed().as_secs_f64()
                    )))
                }
                Step::EndOfEpoch => {
                    let ended = py.detach(|| {
                        lock(&self.inner)
                            .as_ref()
                            .map_or(0, |p| p.epoch().saturating_sub(1))
                    });
                    let failed_source = {
                        let mut slot = lock(&self.shared.source_error);
                        match slot.take() {
                            Some((epoch, e)) if epoch == ended => Some(e),
                            other => {
                                *slot = other;
                                None
                            }
                        }
                    };
                    if let Some(e) = failed_source {
                        let msg = format!("The source failed: {}", e.bind(py));
                        return Err(pipeline_failure(py, msg, vec![e], Some("source")));
                    }
                    // A budget exceeded while the epoch's end was already on its way: as in
                    // SPDL, the failure is raised instead of the end.
                    let failed = py.detach(|| {
                        lock(&self.inner)
                            .as_mut()
                            .and_then(|p| p.take_unobserved_failure())
                    });
                    if let Some(e) = failed {
                        let stage = e.stage().map(str::to_owned);
                        return Err(pipeline_failure(
                            py,
                            e.to_string(),
                            self.shared.take_failures(py),
                            stage.as_deref(),
                        ));
                    }
                    return Err(PyEOFError::new_err("Reached the end of the pipeline."));
                }
                Step::Stopped => return Err(PyEOFError::new_err("The pipeline is stopped.")),
                Step::Failed(e) => {
                    let stage = e.stage().map(str::to_owned);
                    let msg = e.to_string();
                    return Err(pipeline_failure(
                        py,
                        msg,
                        self.shared.take_failures(py),
                        stage.as_deref(),
                    ));
                }
            }
        }
    }

    /// Stops every stage and joins every thread, with the GIL released. Idempotent. Returns
    /// the `PipelineFailure` of a failure budget exceeded that the consumer never received
    /// (for `Pipeline.stop()` to raise), else `None`.
    fn stop(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.stopping.store(true, Ordering::Release);
        if self.forked() {
            // Never join or lock what belongs to the parent's threads.
            if let Ok(mut g) = self.inner.try_lock() {
                std::mem::forget(g.take());
            }
            return None;
        }
        if self.stop_handle.is_engine_thread() {
            // Joining would wait for this very thread: stop without joining (a later `stop()`
            // from another thread joins).
            self.stop_handle.stop();
            return None;
        }
        let unobserved = py.detach(|| {
            let mut p = lock(&self.inner).take();
            // Stop (join) first: a failure being recorded right now is then in the state.
            if let Some(p) = p.as_mut() {
                p.stop();
            }
            let failure = p.as_mut().and_then(|p| p.take_unobserved_failure());
            if let Some(p) = &p {
                *lock(&self.at_stop) = Some(AtStop {
                    stats: p.stats(),
                    errors: p.last_errors(),
                    state: p.state_dict(),
                });
            }
            drop(p);
            failure
        })?;
        let stage = unobserved.stage().map(str::to_owned);
        let err = pipeline_failure(
            py,
            unobserved.to_string(),
            self.shared.take_failures(py),
            stage.as_deref(),
        );
        Some(err.into_value(py).into_any())
    }

    /// Asks the engine to stop and returns at once (for a stop from the pipeline's own
    /// threads, which `stop()` would wait for): every stage is aborted, the consumer's next
    /// read raises `EOFError`; a later `stop()` joins the threads.
    fn request_stop(&self) {
        self.stopping.store(true, Ordering::Release);
        if !self.forked() {
            self.stop_handle.stop();
        }
    }

    /// Whether the calling thread is one of the engine's (its scheduler, a worker, the source
    /// thread).
    fn on_engine_thread(&self) -> bool {
        !self.forked() && self.stop_handle.is_engine_thread()
    }

    /// Whether `stop()` was called.
    #[getter]
    fn stopped(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// The current epoch (the next one if none is running).
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        self.check_fork()?;
        Ok(py.detach(|| lock(&self.inner).as_ref().map_or(0, |p| p.epoch())))
    }

    /// What the consumer has received of the current epoch, as
    /// `{"epoch": int, "done_below": int, "done_above": [int]}` (`spdl_core::PipelineState`);
    /// after `stop()`, what it had received then.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.check_fork()?;
        let state = py
            .detach(|| self.running_or_stopped(|p| p.state_dict(), |s| s.state.clone()))
            .ok_or_else(|| PyRuntimeError::new_err("the pipeline is stopped"))?;
        let d = PyDict::new(py);
        d.set_item("epoch", state.epoch)?;
        d.set_item("done_below", state.done_below)?;
        d.set_item("done_above", state.done_above)?;
        Ok(d)
    }

    /// Resumes from a `state_dict()`: the next epoch started is `state["epoch"]` and its source
    /// skips the positions done, before any stage. Raises `ValueError` for a malformed state or
    /// once the epoch has started.
    fn load_state_dict(&self, py: Python<'_>, state: Bound<'_, PyAny>) -> PyResult<()> {
        self.check_fork()?;
        let field = |name: &str| -> PyResult<Bound<'_, PyAny>> {
            state.get_item(name).map_err(|_| {
                PyValueError::new_err(format!(
                    "load_state_dict: the state has no {name:?} (expected a dict with 'epoch', 'done_below', 'done_above')"
                ))
            })
        };
        let bad = |name: &str, what: &str| {
            PyValueError::new_err(format!("load_state_dict: {name:?} must be {what}"))
        };
        let epoch: u64 = field("epoch")?
            .extract()
            .map_err(|_| bad("epoch", "a non-negative int"))?;
        let done_below: u64 = field("done_below")?
            .extract()
            .map_err(|_| bad("done_below", "a non-negative int"))?;
        let mut done_above: Vec<u64> = field("done_above")?
            .extract()
            .map_err(|_| bad("done_above", "a list of non-negative ints"))?;
        done_above.sort_unstable();
        done_above.dedup();
        if done_above.first().is_some_and(|&p| p <= done_below) {
            return Err(bad(
                "done_above",
                "positions above 'done_below' (those below it are done already)",
            ));
        }
        let state = spdl_core::PipelineState {
            epoch,
            done_below,
            done_above,
        };
        py.detach(|| match lock(&self.inner).as_mut() {
            Some(p) => p
                .load_state_dict(&state)
                .map_err(|e| PyValueError::new_err(e.to_string())),
            None => Err(PyValueError::new_err(
                "load_state_dict: the pipeline is stopped",
            )),
        })
    }

    /// A snapshot of every stage's and queue's statistics; after `stop()`, the final ones.
    fn stats(&self, py: Python<'_>) -> PyResult<PipelineStats> {
        self.check_fork()?;
        let s = py.detach(|| self.running_or_stopped(|p| p.stats(), |s| s.stats.clone()));
        s.map(PipelineStats::from)
            .ok_or_else(|| PyRuntimeError::new_err("the pipeline is stopped"))
    }

    /// The most recent failures (up to 5), each naming its stage and sample position.
    fn last_errors(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.check_fork()?;
        Ok(py.detach(|| {
            self.running_or_stopped(|p| p.last_errors(), |s| s.errors.clone())
                .unwrap_or_default()
        }))
    }

    fn __repr__(&self) -> String {
        format!(
            "_Pipeline(stopped={})",
            self.stopping.load(Ordering::Acquire)
        )
    }
}

impl Drop for PyPipeline {
    fn drop(&mut self) {
        let inner = self
            .inner
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(p) = inner else { return };
        if self.forked() {
            std::mem::forget(p);
            return;
        }
        // Dropping joins the threads; a worker may be waiting for the GIL, so release it.
        Python::attach(|py| py.detach(|| drop(p)));
    }
}
