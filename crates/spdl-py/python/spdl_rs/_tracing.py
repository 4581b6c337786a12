"""Traces of a run, for Perfetto (SPDL 0.8's ``spdl.io.utils.tracing``, ``trace_event``,
``trace_counter``, ``trace_gc``).

The trace shows every op of every stage as a slice named after its stage, on the thread that
ran it (``spdl-worker-N`` for sync and native ops, ``spdl-scheduler`` for async ones), plus the
slices Python code marks with :func:`trace_event`. The file is Chrome's JSON trace format,
which https://ui.perfetto.dev and ``chrome://tracing`` open (SPDL writes Perfetto's protobuf
format).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from . import _native

__all__ = ["tracing", "trace_event", "trace_counter", "trace_gc"]


def _name_process(path: str, name: str) -> None:
    """Puts a ``process_name`` record first in the finished trace file."""
    with open(path, "r+", encoding="utf-8") as f:
        body = f.read()
        head, sep, rest = body.partition("[\n")
        meta = json.dumps({"ph": "M", "pid": 1, "name": "process_name", "args": {"name": name}})
        more = ",\n" if rest.strip() not in ("", "]") else ""
        f.seek(0)
        f.write(head + sep + meta + more + rest)
        f.truncate()


@contextmanager
def tracing(
    output: int | str | os.PathLike,
    buffer_size: int = 4096,
    process_name: str | None = None,
    enable: bool = True,
) -> Iterator[None]:
    """Writes a trace of everything run inside the ``with`` block.

    ``output``: a file path, or an open file descriptor (duplicated; left open).
    ``buffer_size``: the file's write buffer in KiB. ``process_name``: the process's name in
    the trace (default ``sys.argv[0]``; with a descriptor, only when given, and then the
    descriptor must be a regular file opened for reading too). ``enable=False``: no trace.

    The first trace starts a writer thread that lives as long as the process.

    Raises ``RuntimeError`` if a trace is already being written, or if another ``tracing``
    subscriber was installed in this process; ``OSError`` if the file cannot be created.
    """
    if not enable:
        yield
        return
    if isinstance(output, bool) or not isinstance(output, (int, str, os.PathLike)):
        raise TypeError(f"output must be a path or a file descriptor, got {type(output).__name__}")
    is_fd = isinstance(output, int)
    _native._trace_start(None if is_fd else os.fspath(output), output if is_fd else None, int(buffer_size))
    try:
        yield
    finally:
        _native._trace_stop()
        if not is_fd:
            _name_process(os.fspath(output), sys.argv[0] if process_name is None else process_name)
        elif process_name is not None:
            path = f"/proc/self/fd/{output}"
            _name_process(path, process_name)


@contextmanager
def trace_event(name: str) -> Iterator[None]:
    """Marks the ``with`` block as a slice named ``name`` on the calling thread."""
    span = _native._trace_begin(str(name))
    try:
        yield
    finally:
        span.end()


def trace_counter(i: int, val: int | float) -> None:
    """Records counter ``i`` (0 to 7, as SPDL) at value ``val``: an instant event named
    ``counter i`` with a ``value`` argument (the JSON format has no counter track from here).
    Raises ``ValueError`` for another ``i``."""
    if not 0 <= i <= 7:
        raise ValueError(f"counter index must be in [0, 7], got {i}")
    _native._trace_counter(int(i), float(val))


_gc_spans: list = []


def _on_gc(phase: str, _info: object) -> None:
    if phase == "start":
        _gc_spans.append(_native._trace_begin("gc"))
    elif _gc_spans:
        _gc_spans.pop().end()


def trace_gc() -> None:
    """Marks each garbage collection as a ``gc`` slice (on the thread that collects)."""
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)
