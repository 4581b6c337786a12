"""Native listings. A :class:`SampleList` given to ``PipelineBuilder.add_source`` is iterated in
Rust (no GIL per item), again for each epoch."""

from __future__ import annotations

from ._native import SampleList, image_folder, list_files

__all__ = ["SampleList", "list_files", "image_folder"]
