"""Building blocks of a pipeline definition (SPDL 0.8's ``spdl.pipeline.defs``).

A :class:`PipelineConfig` holds a :class:`SourceConfig` (or a :class:`MergeConfig` of several
sub-pipelines), a sequence of stage configs made by :func:`Pipe`, :func:`Aggregate`,
:func:`Disaggregate` and :func:`PathVariants` (and :class:`PlacementConfig` region markers),
and a :class:`SinkConfig`. :func:`spdl_rs.pipeline.build_pipeline` turns it into a
:class:`~spdl_rs.pipeline.Pipeline`; ``PipelineBuilder.get_config()`` gives the config of a
builder. The configs are frozen dataclasses: they pickle whenever their ops and sources do
(module-level functions, lists, ranges, :class:`spdl_rs.sources.SampleList`), so a config
built here can be built in another process (:func:`spdl_rs.pipeline.run_pipeline_in_subprocess`).
"""

from __future__ import annotations

import abc
import enum
import functools
import inspect
import sys
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Generic, TypeVar

from ._misc import check_concurrency, check_output_order, check_sink_size

__all__ = [
    "Aggregate",
    "AggregateConfig",
    "Aggregator",
    "Collate",
    "Disaggregate",
    "DisaggregateConfig",
    "ExecutorConfig",
    "InterpreterPoolExecutorConfig",
    "MAIN_PROCESS",
    "Merge",
    "MergeConfig",
    "PathVariants",
    "PathVariantsConfig",
    "Pipe",
    "PipeConfig",
    "PipelineConfig",
    "PlacementConfig",
    "ProcessPoolExecutorConfig",
    "SinkConfig",
    "SourceConfig",
]

T = TypeVar("T")
U = TypeVar("U")


def _where(obj: Any) -> str | None:
    """``name at file:line`` of a function (through ``functools.partial``), or ``None``."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    try:
        target = obj if inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isclass(obj) else type(obj)
        file = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except (OSError, TypeError):
        return None
    if not file:
        return None
    return f"{getattr(obj, '__qualname__', type(obj).__name__)} at {file}:{line}"


def _op_name(op: Any) -> str:
    while isinstance(op, functools.partial):
        op = op.func
    name = getattr(op, "name", None)  # a native op (spdl_rs.ops) carries its own name
    if isinstance(name, str):
        return name
    return getattr(op, "__name__", type(op).__name__)


################################################################################
# Aggregators
################################################################################
class Aggregator(abc.ABC):
    """Custom grouping of items (SPDL's ``spdl.pipeline.defs.Aggregator``).

    The stage calls :meth:`accumulate` with each item in order, and passes on what it returns
    unless that is ``None``. At the end of each epoch, with ``aggregate(..., drop_last=False)``,
    it calls :meth:`flush` and passes on its result unless ``None``; with ``drop_last=True``
    it does not call ``flush`` (a continuous source: it calls it and discards the result, so
    the next epoch starts empty). An exception fails that item (counted against
    ``build(max_failures=)``). It runs with the GIL, one item at a time.
    """

    @abc.abstractmethod
    def accumulate(self, item: Any) -> Any | None:
        """Takes one item; returns a finished group, or ``None``."""

    @abc.abstractmethod
    def flush(self) -> Any | None:
        """Returns what is left at the end of an epoch (``None``: nothing) and resets."""


class Collate(Aggregator, Generic[T]):
    """Lists of ``n`` items (the last one of an epoch may be shorter); what
    ``aggregate(n)`` and ``Aggregate(n)`` do. ``aggregate(Collate(n))`` runs natively, like
    ``aggregate(n)``, unless the stage has Python task hooks. ``repr``: ``collate(n)`` (as
    SPDL). Raises ``ValueError`` if ``n < 1``."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.n = n
        self._vals: list[T] = []

    def accumulate(self, item: T) -> list[T] | None:
        self._vals.append(item)
        if len(self._vals) >= self.n:
            out, self._vals = self._vals, []
            return out
        return None

    def flush(self) -> list[T] | None:
        out, self._vals = self._vals, []
        return out or None

    def __repr__(self) -> str:
        return f"collate({self.n})"


################################################################################
# Source
################################################################################
@dataclass(frozen=True)
class SourceConfig(Generic[T]):
    """The source of a pipeline (SPDL's ``SourceConfig``): an iterable, an async iterable or
    a :class:`spdl_rs.sources.SampleList`; ``continuous`` as in
    ``PipelineBuilder.add_source``. ``repr`` names the source's type, not its items.

    Raises ``ValueError`` if ``source`` is neither iterable nor async iterable (as SPDL),
    ``TypeError`` if ``continuous`` is not a bool.
    """

    source: Iterable[T] | AsyncIterable[T]
    continuous: bool = False

    def __post_init__(self) -> None:
        if not (hasattr(self.source, "__iter__") or hasattr(self.source, "__aiter__")):
            raise ValueError("Source must be either generator or async generator.")
        if not isinstance(self.continuous, bool):
            raise TypeError(f"continuous must be a bool, got {type(self.continuous).__name__}")

    def __repr__(self) -> str:
        kind = type(self.source).__name__
        code = getattr(self.source, "gi_code", None) or getattr(self.source, "ag_code", None)
        if code is not None:  # a generator: where its function is
            info = f"<{kind} at {code.co_filename}:{code.co_firstlineno}>"
        else:
            info = f"<{kind} object at 0x{id(self.source):x}>"
        return f"SourceConfig(source={info})"


@dataclass(frozen=True)
class MergeConfig:
    """Several sub-pipelines whose outputs form one source (SPDL's ``MergeConfig``; make it
    with :func:`Merge`). Each sub-pipeline is built with the same ``num_threads`` as the
    pipeline and runs while the merged source is iterated.

    ``op``: ``None`` passes the items on in the order they arrive; otherwise an async function
    ``op(name, input_queues, output_queue)`` run on an asyncio loop, reading each
    sub-pipeline's :class:`asyncio.Queue` (end: an item for which
    :func:`spdl_rs.pipeline.is_eof` is true) and putting items into ``output_queue``; when it
    returns, the merged source ends and the sub-pipelines are stopped.

    Raises ``ValueError`` without sub-pipelines.
    """

    pipeline_configs: tuple[PipelineConfig[Any], ...]
    op: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if len(self.pipeline_configs) < 1:
            raise ValueError("MergeConfig must have at least one upstream pipeline configs.")
        for cfg in self.pipeline_configs:
            if not isinstance(cfg, PipelineConfig):
                raise TypeError(f"Merge takes PipelineConfig objects, got {type(cfg).__name__}")

    def __repr__(self) -> str:
        lines = ["MergeConfig("]
        if self.op is not None:
            lines.append(f"  op={_where(self.op) or _op_name(self.op)}")
        for i, cfg in enumerate(self.pipeline_configs, 1):
            lines.append(f"  Pipeline {i}:")
            lines.extend(f"    {line}" for line in repr(cfg).split("\n"))
        lines.append(")")
        return "\n".join(lines)


################################################################################
# Stages
################################################################################
class _PipeType(enum.IntEnum):
    Pipe = 1
    OrderedPipe = 2
    Aggregate = 3
    Disaggregate = 4


@dataclass
class _PipeArgs(Generic[T, U]):
    op: Callable[[T], U]
    executor: Executor | None = None
    concurrency: int = 1

    def __post_init__(self) -> None:
        check_concurrency(self.concurrency)


@dataclass(frozen=True)
class PipeConfig(Generic[T, U]):
    """A stage applying an op to each item (SPDL's ``PipeConfig``; make it with :func:`Pipe`).
    ``repr``: ``name(concurrency=N[, executor=...][, output_order='input'][, op=f at file:line])``.
    """

    name: str
    _type: _PipeType
    _args: _PipeArgs[T, U]
    _max_failures: int | Fraction | None = None

    def __post_init__(self) -> None:
        op = self._args.op
        is_async = inspect.iscoroutinefunction(op) or inspect.isasyncgenfunction(op)
        if is_async and self._args.executor is not None:
            raise ValueError("`executor` cannot be specified when op is async.")
        if inspect.isasyncgenfunction(op) and self._type == _PipeType.OrderedPipe:
            raise ValueError("pipe does not support async generator function when `output_order` is 'input'.")

    def __repr__(self) -> str:
        args = [f"concurrency={self._args.concurrency}"]
        if self._args.executor is not None:
            args.append(f"executor={self._args.executor!r}")
        if self._type == _PipeType.OrderedPipe:
            args.append("output_order='input'")
        if (where := _where(self._args.op)) is not None:
            args.append(f"op={where}")
        return f"{self.name}({', '.join(args)})"


@dataclass(frozen=True)
class AggregateConfig(Generic[T]):
    """A grouping stage (SPDL's ``AggregateConfig``; make it with :func:`Aggregate`):
    ``op`` an :class:`Aggregator`; ``drop_last`` as in ``PipelineBuilder.aggregate``.
    ``repr``: its name."""

    name: str
    op: Aggregator
    drop_last: bool = False
    _type: _PipeType = _PipeType.Aggregate

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DisaggregateConfig(Generic[T]):
    """A stage splitting each list into its items (SPDL's ``DisaggregateConfig``; make it
    with :func:`Disaggregate`). ``repr``: its name."""

    name: str
    _type: _PipeType = _PipeType.Disaggregate

    def __repr__(self) -> str:
        return self.name or "disaggregate"


@dataclass(frozen=True)
class PathVariantsConfig(Generic[T]):
    """Routes each item to one of several chains of stages and merges their outputs
    (SPDL's ``PathVariantsConfig``; make it with :func:`PathVariants`).

    ``router(item) -> int`` picks the path (``batched=True``: ``router(batch) -> [int]``, one
    index per element; each path gets its sub-list, an empty one included, and the outputs are
    concatenated back in path order; a batch every path emptied is not passed on, as SPDL). Per
    item (``batched=False``), as SPDL, each path stage runs with its own kind, concurrency,
    order, failure limit and executor: :class:`PipeConfig` with a function, generator, async or
    async-generator op (``None`` drops the item), :class:`AggregateConfig` (its groups hold only
    that path's items; flushed at the end of each epoch), :class:`DisaggregateConfig` and nested
    per-item :class:`PathVariantsConfig`; ``router`` may be async. Every item passes through
    every path stage, which applies its op only to the items of its path. A native op in a path
    raises ``NotImplementedError`` at build. ``batched=True``: the paths run one after the other
    inside one routing stage (async ops and an async router on that thread's own event loop) and
    may hold :class:`PipeConfig` with any Python op, :class:`DisaggregateConfig` and nested
    :class:`PathVariantsConfig`; an :class:`AggregateConfig` raises ``NotImplementedError`` at
    build, because its groups cannot be recombined with the other paths' sub-batches (SPDL's
    lockstep merge would mis-pair them or drop the last group).

    Raises ``ValueError`` if ``router`` is not callable, there is no path, a path is empty
    or holds a source or a sink config.
    """

    name: str
    router: Callable[[Any], Any]
    paths: tuple[tuple[Any, ...], ...]
    batched: bool = False

    def __post_init__(self) -> None:
        if not callable(self.router):
            raise ValueError("router must be callable.")
        if len(self.paths) < 1:
            raise ValueError("PathVariantsConfig must have at least 1 path.")
        for i, path in enumerate(self.paths):
            if len(path) == 0:
                raise ValueError(f"Path {i} is empty. Each path must have at least one config.")
            for j, cfg in enumerate(path):
                if isinstance(cfg, (SourceConfig, SinkConfig)):
                    raise ValueError(
                        f"Path {i}, position {j}: {type(cfg).__name__} is not allowed inside PathVariants paths."
                    )

    def __repr__(self) -> str:
        paths = ", ".join(f"path{i}=[{', '.join(repr(c) for c in p)}]" for i, p in enumerate(self.paths))
        return f"PathVariants({paths})"


################################################################################
# Executors and placement
################################################################################
@dataclass(frozen=True)
class ExecutorConfig:
    """A pool of workers, described (SPDL's ``ExecutorConfig``): ``max_workers`` (``None``:
    the pool's default), ``initializer(*initargs)`` run in each worker. Use its subclass
    :class:`ProcessPoolExecutorConfig` as a ``PipelineBuilder.to`` target."""

    max_workers: int | None = None
    initializer: Callable[..., None] | None = None
    initargs: tuple = ()

    def __post_init__(self) -> None:
        if self.max_workers is not None and (not isinstance(self.max_workers, int) or self.max_workers < 1):
            raise ValueError(f"max_workers must be None or a positive int, got {self.max_workers!r}")
        if self.initializer is not None and not callable(self.initializer):
            raise TypeError(f"initializer must be callable, got {type(self.initializer).__name__}")

    def _make(self) -> Executor:
        raise NotImplementedError(f"Unsupported executor config: {type(self).__name__}")


@dataclass(frozen=True)
class ProcessPoolExecutorConfig(ExecutorConfig):
    """Worker processes (SPDL's ``ProcessPoolExecutorConfig``): the stages after
    ``PipelineBuilder.to(ProcessPoolExecutorConfig(...))`` (until ``.to(MAIN_PROCESS)``) run
    their function and generator ops in one :class:`concurrent.futures.ProcessPoolExecutor`
    of ``max_workers`` processes started with ``mp_context`` (``"spawn"``, ``"fork"``,
    ``"forkserver"``; ``None``: ``"spawn"``, not Python's default ``"fork"``: the pool starts
    its processes while the pipeline's threads run, and a process forked then can deadlock),
    made when the pipeline is built and shut down when it stops. Unlike SPDL, which runs the region as one nested pipeline inside each
    worker, each item goes to a worker and back per stage, so the ops, items and results
    must pickle; aggregation stages and native ops of the region run in the main process.
    As in SPDL's workers, each function or generator stage of the region runs there inside
    the worker's default task hooks and output queue (``config.get_default_hook_class()``,
    ``config.get_default_queue_class()``, as the ``initializer`` may set them), whose
    ``stage_hook`` exits when the worker exits."""

    mp_context: str | None = None

    def _make(self) -> Executor:
        import concurrent.futures
        import multiprocessing as mp

        ctx = mp.get_context(self.mp_context or "spawn")
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=self.max_workers, mp_context=ctx, initializer=self.initializer, initargs=self.initargs
        )


@dataclass(frozen=True)
class InterpreterPoolExecutorConfig(ExecutorConfig):
    """Subinterpreters (SPDL's ``InterpreterPoolExecutorConfig``, Python 3.14+): the stages
    after ``PipelineBuilder.to(InterpreterPoolExecutorConfig(...))`` run their function and
    generator ops in one :class:`concurrent.futures.InterpreterPoolExecutor` of
    ``max_workers`` interpreters of this process, item by item as with
    :class:`ProcessPoolExecutorConfig` (the ops, items and results must be shareable between
    interpreters; NumPy and spdl_rs itself cannot be imported in a subinterpreter).

    Building such a pipeline on Python before 3.14 raises ``RuntimeError`` (SPDL's message).
    """

    def _make(self) -> Executor:
        if sys.version_info < (3, 14):
            raise RuntimeError(
                "Subinterpreter regions (`.to(InterpreterPoolExecutorConfig(...))`) require "
                f"Python 3.14 or later. Current version: {sys.version_info.major}.{sys.version_info.minor}"
            )
        import concurrent.futures

        pool_cls = getattr(concurrent.futures, "InterpreterPoolExecutor")
        return pool_cls(max_workers=self.max_workers, initializer=self.initializer, initargs=self.initargs)


@dataclass(frozen=True)
class _MainProcess:
    """The main-process placement target; use :data:`MAIN_PROCESS`."""

    def __repr__(self) -> str:
        return "MAIN_PROCESS"


#: The main process as a ``PipelineBuilder.to`` target: closes a worker-pool region.
MAIN_PROCESS: _MainProcess = _MainProcess()


@dataclass(frozen=True)
class PlacementConfig:
    """A region marker among the stage configs (SPDL's ``PlacementConfig``): the stages after
    it (until the next marker) run on ``target`` (a :class:`ProcessPoolExecutorConfig`, an
    :class:`InterpreterPoolExecutorConfig` or :data:`MAIN_PROCESS`).

    ``buffer_size`` (at least 1): on the marker that opens a worker-pool region, at most this
    many items go to a worker in one transfer (as SPDL, to spread the fixed cost of a
    transfer): with more than 1, the function and generator stages right after the marker
    are fused into one chain that a worker runs on each transfer, so their intermediate
    values stay in the worker; the last transfer of an epoch is shorter. On the marker that
    closes a region, it sizes the transfers coming back: the function and generator stages
    right before the marker (those not already in the opening chain) are fused the same way
    on transfers of up to ``buffer_size`` items, whose results return together. A marker
    between two regions sizes both sides. The buffering is transparent (the same items come
    out), but an op that raises in a chain fails every item of its transfer. ``repr``:
    ``placement(target[, buffer_size=n])``."""

    target: ProcessPoolExecutorConfig | InterpreterPoolExecutorConfig | _MainProcess
    name: str = "placement"
    buffer_size: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.target, Executor):
            raise TypeError(
                "`to()` takes a serializable execution target (ProcessPoolExecutorConfig, "
                "InterpreterPoolExecutorConfig, or MAIN_PROCESS), not a live Executor. To run a single "
                "stage on a custom executor, pass it to `pipe(executor=...)` instead."
            )
        if not isinstance(self.target, (ProcessPoolExecutorConfig, InterpreterPoolExecutorConfig, _MainProcess)):
            raise TypeError(
                "target must be a ProcessPoolExecutorConfig, an InterpreterPoolExecutorConfig or MAIN_PROCESS, "
                f"got {type(self.target).__name__}"
            )
        if isinstance(self.buffer_size, bool) or not isinstance(self.buffer_size, int) or self.buffer_size < 1:
            raise ValueError(f"buffer_size must be a positive int, got {self.buffer_size!r}")

    def __repr__(self) -> str:
        buf = f", buffer_size={self.buffer_size}" if self.buffer_size != 1 else ""
        return f"{self.name}({self.target!r}{buf})"


################################################################################
# Sink and pipeline
################################################################################
@dataclass(frozen=True)
class SinkConfig(Generic[T]):
    """The sink (SPDL's ``SinkConfig``): at most ``buffer_size`` finished items wait for the
    consumer (``0``: unlimited, as ``PipelineBuilder.add_sink``). Raises ``ValueError`` for a
    non-int or negative ``buffer_size``."""

    buffer_size: int

    def __post_init__(self) -> None:
        check_sink_size(self.buffer_size)


@dataclass(frozen=True)
class PipelineConfig(Generic[U]):
    """A whole pipeline (SPDL's ``PipelineConfig``): ``src`` (:class:`SourceConfig` or
    :class:`MergeConfig`), ``pipes`` (stage configs and :class:`PlacementConfig` markers, in
    order) and ``sink``. Build it with :func:`spdl_rs.pipeline.build_pipeline`. ``repr``: one
    line per part (``PipelineConfig`` / `` - Source: ...`` / `` - Pipes:`` / ``   - ...`` /
    `` - Sink: ...``), as SPDL."""

    src: SourceConfig[Any] | MergeConfig
    pipes: Sequence[Any] = field(default_factory=tuple)
    sink: SinkConfig[U] = field(default_factory=lambda: SinkConfig(3))

    def __post_init__(self) -> None:
        if not isinstance(self.src, (SourceConfig, MergeConfig)):
            raise TypeError(f"src must be a SourceConfig or a MergeConfig, got {type(self.src).__name__}")
        if not isinstance(self.sink, SinkConfig):
            raise TypeError(f"sink must be a SinkConfig, got {type(self.sink).__name__}")
        stage_types = (PipeConfig, AggregateConfig, DisaggregateConfig, PathVariantsConfig, PlacementConfig)
        for i, p in enumerate(self.pipes):
            if not isinstance(p, stage_types):
                raise TypeError(f"pipes[{i}] must be a stage config, got {type(p).__name__}")

    def __repr__(self) -> str:
        lines = ["PipelineConfig"]
        if isinstance(self.src, MergeConfig):
            lines.append(" - Source:")
            lines.extend(f"   {line}" for line in repr(self.src).split("\n"))
        else:
            lines.append(f" - Source: {self.src!r}")
        if self.pipes:
            lines.append(" - Pipes:")
        lines.extend(f"   - {p!r}" for p in self.pipes)
        lines.append(f" - Sink: {self.sink!r}")
        return "\n".join(lines)


################################################################################
# Factories
################################################################################
def Merge(pipeline_configs: Sequence[PipelineConfig[Any]], op: Callable[..., Any] | None = None) -> MergeConfig:  # noqa: N802
    """A :class:`MergeConfig` of ``pipeline_configs`` (SPDL's ``Merge``), to use as a
    :class:`PipelineConfig`'s ``src``."""
    return MergeConfig(tuple(pipeline_configs), op=op)


def Pipe(  # noqa: N802 (SPDL's name)
    op: Any,
    /,
    *,
    concurrency: int = 1,
    executor: Executor | None = None,
    name: str | None = None,
    output_order: str = "completion",
    max_failures: int | Fraction | None = None,
) -> PipeConfig[Any, Any]:
    """A :class:`PipeConfig` (SPDL's ``Pipe``): the arguments of ``PipelineBuilder.pipe``.
    A container (dict, list) becomes its ``__getitem__``. Raises ``ValueError`` for a bad
    ``output_order`` or ``concurrency``, ``TypeError`` if ``op`` is not callable."""
    ordered = check_output_order(output_order)
    if not callable(op) and hasattr(op, "__getitem__") and not _is_native(op):
        op = op.__getitem__
    if not callable(op) and not _is_native(op):
        raise TypeError(f"op must be callable or have __getitem__, got {type(op).__name__}")
    _type = _PipeType.OrderedPipe if ordered else _PipeType.Pipe
    return PipeConfig(
        name=name or _op_name(op),
        _type=_type,
        _args=_PipeArgs(op=op, executor=executor, concurrency=concurrency),
        _max_failures=max_failures,
    )


def _is_native(op: Any) -> bool:
    from .. import _native

    return isinstance(op, _native.NativeOp)


def Aggregate(input: int | Aggregator, /, *, drop_last: bool = False) -> AggregateConfig[Any]:  # noqa: N802
    """An :class:`AggregateConfig` (SPDL's ``Aggregate``): an int ``n`` becomes
    ``Collate(n)``; its name is ``aggregate(op=collate(n), drop_last=False)``. Raises
    ``TypeError`` for another type, ``ValueError`` if ``n < 1``."""
    if isinstance(input, bool) or not isinstance(input, (int, Aggregator)):
        raise TypeError(f"The `input` must be either int or Aggregator. Found: {type(input)}")
    op = Collate(input) if isinstance(input, int) else input
    return AggregateConfig(name=f"aggregate(op={op!r}, drop_last={drop_last!r})", op=op, drop_last=bool(drop_last))


def Disaggregate() -> DisaggregateConfig[Any]:  # noqa: N802
    """A :class:`DisaggregateConfig` named ``disaggregate`` (SPDL's ``Disaggregate``)."""
    return DisaggregateConfig(name="disaggregate")


def PathVariants(  # noqa: N802
    router: Callable[[Any], Any], paths: Sequence[Sequence[Any]], name: str | None = None, batched: bool = False
) -> PathVariantsConfig[Any]:
    """A :class:`PathVariantsConfig` (SPDL's ``PathVariants``); ``name`` defaults to
    ``path_variants``."""
    return PathVariantsConfig(
        name=name or "path_variants", router=router, paths=tuple(tuple(p) for p in paths), batched=bool(batched)
    )
