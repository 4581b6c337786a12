"""Global defaults of spdl_rs pipelines (SPDL 0.8's ``spdl.pipeline.config``).

Each setter takes effect for pipelines built afterwards. Environment variables, as SPDL's:
``SPDL_PIPELINE_COMPACT_LOG`` (one-line task failure logs), ``SPDL_PIPELINE_DIAGNOSTIC_MODE``
and ``SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS`` (read by :func:`is_diagnostic_mode_enabled` and
:func:`diagnostic_mode_num_sources`; values 1/true/on/yes or 0/false/off/no).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import _misc
from ._hooks import AsyncQueue, StatsQueue, TaskHook, TaskStatsHook

__all__ = [
    "is_diagnostic_mode_enabled",
    "diagnostic_mode_num_sources",
    "set_default_hook_class",
    "get_default_hook_class",
    "set_default_queue_class",
    "get_default_queue_class",
    "set_default_profile_hook",
    "get_default_profile_hook",
    "set_default_profile_callback",
    "get_default_profile_callback",
    "get_default_build_callback",
    "set_default_build_callback",
    "get_default_background_tasks",
    "set_default_background_tasks",
    "set_compact_log",
]

_HOOK_CLASS: type[TaskHook] | None = TaskStatsHook
_QUEUE_CLASS: type[AsyncQueue] = StatsQueue
_PROFILE_HOOK: Any = None
_PROFILE_CALLBACK: Callable[[Any], None] | None = None
_BUILD_CALLBACK: Callable[[Any], None] | None = None


def set_default_hook_class(hook_class: type[TaskHook] | None = TaskStatsHook) -> None:
    """The hook class each stage gets when ``build()`` has no ``task_hook_factory``: it is
    called as ``hook_class(stage_info, interval=report_stats_interval)``. ``None``: no hook.
    The default :class:`~spdl_rs.pipeline.TaskStatsHook` is engine-fed (costs nothing per
    task)."""
    global _HOOK_CLASS
    _HOOK_CLASS = hook_class


def get_default_hook_class() -> type[TaskHook] | None:
    """The current default hook class (``None``: disabled)."""
    return _HOOK_CLASS


def set_default_queue_class(queue_class: type[AsyncQueue] = StatsQueue) -> None:
    """The queue class used when ``build()`` has no ``queue_class``: called as
    ``queue_class(stage_info, buffer_size=n, interval=report_stats_interval)``. Raises
    ``TypeError`` for what is not an ``AsyncQueue`` class or factory. A class overriding
    ``get``/``put`` serves the stages of ``to()`` regions in the worker processes, where items
    pass through it; ``build()`` in the main process refuses it (``TypeError``)."""
    from ._hooks import _check_queue_class

    _check_queue_class(queue_class, items=False)
    global _QUEUE_CLASS
    _QUEUE_CLASS = queue_class


def get_default_queue_class() -> type[AsyncQueue]:
    """The current default queue class."""
    return _QUEUE_CLASS


def set_default_profile_hook(hook: Any = None) -> None:
    """The :class:`~spdl_rs.pipeline.ProfileHook` ``profile_pipeline`` uses when given none
    (``None``: no hook)."""
    global _PROFILE_HOOK
    _PROFILE_HOOK = hook


def get_default_profile_hook() -> Any:
    """The current default profile hook, or ``None``."""
    return _PROFILE_HOOK


def set_default_profile_callback(callback: Callable[[Any], None] | None = None) -> None:
    """The callback ``profile_pipeline`` calls with each stage's
    :class:`~spdl_rs.pipeline.ProfileResult` when given none (``None``: no callback)."""
    global _PROFILE_CALLBACK
    _PROFILE_CALLBACK = callback


def get_default_profile_callback() -> Callable[[Any], None] | None:
    """The current default profile callback, or ``None``."""
    return _PROFILE_CALLBACK


def set_default_build_callback(callback: Callable[[Any], None] | None) -> None:
    """A function called by every ``PipelineBuilder.build()`` with the builder's
    configuration (``builder.get_config()``) before the pipeline is made; an exception
    from it is logged, never raised. ``None`` removes it."""
    global _BUILD_CALLBACK
    _BUILD_CALLBACK = callback


def get_default_build_callback() -> Callable[[Any], None] | None:
    """The current build callback, or ``None``."""
    return _BUILD_CALLBACK


def set_default_background_tasks(tasks: list[_misc.BackgroundTaskFactory] | None) -> None:
    """Factories of :class:`~spdl_rs.pipeline.BackgroundTask` run next to every pipeline
    built afterwards (started with it, cancelled when it stops). ``None`` removes them."""
    _misc._DEFAULT_BACKGROUND_TASKS = None if tasks is None else list(tasks)


def get_default_background_tasks() -> list[_misc.BackgroundTaskFactory] | None:
    """The current default background task factories, or ``None``."""
    return _misc._DEFAULT_BACKGROUND_TASKS


def set_compact_log(value: bool | None) -> None:
    """``True``: a failing task created with :func:`~spdl_rs.pipeline.create_task` is logged
    in one line; ``False``: with its traceback; ``None``: as ``SPDL_PIPELINE_COMPACT_LOG``
    says (default false)."""
    _misc._set_compact_log(value)


def is_diagnostic_mode_enabled() -> bool:
    """Whether ``SPDL_PIPELINE_DIAGNOSTIC_MODE`` is set to a true value."""
    return _misc._env_bool("SPDL_PIPELINE_DIAGNOSTIC_MODE")


def diagnostic_mode_num_sources() -> int:
    """``SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS`` (default 1000): the inputs profiled per
    stage in diagnostic mode."""
    return int(os.environ.get("SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS", "1000"))
