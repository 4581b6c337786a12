//! Chrome/Perfetto traces from Python (SPDL 0.8's `spdl.io.utils.tracing`, `trace_event`,
//! `trace_counter`), and the log filter of `spdl_rs.init_logging`.
//!
//! One global `tracing` subscriber, installed on first use: a Chrome trace layer and a log
//! layer, each behind a reloadable filter that is off until asked for, so that with neither in
//! use every span and event of the engine stays disabled (its callsites cache "never").
//! tracing-chrome caches its output channel per thread, so the one layer (and its writer
//! thread) lives for the process and each trace session switches its output file
//! (`FlushGuard::start_new`).

use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::lock;
use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use tracing::field::{Field, Visit};
use tracing::span;
use tracing_chrome::{ChromeLayer, ChromeLayerBuilder, EventOrSpan, FlushGuard};
use tracing_subscriber::filter::{EnvFilter, Filtered, LevelFilter};
use tracing_subscriber::layer::{Context, Layered, SubscriberExt};
use tracing_subscriber::registry::{LookupSpan, Registry};
use tracing_subscriber::{reload, Layer};

type TraceLayers = Layered<ChromeLayer<Registry>, NameLayer, Registry>;
type TraceFilter = reload::Layer<LevelFilter, Registry>;
type WithTrace = Layered<Filtered<TraceLayers, TraceFilter, Registry>, Registry>;

struct Global {
    trace_filter: reload::Handle<LevelFilter, Registry>,
    log_filter: reload::Handle<EnvFilter, WithTrace>,
    guard: Mutex<FlushGuard>,
    /// Signalled when the current trace file is finished (its writer dropped).
    session: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

static GLOBAL: OnceLock<Result<Global, String>> = OnceLock::new();

/// The name a span gets in the trace: a Python `trace_event`'s `name`, or the stage of an
/// engine op (`op` spans carry `stage`).
struct TraceName(String);

/// Stores [`TraceName`] in each new span that has a `name` or `stage` field.
struct NameLayer;

struct NameVisitor(Option<String>);

impl Visit for NameVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if matches!(field.name(), "name" | "stage") {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if matches!(field.name(), "name" | "stage") && self.0.is_none() {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for NameLayer {
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut v = NameVisitor(None);
        attrs.record(&mut v);
        if let (Some(name), Some(span)) = (v.0, ctx.span(id)) {
            let name = if span.name() == "op" {
                name
            } else {
                name.trim_matches('"').to_owned()
            };
            span.extensions_mut().insert(TraceName(name));
        }
    }
}

fn name_of(e: &EventOrSpan<'_, '_, Registry>) -> String {
    match e {
        EventOrSpan::Span(s) => s
            .extensions()
            .get::<TraceName>()
            .map(|n| n.0.clone())
            .unwrap_or_else(|| s.name().to_owned()),
        EventOrSpan::Event(ev) => {
            let mut v = CounterVisitor(None);
            ev.record(&mut v);
            match v.0 {
                Some(i) => format!("counter {i}"),
                None => ev.metadata().name().to_owned(),
            }
        }
    }
}

/// Finds the `counter` field of a `trace_counter` event.
struct CounterVisitor(Option<i64>);

impl Visit for CounterVisitor {
    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "counter" {
            self.0 = Some(value);
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

fn install() -> Result<Global, String> {
    let (trace_filter, trace_handle) = reload::Layer::new(LevelFilter::OFF);
    let (chrome, guard) = ChromeLayerBuilder::new()
        .writer(std::io::sink())
        .include_args(true)
        .name_fn(Box::new(name_of))
        .build();
    let (log_filter, log_handle) = reload::Layer::new(EnvFilter::new("off"));
    let subscriber = Registry::default()
        .with(NameLayer.and_then(chrome).with_filter(trace_filter))
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(log_filter),
        );
    tracing::subscriber::set_global_default(subscriber).map_err(|e| {
        format!("another tracing subscriber is already installed in this process ({e})")
    })?;
    Ok(Global {
        trace_filter: trace_handle,
        log_filter: log_handle,
        guard: Mutex::new(guard),
        session: Mutex::new(None),
    })
}

fn global() -> PyResult<&'static Global> {
    GLOBAL
        .get_or_init(install)
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(e.clone()))
}

/// Sets the engine's log filter (`spdl_rs.init_logging`).
pub(crate) fn set_log_filter(level: &str) -> PyResult<()> {
    let g = global()?;
    g.log_filter
        .reload(EnvFilter::new(level))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The trace file's writer: reports when the trace layer has finished with it.
struct SessionWriter {
    inner: std::io::BufWriter<std::fs::File>,
    done: std::sync::mpsc::Sender<()>,
}

impl Write for SessionWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Drop for SessionWriter {
    fn drop(&mut self) {
        let _ = self.inner.flush();
        let _ = self.done.send(());
    }
}

/// Starts writing a Chrome trace (JSON, opened by Perfetto and chrome://tracing) to `path`, or
/// to the file descriptor `fd` (duplicated), with a `buffer_kib` KiB write buffer. Internal:
/// use `spdl_rs.tracing`.
#[pyfunction]
#[pyo3(signature = (path, fd, buffer_kib))]
pub(crate) fn _trace_start(
    path: Option<std::path::PathBuf>,
    fd: Option<i32>,
    buffer_kib: usize,
) -> PyResult<()> {
    let g = global()?;
    let mut session = lock(&g.session);
    if session.is_some() {
        return Err(PyRuntimeError::new_err("a trace is already being written"));
    }
    let file = match (path, fd) {
        (Some(p), _) => std::fs::File::create(&p).map_err(|e| {
            PyOSError::new_err(format!("cannot create trace file {}: {e}", p.display()))
        })?,
        (None, Some(fd)) => {
            use std::os::fd::{BorrowedFd, OwnedFd};
            // SAFETY: `fd` is open for the duration of this call (the caller's file); it is
            // duplicated, so the trace owns its own descriptor.
            let owned: OwnedFd = unsafe { BorrowedFd::borrow_raw(fd) }
                .try_clone_to_owned()
                .map_err(|e| PyOSError::new_err(format!("cannot use file descriptor {fd}: {e}")))?;
            std::fs::File::from(owned)
        }
        (None, None) => return Err(PyRuntimeError::new_err("no trace output given")),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = SessionWriter {
        inner: std::io::BufWriter::with_capacity(buffer_kib.max(1) * 1024, file),
        done: tx,
    };
    lock(&g.guard).start_new(Some(Box::new(writer)));
    g.trace_filter
        .reload(LevelFilter::TRACE)
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    *session = Some(rx);
    Ok(())
}

/// Stops the trace and waits (GIL released) until its file is complete.
#[pyfunction]
pub(crate) fn _trace_stop(py: Python<'_>) -> PyResult<()> {
    let g = global()?;
    let Some(rx) = lock(&g.session).take() else {
        return Ok(());
    };
    g.trace_filter
        .reload(LevelFilter::OFF)
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    lock(&g.guard).start_new(Some(Box::new(std::io::sink())));
    py.detach(move || rx.recv_timeout(Duration::from_secs(60)))
        .map_err(|_| PyRuntimeError::new_err("the trace file was not finished within 60 s"))
}

/// A slice of the trace on the calling thread, from `_trace_begin` to `end()`. Internal: use
/// `spdl_rs.trace_event`.
#[pyclass(unsendable)]
pub(crate) struct TraceSlice(Option<span::EnteredSpan>);

#[pymethods]
impl TraceSlice {
    /// Ends the slice (idempotent).
    fn end(&mut self) {
        self.0.take();
    }
}

/// Begins a slice named `name` on the calling thread.
#[pyfunction]
pub(crate) fn _trace_begin(name: &str) -> TraceSlice {
    TraceSlice(Some(tracing::trace_span!("py", name = name).entered()))
}

/// An instant event carrying a counter's value (Chrome JSON has no counter tracks for
/// tracing-chrome): `counter` and `value` are its arguments.
#[pyfunction]
pub(crate) fn _trace_counter(i: i64, value: f64) {
    tracing::trace!(counter = i, value = value, "counter");
}
