"""Hooks, queues and their statistics: SPDL 0.8's ``TaskHook``, ``TaskStatsHook``,
``AsyncQueue``, ``StatsQueue``, ``StageInfo``, ``TaskPerfStats``, ``QueuePerfStats``,
``is_eof`` and ``is_epoch_end``.

The stages and queues of a spdl_rs pipeline are native (``spdl-core``), and the engine already
measures every task and every queue wait. So:

- a :class:`TaskStatsHook` (or a subclass that does not override ``task_hook``) is *fed by the
  engine*: it costs nothing per task; its counters, ``interval_stats_callback`` and final log
  use the engine's figures for its stage;
- any other :class:`TaskHook` runs around each task of its stage (``task_hook``), on the
  pipeline's asyncio loop, as in SPDL;
- a queue class is :class:`AsyncQueue`, :class:`StatsQueue` or a subclass that overrides only
  ``stage_hook`` / ``interval_stats_callback`` (items never pass through a Python queue);
  :class:`StatsQueue`'s figures come from the engine's queue meters.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from ._misc import create_task

__all__ = [
    "StageInfo",
    "TaskHook",
    "TaskStatsHook",
    "TaskPerfStats",
    "AsyncQueue",
    "StatsQueue",
    "QueuePerfStats",
    "is_eof",
    "is_epoch_end",
]

_LG = logging.getLogger("spdl_rs.pipeline")


@dataclass(frozen=True)
class StageInfo:
    """Who a stage is (SPDL's ``spdl.pipeline.StageInfo``): given to ``task_hook_factory``,
    hooks and queues.

    ``pipeline_id`` counts the pipelines built in this process (from 0); ``stage_id`` is the
    stage's index as a string (the source is ``build(stage_id=)``, 0 by default, and each
    stage after it one more); ``concurrency`` is ``None`` for the source and the sink.
    ``str(info)`` is ``"pipeline_id:stage_id:name[concurrency]"``.
    """

    pipeline_id: int
    stage_id: str
    stage_name: str
    concurrency: int | None = None

    def __str__(self) -> str:
        name = self.stage_name if self.concurrency is None else f"{self.stage_name}[{self.concurrency}]"
        return f"{self.pipeline_id}:{self.stage_id}:{name}"


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_EOF = _Sentinel("EOF")
_EPOCH_END = _Sentinel("EPOCH_END")


def is_eof(item: Any) -> bool:
    """Whether ``item`` is the end-of-stream sentinel (SPDL's ``spdl.pipeline.is_eof``).

    spdl_rs's stages never hand a sentinel to user code (the engine carries end-of-stream
    itself), so this is ``False`` for every item an op, aggregator or consumer sees."""
    return item is _EOF


def is_epoch_end(item: Any) -> bool:
    """Whether ``item`` is the epoch-boundary sentinel of a continuous source (SPDL's
    ``spdl.pipeline.is_epoch_end``). As with :func:`is_eof`, spdl_rs never passes it to user
    code: aggregators are flushed at each epoch's end by the engine."""
    return item is _EPOCH_END


def _time_str(val: float) -> str:
    if val < 0.0001:
        return f"{val * 1e6:6.1f} [ us]"
    if val < 1:
        return f"{val * 1e3:6.1f} [ ms]"
    return f"{val:6.1f} [sec]"


class _Quantiles:
    """Streaming percentiles in a log-scale histogram (8 buckets per power of two, so a
    percentile is within 9% of the exact value); constant memory."""

    _PER_OCTAVE = 8

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0

    def add(self, seconds: float) -> None:
        b = -10_000 if seconds <= 0 else math.floor(math.log2(seconds) * self._PER_OCTAVE)
        self.counts[b] = self.counts.get(b, 0) + 1
        self.total += 1

    def value(self, q: float) -> float:
        if not self.total:
            return 0.0
        rank = max(1, math.ceil(q * self.total))
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen >= rank:
                return 0.0 if b == -10_000 else 2.0 ** ((b + 1) / self._PER_OCTAVE)
        return 0.0

    def reset(self) -> None:
        self.counts.clear()
        self.total = 0


class TaskHook(ABC):
    """Custom code around a stage and around each of its tasks (SPDL's
    ``spdl.pipeline.TaskHook``).

    ``stage_hook()`` is an async context manager entered once when the pipeline starts and
    exited once when the stage ends (the end of a single-pass source, or ``stop()``);
    ``task_hook(input_item)`` is an async context manager around each task. Both run on the
    pipeline's asyncio loop thread (made for the purpose if the pipeline has no async op).
    An exception from ``task_hook`` fails that item (dropped and counted); one from
    ``stage_hook``'s entry fails the pipeline (``get_item`` raises :class:`PipelineFailure`).

    A task is one call of the op: for a function or coroutine the call, for a generator
    the whole generator, for an async generator and ``disaggregate`` each step (as SPDL), for
    an aggregation each ``accumulate``; for a native op
    (:mod:`spdl_rs.ops`) the call, with ``input_item=None`` (its input is a Rust value). A
    stage with a hook that is not engine-fed (see :class:`TaskStatsHook`) takes the GIL and
    two loop round trips per task: install hooks only where needed.

    Give hooks with ``PipelineBuilder.build(task_hook_factory=...)``.
    """

    @asynccontextmanager
    async def stage_hook(self) -> AsyncIterator[None]:
        """Around the whole stage (default: nothing)."""
        yield

    @abstractmethod
    @asynccontextmanager
    async def task_hook(self, input_item: Any = None) -> AsyncIterator[None]:
        """Around one task; ``input_item`` is the task's input (``None`` for native ops)."""
        yield


@asynccontextmanager
async def _enter_all(cms: Sequence[Any]) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        for cm in cms:
            await stack.enter_async_context(cm)
        yield


def _task_hooks(hooks: Sequence[TaskHook], input_item: Any = None) -> Any:
    cms = [h.task_hook(input_item) for h in hooks]
    for cm in cms:
        if not hasattr(cm, "__aenter__") or not hasattr(cm, "__aexit__"):
            raise ValueError(
                "`task_hook()` must return an async context manager; decorate it with `asynccontextmanager`."
            )
    return _enter_all(cms)


def _stage_hooks(hooks: Sequence[Any]) -> Any:
    cms = [h.stage_hook() for h in hooks]
    for cm in cms:
        if not hasattr(cm, "__aenter__") or not hasattr(cm, "__aexit__"):
            raise ValueError(
                "`stage_hook()` must return an async context manager; decorate it with `asynccontextmanager`."
            )
    return _enter_all(cms)


async def _every(interval: float, done: asyncio.Event, fn: Callable[[], Any]) -> None:
    """Awaits ``fn()`` every ``interval`` seconds until ``done`` is set, on a fixed grid from
    the start: a report that runs late (a busy loop, a slow callback) does not push the later
    ones back, so a run of ``k * interval`` seconds gets ``k`` reports."""
    loop = asyncio.get_running_loop()
    target = loop.time() + interval
    while True:
        try:
            await asyncio.wait_for(done.wait(), timeout=max(0.0, target - loop.time()))
            return
        except asyncio.TimeoutError:
            pass
        now = loop.time()
        while target <= now:  # the next slot still ahead (slots missed entirely are skipped)
            target += interval
        try:
            await fn()
        except Exception:
            _LG.exception("interval stats callback failed")


@asynccontextmanager
async def _reporting(interval: float, fn: Callable[[], Any], name: str) -> AsyncIterator[None]:
    """Awaits ``fn()`` every ``interval`` seconds (never if ``interval <= 0``) while the body
    runs, in a task called ``name``; on exit, waits for a report in progress to end."""
    if interval <= 0:
        yield
        return
    done = asyncio.Event()
    report = create_task(_every(interval, done, fn), name=name)
    try:
        yield
    finally:
        done.set()
        await report


@dataclass
class TaskPerfStats:
    """Task statistics of one stage (SPDL's ``spdl.pipeline.TaskPerfStats``); times in
    seconds. For an engine-fed :class:`TaskStatsHook` the figures are the engine's: every
    task's time (failed ones included) and percentiles within 19%."""

    num_tasks: int
    """Tasks run."""
    num_failures: int
    """Tasks that failed."""
    ave_time: float
    """Mean task time."""
    p90_time: float
    """90th percentile of the task time."""
    p99_time: float
    """99th percentile of the task time."""


class TaskStatsHook(TaskHook):
    """Counts the tasks of a stage and times them; logs the figures at the end of the stage
    and, with ``interval > 0``, passes each interval's figures to
    :meth:`interval_stats_callback` (SPDL's ``spdl.pipeline.TaskStatsHook``).

    Engine-fed: when its class does not override ``task_hook``, spdl_rs does not run it per
    task; the engine's counters of its stage feed ``num_tasks``, ``num_success``,
    ``ave_time`` and the callbacks, so it costs nothing per item. The interval figures are
    the interval's counts and mean; their percentiles are those since the start (the engine
    keeps one histogram per stage). Called per task (by a custom hook list, in a
    ``TaskHook`` subclass that overrides ``task_hook``), it measures like SPDL's.

    ``info``: the stage; ``interval``: seconds between reports (``-1``: none).
    """

    def __init__(self, info: StageInfo, interval: float = -1) -> None:
        self.info = info
        self.interval = interval
        self.num_tasks = 0
        self.num_success = 0
        self.ave_time = 0.0
        self._p90 = 0.0
        self._p99 = 0.0
        self._quantiles = _Quantiles()
        self._lap = (0, 0, 0.0)
        self._lap_quantiles = _Quantiles()
        # Set by the pipeline for an engine-fed hook: () -> spdl_rs StageStats | None.
        self._engine: Callable[[], Any] | None = None
        # What SPDL counts as the stage's tasks, set by the pipeline for an engine-fed hook:
        # "tasks" (op calls), "items_in" (an aggregation: one accumulate per item, plus one
        # flush at the end when ``_flush_task``), "items_out" (a disaggregation: one step per
        # item it yields).
        self._count = "tasks"
        self._flush_task = False
        self._ended = False  # the stage saw the end of a single-pass source

    def _refresh(self) -> None:
        if self._engine is None:
            return
        st = self._engine()
        if st is None:
            return
        if self._count == "items_in":
            tasks = st.items_in + (1 if self._flush_task and self._ended else 0)
        elif self._count == "items_out":
            tasks = st.items_out
        else:
            tasks = st.tasks
        self.num_tasks = tasks
        self.num_success = tasks - st.failures
        self.ave_time = st.task_time.mean
        self._p90 = st.task_time.p90
        self._p99 = st.task_time.p99

    def _percentiles(self, lap: bool) -> tuple[float, float]:
        if self._engine is not None:
            return self._p90, self._p99
        q = self._lap_quantiles if lap else self._quantiles
        return q.value(0.90), q.value(0.99)

    def _total(self) -> TaskPerfStats:
        self._refresh()
        p90, p99 = self._percentiles(lap=False)
        return TaskPerfStats(self.num_tasks, self.num_tasks - self.num_success, self.ave_time, p90, p99)

    @asynccontextmanager
    async def stage_hook(self) -> AsyncIterator[None]:
        """Reports every ``interval`` seconds while the stage runs, and the totals at its end."""
        try:
            async with _reporting(self.interval, self._log_interval_stats, f"{self.info}_report"):
                yield
        finally:
            self._log_stats(self._total())

    @asynccontextmanager
    async def task_hook(self, input_item: Any = None) -> AsyncIterator[None]:
        """Times one task (only when run per task; see the class)."""
        t0 = time.monotonic()
        try:
            yield
        except StopAsyncIteration:
            raise
        except Exception:
            self.num_tasks += 1
            raise
        else:
            took = time.monotonic() - t0
            self.num_tasks += 1
            self.num_success += 1
            self.ave_time += (took - self.ave_time) / self.num_success
            self._quantiles.add(took)
            self._lap_quantiles.add(took)

    def _get_lap_stats(self) -> TaskPerfStats:
        self._refresh()
        tasks, success, ave = self._lap
        d_tasks = max(0, self.num_tasks - tasks)
        d_success = max(0, self.num_success - success)
        d_ave = 0.0
        if d_success > 0:
            d_ave = max(0.0, (self.ave_time * self.num_success - ave * success) / d_success)
        p90, p99 = self._percentiles(lap=True)
        self._lap_quantiles.reset()
        self._lap = (self.num_tasks, self.num_success, self.ave_time)
        return TaskPerfStats(d_tasks, d_tasks - d_success, d_ave, p90, p99)

    async def _log_interval_stats(self) -> None:
        await self.interval_stats_callback(self._get_lap_stats())

    async def interval_stats_callback(self, stats: TaskPerfStats) -> None:
        """Called every ``interval`` seconds with that interval's figures; logs them (INFO,
        logger ``spdl_rs.pipeline``). Override to send them elsewhere."""
        self._log_stats(stats)

    def _log_stats(self, stats: TaskPerfStats) -> None:
        _LG.info(
            "[%s]\tCompleted %5d tasks (%3d failed). Ave task time: %s. P90: %s. P99: %s.",
            self.info,
            stats.num_tasks,
            stats.num_failures,
            _time_str(stats.ave_time),
            _time_str(stats.p90_time),
            _time_str(stats.p99_time),
        )


def _engine_fed(hook: Any) -> bool:
    """Whether ``hook`` is a TaskStatsHook whose per-task part is the engine's."""
    return isinstance(hook, TaskStatsHook) and type(hook).task_hook is TaskStatsHook.task_hook


@dataclass
class QueuePerfStats:
    """Statistics of the queue after a stage (SPDL's ``spdl.pipeline.QueuePerfStats``); times
    in seconds, percentiles within 19% (the engine's histograms)."""

    elapsed: float
    """Duration of the measurement."""
    num_items: int
    """Items that went through the queue."""
    ave_put_time: float
    """Mean time a put waited for room (the stage before was held up)."""
    ave_get_time: float
    """Mean time a get waited for an item (the stage after was starved)."""
    p90_put_time: float
    p99_put_time: float
    p90_get_time: float
    p99_get_time: float
    occupancy_rate: float
    """Share of the time the queue held at least one item (near 1: data always ready)."""

    @property
    def qps(self) -> float:
        """Items per second, ``num_items / elapsed`` (0 when nothing was measured)."""
        return 0.0 if self.elapsed <= 0 else self.num_items / self.elapsed


class AsyncQueue:
    """The queue after a stage (SPDL's ``spdl.pipeline.AsyncQueue``). In spdl_rs the items
    travel through the engine's native queues; this object stands for one of them: its
    ``stage_hook()`` (an async context manager, default: nothing) is entered when the
    pipeline starts and exited when the stage ends. Subclasses may override ``stage_hook``;
    overriding ``get``/``put`` is refused by ``build()`` (``TypeError``), since no item passes
    through a Python queue.

    ``info``: the stage before the queue; ``buffer_size``: its capacity.
    """

    def __init__(self, info: StageInfo, *, buffer_size: int = 1) -> None:
        self.info = info
        self.buffer_size = buffer_size
        # Set by the pipeline: () -> spdl_rs QueueStats | None.
        self._engine: Callable[[], Any] | None = None
        self._items: asyncio.Queue | None = None  # made by the first put/get

    def _queue(self) -> asyncio.Queue:
        if self._items is None:
            self._items = asyncio.Queue(maxsize=max(0, self.buffer_size))
        return self._items

    async def put(self, item: Any) -> None:
        """Puts ``item``, waiting for room (an :class:`asyncio.Queue` of ``buffer_size``).
        Items pass through it only where a stage runs in Python: a ``to()`` region's stage
        in a worker process puts each result here and takes it back with :meth:`get`."""
        await self._queue().put(item)

    async def get(self) -> Any:
        """Takes the oldest item, waiting for one (see :meth:`put`)."""
        return await self._queue().get()

    @asynccontextmanager
    async def stage_hook(self) -> AsyncIterator[None]:
        """Around the life of the stage (default: nothing)."""
        yield


class StatsQueue(AsyncQueue):
    """An :class:`AsyncQueue` that reports :class:`QueuePerfStats` every ``interval`` seconds
    to :meth:`interval_stats_callback` and logs the totals at the end of the stage (SPDL's
    ``spdl.pipeline.StatsQueue``). The figures are the engine's queue meters (interval
    percentiles: since the start)."""

    def __init__(self, info: StageInfo, *, buffer_size: int = 1, interval: float = -1) -> None:
        super().__init__(info, buffer_size=buffer_size)
        self.interval = interval
        self._lap: Any = None
        self._lap_t = time.monotonic()

    def _stats(self, st: Any, base: Any, elapsed: float) -> QueuePerfStats:
        n = st.items - (base.items if base else 0)

        def mean(attr: str) -> float:
            total = getattr(st, attr) * st.items - (getattr(base, attr) * base.items if base else 0.0)
            return max(0.0, total / n) if n > 0 else 0.0

        return QueuePerfStats(
            elapsed=elapsed,
            num_items=n,
            ave_put_time=mean("mean_put_wait"),
            ave_get_time=mean("mean_get_wait"),
            p90_put_time=st.p90_put_wait,
            p99_put_time=st.p99_put_wait,
            p90_get_time=st.p90_get_wait,
            p99_get_time=st.p99_get_wait,
            occupancy_rate=st.occupancy_rate,
        )

    def _final(self) -> QueuePerfStats | None:
        st = self._engine() if self._engine else None
        return None if st is None else self._stats(st, None, st.elapsed)

    def _get_lap_stats(self) -> QueuePerfStats | None:
        st = self._engine() if self._engine else None
        if st is None:
            return None
        now = time.monotonic()
        out = self._stats(st, self._lap, now - self._lap_t)
        self._lap, self._lap_t = st, now
        return out

    @asynccontextmanager
    async def stage_hook(self) -> AsyncIterator[None]:
        """Reports every ``interval`` seconds while the stage runs, and the totals at its end."""
        self._lap_t = time.monotonic()
        try:
            async with _reporting(self.interval, self._log_interval_stats, f"{self.info}_queue_report"):
                yield
        finally:
            if (final := self._final()) is not None:
                self._log_stats(final)

    async def _log_interval_stats(self) -> None:
        if (stats := self._get_lap_stats()) is not None:
            await self.interval_stats_callback(stats)

    async def interval_stats_callback(self, stats: QueuePerfStats) -> None:
        """Called every ``interval`` seconds with that interval's figures; logs them (INFO,
        logger ``spdl_rs.pipeline``). Override to send them elsewhere."""
        self._log_stats(stats)

    def _log_stats(self, stats: QueuePerfStats) -> None:
        _LG.info(
            "[%s]\tProcessed %5d items in %s (QPS: %6.1f) Ave wait time: put: %s, get (by next stage): %s. "
            "P90: put: %s, get: %s. P99: put: %s, get: %s. Occupancy rate: %d%%",
            f"{self.info}_queue",
            stats.num_items,
            _time_str(stats.elapsed),
            stats.qps,
            _time_str(stats.ave_put_time),
            _time_str(stats.ave_get_time),
            _time_str(stats.p90_put_time),
            _time_str(stats.p90_get_time),
            _time_str(stats.p99_put_time),
            _time_str(stats.p99_get_time),
            100 * stats.occupancy_rate,
        )


def _check_queue_class(queue_class: Any, *, items: bool = True) -> None:
    """Raises ``TypeError`` for a queue class spdl_rs cannot honour: not a class or factory,
    or (``items=True``) one that overrides how items are put or taken (in the main process
    they never pass through Python; in a ``to()`` region's worker they do)."""
    if not isinstance(queue_class, type):
        # SPDL also takes a factory (e.g. functools.partial of a class); what it makes is
        # checked when the pipeline is built.
        if not callable(queue_class):
            raise TypeError(f"queue_class must be a subclass of spdl_rs.pipeline.AsyncQueue, got {queue_class!r}")
        return
    if not issubclass(queue_class, AsyncQueue):
        raise TypeError(f"queue_class must be a subclass of spdl_rs.pipeline.AsyncQueue, got {queue_class.__name__}")
    if not items:
        return
    for cls in queue_class.__mro__:
        if cls in (AsyncQueue, StatsQueue, object):
            continue
        for name in ("get", "put", "get_nowait", "put_nowait", "_put", "_get"):
            if name in vars(cls):
                raise TypeError(
                    f"queue_class={queue_class.__name__} overrides {name}(): spdl_rs's queues are native and "
                    "items never pass through a Python queue (only in a to() region's workers); override "
                    "stage_hook()/interval_stats_callback() only"
                )


def _is_quiet(obj: Any) -> bool:
    """Whether a stage hook or queue needs no loop: SPDL's default classes without periodic
    reports, whose only effect is the final log (written without a loop)."""
    if type(obj) is TaskStatsHook or type(obj) is StatsQueue:
        return not (obj.interval > 0)
    return type(obj) is AsyncQueue
