"""``spdl_rs.io.utils``: SPDL 0.8's ``spdl.io.utils`` (tracing, build and FFmpeg queries).

The tracing functions are :mod:`spdl_rs`'s own (``spdl_rs.tracing`` is the same function).
The build and FFmpeg queries (``built_with_cuda``, ``built_with_nvcodec``,
``built_with_nvjpeg``, ``get_ffmpeg_filters``, ``get_ffmpeg_log_level``,
``get_ffmpeg_versions``, ``set_ffmpeg_log_level``) are defined here and re-exported by
:mod:`spdl_rs.io`, which imports this module (never the other way round).
"""

from __future__ import annotations

from ._native import (
    built_with_nvcodec,
    built_with_nvjpeg,
    cuda_built,
    get_ffmpeg_log_level,
    get_ffmpeg_versions,
)
from ._native import get_ffmpeg_filters as _get_ffmpeg_filters
from ._native import set_ffmpeg_log_level as _set_ffmpeg_log_level
from ._tracing import trace_counter, trace_event, trace_gc, tracing

__all__ = ["tracing", "trace_event", "trace_counter", "trace_gc"]

def get_ffmpeg_filters() -> list[str]:
    """The names of the FFmpeg filters a ``filter_desc`` may use (SPDL's
    ``spdl.io.utils.get_ffmpeg_filters``). ``RuntimeError`` in a build without FFmpeg."""
    return _get_ffmpeg_filters()


def set_ffmpeg_log_level(val: int, /) -> None:
    """Sets FFmpeg's process-wide log level (SPDL's ``spdl.io.utils.set_ffmpeg_log_level``):
    ``-8`` quiet, ``0`` panic, ``8`` fatal, ``16`` error (spdl_rs's start value), ``24``
    warning, ``32`` info, ``40`` verbose, ``48`` debug, ``56`` trace. Read it back with
    :func:`get_ffmpeg_log_level`. ``RuntimeError`` in a build without FFmpeg."""
    _set_ffmpeg_log_level(val)


def built_with_cuda() -> bool:
    """Whether this spdl_rs was built with CUDA support (SPDL's
    ``spdl.io.utils.built_with_cuda``); ``spdl_rs.io.cuda_available`` says whether it can run
    here."""
    return cuda_built()
