"""Config-defined pipelines: ``build_pipeline(cfg)`` and ``config_to_builder`` (SPDL 0.8's
``spdl.pipeline.build_pipeline``), and the ``Merge`` source, the one config stage that
becomes a source (the lowering of regions and path variants: :mod:`._regions`).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import _hooks
from ._builder import PipelineBuilder
from ._regions import _expand_path_variants
from ._stage import MaxFailuresArg, Stage
from .defs import (
    AggregateConfig,
    DisaggregateConfig,
    MergeConfig,
    PathVariantsConfig,
    PipeConfig,
    PipelineConfig,
    PlacementConfig,
    _PipeType,
)

__all__ = ["build_pipeline"]


def build_pipeline(
    cfg: PipelineConfig[Any],
    /,
    *,
    num_threads: int,
    max_failures: MaxFailuresArg = -1,
    report_stats_interval: float = -1,
    queue_class: Any = None,
    task_hook_factory: Callable[[Any], list[Any]] | None = None,
    stage_id: int = 0,
    background_tasks: Sequence[Callable[[], Any]] | None = None,
    use_thread_output_queue: bool = False,
    prefetch_epochs: bool = False,
) -> Any:
    """Builds a :class:`~spdl_rs.pipeline.Pipeline` from a
    :class:`~spdl_rs.pipeline.defs.PipelineConfig` (SPDL's ``spdl.pipeline.build_pipeline``).

    The keywords are those of ``PipelineBuilder.build``; ``background_tasks``: factories of
    :class:`~spdl_rs.pipeline.BackgroundTask` run while the pipeline runs, after the global
    defaults (``config.set_default_background_tasks``), which always run (as SPDL). Sub-pipelines of a
    :class:`~spdl_rs.pipeline.defs.MergeConfig` are built with the same ``num_threads``.
    Building from a config gives the same pipeline as building its builder: the same items.

    Raises ``TypeError`` if ``cfg`` is not a ``PipelineConfig``, and what
    ``PipelineBuilder.build`` raises.
    """
    # `PipelineBuilder.build`'s keywords: the parameters (the only locals yet) but two.
    build_args = dict(locals())
    del build_args["cfg"], build_args["background_tasks"]
    if not isinstance(cfg, PipelineConfig):
        raise TypeError(f"build_pipeline takes a PipelineConfig, got {type(cfg).__name__}")
    if background_tasks is not None and not all(callable(t) for t in background_tasks):
        raise TypeError("background_tasks must be a sequence of callables (BackgroundTask factories)")
    builder = config_to_builder(cfg, num_threads=num_threads)
    builder._background_tasks = background_tasks
    builder._from_config = True  # SPDL checks a hand-built config's regions as it fuses them
    return builder.build(**build_args)


################################################################################
# config -> builder (builder -> config: _stage.builder_to_config)
################################################################################
def config_to_builder(cfg: PipelineConfig[Any], *, num_threads: int = 1) -> PipelineBuilder:
    """A :class:`PipelineBuilder` with ``cfg``'s source, stages and sink; a ``Merge`` source
    becomes a :class:`_MergedSource` whose sub-pipelines get ``num_threads``."""
    b: PipelineBuilder = PipelineBuilder()
    if isinstance(cfg.src, MergeConfig):
        if len(modes := set(_continuous_modes(cfg))) > 1:
            raise ValueError(
                "Mixed continuous mode is not supported. All sources in a pipeline "
                "(including merged sub-pipelines) must have the same continuous setting."
            )
        b.add_source(_MergedSource(cfg.src, num_threads))
    else:
        b.add_source(cfg.src.source, continuous=cfg.src.continuous)
    for p in cfg.pipes:
        if isinstance(p, PipeConfig):
            a = p._args
            order = "input" if p._type == _PipeType.OrderedPipe else "completion"
            b.pipe(
                a.op,
                concurrency=a.concurrency,
                executor=a.executor,
                name=p.name,
                output_order=order,
                max_failures=p._max_failures,
            )
        elif isinstance(p, AggregateConfig):
            b.aggregate(p.op, drop_last=p.drop_last)
            b._stages[-1].name = p.name
        elif isinstance(p, DisaggregateConfig):
            b.disaggregate()
            b._stages[-1].name = p.name
        elif isinstance(p, PathVariantsConfig):
            b._stages.append(Stage(kind="path_variants", name=p.name, config=p))
        elif isinstance(p, PlacementConfig):
            b.to(p.target, buffer_size=p.buffer_size)
            b._stages[-1].name = p.name
        else:  # PipelineConfig checked the types already
            raise TypeError(f"unknown stage config {type(p).__name__}")
    b.add_sink(cfg.sink.buffer_size)
    return b


def _continuous_modes(cfg: PipelineConfig[Any]) -> Iterator[bool]:
    """The ``continuous`` flag of every source of ``cfg``, merged sub-pipelines' included."""
    if isinstance(cfg.src, MergeConfig):
        for sub in cfg.src.pipeline_configs:
            yield from _continuous_modes(sub)
    else:
        yield bool(cfg.src.continuous)


################################################################################
# Merge
################################################################################
async def _pass_through(name: str, input_queues: Sequence[asyncio.Queue], output_queue: asyncio.Queue) -> None:
    """The default merge: every item of every input as it arrives."""

    async def one(q: asyncio.Queue) -> None:
        while not _hooks.is_eof(item := await q.get()):
            await output_queue.put(item)

    await asyncio.gather(*(one(q) for q in input_queues))


async def _cancel_all() -> None:
    """Cancels and awaits every other task of the running loop (before it stops)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _stats_stage_count(cfg: PipelineConfig[Any]) -> int:
    """The stage ids a sub-pipeline of a Merge takes in SPDL's stats: its source (or merge,
    with that merge's sub-pipelines), then each engine stage of its pipes."""
    n = 1
    if isinstance(cfg.src, MergeConfig):
        n += sum(_stats_stage_count(c) for c in cfg.src.pipeline_configs)
    stages = config_to_builder(cfg)._stages
    return n + sum(1 for st in _expand_path_variants(stages) if st.kind != "placement")


class _MergedSource:
    """The source a :class:`MergeConfig` becomes: each ``iter()`` builds and starts the
    sub-pipelines, and yields what the merge op puts into its output queue. Feeder threads
    move each sub-pipeline's items into the op's input queues (bounded: back-pressure); an
    asyncio loop in its own thread runs the op. A sub-pipeline that fails makes the iterator
    raise that failure."""

    def __init__(self, config: MergeConfig, num_threads: int) -> None:
        self.config = config
        self.num_threads = num_threads
        # (pipeline_id, first stage id) of the sub-pipelines' stats, set by the pipeline that
        # merges them (as SPDL numbers them within it); None: numbered on their own.
        self._stats_ids: tuple[int, int] | None = None
        # (close, closed) of the iterations not closed yet; close() is idempotent.
        self._closers: list[tuple[Callable[[], None], threading.Event]] = []

    def _merged_shutdown(self) -> None:
        """Stops the sub-pipelines and threads of every open iteration (the pipeline calls it
        when it stops, so that this does not wait for the iterator's garbage collection)."""
        for close, closed in list(self._closers):
            close()  # returns at once if another thread is closing it
            closed.wait()

    def _num_stats_stages(self) -> int:
        """The stage ids the sub-pipelines take in the merging pipeline's stats."""
        return sum(_stats_stage_count(c) for c in self.config.pipeline_configs)

    def _build_sub(self, cfg: PipelineConfig[Any], stage_id: int) -> Any:
        b = config_to_builder(cfg, num_threads=self.num_threads)
        if self._stats_ids is not None:
            b._stats_ids = (self._stats_ids[0], stage_id)
        return b.build(num_threads=self.num_threads)

    def __iter__(self) -> Iterator[Any]:
        first = self._stats_ids[1] if self._stats_ids is not None else 0
        pipelines = []
        for c in self.config.pipeline_configs:
            pipelines.append(self._build_sub(c, first))
            first += _stats_stage_count(c)
        op = self.config.op or _pass_through
        loop = asyncio.new_event_loop()
        loop_thread = threading.Thread(target=loop.run_forever, name="spdl_rs_merge", daemon=True)
        loop_thread.start()
        stop = threading.Event()
        errors: list[BaseException] = []
        done = object()
        out: queue.Queue = queue.Queue(maxsize=2)

        async def make_queues() -> list[asyncio.Queue]:
            return [asyncio.Queue(maxsize=max(1, c.sink.buffer_size)) for c in self.config.pipeline_configs]

        inputs = asyncio.run_coroutine_threadsafe(make_queues(), loop).result()

        def put_out(item: Any) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    pass
            return False

        class _Out:
            async def put(self, item: Any) -> None:
                ok = await asyncio.to_thread(put_out, item)
                if not ok:
                    raise asyncio.CancelledError

            def put_nowait(self, item: Any) -> None:
                if not put_out(item):
                    raise asyncio.CancelledError

        def feed(p: Any, q: asyncio.Queue) -> None:
            try:
                for item in p:
                    fut = asyncio.run_coroutine_threadsafe(q.put(item), loop)
                    while not stop.is_set():
                        try:
                            fut.result(timeout=0.1)
                            break
                        except TimeoutError:
                            continue
                    if stop.is_set():
                        fut.cancel()
                        return
            except BaseException as e:  # a failed sub-pipeline fails the merged source
                errors.append(e)
                put_out(done)
                return
            asyncio.run_coroutine_threadsafe(q.put(_hooks._EOF), loop)

        async def run_op() -> None:
            try:
                await op("merge", inputs, _Out())
            except asyncio.CancelledError:
                pass
            except BaseException as e:
                errors.append(e)
            finally:
                try:  # never blocks: the reader also watches op_fut
                    out.put_nowait(done)
                except queue.Full:
                    pass

        feeders = [threading.Thread(target=feed, args=(p, q), daemon=True) for p, q in zip(pipelines, inputs)]
        for t in feeders:
            t.start()
        op_fut = asyncio.run_coroutine_threadsafe(run_op(), loop)
        owner = threading.get_ident()
        closing = threading.Lock()
        started: list[bool] = []
        closed = threading.Event()

        def close() -> None:
            with closing:
                if started:
                    return
                started.append(True)
                stop.set()
            for p in pipelines:
                p.stop()
            for t in feeders:
                t.join()
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result()
            asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            loop_thread.join()
            loop.close()
            self._closers.remove((close, closed))
            closed.set()

        self._closers.append((close, closed))
        try:
            while True:
                try:
                    item = out.get(timeout=0.1)
                except queue.Empty:
                    if op_fut.done() and out.empty():
                        break
                    continue
                if item is done:
                    break
                yield item
            if errors:
                raise errors[0]
        finally:
            stop.set()
            if threading.get_ident() == owner:
                close()
            else:
                # Finalised on another thread (a deferred release can run on any thread that
                # takes the GIL, even one of the threads close() joins): close in the background.
                threading.Thread(target=close, name="spdl_rs_merge_close", daemon=True).start()

    def __repr__(self) -> str:
        return f"<merged source of {len(self.config.pipeline_configs)} pipelines>"
