"""``PipelineBuilder``: SPDL 0.8's builder of a :class:`~spdl_rs.pipeline.Pipeline`. It
records one :class:`._stage.Stage` per call; ``build()`` lowers them (:mod:`._regions`) and
hands them to ``_pipeline._Build``, which makes the engine's pipeline.
"""

from __future__ import annotations

import numbers
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any, Generic, TypeVar

from .. import _native
from . import config
from ._hooks import AsyncQueue, StageInfo, TaskHook, _check_queue_class
from ._misc import check_sink_size
from ._pipeline import _LG, Pipeline, _Build
from ._regions import validate_regions
from ._stage import (
    MAX_BUFFER,
    MAX_THREADS,
    MaxFailures,
    MaxFailuresArg,
    Stage,
    aggregate_stage,
    at_most,
    builder_to_config,
    pipe_stage,
)
from ._sweep import _DiagnosticPipeline
from .defs import Aggregator, PathVariants, PlacementConfig

__all__ = ["PipelineBuilder"]

T = TypeVar("T")
U = TypeVar("U")


class PipelineBuilder(Generic[T, U]):
    """Builds a :class:`Pipeline`: one source, stages in order, one sink (SPDL 0.8's
    ``spdl.pipeline.PipelineBuilder``). Every method returns the builder; nothing runs
    before :meth:`build`.

    Sizes have upper bounds, past which a value is a mistake that would exhaust memory
    (``ValueError`` naming the argument): ``concurrency`` 65,536, ``aggregate`` 2**24 items,
    ``add_sink`` 2**30 items, ``build(num_threads=)`` 4,096.
    """

    def __init__(self) -> None:
        self._source: Any = None
        self._continuous = False
        self._stages: list[Stage] = []
        self._sink_size: int | None = None
        # The background task factories of build_pipeline(..., background_tasks=...), which
        # sets them on the builder it makes; None: the global default (build() takes none).
        self._background_tasks: Sequence[Callable[[], Any]] | None = None
        self._from_config = False  # made by build_pipeline from a PipelineConfig
        # (pipeline_id, first stage id) of a Merge's sub-pipeline: its stats are numbered
        # within the pipeline that merges it (as SPDL), else None.
        self._stats_ids: tuple[int, int] | None = None

    def add_source(self, source: Iterable[T] | AsyncIterable[T], *, continuous: bool = False) -> "PipelineBuilder[T, U]":
        """Sets the source: an iterable, an async iterable, or a native
        :class:`spdl_rs.sources.SampleList` (iterated without the GIL).

        ``continuous=False`` (SPDL's default): one pass. The pipeline ends when the source is
        exhausted; afterwards ``get_item`` raises ``EOFError`` and iterating the pipeline again
        yields nothing.

        ``continuous=True``: one epoch per iterator. At the end of each pass the current
        iterator ends (``EOFError`` from ``get_item``), and the next ``get_item`` /
        ``get_iterator()`` starts the next epoch, which calls ``iter(source)`` (``__aiter__``)
        again: a list or a ``SampleList`` gives its items every epoch (a ``SampleList``
        reshuffles with the epoch number), a generator only once. Unlike SPDL, which
        re-iterates right away, the next epoch starts when the consumer asks for it, so
        ``state_dict()`` and ``load_state_dict()`` work between epochs.

        A Python ``str`` item stays native so that native ops read it without the GIL. If the
        source raises, the epoch ends and the iterator raises :class:`PipelineFailure`
        (``stage="source"``).

        Raises ``ValueError`` if a source was already set, ``TypeError`` if ``source`` is not
        iterable or ``continuous`` is not a bool.
        """
        if self._source is not None:
            raise ValueError("Source already set.")
        if not isinstance(source, (Iterable, AsyncIterable, _native.SampleList)):
            raise TypeError(f"source must be an iterable or an async iterable, got {type(source).__name__}")
        if not isinstance(continuous, bool):
            raise TypeError(f"continuous must be a bool, got {type(continuous).__name__}")
        self._source = source
        self._continuous = continuous
        return self

    def pipe(
        self,
        op: Any,
        /,
        *,
        concurrency: int = 1,
        executor: Executor | None = None,
        name: str | None = None,
        output_order: str = "completion",
        max_failures: MaxFailuresArg | None = None,
    ) -> "PipelineBuilder[T, U]":
        """Adds a stage applying ``op`` to each item.

        ``op`` may be a function (returning ``None`` drops the item), a generator function
        (each yielded value is passed on), an async function, an async generator function
        (each yielded value is passed on as soon as it is yielded), a container with
        ``__getitem__`` (a dict or list: ``op[item]``), or a native stage from
        :mod:`spdl_rs.ops` (runs without the GIL). Up to ``concurrency`` items are processed
        at once; ``output_order="completion"`` passes results on as they finish, ``"input"``
        keeps the source order.

        ``executor``: a :class:`concurrent.futures.Executor` that runs a function or generator
        op (e.g. a ``ProcessPoolExecutor`` for GIL-bound code) instead of the Rust workers; a
        generator's items then come back when it finishes.

        ``max_failures``: the failures this stage tolerates before the pipeline stops and the
        iterator raises :class:`PipelineFailure` naming the stage: an int (a count; negative:
        no limit) or a :class:`fractions.Fraction` in (0, 1] (a rate of failed calls, checked
        after 100 calls). ``None``: the pipeline's ``build(max_failures=)`` applies. An
        exception fails that item only (it is dropped and counted).

        Raises ``ValueError`` for a bad ``output_order``, ``concurrency`` or ``Fraction``, for
        an async generator (or a generator with ``executor``) with ``output_order="input"``, or
        an ``executor`` with an async op (as SPDL); ``TypeError`` for a non-callable ``op``, a non-Executor ``executor``, an
        ``executor`` with a native op (those run on the Rust workers), or a bad
        ``max_failures`` type.
        """
        self._stages.append(
            pipe_stage(
                op,
                concurrency=concurrency,
                executor=executor,
                name=name,
                output_order=output_order,
                max_failures=max_failures,
            )
        )
        return self

    def aggregate(self, input: int | Aggregator, /, *, drop_last: bool = False) -> "PipelineBuilder[T, U]":
        """Groups items.

        ``input`` is an int ``n`` (lists of ``n`` items; natively: no GIL for native items) or
        an :class:`~spdl_rs.pipeline.defs.Aggregator` (its ``accumulate`` takes each item and
        returns a group or ``None``; its ``flush`` gives the rest at the end of each epoch).
        With ``drop_last=True`` the last, short group of an epoch is dropped (``flush`` is not
        called).

        Raises ``ValueError`` if ``n < 1``, ``TypeError`` for another type.
        """
        self._stages.append(aggregate_stage(input, drop_last))
        return self

    def disaggregate(self) -> "PipelineBuilder[T, U]":
        """Splits each list (or other iterable item) back into its elements."""
        self._stages.append(Stage(kind="disaggregate", name="disaggregate"))
        return self

    def add_sink(self, buffer_size: int = 3) -> "PipelineBuilder[T, U]":
        """Sets the sink: at most ``buffer_size`` finished items wait for the consumer; ``0``
        is unlimited (in practice 2**30 items), as SPDL 0.8's docstring says (its code
        raises ``ValueError`` for 0).

        Raises ``ValueError`` if a sink was already set, ``buffer_size`` is not an int or is
        negative.
        """
        if self._sink_size is not None:
            raise ValueError("Sink is already set.")
        check_sink_size(buffer_size)
        at_most("buffer_size", buffer_size, MAX_BUFFER)
        self._sink_size = int(buffer_size)
        return self

    def path_variants(
        self, router: Callable[[Any], Any], paths: Sequence[Sequence[Any]], name: str | None = None, batched: bool = False
    ) -> "PipelineBuilder[T, U]":
        """Adds a stage routing each item to one of ``paths`` (chains of
        :func:`~spdl_rs.pipeline.defs.Pipe` configs) and merging their outputs (SPDL's
        ``path_variants``); see :class:`~spdl_rs.pipeline.defs.PathVariantsConfig`.
        Raises what ``PathVariants`` raises."""
        cfg = PathVariants(router, paths, name, batched=batched)
        self._stages.append(Stage(kind="path_variants", name=cfg.name, config=cfg))
        return self

    def to(self, target: Any, /, *, buffer_size: int = 1) -> "PipelineBuilder[T, U]":
        """Runs the stages added after this call on ``target`` (SPDL's ``PipelineBuilder.to``):
        a :class:`~spdl_rs.pipeline.defs.ProcessPoolExecutorConfig` (their function and
        generator ops run in that pool of worker processes, made at build and shut down
        when the pipeline stops) or :data:`~spdl_rs.pipeline.defs.MAIN_PROCESS` (back to the
        pipeline's threads). A stage with its own ``executor=`` keeps it. ``buffer_size``: the
        items per transfer into the region on the opening marker, out of it on the closing
        one (see
        :class:`~spdl_rs.pipeline.defs.PlacementConfig`). Raises ``TypeError`` for another
        target."""
        cfg = PlacementConfig(target, buffer_size=buffer_size)
        self._stages.append(Stage(kind="placement", name=cfg.name, target=target, buffer_size=buffer_size))
        return self

    def get_config(self) -> Any:
        """The :class:`~spdl_rs.pipeline.defs.PipelineConfig` of this builder (SPDL's
        ``get_config``): ``build_pipeline(builder.get_config(), ...)`` builds the same
        pipeline, and :func:`profile_pipeline` takes it.

        Raises ``RuntimeError`` if the source or the sink is not set, or for a subinterpreter
        region before Python 3.14; ``ValueError`` for a ``to()`` region that is empty, left open
        at the sink, or holds an ``output_order="input"`` stage (as SPDL).
        """
        if self._source is None:
            raise RuntimeError("Source is not set. Did you call `add_source`?")
        if self._sink_size is None:
            raise RuntimeError("Sink is not set. Did you call `add_sink`?")
        validate_regions(self._stages)
        return builder_to_config(self)

    def build(
        self,
        *,
        num_threads: int,
        max_failures: MaxFailuresArg = -1,
        report_stats_interval: float = -1,
        queue_class: type[AsyncQueue] | None = None,
        task_hook_factory: Callable[[StageInfo], list[TaskHook]] | None = None,
        stage_id: int = 0,
        use_thread_output_queue: bool = False,
        prefetch_epochs: bool = False,
    ) -> "Pipeline[U]":
        """Builds the pipeline. No item is produced before :meth:`Pipeline.start` or the first
        ``get_item``.

        - ``num_threads``: Rust worker threads for the sync and native ops.
        - ``max_failures``: the failures tolerated by each stage that has no ``pipe(...,
          max_failures=)`` of its own, counted over all stages (as SPDL 0.8 counts them): an
          int (``-1``: no limit) or a :class:`fractions.Fraction` in (0, 1] (failed calls over
          all calls of all stages, checked after 100 calls). Past it the pipeline stops after
          the items already produced and the iterator raises :class:`PipelineFailure`.
          As SPDL, a rate is checked after every call (a count after every failure), so the
          successes that end the probation still catch a rate reached before it.
        - ``report_stats_interval``: seconds between the stats reports of each stage's
          :class:`TaskStatsHook` and :class:`StatsQueue` (logger ``spdl_rs.pipeline``, INFO)
          and of the engine's table (``spdl_rs.init_logging``); ``-1``: none.
        - ``queue_class``: the class standing for each stage's output queue (default
          ``config.get_default_queue_class()``, :class:`StatsQueue`), called as
          ``queue_class(stage_info, buffer_size=n)`` (the default class also with
          ``interval=report_stats_interval``); its ``stage_hook`` runs. Items travel through
          native queues, so a class overriding ``get``/``put`` is refused (``TypeError``).
        - ``task_hook_factory``: ``f(stage_info) -> list[TaskHook]`` for each stage (default:
          ``config.get_default_hook_class()(stage_info, interval=report_stats_interval)``,
          an engine-fed :class:`TaskStatsHook`).
        - ``stage_id``: the id of the source in :class:`StageInfo` (the stages count on).
        - ``use_thread_output_queue``: accepted for SPDL compatibility; the sink is always a
          native queue that the consumer reads with the GIL released, which is what it asks
          for.
        - ``prefetch_epochs`` (spdl_rs only, default ``False``): with a continuous source
          (``add_source(..., continuous=True)``: one epoch per :meth:`Pipeline.get_iterator`),
          the next epoch's first items load while the consumer takes this epoch's tail, so a
          new epoch starts without a wait; epoch boundaries and ``state_dict()`` stay exact.
          The source is iterated for epoch ``e + 1`` as soon as epoch ``e``'s iterator is
          exhausted, before the consumer asks for it: use it with a source that does not change
          between epochs (a :mod:`spdl_rs.sources` listing reshuffles by its own epoch count),
          not one whose ``set_epoch`` you call between epochs. The stats and the end-of-epoch
          failure warning then count the next epoch's first items with this epoch's.

        Raises ``RuntimeError`` if the source or the sink is not set (as SPDL) or threads
        cannot start, ``ValueError`` for a bad value (``prefetch_epochs=True`` with a source that
        is not continuous), ``TypeError`` for a bad type or a queue class that cannot be
        honoured.
        """
        # As SPDL's build(), which goes through get_config().
        if self._source is None:
            raise RuntimeError("Source is not set. Did you call `add_source`?")
        if self._sink_size is None:
            raise RuntimeError("Sink is not set. Did you call `add_sink`?")
        if not self._from_config:
            validate_regions(self._stages)
        if isinstance(num_threads, bool) or not isinstance(num_threads, numbers.Integral) or num_threads < 1:
            raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")
        at_most("num_threads", num_threads, MAX_THREADS)
        global_budget = MaxFailures.of(max_failures)
        if isinstance(report_stats_interval, bool) or not isinstance(report_stats_interval, numbers.Real):
            raise TypeError(f"report_stats_interval must be a number, got {type(report_stats_interval).__name__}")
        if isinstance(stage_id, bool) or not isinstance(stage_id, numbers.Integral):
            raise TypeError(f"stage_id must be an int, got {type(stage_id).__name__}")
        if not isinstance(use_thread_output_queue, bool):
            raise TypeError(f"use_thread_output_queue must be a bool, got {type(use_thread_output_queue).__name__}")
        if not isinstance(prefetch_epochs, bool):
            raise TypeError(f"prefetch_epochs must be a bool, got {type(prefetch_epochs).__name__}")
        if prefetch_epochs and not self._continuous:
            raise ValueError(
                "prefetch_epochs=True needs a continuous source (add_source(..., continuous=True)): "
                "a single-pass source has no next epoch"
            )
        if task_hook_factory is not None and not callable(task_hook_factory):
            raise TypeError(f"task_hook_factory must be callable, got {type(task_hook_factory).__name__}")
        # The default class too (set_default_queue_class takes one for region workers).
        _check_queue_class(queue_class if queue_class is not None else config.get_default_queue_class())
        if (callback := config.get_default_build_callback()) is not None:
            try:
                callback(builder_to_config(self))
            except Exception:
                _LG.exception("Build callback failed.")
        if config.is_diagnostic_mode_enabled():
            return _DiagnosticPipeline(self._copy(), config.diagnostic_mode_num_sources())  # type: ignore[return-value]
        build = _Build(self, num_threads, global_budget, report_stats_interval, queue_class, task_hook_factory, int(stage_id))
        build.background_tasks = self._background_tasks
        build.prefetch_epochs = prefetch_epochs
        return build.run()

    def _copy(self) -> "PipelineBuilder[T, U]":
        b: PipelineBuilder[T, U] = PipelineBuilder()
        b._source, b._continuous, b._sink_size = self._source, self._continuous, self._sink_size
        b._stages = [st.with_() for st in self._stages]
        return b
