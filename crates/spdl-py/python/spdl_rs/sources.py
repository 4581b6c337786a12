"""Native listings and the distributed sampler.

A :class:`SampleList` given to ``PipelineBuilder.add_source`` is iterated in Rust (no GIL per
item), again for each epoch. :class:`Sampler` deals each rank its share of an epoch, as torch's
``DistributedSampler``; ``samples.select(list(sampler))`` is that share as a native source.
"""

from __future__ import annotations

from ._native import SampleList, Sampler, image_folder, list_files

__all__ = ["SampleList", "Sampler", "list_files", "image_folder"]
