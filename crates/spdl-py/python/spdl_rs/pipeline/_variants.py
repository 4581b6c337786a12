"""Lowering of a per-item :class:`~spdl_rs.pipeline.defs.PathVariantsConfig` into engine
stages (SPDL 0.8 builds a router node, one chain of nodes per path and a merge node).

The engine runs one chain of stages, so the routed items carry their path: the router stage
wraps each item as :class:`_Routed` with the index of its path, every stage of path ``i``
applies its op only to the items routed to ``i`` and passes the others on unchanged, and the
merge stage unwraps them. Each path stage keeps its own kind (function, generator, async,
async generator, aggregate), concurrency, output order, failure limit and executor, so
async ops and aggregation work in a path as in SPDL; an :class:`Aggregator` in a path sees
only that path's items and is flushed at the end of each epoch. Nested per-item
``PathVariants`` extend the route (a tuple of indices, one per level); a nested batched one
runs its paths inline in one stage.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .. import _native
from ._misc import op_kind
from ._stage import MaxFailures, Stage
from .defs import (
    AggregateConfig,
    Aggregator,
    DisaggregateConfig,
    PathVariantsConfig,
    PipeConfig,
    _PipeType,
)

__all__ = ["lower_path_variants", "path_variants_stage"]


class _Routed:
    """An item on its way through a path: ``route`` holds one path index per nesting level."""

    __slots__ = ("route", "value")

    def __init__(self, route: tuple[int, ...], value: Any) -> None:
        self.route = route
        self.value = value

    def __reduce__(self) -> Any:  # pickles to a process-pool stage and back
        return (_Routed, (self.route, self.value))


def _route_of(item: Any) -> tuple[int, ...]:
    return item.route if isinstance(item, _Routed) else ()


def _wrap(route: tuple[int, ...], value: Any) -> Any:
    return _Routed(route, value) if route else value


def _check(idx: Any, n: int) -> int:
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
        raise IndexError(f"Router returned index {idx!r}, but there are only {n} paths (valid range: [0, {n})).")
    return idx


class _PathCount:
    """What one path stage did with the items routed to it, for its stats (SPDL counts the
    tasks and queue items of each path, not the items passed through): ``calls`` of its op,
    ``outs`` produced. Pickles as its counts (a process-pool worker counts on its own)."""

    def __init__(self) -> None:
        self.calls = 0
        self.outs = 0
        self._lock = threading.Lock()

    def call(self) -> None:
        with self._lock:
            self.calls += 1

    def out(self, n: int = 1) -> None:
        with self._lock:
            self.outs += n

    def __getstate__(self) -> dict[str, int]:
        return {"calls": self.calls, "outs": self.outs}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__()  # type: ignore[misc]
        self.calls, self.outs = state["calls"], state["outs"]


class _Router:
    """Tags each item at route ``prefix`` with ``router(value)``; passes other items on."""

    def __init__(self, router: Any, n: int, prefix: tuple[int, ...]) -> None:
        self.router, self.n, self.prefix = router, n, prefix

    def __call__(self, item: Any) -> Any:
        if _route_of(item) != self.prefix:
            return item
        value = item.value if self.prefix else item
        return _Routed(self.prefix + (_check(self.router(value), self.n),), value)


class _AsyncRouter(_Router):
    async def __call__(self, item: Any) -> Any:  # type: ignore[override]
        if _route_of(item) != self.prefix:
            return item
        value = item.value if self.prefix else item
        return _Routed(self.prefix + (_check(await self.router(value), self.n),), value)


class _Merge:
    """Drops the last route index of the items of the paths under ``prefix``."""

    def __init__(self, prefix: tuple[int, ...]) -> None:
        self.prefix = prefix

    def __call__(self, item: Any) -> Any:
        r = _route_of(item)
        if len(r) == len(self.prefix) + 1 and r[:-1] == self.prefix:
            return _wrap(self.prefix, item.value)
        return item


class _OnPathBase:
    """An op (``op``) applied to the items of one path (``route``), counted for its stats."""

    def __init__(self, op: Any, route: tuple[int, ...]) -> None:
        self.op, self.route = op, route
        self.count = _PathCount()

    def _mine(self, item: Any) -> bool:
        """Whether ``item`` is routed to this path (then one call is counted)."""
        if _route_of(item) != self.route:
            return False
        self.count.call()
        return True

    def _emit(self, out: Any) -> Any:
        """One output of the path, counted and tagged with its route."""
        self.count.out()
        return _Routed(self.route, out)


class _OnPath(_OnPathBase):
    """A function op applied to the items of one path (``None``: dropped)."""

    def __call__(self, item: Any) -> Any:
        if not self._mine(item):
            return item
        out = self.op(item.value)
        return None if out is None else self._emit(out)


class _OnPathGen(_OnPath):
    def __call__(self, item: Any) -> Any:
        if not self._mine(item):
            yield item
            return
        for out in self.op(item.value):
            yield self._emit(out)


class _OnPathAsync(_OnPath):
    async def __call__(self, item: Any) -> Any:  # type: ignore[override]
        if not self._mine(item):
            return item
        out = await self.op(item.value)
        return None if out is None else self._emit(out)


class _OnPathAsyncGen(_OnPath):
    async def __call__(self, item: Any) -> Any:  # type: ignore[override]
        if not self._mine(item):
            yield item
            return
        async for out in self.op(item.value):
            yield self._emit(out)


class _OnPathAggregator(Aggregator, _OnPathBase):
    """An :class:`Aggregator` (``op``) fed only the items of one path; the others pass
    through."""

    def accumulate(self, item: Any) -> Any | None:
        if not self._mine(item):
            return item
        out = self.op.accumulate(item.value)
        return None if out is None else self._emit(out)

    def flush(self) -> Any | None:
        out = self.op.flush()
        return None if out is None else self._emit(out)


def _stage(kind: str, op: Any, name: str, **kw: Any) -> Stage:
    # routing and merging keep the order they get
    return Stage(kind=kind, op=op, name=name, **{"ordered": True, **kw})


def lower_path_variants(cfg: PathVariantsConfig[Any], prefix: tuple[int, ...] = ()) -> list[Stage]:
    """The engine stages of a per-item ``PathVariants`` whose items arrive at route ``prefix``
    (``()``: untagged). A nested batched ``PathVariants`` runs inline in one stage. Raises
    ``NotImplementedError`` for what a path cannot hold here: a native op, a placement
    marker, and what a batched one's paths cannot hold."""
    router_kind = "async" if op_kind(cfg.router) == "async" else "func"
    router_cls = _AsyncRouter if router_kind == "async" else _Router
    router = _stage(router_kind, router_cls(cfg.router, len(cfg.paths), prefix), cfg.name)
    # For the stats (see _pipeline._Build): the router and the merge run no task of SPDL's;
    # the router's queue stands for one queue per path, counting what the path received.
    router.stats = {"tasks": 0, "path_queues": []}
    stages = [router]
    for i, path in enumerate(cfg.paths):
        route = prefix + (i,)
        first = len(stages)
        for c in path:
            if isinstance(c, PathVariantsConfig):
                if c.batched:  # its paths run inline, in one stage (see path_variants_stage)
                    inline = path_variants_stage(c)
                    stages.append(_stage("gen", _OnPathGen(inline.op, route), c.name, concurrency=inline.concurrency))
                else:
                    stages.extend(lower_path_variants(c, route))
            elif isinstance(c, DisaggregateConfig):
                stages.append(_stage("gen", _OnPathGen(iter, route), c.name, ordered=False))
            elif isinstance(c, AggregateConfig):
                agg = _OnPathAggregator(c.op, route)
                stages.append(Stage(kind="aggregate", op=agg, name=c.name, drop_last=c.drop_last))
            elif isinstance(c, PipeConfig):
                op, a = c._args.op, c._args
                if isinstance(op, _native.NativeOp):
                    raise NotImplementedError(
                        f"PathVariants path {i}: native op {c.name!r} inside a path is not supported"
                    )
                kind = op_kind(op)
                wrapper = {"func": _OnPath, "gen": _OnPathGen, "async": _OnPathAsync, "asyncgen": _OnPathAsyncGen}[kind]
                stages.append(
                    _stage(
                        kind,
                        wrapper(op, route),
                        c.name,
                        concurrency=a.concurrency,
                        ordered=c._type == _PipeType.OrderedPipe,
                        max_failures=MaxFailures.of(c._max_failures),
                        executor=a.executor,
                    )
                )
            else:
                raise NotImplementedError(
                    f"PathVariants path {i}: {type(c).__name__} inside a path is not supported by spdl_rs"
                )
        for st in stages[first:]:
            count = getattr(st.op, "count", None)
            if isinstance(count, _PathCount) and st.stats is None:
                st.stats = {"count": count}
        head = getattr(stages[first].op, "count", None) if first < len(stages) else None
        router.stats["path_queues"].append((f"path_variants_path{i}", head))
    merge = _stage("func", _Merge(prefix), "path_variants_merge")
    merge.stats = {"tasks": 0}
    stages.append(merge)
    return stages


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


def path_variants_stage(cfg: PathVariantsConfig[Any]) -> Stage:
    """One stage running a batched ``PathVariants`` (or a nested one in a batched path) inline:
    its router, then each item's path as a chain of ops in this stage's call."""
    paths: list[_Chain] = []
    conc = 1
    for i, path in enumerate(cfg.paths):
        ops = []
        for p in path:
            if isinstance(p, DisaggregateConfig):  # a list becomes its elements
                ops.append((iter, True))
                continue
            if isinstance(p, PathVariantsConfig):  # nested routing: its route, as a generator
                inner = path_variants_stage(p)
                ops.append((inner.op, True))
                conc = max(conc, inner.concurrency)
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
    return Stage(kind="gen", op=route, name=cfg.name, concurrency=conc)
