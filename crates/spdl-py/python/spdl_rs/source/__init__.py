"""Sources, samplers and source utilities with SPDL 0.8's module name and API
(``spdl.source``): :class:`DistributedRandomSampler`, :class:`DistributedDeterministicSampler`,
the protocols :class:`IterableWithShuffle`, :class:`SizedIterable`,
:class:`SizedIterableWithShuffle`; submodules :mod:`spdl_rs.source.utils`
(``MergeIterator``, ``repeat_source``, ``embed_shuffle``),
:mod:`spdl_rs.source.local_directory` (``LocalDirectory``) and
:mod:`spdl_rs.source.imagenet` (``ImageNet``, ``parse_wnid``, ``get_mappings``).

spdl_rs's native sources (``SampleList``, ``Sampler``, ``image_folder``, iterated without
the GIL and resumable) are in :mod:`spdl_rs.sources`.
"""

from . import imagenet, local_directory, utils
from ._sampler import DistributedDeterministicSampler, DistributedRandomSampler
from ._type import IterableWithShuffle, SizedIterable, SizedIterableWithShuffle

__all__ = [
    "DistributedDeterministicSampler",
    "DistributedRandomSampler",
    "IterableWithShuffle",
    "SizedIterable",
    "SizedIterableWithShuffle",
    "imagenet",
    "local_directory",
    "utils",
]
