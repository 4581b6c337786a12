"""asyncio helpers of SPDL 0.8's pipeline API: ``create_task``, ``BackgroundTask``, the
global settings they read (compact log, default background tasks), ``op_kind`` and
``check_output_order``."""

from __future__ import annotations

import asyncio
import inspect
import logging
import numbers
import os
import traceback
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["create_task", "BackgroundTask", "BackgroundTaskFactory"]

_LG = logging.getLogger("spdl_rs.pipeline")
T = TypeVar("T")

_TRUE = ("1", "true", "TRUE", "on", "ON", "yes", "YES")
_FALSE = ("0", "false", "FALSE", "off", "OFF", "no", "NO")


def _env_bool(name: str, default: bool = False) -> bool:
    """An environment variable read as SPDL reads it: 1/true/on/yes or 0/false/off/no; any
    other value logs a warning and counts as false."""
    if name not in os.environ:
        return default
    val = os.environ[name]
    if val in _TRUE:
        return True
    if val not in _FALSE:
        _LG.warning("Unexpected environment variable value `%s=%s`. Expected one of %s", name, val, _TRUE + _FALSE)
    return False


_COMPACT_LOG: bool | None = None


def _get_compact_log() -> bool:
    global _COMPACT_LOG
    if _COMPACT_LOG is None:
        _COMPACT_LOG = _env_bool("SPDL_PIPELINE_COMPACT_LOG")
    return _COMPACT_LOG


def _set_compact_log(value: bool | None) -> None:
    global _COMPACT_LOG
    _COMPACT_LOG = value


_counts: dict[tuple[str, int], int] = {}


def _log_done(
    task: asyncio.Task,
    log_cancelled: bool,
    suppress: bool,
    threshold: int,
    every: int,
) -> None:
    if task.cancelled():
        if log_cancelled:
            _LG.warning("Task [%s] was cancelled.", task.get_name())
        return
    err = task.exception()
    if err is None:
        return
    frames = traceback.extract_tb(err.__traceback__)
    where = (frames[-1].filename, frames[-1].lineno or 0) if frames else ("?", 0)
    if suppress:
        n = _counts[where] = _counts.get(where, 0) + 1
        if n > threshold:
            if (n - threshold) % every == 0:
                _LG.warning("%d exceptions from %s:%d so far (logs suppressed).", n, *where)
            return
    if _get_compact_log():
        _LG.error("Task [%s] failed: %s: %s (%s:%d)", task.get_name(), type(err).__name__, err, *where)
    else:
        _LG.error("Task [%s] failed: %s: %s", task.get_name(), type(err).__name__, err, exc_info=err)


def create_task(
    coro: Coroutine[Any, Any, T],
    name: str | None = None,
    log_cancelled: bool = False,
    suppress_repeated_logs: bool = False,
    suppression_threshold: int = 5,
    suppression_warning_interval: int = 100,
) -> asyncio.Task[T]:
    """``asyncio.create_task`` that logs the task's exception when it fails (SPDL's
    ``spdl.pipeline.create_task``); call it inside a running loop.

    ``log_cancelled``: also log a cancellation. ``suppress_repeated_logs``: after
    ``suppression_threshold`` exceptions from one source line, log only every
    ``suppression_warning_interval``-th. A compact log (``config.set_compact_log``,
    ``SPDL_PIPELINE_COMPACT_LOG``) logs one line instead of the traceback.
    """
    task = asyncio.create_task(coro, name=name)
    task.add_done_callback(
        lambda t: _log_done(t, log_cancelled, suppress_repeated_logs, suppression_threshold, suppression_warning_interval)
    )
    return task


class BackgroundTask:
    """A coroutine that runs next to the pipeline's stages (SPDL's
    ``spdl.pipeline.BackgroundTask``): override :meth:`run`. It starts on the pipeline's
    asyncio loop when the pipeline starts and is cancelled when the pipeline stops; its
    errors are logged, never fail the pipeline. Give factories (classes or callables making
    one) to ``config.set_default_background_tasks``."""

    async def run(self) -> None:
        """The task's body."""
        raise NotImplementedError


BackgroundTaskFactory = Callable[[], BackgroundTask]

_DEFAULT_BACKGROUND_TASKS: list[BackgroundTaskFactory] | None = None


def check_output_order(output_order: Any) -> bool:
    """Whether ``output_order`` keeps the input order (``"input"``) rather than the order of
    completion (``"completion"``), for ``PipelineBuilder.pipe`` and ``defs.Pipe``. Raises
    ``ValueError`` for anything else (SPDL's message)."""
    if output_order not in ("completion", "input"):
        raise ValueError(f'`output_order` must be either "completion" or "input". Found: {output_order}')
    return output_order == "input"


def check_concurrency(concurrency: Any) -> None:
    """The check of a stage's ``concurrency`` (``PipelineBuilder.pipe``, ``defs.Pipe``):
    ``TypeError`` unless an int (not a bool), ``ValueError`` below 1 (SPDL's messages)."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, numbers.Integral):
        raise TypeError(f"concurrency must be an int, got {type(concurrency).__name__}")
    if concurrency < 1:
        raise ValueError(f"`concurrency` value must be >= 1. Found: {concurrency}")


def check_sink_size(buffer_size: Any) -> None:
    """The check of a sink's ``buffer_size`` (``PipelineBuilder.add_sink``, ``defs.SinkConfig``):
    ``ValueError`` unless an int (not a bool) of 0 (unlimited) or more (SPDL's first message)."""
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, numbers.Integral):
        raise ValueError(f"`buffer_size` must be int. Found: {type(buffer_size)}.")
    if buffer_size < 0:
        raise ValueError(f"`buffer_size` must be 0 (unlimited) or more. Found: {buffer_size}")


def op_kind(op: Any) -> str:
    """How a Python op runs: ``"asyncgen"``, ``"async"``, ``"gen"`` or ``"func"``, read from the
    function or from a callable object's ``__call__``."""
    call = getattr(op, "__call__", None)
    if inspect.isasyncgenfunction(op) or inspect.isasyncgenfunction(call):
        return "asyncgen"
    if inspect.iscoroutinefunction(op) or inspect.iscoroutinefunction(call):
        return "async"
    if inspect.isgeneratorfunction(op) or inspect.isgeneratorfunction(call):
        return "gen"
    return "func"
