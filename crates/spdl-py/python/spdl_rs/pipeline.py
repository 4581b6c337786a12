"""Data-loading pipelines with SPDL 0.8's public API, run by the Rust engine ``spdl-core``.

A pipeline is a source, a chain of stages and a sink joined by bounded queues::

    from spdl_rs.pipeline import PipelineBuilder

    pipeline = (
        PipelineBuilder()
        .add_source(range(12))
        .pipe(lambda x: 2 * x, concurrency=4, output_order="input")
        .aggregate(3)
        .add_sink(3)
        .build(num_threads=2)
    )
    with pipeline.auto_stop():
        for batch in pipeline:
            print(batch)  # [0, 2, 4], [6, 8, 10], ...

Where the work runs:

- a function or generator op runs on one of the ``num_threads`` Rust worker threads and holds
  the GIL only for the call itself;
- an async function or async generator op runs on an asyncio loop in a thread owned by the
  pipeline (``run_coroutine_threadsafe``), ``concurrency`` coroutines at a time;
- a native op (:mod:`spdl_rs.ops`) runs in Rust with no GIL at all;
- the source's iterator runs on the source thread (GIL per item; none for a
  :class:`spdl_rs.sources.SampleList`);
- the consumer's ``get_item`` / ``__next__`` waits with the GIL released.

Differences from SPDL 0.8: ``executor`` is ignored (sync ops always run on the Rust worker
pool); stage names default to the op's ``__name__``; an async generator op adds a
``NAME:flatten`` stage to the stats.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import warnings
import weakref
from collections.abc import AsyncIterable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from . import _native
from ._errors import PipelineFailure
from ._native import PipelineStats, QueueStats, StageStats, TimeSummary

__all__ = [
    "PipelineBuilder",
    "Pipeline",
    "PipelineIterator",
    "PipelineFailure",
    "PipelineStats",
    "StageStats",
    "QueueStats",
    "TimeSummary",
]

T = TypeVar("T")


class _LoopThread:
    """An asyncio event loop running in a thread of its own, for a pipeline's async ops."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name="spdl_rs_event_loop", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self.loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(loop)
            for t in tasks:
                t.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def submit(self, coro: Any) -> concurrent.futures.Future:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        if not self._thread.is_alive() or self.loop is None:
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # already closed
            return
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)


async def _collect(agen: Any) -> list:
    return [x async for x in agen]


async def _anext(ait: Any) -> Any:
    return await ait.__anext__()


class _AsyncSource:
    """Iterates an async iterable from the source thread, one ``__anext__`` at a time on the
    pipeline's loop (each epoch calls ``__aiter__`` again)."""

    def __init__(self, source: AsyncIterable, loop: _LoopThread) -> None:
        self._source = source
        self._loop = loop

    def __iter__(self) -> Iterator:
        ait = self._source.__aiter__()
        while True:
            try:
                yield self._loop.submit(_anext(ait)).result()
            except StopAsyncIteration:
                return


def _op_kind(op: Any) -> str:
    if isinstance(op, _native.NativeOp):
        return "native"
    if not callable(op):
        raise TypeError(f"op must be callable or a spdl_rs.ops stage, got {type(op).__name__}")
    call = getattr(op, "__call__", None)
    if inspect.isasyncgenfunction(op) or inspect.isasyncgenfunction(call):
        return "asyncgen"
    if inspect.iscoroutinefunction(op) or inspect.iscoroutinefunction(call):
        return "async"
    if inspect.isgeneratorfunction(op) or inspect.isgeneratorfunction(call):
        return "gen"
    return "func"


def _op_name(op: Any) -> str:
    if isinstance(op, _native.NativeOp):
        return op.name
    return getattr(op, "__name__", None) or type(op).__name__


class PipelineBuilder(Generic[T]):
    """Builds a :class:`Pipeline`: one source, stages in order, one sink.

    Mirrors SPDL 0.8's ``spdl.pipeline.PipelineBuilder``; every method returns the builder.
    Nothing runs before :meth:`build`.
    """

    def __init__(self) -> None:
        self._source: Any = None
        self._stages: list[tuple[str, Any, dict[str, Any]]] = []
        self._sink_size: int | None = None

    def add_source(self, source: Iterable[T] | AsyncIterable[T], **_kwargs: Any) -> "PipelineBuilder[T]":
        """Sets the source: an iterable, an async iterable, or a native
        :class:`spdl_rs.sources.SampleList` (iterated without the GIL).

        Each epoch calls ``iter(source)`` (``__aiter__`` for an async iterable) again, so a
        list or a ``SampleList`` gives the same items every epoch, while an iterator or
        generator is exhausted after the first. A Python ``str`` item stays native so that
        native ops read it without the GIL. If the source raises, the epoch ends and the
        iterator raises :class:`PipelineFailure` (``stage="source"``).

        Raises ``ValueError`` if a source was already set, ``TypeError`` if ``source`` is not
        iterable.
        """
        if self._source is not None:
            raise ValueError("Source already set.")
        if not isinstance(source, (Iterable, AsyncIterable, _native.SampleList)):
            raise TypeError(f"source must be an iterable or an async iterable, got {type(source).__name__}")
        self._source = source
        return self

    def pipe(
        self,
        op: Callable[..., Any] | _native.NativeOp,
        /,
        *,
        concurrency: int = 1,
        executor: Any = None,
        name: str | None = None,
        output_order: str = "completion",
        max_failures: int | None = None,
        **_kwargs: Any,
    ) -> "PipelineBuilder":
        """Adds a stage applying ``op`` to each item.

        ``op`` may be a function (returning ``None`` drops the item), a generator function
        (each yielded value is passed on), an async function, an async generator function,
        or a native stage from :mod:`spdl_rs.ops` (runs without the GIL). Up to
        ``concurrency`` items are processed at once; ``output_order="completion"`` passes
        results on as they finish, ``"input"`` keeps the source order. An exception fails that
        item only (it is dropped and counted); past ``max_failures`` failures in this stage
        (default: no stage limit, the pipeline's ``max_failures`` applies) the pipeline stops
        and the iterator raises :class:`PipelineFailure` naming the stage. ``executor`` is
        accepted for SPDL compatibility and ignored: sync ops run on the Rust worker threads.

        Raises ``ValueError`` for a bad ``output_order`` or ``concurrency``, ``TypeError`` for
        a non-callable ``op``.
        """
        del executor
        if output_order not in ("completion", "input"):
            raise ValueError(f"output_order must be 'completion' or 'input', got {output_order!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if max_failures is not None and max_failures < 0:
            max_failures = None
        kind = _op_kind(op)
        self._stages.append(
            (
                kind,
                op,
                {
                    "name": name or _op_name(op),
                    "concurrency": concurrency,
                    "output_order": output_order,
                    "max_failures": max_failures,
                },
            )
        )
        return self

    def aggregate(self, num_items: int, /, *, drop_last: bool = False) -> "PipelineBuilder":
        """Groups items into lists of ``num_items`` (natively: no GIL for native items); the
        last list of an epoch may be shorter, or is dropped with ``drop_last=True``.

        Raises ``ValueError`` if ``num_items < 1``.
        """
        if num_items < 1:
            raise ValueError(f"num_items must be at least 1, got {num_items}")
        self._stages.append(("aggregate", None, {"size": num_items, "drop_last": drop_last}))
        return self

    def disaggregate(self) -> "PipelineBuilder":
        """Splits each list (or other iterable item) back into its elements."""
        self._stages.append(("disaggregate", None, {"name": "disaggregate"}))
        return self

    def add_sink(self, buffer_size: int = 3) -> "PipelineBuilder":
        """Sets the sink: at most ``buffer_size`` finished items wait for the consumer.

        Raises ``ValueError`` if a sink was already set or ``buffer_size < 1``.
        """
        if self._sink_size is not None:
            raise ValueError("Sink is already set.")
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be at least 1, got {buffer_size}")
        self._sink_size = buffer_size
        return self

    def build(
        self,
        *,
        num_threads: int,
        max_failures: int = -1,
        report_stats_interval: float = -1,
        **_kwargs: Any,
    ) -> "Pipeline":
        """Builds the pipeline: ``num_threads`` Rust worker threads run the sync and native ops,
        a scheduler thread runs the stages, a source thread the source, and (only if there is
        an async op or source) a thread runs an asyncio loop. No item is produced before
        :meth:`Pipeline.start` or the first ``get_item``.

        ``max_failures``: failures allowed in the whole pipeline (``-1``: no limit) before it
        stops. ``report_stats_interval``: seconds between stats tables logged by the engine
        (see :func:`spdl_rs.init_logging`); ``-1`` disables.

        Raises ``ValueError`` without a source, ``RuntimeError`` if threads cannot start.
        """
        if self._source is None:
            raise ValueError("Source is not set.")
        needs_loop = isinstance(self._source, AsyncIterable) and not isinstance(self._source, Iterable)
        needs_loop |= any(kind in ("async", "asyncgen") for kind, _, _ in self._stages)
        loop = _LoopThread() if needs_loop else None
        try:
            source = self._source
            if loop is not None and isinstance(source, AsyncIterable) and not isinstance(source, Iterable):
                source = _AsyncSource(source, loop)
            specs = []
            for kind, op, cfg in self._stages:
                if kind == "aggregate":
                    specs.append(("aggregate", None, "aggregate", 1, "completion", None, cfg["size"], cfg["drop_last"]))
                    continue
                if kind == "disaggregate":
                    specs.append(("disaggregate", None, cfg["name"], 1, "completion", None, 0, False))
                    continue
                if kind == "async":
                    op = _bind_async(op, loop)
                elif kind == "asyncgen":
                    op = _bind_asyncgen(op, loop)
                specs.append(
                    (kind, op, cfg["name"], cfg["concurrency"], cfg["output_order"], cfg["max_failures"], 0, False)
                )
            native = _native.build_pipeline(
                source,
                specs,
                sink_size=self._sink_size or 3,
                num_threads=num_threads,
                max_failures=max_failures,
                report_stats_interval=report_stats_interval,
            )
        except BaseException:
            if loop is not None:
                loop.stop()
            raise
        return Pipeline(native, loop)


def _bind_async(op: Any, loop: Any) -> Callable[[Any], concurrent.futures.Future]:
    def submit(item: Any) -> concurrent.futures.Future:
        return loop.submit(op(item))

    return submit


def _bind_asyncgen(op: Any, loop: Any) -> Callable[[Any], concurrent.futures.Future]:
    def submit(item: Any) -> concurrent.futures.Future:
        return loop.submit(_collect(op(item)))

    return submit


def _stop_impl(native: Any, loop: _LoopThread | None) -> None:
    try:
        native.stop()
    finally:
        if loop is not None:
            loop.stop()


def _register_stop_at_exit(pipeline: "Pipeline") -> None:
    # Like SPDL: threading's exit hooks run before the interpreter joins threads and finalizes,
    # so a pipeline still referenced at exit is stopped while Python is fully alive.
    ref = weakref.ref(pipeline)

    def _hook() -> None:
        p = ref()
        if p is not None:
            p.stop()

    try:
        threading._register_atexit(_hook)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        pass


class Pipeline(Generic[T]):
    """A built pipeline. Use :class:`PipelineBuilder` to make one.

    Iterate it (``for item in pipeline``) once per epoch; ``get_item`` / ``get_iterator`` add
    a timeout. ``stop()`` (or leaving ``auto_stop()``) stops every stage and joins every
    thread promptly. A pipeline that is garbage-collected, or still running at interpreter
    exit, is stopped too. After ``os.fork()``, a pipeline built in the parent raises
    ``RuntimeError`` in the child (build a new one there).

    Mirrors SPDL 0.8's ``spdl.pipeline.Pipeline``.
    """

    def __init__(self, native: Any, loop: _LoopThread | None) -> None:
        self._native = native
        self._loop = loop
        self._started = False
        self._failures_warned = 0  # failures already reported by _warn_failures
        self._finalizer = weakref.finalize(self, _stop_impl, native, loop)
        _register_stop_at_exit(self)

    def start(self, *, timeout: float | None = None, **_kwargs: Any) -> None:
        """Starts producing items (the source and stages fill the queues).

        Optional: the first ``get_item`` starts the pipeline. Raises ``RuntimeError`` if the
        pipeline was already started.
        """
        del timeout
        if self._started:
            raise RuntimeError("The pipeline was already started.")
        self._started = True
        self._native.start()

    def stop(self, *, timeout: float | None = None) -> None:
        """Stops every stage and joins every thread (the GIL is released meanwhile); an op
        running at that moment finishes its current call first. Idempotent; the pipeline is
        unusable afterwards (``get_item`` raises ``EOFError``)."""
        del timeout
        # Not `self._finalizer()`: it forgets itself before stopping, so a Ctrl-C landing in
        # between would leave the threads running with no way to stop them. `_stop_impl` is
        # idempotent, so a stop() cut short can be called again.
        _stop_impl(self._native, self._loop)
        self._finalizer.detach()

    @contextmanager
    def auto_stop(self, *, timeout: float | None = None) -> Iterator[None]:
        """Context manager: ``start()`` on entry (unless already started), ``stop()`` on exit."""
        if not self._started:
            self.start(timeout=timeout)
        try:
            yield
        finally:
            self.stop(timeout=timeout)

    def get_item(self, *, timeout: float | None = None) -> T:
        """The next item, waiting at most ``timeout`` seconds (``None``: forever) with the GIL
        released.

        Raises ``EOFError`` at the end of the epoch (the next call starts the next epoch) or
        once stopped; ``TimeoutError`` if no item came in time (the pipeline goes on);
        :class:`PipelineFailure` after the last item when a failure budget was exceeded or
        the source failed; ``RuntimeError`` in a forked child.
        """
        if not self._started:
            self.start()
        return self._native.next(timeout)

    def get_iterator(self, *, timeout: float | None = None) -> "PipelineIterator[T]":
        """An iterator over one epoch; ``timeout`` applies to each item (``TimeoutError``).
        Call again (or iterate the pipeline again) for the next epoch."""
        return PipelineIterator(self, timeout)

    def __iter__(self) -> "PipelineIterator[T]":
        """``get_iterator()`` without a timeout."""
        return self.get_iterator()

    def get_stats(self) -> PipelineStats:
        """A snapshot of every stage's and queue's counters (``str()`` prints a table).

        Raises ``RuntimeError`` once stopped."""
        return self._native.stats()

    def _warn_failures(self) -> None:
        """At the end of an epoch: one ``RuntimeWarning`` if items failed and were skipped since
        the last warning (with the default ``max_failures=-1`` nothing else would tell)."""
        try:
            failed = {st.name: st.failures for st in self._native.stats().stages if st.failures}
        except RuntimeError:  # stopped
            return
        total = sum(failed.values())
        if total <= self._failures_warned:
            return
        new = total - self._failures_warned
        self._failures_warned = total
        per_stage = ", ".join(f"{name}: {n}" for name, n in failed.items())
        last = "; ".join(self.last_errors()[-3:])
        warnings.warn(
            f"{new} item(s) failed and were skipped ({per_stage}); last: {last}. Give "
            "max_failures to stop on failures, or call spdl_rs.init_logging('warn') to log each.",
            RuntimeWarning,
            stacklevel=3,
        )

    def last_errors(self) -> list[str]:
        """The most recent failures (up to 5), each naming its stage and sample position."""
        return self._native.last_errors()

    def state_dict(self) -> dict[str, Any]:
        """What the consumer has received so far, enough to resume the epoch in a fresh process
        with no repeat and no skip (torchdata ``StatefulDataLoader.state_dict()``'s name).

        Returns ``{"epoch": int, "done_below": int, "done_above": [int]}``: every source
        position of ``epoch`` below ``done_below`` is done, plus the positions ``done_above``
        (those delivered out of order; at most about the items in flight). Between epochs,
        ``epoch`` is the next one and nothing is done. A position counts as done when its item
        was returned by ``get_item`` (or when it was dropped: filtered out or failed). The
        state is small and JSON-serializable. Raises ``RuntimeError`` once stopped.
        """
        return self._native.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes from a :meth:`state_dict` (possibly of another process): the next epoch
        started is ``state["epoch"]``, and the source skips the positions done before any stage
        sees them (nothing is read or decoded again).

        Call it before the epoch starts: after ``build()`` and before ``start()``,
        ``auto_stop()`` or the first item (or between epochs). The source must give the same
        items in the same order as the run that saved the state (e.g. a
        :mod:`spdl_rs.sources` listing, or a sampler with the same seed and epoch). Raises
        ``ValueError`` for a malformed state, once the epoch has started, or once stopped.
        """
        if self._started and self._native.stopped:
            raise ValueError("load_state_dict: the pipeline is stopped")
        self._native.load_state_dict(state)

    @property
    def epoch(self) -> int:
        """The epoch in progress (0-based), or the next one between epochs."""
        return self._native.epoch

    def __str__(self) -> str:
        return f"Pipeline(started={self._started}, stopped={self._native.stopped})"


class PipelineIterator(Generic[T]):
    """Iterator over one epoch of a :class:`Pipeline` (single use)."""

    def __init__(self, pipeline: Pipeline[T], timeout: float | None) -> None:
        self._pipeline = pipeline
        self._timeout = timeout
        self._done = False

    def __iter__(self) -> "PipelineIterator[T]":
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        try:
            return self._pipeline.get_item(timeout=self._timeout)
        except EOFError:
            self._done = True
            self._pipeline._warn_failures()
            raise StopIteration from None
        except PipelineFailure:
            self._done = True
            raise
