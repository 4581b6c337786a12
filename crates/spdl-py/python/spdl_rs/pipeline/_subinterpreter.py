"""SPDL's subinterpreter variants of the subprocess helpers: ``iterate_in_subinterpreter`` and
``run_pipeline_in_subinterpreter`` (Python 3.14's :mod:`concurrent.interpreters`).

spdl_rs does not run them: before Python 3.14 they raise SPDL's ``RuntimeError``; on 3.14 and
later ``NotImplementedError``, because spdl_rs's native module (PyO3) can be imported in the
main interpreter only, so neither a pipeline nor its CPUBuffer items can live in a
subinterpreter. Use :func:`~spdl_rs.pipeline.iterate_in_subprocess` and
:func:`~spdl_rs.pipeline.run_pipeline_in_subprocess`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ._stage import MaxFailuresArg

__all__ = ["iterate_in_subinterpreter", "run_pipeline_in_subinterpreter"]

T = TypeVar("T")


def _unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what} is not supported by spdl_rs: its native module can only be imported in the main "
        "interpreter. Use the subprocess variant instead."
    )


def iterate_in_subinterpreter(
    fn: Callable[[], Iterable[T]],
    *,
    buffer_size: int = 3,
    initializer: Callable[[], None] | Sequence[Callable[[], None]] | None = None,
    timeout: float | None = None,
) -> Iterable[T]:
    """SPDL's ``iterate_in_subinterpreter`` (the signature of SPDL 0.8).

    Raises ``RuntimeError`` on Python before 3.14 (as SPDL:
    ``iterate_in_subinterpreter requires Python 3.14 or later. Current version: X.Y``) and
    ``NotImplementedError`` on 3.14 and later (see the module notes).
    """
    if sys.version_info < (3, 14):
        v = sys.version_info
        raise RuntimeError(
            f"iterate_in_subinterpreter requires Python 3.14 or later. Current version: {v.major}.{v.minor}"
        )
    raise _unsupported("iterate_in_subinterpreter")


def run_pipeline_in_subinterpreter(
    config: Any,
    /,
    *,
    num_threads: int,
    max_failures: MaxFailuresArg = -1,
    report_stats_interval: float = -1,
    queue_class: Any = None,
    task_hook_factory: Any = None,
    background_tasks: Any = None,
    use_thread_output_queue: bool = False,
    **kwargs: Any,
) -> Iterable[Any]:
    """SPDL's ``run_pipeline_in_subinterpreter`` (the signature of SPDL 0.8; ``kwargs`` are
    :func:`iterate_in_subinterpreter`'s).

    Raises ``TypeError`` for a keyword :func:`iterate_in_subinterpreter` does not take;
    otherwise what :func:`iterate_in_subinterpreter` raises (``RuntimeError`` before Python
    3.14, as SPDL; ``NotImplementedError`` after).
    """
    unknown = set(kwargs) - {"buffer_size", "initializer", "timeout"}
    if unknown:
        raise TypeError(f"run_pipeline_in_subinterpreter got unexpected keyword arguments: {sorted(unknown)}")
    return iterate_in_subinterpreter(lambda: (), **kwargs)
