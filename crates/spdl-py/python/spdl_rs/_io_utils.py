"""``spdl_rs.io.utils``: SPDL 0.8's ``spdl.io.utils`` (tracing, build and FFmpeg queries).

The tracing functions are :mod:`spdl_rs`'s own (``spdl_rs.tracing`` is the same function).
The build and FFmpeg queries (``built_with_cuda``, ``built_with_nvcodec``,
``built_with_nvjpeg``, ``get_ffmpeg_filters``, ``get_ffmpeg_log_level``,
``get_ffmpeg_versions``, ``set_ffmpeg_log_level``) are those of :mod:`spdl_rs.io`, looked up
there when first used; a name this build's :mod:`spdl_rs.io` lacks raises ``AttributeError``.
"""

from __future__ import annotations

from typing import Any

from ._tracing import trace_counter, trace_event, trace_gc, tracing

#: SPDL's names that live in :mod:`spdl_rs.io`.
_FROM_IO = (
    "built_with_cuda",
    "built_with_nvcodec",
    "built_with_nvjpeg",
    "get_ffmpeg_filters",
    "get_ffmpeg_log_level",
    "get_ffmpeg_versions",
    "set_ffmpeg_log_level",
)

__all__ = ["tracing", "trace_event", "trace_counter", "trace_gc"]


def __getattr__(name: str) -> Any:
    if name in _FROM_IO:
        from . import io

        if hasattr(io, name):
            return getattr(io, name)
    raise AttributeError(f"module 'spdl_rs.io.utils' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FROM_IO))
