"""``Pipeline`` and ``PipelineIterator`` (SPDL 0.8's pipeline API on the Rust engine
``spdl-core``), and ``_Build``, which makes one from a builder's stages
(``PipelineBuilder`` is in :mod:`._builder`).

Where the work runs:

- a function or generator op runs on one of the ``num_threads`` Rust worker threads and holds
  the GIL only for the call itself; with ``executor=``, in that executor instead (as SPDL);
- an async function or async generator op runs on an asyncio loop in a thread owned by the
  pipeline, ``concurrency`` coroutines at a time; an async generator's items move on as each
  is yielded;
- a native op (:mod:`spdl_rs.ops`) runs in Rust with no GIL at all;
- the source's iterator runs on the source thread (GIL per item; none for a
  :class:`spdl_rs.sources.SampleList`);
- hooks' ``stage_hook``/``task_hook``, queue ``stage_hook``s and background tasks run on the
  asyncio loop thread (made only when something needs it);
- the consumer's ``get_item`` / ``__next__`` waits with the GIL released.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import logging
import multiprocessing.util
import numbers
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import AsyncIterable, Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from .. import _native
from .._errors import PipelineFailure
from . import _misc, config
from ._hooks import (
    AsyncQueue,
    StageInfo,
    TaskHook,
    _engine_fed,
    _is_quiet,
    _stage_hooks,
    _task_hooks,
)
from ._regions import lower_stages
from ._stage import MaxFailures, Stage, builder_to_config
from .defs import Aggregator, Collate, MergeConfig

T = TypeVar("T")
U = TypeVar("U")

_LG = logging.getLogger("spdl_rs.pipeline")

_PIPELINE_IDS = itertools.count()

class _LoopThread:
    """An asyncio event loop running in a thread of its own, for a pipeline's async ops and
    hooks."""

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
        return asyncio.run_coroutine_threadsafe(_contained(coro), self.loop)

    def run(self, coro: Any, timeout: float | None = None) -> Any:
        """Runs ``coro`` on the loop and waits for its result (GIL released while waiting)."""
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        if not self._thread.is_alive() or self.loop is None:
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # already closed
            return
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)


async def _contained(coro: Any) -> Any:
    """Awaits ``coro``; a ``KeyboardInterrupt`` or ``SystemExit`` it raises fails this call as a
    ``RuntimeError`` (as in a sync op) instead of stopping the event loop that every async stage
    of the pipeline shares."""
    try:
        return await coro
    except (KeyboardInterrupt, SystemExit) as e:
        raise RuntimeError(f"{type(e).__name__} raised in an async op") from e


def _done_future(fn: Callable[[Any], Any], arg: Any) -> concurrent.futures.Future:
    """A future already holding ``fn(arg)`` (or its exception): no loop round trip."""
    fut: concurrent.futures.Future = concurrent.futures.Future()
    try:
        fut.set_result(fn(arg))
    except Exception as e:
        fut.set_exception(e)
    return fut


class _AsyncSource:
    """Iterates an async iterable from the source thread, one ``__anext__`` at a time on the
    pipeline's loop (each epoch calls ``__aiter__`` again); closes the iterator at the end."""

    def __init__(self, source: AsyncIterable, loop: _LoopThread) -> None:
        self._source = source
        self._loop = loop

    def __iter__(self) -> Iterator:
        ait = self._source.__aiter__()
        try:
            while True:
                try:
                    yield self._loop.run(ait.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            if ait is not self._source and hasattr(ait, "aclose"):
                try:
                    self._loop.run(ait.aclose(), timeout=10)
                except Exception:
                    pass


class _HookRunner:
    """Runs a stage's task hooks around a call made on another thread: ``enter`` and ``exit``
    each run on the pipeline's loop and wait for it (the GIL is released meanwhile)."""

    def __init__(self, hooks: Sequence[TaskHook], loop: _LoopThread) -> None:
        self._hooks = list(hooks)
        self._loop = loop

    def enter(self, item: Any) -> Any:
        cm = _task_hooks(self._hooks, item)
        self._loop.run(cm.__aenter__())
        return cm

    def exit(self, cm: Any, error: BaseException | str | None) -> bool:
        """Closes ``cm``; re-raises ``error`` unless a hook suppressed it (returns ``True``).
        A string error is a native op's message, raised as ``RuntimeError``."""
        if isinstance(error, str):
            error = RuntimeError(error)
        if error is None:
            self._loop.run(cm.__aexit__(None, None, None))
            return False
        if self._loop.run(cm.__aexit__(type(error), error, error.__traceback__)):
            return True
        raise error

    def end(self, cm: Any) -> None:
        """Closes ``cm`` at the end of a generator, with ``StopAsyncIteration`` (SPDL's)."""
        stop = StopAsyncIteration()
        try:
            self._loop.run(cm.__aexit__(StopAsyncIteration, stop, None))
        except StopAsyncIteration:
            pass


def _hooked_sync(op: Callable, runner: _HookRunner) -> Callable:
    def call(item: Any) -> Any:
        cm = runner.enter(item)
        try:
            out = op(item)
        except Exception as e:
            runner.exit(cm, e)
            return None
        runner.exit(cm, None)
        return out

    return call


def _hooked_gen(op: Callable, runner: _HookRunner) -> Callable:
    """A generator op whose every step runs inside the task hooks, as SPDL runs a converted
    generator: the last step's hooks see ``StopAsyncIteration``."""

    def call(item: Any) -> Any:
        it = None
        while True:
            cm = runner.enter(item)
            try:
                if it is None:
                    it = iter(op(item))
                value = next(it)
            except StopIteration:
                runner.end(cm)
                return
            except Exception as e:
                runner.exit(cm, e)  # raises unless a hook suppressed it
                return
            runner.exit(cm, None)
            yield value

    return call


async def _hooked_await(aop: Callable, hooks: Sequence[TaskHook], item: Any) -> Any:
    out = None
    async with _task_hooks(hooks, item):
        out = await aop(item)
    return out


class _AgenStepper:
    """One async generator op call: each call returns a future of ``(value,)`` for the next
    yielded value that is not ``None``, or of ``None`` once the generator is exhausted. Task
    hooks wrap each step, as in SPDL."""

    def __init__(self, agen: Any, item: Any, hooks: Sequence[TaskHook], loop: _LoopThread) -> None:
        self._agen = agen
        self._item = item
        self._hooks = hooks
        self._loop = loop

    def __call__(self, _unused: Any) -> concurrent.futures.Future:
        return self._loop.submit(self._step())

    async def _next(self) -> Any:
        if not self._hooks:
            return await self._agen.__anext__()
        value = None
        async with _task_hooks(self._hooks, self._item):
            value = await self._agen.__anext__()
        return value

    async def _step(self) -> tuple[Any] | None:
        while True:
            try:
                value = await self._next()
            except StopAsyncIteration:
                return None
            if value is not None:
                return (value,)


def _is_process_pool(executor: Any) -> bool:
    """Whether ``executor`` runs work in other processes: a ``ProcessPoolExecutor``, or a pool
    wrapping one (a priority executor, its entry point)."""
    if isinstance(executor, concurrent.futures.ProcessPoolExecutor):
        return True
    cls = getattr(executor, "_pool_executor_class", None)
    if isinstance(cls, type):
        return issubclass(cls, concurrent.futures.ProcessPoolExecutor)
    for attr in ("_owner", "_pool", "_inner"):
        inner = getattr(executor, attr, None)
        if inner is not None and inner is not executor and _is_process_pool(inner):
            return True
    return False


def _func_in_subprocess(func: Callable, item: Any) -> Any:
    """Runs ``func(item)`` in a worker process; a failure comes back as a ``RuntimeError``
    naming the exception and where it was raised (its traceback does not cross processes)."""
    try:
        return func(item)
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        raise RuntimeError(
            f"Function failed in subprocess: {type(e).__name__}: {e} ({frame.filename}:{frame.lineno}:{frame.name})"
        ) from None


_END = object()


def _next_or_end(it: Iterator) -> Any:
    # StopIteration cannot travel through a future: the end is a sentinel.
    try:
        return next(it)
    except StopIteration:
        return _END


def _in_executor(op: Callable, executor: Executor, gen: bool) -> Callable:
    """``op`` as an async function (a generator: an async generator) running in ``executor``
    (SPDL's ``convert_to_async``). A generator's items come back one ``next()`` at a time,
    each as it is yielded; in a process pool, all at once when it finishes (as SPDL)."""
    process = _is_process_pool(executor)
    if gen and process:

        async def batch_agen(item: Any) -> Any:
            loop = asyncio.get_running_loop()
            for value in await loop.run_in_executor(executor, _drain, op, item):
                yield value

        return batch_agen
    if gen:

        async def agen(item: Any) -> Any:
            loop = asyncio.get_running_loop()
            it = iter(await loop.run_in_executor(executor, op, item))
            try:
                while (value := await loop.run_in_executor(executor, _next_or_end, it)) is not _END:
                    yield value
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    try:
                        await loop.run_in_executor(executor, close)
                    except BaseException:  # closing is best effort (cancelled, executor shut down)
                        pass

        return agen

    if process:

        async def pfunc(item: Any) -> Any:
            return await asyncio.get_running_loop().run_in_executor(executor, _func_in_subprocess, op, item)

        return pfunc

    async def afunc(item: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(executor, op, item)

    return afunc


async def _disaggregate(items: Any) -> Any:
    for item in items:
        yield item


def _drain(op: Callable, item: Any) -> list:
    return list(op(item))


class _Build:
    """Turns a builder into a :class:`Pipeline`: stage infos, hooks, queues, the loop thread
    if anything needs one, the per-stage specs for the engine."""

    def __init__(
        self,
        b: Any,
        num_threads: int,
        budget: MaxFailures | None,
        interval: float,
        queue_class: Any,
        hook_factory: Any,
        stage_id: int,
    ) -> None:
        self.b = b
        self.num_threads = int(num_threads)
        self.budget = budget
        self.interval = interval
        self.queue_class = queue_class
        self.prefetch_epochs = False
        self.hook_factory = hook_factory
        self.stage_id = stage_id
        if b._stats_ids is not None:  # a merged sub-pipeline: numbered within its parent
            self.pipeline_id, self.stage_id = b._stats_ids
        else:
            self.pipeline_id = next(_PIPELINE_IDS)
        self.background_tasks: Any = None

    def _hooks_for(self, info: StageInfo) -> list[Any]:
        if self.hook_factory is not None:
            hooks = list(self.hook_factory(info))
        elif (cls := config.get_default_hook_class()) is not None:
            hooks = [cls(info, interval=self.interval)]
        else:
            hooks = []
        for h in hooks:
            if not isinstance(h, TaskHook):
                raise TypeError(f"task_hook_factory must return TaskHook objects, got {type(h).__name__}")
        return hooks

    def _queue_for(self, info: StageInfo, size: int) -> Any:
        if self.queue_class is not None:
            q = self.queue_class(info, buffer_size=size)
        else:
            q = config.get_default_queue_class()(info, buffer_size=size, interval=self.interval)
        if not isinstance(q, AsyncQueue):
            raise TypeError(f"queue_class must make spdl_rs.pipeline.AsyncQueue objects, got {type(q).__name__}")
        return q

    def run(self) -> "Pipeline":
        b = self.b
        stages, executors = lower_stages(b._stages, float(self.interval))
        try:
            return self._run(stages, executors)
        except BaseException:
            for ex in executors:
                ex.shutdown(wait=False, cancel_futures=True)
            raise

    def _run(self, stages: list[Stage], executors: list[Executor]) -> "Pipeline":
        b = self.b
        # As SPDL numbers the stages of a Merge: the merge (the source) first, then each
        # sub-pipeline's (it has no sink), then this pipeline's own stages.
        merge = b._source if isinstance(getattr(b._source, "config", None), MergeConfig) else None
        first = self.stage_id
        if merge is not None:
            merge._stats_ids = (self.pipeline_id, first + 1)
            first += merge._num_stats_stages()
        infos = [StageInfo(self.pipeline_id, str(self.stage_id), "src" if merge is None else "merge")]
        for i, st in enumerate(stages, 1):
            # As SPDL: only a pipe stage running more than one task at a time shows it.
            conc = st.concurrency if st.kind not in ("aggregate", "disaggregate") else 1
            infos.append(StageInfo(self.pipeline_id, str(first + i), st.name, conc if conc > 1 else None))
        sink_info = StageInfo(self.pipeline_id, str(first + len(stages) + 1), "sink")
        # hooks[i] for stage i (0: the source, none but a merge's, which runs no task of
        # SPDL's); queues: the queue after each stage, then the sink's (SPDL's sizes: 2
        # between stages). The engine's last queue is both the last stage's and the sink's.
        hooks: list[list[Any]] = [[] if merge is None else self._hooks_for(infos[0])]
        hooks += [self._hooks_for(info) for info in infos[1:]]
        # queue_at[j]: the engine queue that queue object j reads; queue_items[j]: what it
        # counts instead of that queue's items (a path_variants path's share), or None.
        queues: list[Any] = []
        queue_at: list[int] = []
        queue_items: list[Callable[[Any], int] | None] = []
        stage_tasks: dict[int, Callable[[], int]] = {} if merge is None else {0: lambda: 0}
        for i, info in enumerate(infos):
            stats = stages[i - 1].stats if i else None
            if stats is not None and "tasks" in stats:
                stage_tasks[i] = lambda n=stats["tasks"]: n
            elif stats is not None and "count" in stats:
                stage_tasks[i] = lambda c=stats["count"]: c.calls
            if stats is not None and "path_queues" in stats:
                for name, count in stats["path_queues"]:
                    queues.append(self._queue_for(StageInfo(info.pipeline_id, info.stage_id, name), 2))
                    queue_at.append(i)
                    queue_items.append(None if count is None else _path_items(i, lambda c=count: c.calls))
                continue
            queues.append(self._queue_for(info, 2))
            queue_at.append(i)
            count = stats.get("count") if stats is not None else None
            queue_items.append(None if count is None else _path_items(i, lambda c=count: c.outs))
        if b._stats_ids is None:  # a merged sub-pipeline has no sink of SPDL's
            queues.append(self._queue_for(sink_info, b._sink_size if b._sink_size is not None else 3))
            queue_at.append(len(stages))
            # SPDL's sink queue counts the items, not the end marker.
            queue_items.append(lambda stats, n=len(stages): stats.stages[n].items_out)
        per_task = [[h for h in hs if not _engine_fed(h)] for hs in hooks]
        # As SPDL: the global defaults, then the pipeline's own.
        bg = list(_misc._DEFAULT_BACKGROUND_TASKS or []) + list(self.background_tasks or [])

        stage_objs = [h for hs in hooks for h in hs] + queues
        quiet = all(_is_quiet(o) for o in stage_objs) and not bg
        source_async = isinstance(b._source, AsyncIterable) and not isinstance(b._source, Iterable)
        needs_loop = (
            source_async
            or any(st.kind in ("async", "asyncgen") or st.executor is not None for st in stages)
            or any(per_task)
            or not quiet
        )
        loop = _LoopThread() if needs_loop else None
        try:
            source = b._source
            if source_async:
                assert loop is not None
                source = _AsyncSource(source, loop)
            specs = [self._spec(st, per_task[i], loop) for i, st in enumerate(stages, 1)]
            for spec, info in zip(specs, infos[1:]):
                if spec.kind in ("func", "gen", "async", "asyncgen"):
                    spec.op = _logging_failures(spec.op, spec.kind, str(info))
            native = _native.build_pipeline(
                source,
                specs,
                sink_size=b._sink_size if b._sink_size is not None else 3,
                num_threads=self.num_threads,
                max_failures=self.budget,
                report_stats_interval=float(self.interval),
                prefetch_epochs=self.prefetch_epochs,
            )
        except BaseException:
            if loop is not None:
                loop.stop()
            raise
        lifecycle = _StageLifecycle(native, hooks, queues, bg, loop, quiet, queue_at, queue_items, stage_tasks)
        for st, hs in zip(stages, hooks[1:]):
            # SPDL's task counts of its aggregation stages (see TaskStatsHook._refresh).
            if st.kind in ("aggregate", "pyaggregate", "disaggregate"):
                for h in hs:
                    if _engine_fed(h):
                        h._count = "items_out" if st.kind == "disaggregate" else "items_in"
                        h._flush_task = st.kind != "disaggregate" and not st.drop_last
        lifecycle.executors = executors
        if (shutdown := getattr(b._source, "_merged_shutdown", None)) is not None:
            lifecycle.on_stop.append(shutdown)
        return Pipeline(native, loop, lifecycle, continuous=b._continuous, desc=_describe(b))

    def _spec(self, st: Stage, hooks: list[TaskHook], loop: _LoopThread | None) -> Stage:
        """``st`` as the engine runs it: its op wrapped for the loop, executor and hooks."""
        kind, op = st.kind, st.op
        spec = st.with_()
        if kind == "aggregate":
            return self._aggregate_spec(spec, op, hooks, loop)
        if kind == "disaggregate":
            if not hooks:
                return spec
            # With task hooks: as SPDL, an async generator over the list, one task per item.
            kind, op = "asyncgen", _disaggregate
        if kind == "native":
            if hooks:
                assert loop is not None
                spec.hooks = _HookRunner(hooks, loop)
            return spec
        executor = st.executor
        if executor is not None:
            op = _in_executor(op, executor, kind == "gen")
            kind = "asyncgen" if kind == "gen" else "async"
        if kind == "async":
            assert loop is not None
            if hooks:
                spec.op = lambda item, op=op: loop.submit(_hooked_await(op, hooks, item))
            else:
                spec.op = lambda item, op=op: loop.submit(op(item))
        elif kind == "asyncgen":
            assert loop is not None
            spec.op = lambda item, op=op: _AgenStepper(op(item), item, hooks, loop)
        elif hooks:
            assert loop is not None
            runner = _HookRunner(hooks, loop)
            spec.op = _hooked_gen(op, runner) if kind == "gen" else _hooked_sync(op, runner)
        spec.kind = kind
        return spec

    def _aggregate_spec(
        self, spec: Stage, op: Any, hooks: list[TaskHook], loop: _LoopThread | None
    ) -> Stage:
        if isinstance(op, numbers.Integral):
            if not hooks:
                spec.size = int(op)
                return spec
            op = Collate(int(op))
        elif type(op) is Collate and not hooks:
            spec.size = op.n
            return spec
        agg: Aggregator = op
        spec.kind = "pyaggregate"
        if hooks:
            assert loop is not None

            async def step(item: Any) -> Any:
                out = None
                async with _task_hooks(hooks, item):
                    out = agg.accumulate(item)
                return out

            spec.op = lambda item: loop.submit(step(item))
        else:
            spec.op = lambda item: _done_future(agg.accumulate, item)
        if not spec.drop_last:
            spec.flush = lambda _: _done_future(lambda _: agg.flush(), None)
        elif self.b._continuous:
            # Drop the partial group, but start the next epoch empty.
            spec.flush = lambda _: _done_future(lambda _: (agg.flush(), None)[1], None)
        return spec


def _logging_failures(op: Callable[[Any], Any], kind: str, stage: str) -> Callable[[Any], Any]:
    """``op`` (as the engine calls it: a function, a generator function, or one returning
    futures) logging each failed task as SPDL does: ``ERROR``
    ``Task [<stage>:<n>] failed.`` with the traceback (logger ``spdl_rs.pipeline``), ``n``
    counting the stage's tasks from 1. The failure itself goes on as before."""
    counter = itertools.count(1)

    def log(n: int, e: BaseException) -> None:
        # On an engine thread, logging's threading.current_thread() registers a dummy Python
        # thread that would stay listed (threading.enumerate) for good: forget it again.
        active = getattr(threading, "_active", {})
        ident = threading.get_ident()
        foreign = ident not in active
        try:
            _LG.error("Task [%s:%d] failed.", stage, n, exc_info=(type(e), e, e.__traceback__))
        finally:
            if foreign:
                active.pop(ident, None)

    def log_done(n: int, fut: concurrent.futures.Future) -> None:
        if not fut.cancelled() and (e := fut.exception()) is not None and isinstance(e, Exception):
            log(n, e)

    @contextmanager
    def task() -> Iterator[None]:
        """One task: numbered as it starts, logged if it raises (the error goes on)."""
        n = next(counter)
        try:
            yield
        except Exception as e:
            log(n, e)
            raise

    if kind == "func":

        def call(item: Any) -> Any:
            with task():
                return op(item)

        return call
    if kind == "gen":

        def gen(item: Any) -> Any:
            with task():
                yield from op(item)

        return gen
    if kind == "async":

        def submit(item: Any) -> Any:
            n = next(counter)
            fut = op(item)
            fut.add_done_callback(functools.partial(log_done, n))
            return fut

        return submit

    def stepper(item: Any) -> Any:  # asyncgen: each step a future
        n = next(counter)
        step = op(item)

        def next_step(arg: Any) -> Any:
            fut = step(arg)
            fut.add_done_callback(functools.partial(log_done, n))
            return fut

        return next_step

    return stepper


def _path_items(i: int, items: Callable[[], int]) -> Callable[[Any], int]:
    """The items count of a path_variants path's queue after stage ``i``: what the path's
    stage received or produced (``items()``), plus the end markers the engine's queue counts
    (its items beyond what the stage put out), as SPDL's per-path queues count them."""

    def count(stats: Any) -> int:
        ends = max(0, stats.queues[i].items - stats.stages[i].items_out)
        return items() + ends

    return count


def _describe(b: Any) -> str:
    """The builder's :class:`~spdl_rs.pipeline.defs.PipelineConfig` as text (SPDL's
    ``str(pipeline)``), or ``""`` when it cannot be made."""
    try:
        return str(builder_to_config(b))
    except Exception:
        return ""


class _StageLifecycle:
    """Enters every stage's ``stage_hook`` (hooks, then queues) and starts the background
    tasks when the pipeline starts; exits them once, when the stages end (the end of a
    single-pass source) or at ``stop()``. Engine-fed hooks and queues read the engine's
    figures of their stage."""

    def __init__(
        self,
        native: Any,
        hooks: list[list[Any]],
        queues: list[Any],
        bg: list[Any],
        loop: _LoopThread | None,
        quiet: bool,
        queue_at: list[int] | None = None,
        queue_items: list[Callable[[Any], int] | None] | None = None,
        stage_tasks: dict[int, Callable[[], int]] | None = None,
    ) -> None:
        """``queue_at[j]``: the engine queue queue object ``j`` reads (default: ``j``, the sink's
        for the rest); ``queue_items[j]``: its item count instead of that queue's;
        ``stage_tasks[i]``: stage ``i``'s task count instead of the engine's."""
        self._loop = loop
        self._quiet = quiet
        self._bg_factories = bg
        self._bg: list[asyncio.Task] = []
        self._stack: Any = None
        self._state = "new"  # -> "entered" -> "exited"
        self._state_lock = threading.Lock()  # the consumer and stop() may both end the stages
        self.error: BaseException | None = None
        self.executors: list[Executor] = []  # made for PlacementConfig regions; shut down at stop
        self.on_stop: list[Callable[[], None]] = []  # e.g. a Merge source's shutdown

        def engine_stats(kind: str, i: int, **counts: Callable[[Any], int]) -> Callable[[], Any]:
            """``() -> native.stats().<kind>[i]`` (with the ``counts`` read from the whole
            stats instead), ``None`` once the pipeline is gone."""

            def get() -> Any:
                try:
                    stats = native.stats()
                    one = getattr(stats, kind)[i]
                    return _Counted(one, {k: f(stats) for k, f in counts.items()}) if counts else one
                except (RuntimeError, IndexError):
                    return None

            return get

        tasks_of = stage_tasks or {}
        for i, hs in enumerate(hooks):
            for h in hs:
                if _engine_fed(h):
                    if i in tasks_of:
                        h._engine = engine_stats("stages", i, tasks=lambda _s, f=tasks_of[i]: f())
                    else:
                        h._engine = engine_stats("stages", i)
        for j, q in enumerate(queues):
            at = queue_at[j] if queue_at is not None else min(j, len(hooks) - 1)
            items = queue_items[j] if queue_items is not None else None
            q._engine = engine_stats("queues", at, items=items) if items is not None else engine_stats("queues", at)
        self._objs = [h for hs in hooks for h in hs] + list(queues)

    def enter(self, timeout: float | None) -> None:
        with self._state_lock:
            if self._state != "new":
                return
            self._state = "entered"
        if self._quiet or self._loop is None:
            return

        async def go() -> None:
            stack = _stage_hooks(self._objs)
            await stack.__aenter__()
            self._stack = stack  # only once entered: a failed entry has cleaned up
            for make in self._bg_factories:
                task = make()
                self._bg.append(_misc.create_task(task.run(), name=f"background:{type(task).__name__}"))

        try:
            self._loop.run(go(), timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the pipeline's stage hooks did not start within {timeout} sec") from None
        except Exception as e:  # a stage hook failed: the pipeline fails, as in SPDL
            self.error = e

    def exit(self, error: BaseException | None = None, ended: bool = False) -> None:
        """``ended``: the stages saw the end of a single-pass source (an aggregation then
        flushed, one more task in SPDL's counts)."""
        with self._state_lock:
            was, self._state = self._state, "exited"
        if was != "entered":
            return
        if ended:
            for obj in self._objs:
                if hasattr(obj, "_ended"):
                    obj._ended = True
        if self._quiet or self._loop is None:
            for obj in self._objs:
                final = getattr(obj, "_total", None) or getattr(obj, "_final", None)
                stats = final() if final is not None else None
                if stats is not None:
                    obj._log_stats(stats)
            return
        if self._stack is None:
            return

        async def go() -> None:
            for t in self._bg:
                t.cancel()
            if self._bg:
                await asyncio.gather(*self._bg, return_exceptions=True)
            exc = (type(error), error, error.__traceback__) if error is not None else (None, None, None)
            await self._stack.__aexit__(*exc)

        try:
            self._loop.run(go(), 30)
        except Exception:
            _LG.exception("a stage hook failed at the end of the pipeline")


class _Counted:
    """An engine stats record with some of its counts replaced (see ``_StageLifecycle``)."""

    def __init__(self, base: Any, counts: dict[str, int]) -> None:
        self._base = base
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        counts = self.__dict__["_counts"]
        return counts[name] if name in counts else getattr(self.__dict__["_base"], name)


def _on_own_thread(native: Any, loop: _LoopThread | None) -> bool:
    """Whether this thread is one that a blocking stop would wait for: the engine's (a stage's
    op, the source, a custom aggregator) or the loop's (a hook, an async op)."""
    if loop is not None and threading.current_thread() is loop._thread:
        return True
    return bool(native.on_engine_thread())


class _StopState:
    """Shared by a pipeline's stops: one at a time (``lock``), and the background stop started
    from an own thread (``thread``), which a later stop waits for."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None


def _stop_impl(native: Any, loop: _LoopThread | None, lifecycle: _StageLifecycle, state: _StopState) -> Any:
    if _on_own_thread(native, loop):
        # From the pipeline's own thread (a hook, an op, GC there) a stop cannot wait for that
        # thread: stop the engine now, join and close the rest from a thread of its own.
        native.request_stop()
        with state.lock:
            if state.thread is None:
                state.thread = threading.Thread(
                    target=_stop_impl, args=(native, loop, lifecycle, state), name="spdl_rs_stop", daemon=True
                )
                state.thread.start()
        return None
    try:
        with state.lock:
            try:
                return native.stop()
            finally:
                try:
                    lifecycle.exit()
                finally:
                    try:
                        if loop is not None:
                            loop.stop()
                    finally:
                        for ex in lifecycle.executors:
                            _reap_process_pool(ex)
                        for cb in lifecycle.on_stop:
                            cb()
                        lifecycle.executors, lifecycle.on_stop = [], []
    finally:
        bg = state.thread
        if bg is not None and bg is not threading.current_thread():
            bg.join()


def _reap_process_pool(ex: Executor, grace: float = 3.0) -> None:
    """Shuts down a pool the pipeline made (a ``to()`` region's, a config's process pool
    rebuilt in a subprocess worker) and reaps its worker processes as SPDL reaps its region
    workers: ``grace`` seconds (all together) to exit, then they are terminated (5 s), then
    killed. A pool asked to shut down can leave a worker waiting for work forever (its
    sentinel lost in a race with the last submissions); a process exit would then wait for
    it."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for wait, end in ((grace, None), (5.0, "terminate"), (5.0, "kill")):
        alive = [p for p in procs if p.exitcode is None]
        if not alive:
            return
        if end is not None:
            for p in alive:
                getattr(p, end)()
        deadline = time.monotonic() + wait
        for p in alive:
            p.join(max(0.0, deadline - time.monotonic()))


#: Seconds the interpreter's exit waits for a pipeline still running to stop.
_EXIT_STOP_TIMEOUT = 5.0


def _register_stop_at_exit(pipeline: "Pipeline") -> None:
    # Like SPDL: threading's exit hooks run before the interpreter joins threads and finalizes,
    # so a pipeline still referenced at exit is stopped while Python is fully alive.
    ref = weakref.ref(pipeline)

    def _hook() -> None:
        p = ref()
        if p is not None:
            try:
                p.stop(timeout=_EXIT_STOP_TIMEOUT)
            except TimeoutError:
                # An op that never returns (blocked in a call) must not keep the process alive.
                _LG.warning(
                    "a pipeline did not stop within %s s at exit (an op or the source is still "
                    "running); exiting without it",
                    _EXIT_STOP_TIMEOUT,
                )
            except Exception:
                pass

    try:
        threading._register_atexit(_hook)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        pass
    # In a multiprocessing child the order differs: its exit function joins the child's own
    # non-daemon processes (a region's ProcessPoolExecutor workers, which wait for work) before
    # threading's exit hooks run, so the hook above would come too late. Multiprocessing runs
    # its finalizers first: stop the pipeline there too (the second stop returns at once).
    multiprocessing.util.Finalize(pipeline, _hook, exitpriority=100)


class Pipeline(Generic[T]):
    """A built pipeline (SPDL 0.8's ``spdl.pipeline.Pipeline``); make one with
    :class:`PipelineBuilder`.

    Iterate it (``for item in pipeline``) once per epoch; ``get_item`` / ``get_iterator`` add
    a timeout. ``stop()`` (or leaving ``auto_stop()``) stops every stage and joins every
    thread. A pipeline that is garbage-collected, or still running at interpreter exit, is
    stopped too. After ``os.fork()``, a pipeline built in the parent raises ``RuntimeError``
    in the child (build a new one there).
    """

    def __init__(
        self, native: Any, loop: _LoopThread | None, lifecycle: _StageLifecycle, *, continuous: bool, desc: str = ""
    ) -> None:
        self._desc = desc
        self._native = native
        self._loop = loop
        self._lifecycle = lifecycle
        self._continuous = continuous
        self._started = False
        self._exhausted = False  # a single-pass pipeline reached its end
        self._warned_reiterate = False  # get_iterator() warned about iterating it again
        # One consumer at a time: threads sharing the pipeline share its items (each once).
        self._consumer_lock = threading.Lock()
        self._failure: BaseException | None = None  # raised again by later reads
        self._failures_warned = 0  # failures already reported by _warn_failures
        self._finalizer = weakref.finalize(self, _stop_impl, native, loop, lifecycle, _StopState())
        # At exit the threading hook below stops it, with a time limit; the finalizer's own
        # exit call would wait without one.
        self._finalizer.atexit = False
        _register_stop_at_exit(self)

    def start(self, *, timeout: float | None = None, daemon: bool = False) -> None:
        """Starts producing items (the source and stages fill the queues) after entering the
        stage hooks.

        ``timeout``: seconds to wait for the stage hooks to start (``TimeoutError`` past it;
        ``None``: no limit). ``daemon``: SPDL's flag for its event-loop thread; spdl_rs's
        threads never keep the interpreter alive (a pipeline still running at exit is
        stopped first), so both values behave as ``daemon=True`` in SPDL. Optional: the first
        ``get_item`` starts the pipeline. Raises ``RuntimeError`` if already started.
        """
        if self._started:
            raise RuntimeError("The pipeline was already started.")
        if not isinstance(daemon, bool):
            raise TypeError(f"daemon must be a bool, got {type(daemon).__name__}")
        self._started = True
        self._lifecycle.enter(timeout)
        if self._lifecycle.error is None:
            self._native.start()

    def stop(self, *, timeout: float | None = None) -> None:
        """Stops every stage and joins every thread (the GIL is released meanwhile); an op
        running at that moment finishes its current call first. Then exits the stage hooks
        (final stats logs) and stops the loop thread. Idempotent; afterwards ``get_item``
        raises ``EOFError`` and ``get_stats()`` gives the final figures.

        As SPDL 0.8: if a failure budget was exceeded and no read has raised it yet, one
        ``stop()`` call raises that :class:`PipelineFailure` (later calls return normally).
        ``timeout``: seconds to wait for the threads; past it ``TimeoutError`` is raised and
        the stop goes on in the background. The wait wakes for signals: a signal handler's
        exception (``KeyboardInterrupt``) is raised and the stop goes on in the background
        too.

        Called from the pipeline's own threads (an op, the source's iterator, a custom
        aggregator, a hook, a background task), it cannot wait for the thread it runs on (SPDL
        raises ``RuntimeError`` there): it stops every stage at once and returns; joining the
        threads and exiting the stage hooks finish in the background, and the consumer's next
        read raises ``EOFError``. A later ``stop()`` from another thread waits for that.
        """
        if timeout is not None and not isinstance(timeout, numbers.Real):
            raise TypeError(f"timeout must be a number or None, got {type(timeout).__name__}")
        if _on_own_thread(self._native, self._loop):
            self._stop_now()  # stops the engine and returns; the rest runs in the background
            return
        # The joins run in a thread of their own, and this one waits in Thread.join, which a
        # signal interrupts: a handler's exception (Ctrl-C's KeyboardInterrupt) is raised here
        # while the stop goes on in the background (a later stop() waits for it).
        box: list[Any] = []

        def run() -> None:
            try:
                box.append((True, self._stop_now()))
            except BaseException as e:  # raised again on the calling thread
                box.append((False, e))

        t = threading.Thread(target=run, name="spdl_rs_stop", daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            raise TimeoutError(f"The pipeline did not stop within {timeout} sec.")
        ok, unobserved = box[0] if box else (True, None)
        if not ok:
            raise unobserved
        if unobserved is not None and self._failure is None:
            self._failure = unobserved
            raise unobserved

    def _stop_now(self) -> Any:
        # Not `self._finalizer()`: it forgets itself before stopping, so a Ctrl-C landing in
        # between would leave the threads running with no way to stop them. The stop is
        # idempotent, so a stop() cut short can be called again; the finalizer is detached
        # only once it completed. From an own thread the stop is only started: the finalizer
        # stays, so a later stop() (or GC) waits for the background stop (its lock).
        info = self._finalizer.peek()
        if info is None:
            return None
        _, func, args, kwargs = info
        own = _on_own_thread(self._native, self._loop)
        result = func(*args, **kwargs)
        if not own:
            self._finalizer.detach()
        return result

    @contextmanager
    def auto_stop(self, *, timeout: float | None = None) -> Iterator[None]:
        """Context manager: ``start(timeout=)`` on entry, ``stop(timeout=)`` on exit (as SPDL:
        ``RuntimeError`` if the pipeline was already started)."""
        self.start(timeout=timeout)
        try:
            yield
        finally:
            self.stop(timeout=timeout)

    def get_item(self, *, timeout: float | None = None) -> T:
        """The next item, waiting at most ``timeout`` seconds (``None``: forever) with the GIL
        released.

        Raises ``EOFError`` at the end of the pass (for good with a single-pass source; with
        ``continuous=True`` the next call starts the next epoch) or once stopped;
        ``TimeoutError`` if no item came in time (the pipeline goes on);
        :class:`PipelineFailure` after the last item when a failure budget was exceeded, the
        source failed or a stage hook failed (later calls raise it again); ``RuntimeError`` in
        a forked child. Threads may share a pipeline: each item goes to one of them.
        """
        if timeout is None:
            self._consumer_lock.acquire()
        else:
            start = time.monotonic()
            if not self._consumer_lock.acquire(timeout=max(timeout, 0)):
                raise TimeoutError(f"no item within {timeout} s (another thread is taking one)")
            timeout = max(0.0, timeout - (time.monotonic() - start))  # one limit for both waits
        try:
            return self._get_item(timeout)
        finally:
            self._consumer_lock.release()

    def _get_item(self, timeout: float | None) -> T:
        if not self._started:
            self.start()
        if self._failure is not None:
            raise self._failure
        if self._lifecycle.error is not None:
            e = self._lifecycle.error
            self._failure = PipelineFailure(f"A stage hook failed: {type(e).__name__}: {e}", [e])
            raise self._failure
        if self._exhausted:
            raise EOFError("Reached the end of the pipeline.")
        try:
            return self._native.next(timeout)
        except EOFError:
            if not self._continuous and not self._native.stopped:
                self._exhausted = True
                self._lifecycle.exit(ended=True)
            raise
        except PipelineFailure as e:
            self._failure = e
            self._lifecycle.exit(e)
            raise

    def get_iterator(self, *, timeout: float | None = None) -> "PipelineIterator[T]":
        """An iterator over one epoch; ``timeout`` applies to each item (``TimeoutError``).
        With ``continuous=True``, call again for the next epoch.

        A single-pass pipeline (``continuous=False``) that has reached its end yields nothing
        again, as SPDL; unlike SPDL, the first such iterator warns (``RuntimeWarning``, once per
        pipeline), since a training loop would otherwise silently run its later epochs empty."""
        if self._exhausted and not self._continuous and not self._warned_reiterate:
            self._warned_reiterate = True
            warnings.warn(
                "This pipeline has a single-pass source and was already iterated to its end: "
                "this iterator yields nothing. For one epoch per iterator, build it with "
                "add_source(..., continuous=True) and call get_iterator() once per epoch.",
                RuntimeWarning,
                stacklevel=2,
            )
        return PipelineIterator(self, timeout)

    def __iter__(self) -> "PipelineIterator[T]":
        """``get_iterator()`` without a timeout."""
        return self.get_iterator()

    def get_stats(self) -> _native.PipelineStats:
        """Every stage's and queue's counters (``str()`` prints a table); after ``stop()``,
        the final ones."""
        return self._native.stats()

    def _warn_failures(self) -> None:
        """At the end of an epoch: one ``RuntimeWarning`` if items failed and were skipped since
        the last warning (with the default ``max_failures=-1`` nothing else would tell)."""
        try:
            failed = {st.name: st.failures for st in self._native.stats().stages if st.failures}
        except RuntimeError:
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
            "max_failures to stop on failures; each failed task is logged (ERROR, logger spdl_rs.pipeline).",
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
        state is small and JSON-serializable. After :meth:`stop` (e.g. after the
        ``auto_stop()`` block) it is the state at the stop, so a checkpoint may be taken after
        the loop.
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
        """As SPDL: the object's repr, then the pipeline's config (source, stages, sink)."""
        return "\n".join(x for x in (repr(self), self._desc) if x)


class PipelineIterator(Generic[T]):
    """Iterator over one epoch of a :class:`Pipeline` (single use; SPDL's
    ``PipelineIterator``). A failure is raised again by later ``next()`` calls."""

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
