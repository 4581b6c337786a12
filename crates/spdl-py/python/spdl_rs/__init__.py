"""spdl-rs: SPDL-compatible data loading with a Rust engine.

Submodules:

- :mod:`spdl_rs.pipeline`: ``PipelineBuilder`` / ``Pipeline`` with SPDL 0.8's names and semantics.
- :mod:`spdl_rs.ops`: native pipeline stages (``read_file``, ``decode_image``, ``load_image``,
  ``collate``, ``to_device``; ``load_video``, ``decode_video``, ``load_audio``, ``decode_audio``
  with FFmpeg) that run on Rust threads without the GIL.
- :mod:`spdl_rs.io`: ``load_image``, ``decode_image``, ``load_image_batch``, ``load_video``,
  ``load_video_clips``, ``load_audio`` (GIL released), the zero-copy ``CPUBuffer`` and
  ``CUDABuffer``, ``transfer_buffer``.
- :mod:`spdl_rs.sources`: native file listings (``list_files``, ``image_folder``).
- ``tracing(path)``, ``trace_event``, ``trace_counter``, ``trace_gc``: Perfetto-readable traces
  of every op of every stage (SPDL's ``spdl.io.utils`` tracing).

``__version__`` is the version of the Rust crates the extension was built from (the
workspace version in ``Cargo.toml``; the wheel's version is the same).
"""

from . import dataloader, io, ops, pipeline, source, sources
from ._native import __version__, init_logging
from ._tracing import trace_counter, trace_event, trace_gc, tracing


__all__ = [
    "dataloader",
    "io",
    "ops",
    "pipeline",
    "source",
    "sources",
    "init_logging",
    "tracing",
    "trace_event",
    "trace_counter",
    "trace_gc",
    "__version__",
]
