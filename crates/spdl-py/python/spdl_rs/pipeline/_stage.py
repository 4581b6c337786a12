"""The stage record: what ``PipelineBuilder`` holds for each stage, what the lowering of
regions and path variants rewrites, and what the engine (``_native.build_pipeline``, read
field by field as ``StageSpec`` in ``crates/spdl-py/src/pipeline.rs``) builds each stage from.

A leaf module of :mod:`spdl_rs.pipeline`: it imports no other module of the package but
:mod:`._misc` and :mod:`.defs`, so the builder, the lowering, the profiler and the
subprocess code can all use it without importing each other. ``max_failures`` is checked
here once (:meth:`MaxFailures.of`); ``output_order`` once, by ``_misc.check_output_order``.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Union

from .. import _native
from . import _misc
from ._misc import check_concurrency, check_output_order
from .defs import (
    AggregateConfig,
    Aggregator,
    Collate,
    DisaggregateConfig,
    MergeConfig,
    PipeConfig,
    PipelineConfig,
    PlacementConfig,
    SinkConfig,
    SourceConfig,
    _PipeArgs,
    _PipeType,
)

#: What a ``max_failures=`` keyword takes (``pipe``, ``Pipe``, ``build``, ``build_pipeline``,
#: ``run_pipeline_in_subprocess``, ``run_pipeline_in_subinterpreter``): a count (an int;
#: negative: no limit) or a rate (a :class:`fractions.Fraction` in (0, 1]).
MaxFailuresArg = Union[int, Fraction]

#: The largest count the engine holds (a larger one is no limit in practice).
_MAX_COUNT = (1 << 64) - 1


@dataclass(frozen=True)
class MaxFailures:
    """A checked failure budget, as SPDL 0.8's ``max_failures``: ``given`` is the value as the
    user wrote it (``get_config()`` shows it), read by the engine as ``count`` (an int at
    least 0), ``rate`` (a share of failed calls in (0, 1], judged after 100 calls) or
    neither (``unlimited``: a negative int). Make one with :meth:`of`."""

    given: MaxFailuresArg

    @classmethod
    def of(cls, value: Any, what: str = "max_failures") -> MaxFailures | None:
        """``value`` checked: ``None`` stays ``None`` (the pipeline's budget applies).
        Raises ``TypeError`` for a value that is neither an int nor a ``Fraction`` (a bool
        included), ``ValueError`` for a ``Fraction`` outside (0, 1]; both name ``what``."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (Fraction, numbers.Integral)):
            raise TypeError(f"{what} must be an int or a fractions.Fraction, got {type(value).__name__}")
        if isinstance(value, Fraction) and not 0 < value <= 1:
            raise ValueError(f"`{what}` Fraction must be in range (0, 1]. Got: {value}")
        return cls(value)

    @property
    def unlimited(self) -> bool:
        """A negative count: no limit (a stage with it ignores the pipeline's budget)."""
        return not isinstance(self.given, Fraction) and self.given < 0

    @property
    def count(self) -> int | None:
        """The failures tolerated, or ``None`` for a rate or no limit."""
        if isinstance(self.given, Fraction) or self.unlimited:
            return None
        return min(int(self.given), _MAX_COUNT)

    @property
    def rate(self) -> float | None:
        """The share of failed calls tolerated, or ``None`` for a count."""
        return float(self.given) if isinstance(self.given, Fraction) else None


@dataclass
class Stage:
    """One stage of a pipeline, from the builder to the engine.

    ``kind``: ``func``, ``gen``, ``async``, ``asyncgen``, ``native`` (per-item ops),
    ``aggregate`` (``op`` an int or an :class:`Aggregator`), ``disaggregate``, and, before
    the lowering, ``path_variants`` (``config``) and ``placement`` (``target``,
    ``buffer_size``); after ``_Build``'s wrapping also ``pyaggregate`` (``op`` accumulates,
    ``flush`` flushes). ``size``: an engine-run aggregate's group size; ``hooks``: a native
    op's task hooks; ``stats``: how a path-variants stage is accounted (see
    ``_pipeline._Build``).
    """

    kind: str
    name: str
    op: Any = None
    concurrency: int = 1
    ordered: bool = False
    max_failures: MaxFailures | None = None
    executor: Any = None
    drop_last: bool = False
    config: Any = None
    target: Any = None
    buffer_size: int = 1
    stats: dict[str, Any] | None = None
    size: int = 0
    hooks: Any = None
    flush: Any = None

    def with_(self, **changes: Any) -> Stage:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)


#: Upper bounds of the builder's sizes: past them a value is a mistake, and would exhaust
#: memory or the engine's limits (``ValueError`` naming the argument).
MAX_CONCURRENCY = 1 << 16
MAX_BATCH = 1 << 24
MAX_BUFFER = 1 << 30
MAX_THREADS = 1 << 12


def at_most(name: str, value: int, limit: int) -> None:
    """Raises ``ValueError`` if ``value`` is above ``limit``."""
    if value > limit:
        raise ValueError(f"{name} must be at most {limit}, got {value}")


def op_kind(op: Any) -> str:
    """``native`` for a :mod:`spdl_rs.ops` stage, else ``func``, ``gen``, ``async`` or
    ``asyncgen``. Raises ``TypeError`` if ``op`` is not callable."""
    if isinstance(op, _native.NativeOp):
        return "native"
    if not callable(op):
        raise TypeError(f"op must be callable, a container with __getitem__, or a spdl_rs.ops stage, got {type(op).__name__}")
    return _misc.op_kind(op)


def op_name(op: Any) -> str:
    """SPDL's default stage name: the function's name (through ``functools.partial``), else
    the class name."""
    if isinstance(op, _native.NativeOp):
        return op.name
    if isinstance(op, functools.partial):
        return op_name(op.func)
    return getattr(op, "__name__", None) or type(op).__name__


def pipe_stage(
    op: Any,
    *,
    concurrency: int = 1,
    executor: Any = None,
    name: str | None = None,
    output_order: str = "completion",
    max_failures: Any = None,
) -> Stage:
    """The stage of ``PipelineBuilder.pipe`` (see there for what it checks and raises)."""
    from concurrent.futures import Executor

    ordered = check_output_order(output_order)
    check_concurrency(concurrency)
    at_most("concurrency", concurrency, MAX_CONCURRENCY)
    # As SPDL: an object with ``__getitem__`` (a dict, a list) is a container, even if
    # callable; a class (``str``, ``tuple``) stays a callable (SPDL would index it).
    if not isinstance(op, (type, _native.NativeOp)) and hasattr(op, "__getitem__"):
        op = op.__getitem__
    kind = op_kind(op)
    if executor is not None:
        if not isinstance(executor, Executor):
            raise TypeError(f"executor must be a concurrent.futures.Executor, got {type(executor).__name__}")
        if kind in ("async", "asyncgen"):
            raise ValueError("`executor` cannot be specified when op is async.")
        if kind == "native":
            raise TypeError(
                f"executor= cannot run the native op {op.name!r}: native ops run on the pipeline's Rust worker threads"
            )
    if kind == "asyncgen" and ordered:
        raise ValueError("pipe does not support async generator function when `output_order` is 'input'.")
    if kind == "gen" and executor is not None and ordered:
        # SPDL turns it into an async generator, which its ordered pipe cannot run (every
        # item fails); say so at once.
        raise ValueError("pipe does not support a generator function with `executor` when `output_order` is 'input'.")
    return Stage(
        kind=kind,
        op=op,
        name=name or op_name(op),
        concurrency=int(concurrency),
        ordered=ordered,
        max_failures=MaxFailures.of(max_failures),
        executor=executor,
    )


def aggregate_stage(input: Any, drop_last: bool = False) -> Stage:
    """The stage of ``PipelineBuilder.aggregate`` (see there for what it raises)."""
    if isinstance(input, bool) or not isinstance(input, (numbers.Integral, Aggregator)):
        raise TypeError(f"aggregate takes an int or an Aggregator, got {type(input).__name__}")
    if isinstance(input, numbers.Integral) and input < 1:
        raise ValueError(f"num_items must be at least 1, got {input}")
    if isinstance(input, numbers.Integral):
        at_most("num_items", input, MAX_BATCH)
    # SPDL's stage name (that of ``defs.Aggregate``): ``aggregate(op=collate(3), drop_last=False)``.
    shown = Collate(int(input)) if isinstance(input, numbers.Integral) else input
    name = f"aggregate(op={shown!r}, drop_last={bool(drop_last)!r})"
    return Stage(kind="aggregate", op=input, name=name, drop_last=bool(drop_last))


def stage_config(st: Stage) -> Any:
    """The :mod:`~spdl_rs.pipeline.defs` config of a builder's stage (``get_config()``)."""
    if st.kind == "aggregate":
        agg = st.op if isinstance(st.op, Aggregator) else Collate(int(st.op))
        return AggregateConfig(name=st.name, op=agg, drop_last=st.drop_last)
    if st.kind == "disaggregate":
        return DisaggregateConfig(name=st.name)
    if st.kind == "path_variants":
        return st.config
    if st.kind == "placement":
        return PlacementConfig(st.target, name=st.name, buffer_size=st.buffer_size)
    order = _PipeType.OrderedPipe if st.ordered else _PipeType.Pipe
    args = _PipeArgs(op=st.op, executor=st.executor, concurrency=st.concurrency)
    given = st.max_failures.given if st.max_failures is not None else None
    return PipeConfig(name=st.name, _type=order, _args=args, _max_failures=given)


def builder_to_config(b: Any) -> PipelineConfig[Any]:
    """The :class:`PipelineConfig` of a builder whose source and sink are set (a merged
    source gives back its ``MergeConfig``)."""
    src = b._source
    merged = isinstance(getattr(src, "config", None), MergeConfig)
    src_cfg = src.config if merged else SourceConfig(src, continuous=b._continuous)
    sink = SinkConfig(b._sink_size if b._sink_size is not None else 3)  # build()'s default sink
    return PipelineConfig(src=src_cfg, pipes=tuple(stage_config(st) for st in b._stages), sink=sink)
