"""Data-loader helpers with SPDL 0.8's API (``spdl.dataloader``): :class:`DataLoader` (a
boxed source -> preprocess -> batch -> aggregate -> transfer pipeline),
:func:`get_pytorch_dataloader` (a drop-in for ``torch.utils.data.DataLoader`` over a
map-style dataset, driven by a process pool) and :class:`CacheDataLoader` (headspace
analysis: replays cached batches)."""

from ._cache import CacheDataLoader
from ._dataloader import DataLoader
from ._pytorch import PyTorchDataLoader, get_pytorch_dataloader

__all__ = ["CacheDataLoader", "DataLoader", "PyTorchDataLoader", "get_pytorch_dataloader"]
