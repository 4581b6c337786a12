"""Config-defined pipelines: ``build_pipeline(cfg)``, ``PipelineBuilder.get_config()`` and
the lowering of what the engine has no stage for (``Merge`` sources, ``PathVariants``,
``PlacementConfig`` regions) into what it has (SPDL 0.8's ``spdl.pipeline.build_pipeline``).
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from fractions import Fraction
from typing import Any

from . import _hooks
from ._misc import op_kind
from ._variants import lower_path_variants
from .defs import (
    AggregateConfig,
    Aggregator,
    Collate,
    DisaggregateConfig,
    InterpreterPoolExecutorConfig,
    MergeConfig,
    PathVariantsConfig,
    PipeConfig,
    PipelineConfig,
    PlacementConfig,
    SinkConfig,
    SourceConfig,
    _MainProcess,
    _PipeArgs,
    _PipeType,
)

__all__ = ["build_pipeline"]


def build_pipeline(
    cfg: PipelineConfig[Any],
    /,
    *,
    num_threads: int,
    max_failures: int | Fraction = -1,
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
# builder <-> config
################################################################################
def config_to_builder(cfg: PipelineConfig[Any], *, num_threads: int = 1) -> Any:
    """A :class:`PipelineBuilder` with ``cfg``'s source, stages and sink; a ``Merge`` source
    becomes a :class:`_MergedSource` whose sub-pipelines get ``num_threads``."""
    from ._pipeline import PipelineBuilder

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
            b._stages[-1]["name"] = p.name
        elif isinstance(p, DisaggregateConfig):
            b.disaggregate()
            b._stages[-1]["name"] = p.name
        elif isinstance(p, PathVariantsConfig):
            b._stages.append({"kind": "path_variants", "config": p, "name": p.name})
        elif isinstance(p, PlacementConfig):
            b.to(p.target, buffer_size=p.buffer_size)
            b._stages[-1]["name"] = p.name
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


def builder_to_config(b: Any) -> PipelineConfig[Any]:
    """The :class:`PipelineConfig` of a builder whose source and sink are set."""
    src = b._source
    src_cfg = src.config if isinstance(src, _MergedSource) else SourceConfig(src, continuous=b._continuous)
    pipes: list[Any] = []
    for st in b._stages:
        kind = st["kind"]
        if kind == "aggregate":
            op = st["op"]
            agg = op if isinstance(op, Aggregator) else Collate(int(op))
            pipes.append(AggregateConfig(name=st["name"], op=agg, drop_last=st["drop_last"]))
        elif kind == "disaggregate":
            pipes.append(DisaggregateConfig(name=st["name"]))
        elif kind == "path_variants":
            pipes.append(st["config"])
        elif kind == "placement":
            pipes.append(PlacementConfig(st["target"], name=st["name"], buffer_size=st["buffer_size"]))
        else:
            order = _PipeType.OrderedPipe if st["output_order"] == "input" else _PipeType.Pipe
            args = _PipeArgs(op=st["op"], executor=st["executor"], concurrency=st["concurrency"])
            pipes.append(PipeConfig(name=st["name"], _type=order, _args=args, _max_failures=st.get("max_failures")))
    sink = SinkConfig(b._sink_size if b._sink_size is not None else 3)  # build()'s default sink
    return PipelineConfig(src=src_cfg, pipes=tuple(pipes), sink=sink)


################################################################################
# lowering: placement regions and path variants
################################################################################
def lower_stages(
    stages: list[dict[str, Any]], interval: float = -1
) -> tuple[list[dict[str, Any]], list[Executor]]:
    """The stage dicts the engine runs, and the executors made for placement regions (the
    pipeline shuts them down when it stops).

    In a worker-pool region, each function or generator stage without its own ``executor``
    runs its items in the region's pool one by one. Transfers of several items, as SPDL's
    ``buffer_size`` on the markers: with ``buffer_size`` ``n`` above 1 on the marker that
    opens the region, the function and generator stages that directly follow it are fused
    into one chain run in a worker on transfers of up to ``n`` items (gathered in this
    process, the last one of an epoch shorter), and the results of each transfer come back
    together; with ``buffer_size`` ``m`` above 1 on the marker that closes the region, the
    function and generator stages that directly precede it (and are not in the opening
    chain) are fused the same way on transfers of up to ``m`` items, so their results come
    back ``m`` items' worth at a time. A chain's intermediate values stay in the worker, and
    an op that raises fails the items of its transfer (one failure counted). A marker between
    two regions sizes both sides of its handoff (as SPDL).
    """
    _validate_regions(stages, subinterpreter=False)
    out: list[dict[str, Any]] = []
    executors: list[Executor] = []
    region: Executor | None = None
    open_size = 1
    pending: list[dict[str, Any]] = []  # the stages of the open worker-pool region
    try:
        for st in _expand_path_variants(stages):
            if st["kind"] != "placement":
                (out if region is None else pending).append(st)
                continue
            if region is not None:
                out.extend(_lower_region(pending, region, open_size, st["buffer_size"], interval))
                pending = []
            target = st["target"]
            if isinstance(target, _MainProcess):
                region = None
            else:
                region = target._make()
                executors.append(region)
                open_size = st["buffer_size"]
        assert region is None, "_validate_regions rejects an open region"
    except BaseException:
        for ex in executors:
            ex.shutdown(wait=False, cancel_futures=True)
        raise
    return out, executors


def _fusable(st: dict[str, Any]) -> bool:
    return st["kind"] in ("func", "gen") and st.get("executor") is None


def _lower_region(
    stages: list[dict[str, Any]], pool: Executor, n: int, m: int, interval: float = -1
) -> list[dict[str, Any]]:
    """The engine stages of one worker-pool region opened with ``buffer_size`` ``n`` and closed
    with ``m`` (see :func:`lower_stages`); ``interval``: the workers' stats reports (SPDL
    passes the pipeline's ``report_stats_interval`` to its worker pipelines)."""
    lead = 0
    if n > 1:
        while lead < len(stages) and _fusable(stages[lead]):
            lead += 1
    tail = len(stages)
    if m > 1:
        while tail > lead and _fusable(stages[tail - 1]):
            tail -= 1
    region_id = next(_REGION_IDS)
    stages = [
        dict(st, op=_WorkerStage(st["op"], st["kind"] == "gen", f"{region_id}:{i}", st["name"], st["concurrency"], interval))
        if _fusable(st)
        else st
        for i, st in enumerate(stages)
    ]
    out: list[dict[str, Any]] = []
    if lead:
        out.extend(_fused_chain(stages[:lead], pool, n))
    out.extend(dict(st, executor=pool) if _fusable(st) else st for st in stages[lead:tail])
    if tail < len(stages):
        out.extend(_fused_chain(stages[tail:], pool, m))
    return out


_REGION_IDS = itertools.count()


class _WorkerStage:
    """A region stage's op as it runs in a worker process: inside the task hooks and past the
    output queue that the worker's defaults make (``config.get_default_hook_class()``,
    ``config.get_default_queue_class()``, as set there by the region's ``initializer``), as
    SPDL runs a region as a nested pipeline in each worker. Each worker makes its hooks and
    queue once per stage, enters their ``stage_hook`` on the stage's first item and exits it
    when the worker exits. Pickles as its op and the stage's identity. A generator op's
    outputs come back as one list."""

    def __init__(
        self, op: Callable[[Any], Any], gen: bool, key: str, name: str, concurrency: int, interval: float = -1
    ) -> None:
        self.op = op
        self.interval = interval
        self.gen = gen
        self.key = key
        self.name = name
        self.concurrency = concurrency

    def __call__(self, item: Any) -> Any:
        state = _WORKER_STAGES.get(self.key)
        if state is None:
            state = _WORKER_STAGES[self.key] = _WorkerStageState(self)
        return state.run(self.op, self.gen, item)


#: The per-process state of each region stage run in this (worker) process, by stage key.
_WORKER_STAGES: dict[str, "_WorkerStageState"] = {}


class _WorkerStageState:
    """One region stage's hooks and queue in one worker process (see :class:`_WorkerStage`)."""

    def __init__(self, stage: _WorkerStage) -> None:
        from . import config
        from ._hooks import StageInfo
        from ._pipeline import _is_quiet

        region, index = stage.key.split(":")
        conc = stage.concurrency if stage.concurrency > 1 else None
        info = StageInfo(int(region), str(int(index) + 1), stage.name, conc)
        hook_cls = config.get_default_hook_class()
        self.hooks = [hook_cls(info, interval=stage.interval)] if hook_cls is not None else []
        queue_cls = config.get_default_queue_class()
        try:
            self.queue = queue_cls(info, buffer_size=2, interval=stage.interval)
        except TypeError:  # a queue class without SPDL's `interval`
            self.queue = queue_cls(info, buffer_size=2)
        # SPDL's default classes with no periodic report only log their totals: nothing to run
        # per item (and no loop) for them.
        self.quiet = all(_is_quiet(o) for o in [*self.hooks, self.queue])
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stack: Any = None

    def _enter(self) -> None:
        import multiprocessing.util

        from ._hooks import _stage_hooks

        self.loop = asyncio.new_event_loop()
        stack = _stage_hooks([*self.hooks, self.queue])
        self.loop.run_until_complete(stack.__aenter__())
        self.stack = stack
        # Run when the worker process exits (a pool worker ends through multiprocessing's
        # exit function, which runs these, not atexit's).
        multiprocessing.util.Finalize(None, self._exit, exitpriority=10)

    def _exit(self) -> None:
        if self.loop is None or self.stack is None:
            return
        try:
            self.loop.run_until_complete(self.stack.__aexit__(None, None, None))
        finally:
            self.stack = None
            self.loop.close()

    def run(self, op: Callable[[Any], Any], gen: bool, item: Any) -> Any:
        if self.quiet:
            return list(op(item)) if gen else op(item)
        if self.loop is None:
            self._enter()
        assert self.loop is not None
        return self.loop.run_until_complete(self._one(op, gen, item))

    async def _one(self, op: Callable[[Any], Any], gen: bool, item: Any) -> Any:
        from ._hooks import _task_hooks

        out = [] if gen else None
        async with _task_hooks(self.hooks, item):
            out = list(op(item)) if gen else op(item)
        if out is None:
            return None
        await self.queue.put(out)
        return await self.queue.get()


def _expand_path_variants(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``stages`` with each ``PathVariants`` replaced by its engine stages: a per-item one by
    its router, path and merge stages (:mod:`._variants`), a batched one by one stage that
    runs its paths inline."""
    out: list[dict[str, Any]] = []
    for st in stages:
        if st["kind"] != "path_variants":
            out.append(st)
        elif st["config"].batched:
            out.append(_path_variants_stage(st["config"]))
        else:
            out.extend(lower_path_variants(st["config"]))
    return out


def _has_ordered_pipe(st: dict[str, Any]) -> bool:
    if st["kind"] == "path_variants":
        return any(
            isinstance(c, PipeConfig) and c._type == _PipeType.OrderedPipe
            or isinstance(c, PathVariantsConfig) and _has_ordered_pipe({"kind": "path_variants", "config": c})
            for path in st["config"].paths
            for c in path
        )
    return st.get("output_order") == "input"


def _validate_regions(stages: list[dict[str, Any]], *, subinterpreter: bool = True) -> None:
    """SPDL's checks of ``to()`` regions, run by ``get_config()`` and ``build()``: no empty
    region, no ``output_order="input"`` stage inside one, nor in a ``path_variants`` path inside
    one (workers finish in any order), every region closed before the sink (``ValueError``); a
    subinterpreter region needs Python 3.14 (``RuntimeError``; with ``subinterpreter=False``
    left to the region's executor, whose message is that of SPDL's ``build_pipeline``)."""
    in_region = has_stage = False
    for st in stages:
        if st["kind"] == "placement":
            if in_region and not has_stage:
                raise ValueError(
                    "An empty `to(...)` region has no stages. Add stages before the next `.to(...)`, "
                    "or remove the redundant marker."
                )
            in_region, has_stage = not isinstance(st["target"], _MainProcess), False
            subinterp = isinstance(st["target"], InterpreterPoolExecutorConfig)
            if subinterpreter and subinterp and sys.version_info < (3, 14):
                raise RuntimeError(
                    "A subinterpreter region (`to(InterpreterPoolExecutorConfig(...))`) requires Python 3.14 "
                    f"or later. Current version: {sys.version_info.major}.{sys.version_info.minor}"
                )
        elif in_region:
            has_stage = True
            if _has_ordered_pipe(st):
                raise ValueError(
                    "A stage with `output_order='input'` cannot run inside a `to()` region: input order "
                    "cannot be preserved across the region's independent workers."
                )
    if in_region and not has_stage:
        raise ValueError(
            "An empty `to(...)` region has no stages. Add stages before closing it, or remove the redundant marker."
        )
    if in_region:
        raise ValueError(
            "A `to()` execution region must be closed with `to(MAIN_PROCESS)` before `add_sink()`. "
            "The sink always runs in the main process."
        )


def _fused_chain(stages: list[dict[str, Any]], pool: Executor | None, size: int) -> list[dict[str, Any]]:
    """Stages running ``stages`` in ``pool`` on transfers of up to ``size`` items: a grouping
    stage here, then one generator stage whose op (:class:`_Chain`, pickled to the worker)
    runs every op on the transfer's items and returns all the outputs."""
    name = "+".join(st["name"] for st in stages)
    limits = {repr(st.get("max_failures")): st for st in stages if st.get("max_failures") is not None}
    if len(limits) > 1:
        raise NotImplementedError(
            f"stages {name} are fused into one transfer (PlacementConfig buffer_size={size}) but have different "
            "max_failures; give them the same value"
        )
    limit = next(iter(limits.values()), {"budget": None, "max_failures": None})
    group = {"kind": "aggregate", "op": size, "name": f"to_worker({size})", "drop_last": False}
    run = {
        "kind": "gen",
        "op": _Chain([(st["op"], st["kind"] == "gen") for st in stages]),
        "name": name,
        "concurrency": max(st["concurrency"] for st in stages),
        "output_order": "completion",  # no input-ordered stage in a region (_validate_regions)
        "budget": limit["budget"],
        "max_failures": limit["max_failures"],
        "executor": pool,
    }
    return [group, run]


class _Chain:
    """Runs a chain of function (``None``: dropped) and generator ops over a list of items in
    a worker; returns the outputs of the last op, in order. Pickles as its ops."""

    def __init__(self, ops: list[tuple[Callable[[Any], Any], bool]]) -> None:
        self.ops = ops

    def __call__(self, items: list[Any]) -> list[Any]:
        values = items
        for op, is_gen in self.ops:
            nxt: list[Any] = []
            for v in values:
                if is_gen:
                    nxt.extend(op(v))
                elif (r := op(v)) is not None:
                    nxt.append(r)
            values = nxt
        return values


_THREAD_LOOP = threading.local()


def _run_async(op: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``op`` (an async function, or an async generator function: then the list of what it
    yields) as a plain function that runs it to completion on the calling thread's own event
    loop. The paths of a batched ``PathVariants`` run inline in one engine thread, which has
    no loop of its own."""
    is_gen = op_kind(op) == "asyncgen"

    async def collect(value: Any) -> list[Any]:
        return [v async for v in op(value)]

    def call(value: Any) -> Any:
        loop = getattr(_THREAD_LOOP, "loop", None)
        if loop is None:
            loop = _THREAD_LOOP.loop = asyncio.new_event_loop()
        return loop.run_until_complete(collect(value) if is_gen else op(value))

    call.__name__ = getattr(op, "__name__", "op")
    return call


def _path_variants_stage(cfg: PathVariantsConfig[Any]) -> dict[str, Any]:
    paths: list[_Chain] = []
    conc = 1
    for i, path in enumerate(cfg.paths):
        ops = []
        for p in path:
            if isinstance(p, DisaggregateConfig):  # a list becomes its elements
                ops.append((iter, True))
                continue
            if isinstance(p, PathVariantsConfig):  # nested routing: its route, as a generator
                inner = _path_variants_stage(p)
                ops.append((inner["op"], True))
                conc = max(conc, inner["concurrency"])
                continue
            if isinstance(p, AggregateConfig):
                # SPDL recombines a batch by reading one sub-batch from every path in lockstep;
                # an Aggregate emits on its own rhythm, so sub-batches would be mis-paired or
                # its last group dropped at the epoch's end. Refused rather than lost.
                raise NotImplementedError(
                    f"PathVariants path {i}: AggregateConfig {p.name!r} inside a batched path cannot be "
                    "recombined with the other paths' sub-batches; aggregate before or after the "
                    "path_variants stage, or use batched=False"
                )
            if not isinstance(p, PipeConfig):
                raise NotImplementedError(
                    f"PathVariants path {i}: {type(p).__name__} inside a path is not supported by spdl_rs "
                    "(Pipe stages, Disaggregate and nested PathVariants are)"
                )
            op, kind = p._args.op, op_kind(p._args.op)
            if kind in ("async", "asyncgen"):
                ops.append((_run_async(op), kind == "asyncgen"))
            else:
                ops.append((op, kind == "gen"))
            conc = max(conc, p._args.concurrency)
        paths.append(_Chain(ops))
    router, n, batched = cfg.router, len(paths), cfg.batched
    if op_kind(router) == "async":
        router = _run_async(router)

    def run_path(idx: int, value: Any) -> list[Any]:
        return paths[idx]([value])

    def check(idx: Any) -> int:
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
            raise ValueError(f"router returned {idx!r}; expected an int in [0, {n})")
        return idx

    def route(item: Any) -> Iterator[Any]:
        if not batched:
            yield from run_path(check(router(item)), item)
            return
        batch = list(item)
        idxs = list(router(batch))
        if len(idxs) != len(batch):
            raise ValueError(f"router returned {len(idxs)} indices for a batch of {len(batch)}")
        subs: list[list[Any]] = [[] for _ in range(n)]
        for v, idx in zip(batch, idxs):
            subs[check(idx)].append(v)
        merged: list[Any] = []
        for p, sub in enumerate(subs):
            for out in run_path(p, sub):
                merged.extend(out)
        if merged:  # as SPDL, a batch every path emptied is not passed on
            yield merged

    route.__name__ = cfg.name
    return {
        "kind": "gen",
        "op": route,
        "name": cfg.name,
        "concurrency": conc,
        "output_order": "completion",
        "budget": None,
        "max_failures": None,
        "executor": None,
    }


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
    return n + sum(1 for st in _expand_path_variants(stages) if st["kind"] != "placement")


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
