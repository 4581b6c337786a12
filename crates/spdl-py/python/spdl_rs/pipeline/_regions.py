"""The lowering of what the engine has no stage for into what it has: ``to()`` regions
(``PlacementConfig`` markers: worker-pool stages, fused transfers) and ``PathVariants``
(:mod:`._variants`), with SPDL 0.8's checks of the regions. Works on :class:`._stage.Stage`
records; used by the builder (``build()``, ``get_config()``) and the profiler.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from concurrent.futures import Executor
from typing import Any

from . import config
from ._hooks import StageInfo, _is_quiet, _stage_hooks, _task_hooks
from ._stage import Stage
from ._variants import _Chain, lower_path_variants, path_variants_stage
from .defs import (
    InterpreterPoolExecutorConfig,
    PathVariantsConfig,
    PipeConfig,
    _MainProcess,
    _PipeType,
)

__all__ = ["lower_stages", "validate_regions"]


def lower_stages(
    stages: list[Stage], interval: float = -1
) -> tuple[list[Stage], list[Executor]]:
    """The stages the engine runs, and the executors made for placement regions (the
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
    validate_regions(stages, subinterpreter=False)
    out: list[Stage] = []
    executors: list[Executor] = []
    region: Executor | None = None
    open_size = 1
    pending: list[Stage] = []  # the stages of the open worker-pool region
    try:
        for st in _expand_path_variants(stages):
            if st.kind != "placement":
                (out if region is None else pending).append(st)
                continue
            if region is not None:
                out.extend(_lower_region(pending, region, open_size, st.buffer_size, interval))
                pending = []
            target = st.target
            if isinstance(target, _MainProcess):
                region = None
            else:
                region = target._make()
                executors.append(region)
                open_size = st.buffer_size
        assert region is None, "validate_regions rejects an open region"
    except BaseException:
        for ex in executors:
            ex.shutdown(wait=False, cancel_futures=True)
        raise
    return out, executors


def _fusable(st: Stage) -> bool:
    return st.kind in ("func", "gen") and st.executor is None


def _lower_region(
    stages: list[Stage], pool: Executor, n: int, m: int, interval: float = -1
) -> list[Stage]:
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
        st.with_(op=_WorkerStage(st.op, st.kind == "gen", f"{region_id}:{i}", st.name, st.concurrency, interval))
        if _fusable(st)
        else st
        for i, st in enumerate(stages)
    ]
    out: list[Stage] = []
    if lead:
        out.extend(_fused_chain(stages[:lead], pool, n))
    out.extend(st.with_(executor=pool) if _fusable(st) else st for st in stages[lead:tail])
    if tail < len(stages):
        out.extend(_fused_chain(stages[tail:], pool, m))
    return out


_REGION_IDS = itertools.count()


@dataclass(eq=False)  # compared and hashed by identity, as the op it stands for
class _WorkerStage:
    """A region stage's op as it runs in a worker process: inside the task hooks and past the
    output queue that the worker's defaults make (``config.get_default_hook_class()``,
    ``config.get_default_queue_class()``, as set there by the region's ``initializer``), as
    SPDL runs a region as a nested pipeline in each worker. Each worker makes its hooks and
    queue once per stage, enters their ``stage_hook`` on the stage's first item and exits it
    when the worker exits. Pickles as its op and the stage's identity. A generator op's
    outputs come back as one list."""

    op: Callable[[Any], Any]
    gen: bool
    key: str
    name: str
    concurrency: int
    interval: float = -1

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
        out = [] if gen else None
        async with _task_hooks(self.hooks, item):
            out = list(op(item)) if gen else op(item)
        if out is None:
            return None
        await self.queue.put(out)
        return await self.queue.get()


def _expand_path_variants(stages: list[Stage]) -> list[Stage]:
    """``stages`` with each ``PathVariants`` replaced by its engine stages: a per-item one by
    its router, path and merge stages (:mod:`._variants`), a batched one by one stage that
    runs its paths inline."""
    out: list[Stage] = []
    for st in stages:
        if st.kind != "path_variants":
            out.append(st)
        elif st.config.batched:
            out.append(path_variants_stage(st.config))
        else:
            out.extend(lower_path_variants(st.config))
    return out


def _has_ordered_pipe(st: Stage) -> bool:
    if st.kind == "path_variants":
        return _has_ordered_path(st.config)
    return st.ordered


def _has_ordered_path(cfg: PathVariantsConfig[Any]) -> bool:
    return any(
        isinstance(c, PipeConfig) and c._type == _PipeType.OrderedPipe
        or isinstance(c, PathVariantsConfig) and _has_ordered_path(c)
        for path in cfg.paths
        for c in path
    )


def validate_regions(stages: list[Stage], *, subinterpreter: bool = True) -> None:
    """SPDL's checks of ``to()`` regions, run by ``get_config()`` and ``build()``: no empty
    region, no ``output_order="input"`` stage inside one, nor in a ``path_variants`` path inside
    one (workers finish in any order), every region closed before the sink (``ValueError``); a
    subinterpreter region needs Python 3.14 (``RuntimeError``; with ``subinterpreter=False``
    left to the region's executor, whose message is that of SPDL's ``build_pipeline``)."""
    in_region = has_stage = False
    for st in stages:
        if st.kind == "placement":
            if in_region and not has_stage:
                raise ValueError(
                    "An empty `to(...)` region has no stages. Add stages before the next `.to(...)`, "
                    "or remove the redundant marker."
                )
            in_region, has_stage = not isinstance(st.target, _MainProcess), False
            subinterp = isinstance(st.target, InterpreterPoolExecutorConfig)
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


def _fused_chain(stages: list[Stage], pool: Executor | None, size: int) -> list[Stage]:
    """Stages running ``stages`` in ``pool`` on transfers of up to ``size`` items: a grouping
    stage here, then one generator stage whose op (:class:`_Chain`, pickled to the worker)
    runs every op on the transfer's items and returns all the outputs."""
    name = "+".join(st.name for st in stages)
    limits = {st.max_failures for st in stages if st.max_failures is not None}
    if len(limits) > 1:
        raise NotImplementedError(
            f"stages {name} are fused into one transfer (PlacementConfig buffer_size={size}) but have different "
            "max_failures; give them the same value"
        )
    group = Stage(kind="aggregate", op=size, name=f"to_worker({size})")
    run = Stage(
        kind="gen",
        op=_Chain([(st.op, st.kind == "gen") for st in stages]),
        name=name,
        concurrency=max(st.concurrency for st in stages),
        ordered=False,  # no input-ordered stage in a region (validate_regions)
        max_failures=next(iter(limits), None),
        executor=pool,
    )
    return [group, run]
