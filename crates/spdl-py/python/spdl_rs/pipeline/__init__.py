"""Data-loading pipelines with SPDL 0.8's public API (``spdl.pipeline``), run by the Rust
engine ``spdl-core``.

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

Names, signatures and behaviour follow SPDL 0.8; the differences are listed in
``crates/spdl-py/README.md`` (e.g. a ``TaskStatsHook`` is fed by the engine's counters and
costs nothing per task, ``continuous=True`` starts each epoch when the consumer asks for it).
Submodules: :mod:`spdl_rs.pipeline.config` (global defaults), :mod:`spdl_rs.pipeline.defs`
(config-defined pipelines: ``PipelineConfig``, ``Pipe``, ``Aggregate``, ``Merge``, ...; build
one with :func:`build_pipeline`). :func:`run_pipeline_in_subprocess` and
:func:`iterate_in_subprocess` run a pipeline or any iterable in a worker process;
:class:`SharedMemoryRingBuffer` and :class:`SharedMemorySegmentPool` (their ``arena=``) carry
large arrays and bytes from it through shared memory.
"""

from .._errors import PipelineFailure
from .._native import PipelineStats, QueueStats, StageStats, TimeSummary
from . import config, defs
from ._cache import cache_iterator
from . import _hooks
from ._hooks import *  # noqa: F403
from ._misc import BackgroundTask, BackgroundTaskFactory, create_task
from ._pgrp_stats import ProcessGroupResourceUsage, ProcessGroupStatsMonitor
from ._build import build_pipeline
from ._builder import PipelineBuilder
from ._pipeline import Pipeline, PipelineIterator
from ._profile import ProfileHook, ProfileResult, profile_pipeline
from ._priority import (
    PriorityExecutorEntrypoint,
    PriorityInterpreterPoolExecutor,
    PriorityProcessPoolExecutor,
    PriorityThreadPoolExecutor,
)
from ._subinterpreter import iterate_in_subinterpreter, run_pipeline_in_subinterpreter
from ._arena import SharedMemoryRingBuffer, SharedMemorySegmentPool
from ._subprocess import WorkerDied, iterate_in_subprocess, run_pipeline_in_subprocess

__all__ = [
    "PipelineBuilder",
    "build_pipeline",
    "run_pipeline_in_subprocess",
    "iterate_in_subprocess",
    "SharedMemoryRingBuffer",
    "SharedMemorySegmentPool",
    "run_pipeline_in_subinterpreter",
    "iterate_in_subinterpreter",
    "PriorityThreadPoolExecutor",
    "PriorityProcessPoolExecutor",
    "PriorityInterpreterPoolExecutor",
    "PriorityExecutorEntrypoint",
    "WorkerDied",
    "cache_iterator",
    "Pipeline",
    "PipelineIterator",
    "PipelineFailure",
    "PipelineStats",
    "StageStats",
    "QueueStats",
    "TimeSummary",
    "create_task",
    "BackgroundTask",
    "BackgroundTaskFactory",
    "ProcessGroupStatsMonitor",
    "ProcessGroupResourceUsage",
    "profile_pipeline",
    "ProfileHook",
    "ProfileResult",
    "config",
    "defs",
]
# Hooks, queues and their stats (_hooks.py): TaskHook, TaskStatsHook, TaskPerfStats, AsyncQueue,
# StatsQueue, QueuePerfStats, StageInfo, is_eof, is_epoch_end.
__all__ += _hooks.__all__
