"""Native listings and the distributed sampler.

A :class:`SampleList` given to ``PipelineBuilder.add_source`` is iterated in Rust (no GIL per
item), again for each epoch. :class:`Sampler` deals each rank its share of an epoch, as torch's
``DistributedSampler``; ``samples.select(list(sampler))`` is that share as a native source.
When the world size changes mid-epoch (8 ranks to 6 after a node loss), :func:`merge_states`
merges every old rank's ``state()`` and :meth:`Sampler.resume` deals the rest to the new ranks,
each remaining sample exactly once. :class:`TarShards` reads tar shards in the WebDataset
layout from local disk (shards dealt to ranks, shuffled per epoch, samples as ``dict``).
Both take the keywords of :class:`SamplingOptions` (``rank``, ``world_size``, ``shuffle``,
``seed``, ``drop_last``); an unknown keyword raises ``TypeError`` naming it.
"""

from __future__ import annotations

from ._native import SampleList, Sampler, TarShards, image_folder, list_files, merge_states
from ._options import SamplingOptions

__all__ = ["SampleList", "Sampler", "list_files", "image_folder", "merge_states", "TarShards", "SamplingOptions"]
