"""Image loading with the GIL released, and the zero-copy :class:`CPUBuffer`.

``load_image`` / ``decode_image`` return ``[H, W, C]`` buffers; ``load_image_batch`` returns
``[N, H, W, C]`` (or normalized ``[N, C, H, W]`` ``float32``); ``decode_image_batch`` does the
same for a batch of bytes (or paths) and reports failed samples instead of raising. ``numpy.asarray(buf)``,
``numpy.from_dlpack(buf)`` and ``torch.from_dlpack(buf)`` share the buffer's memory.
"""

from __future__ import annotations

from typing import Any

from ._native import CPUBuffer, decode_image, decode_image_batch, load_image, load_image_batch

__all__ = [
    "CPUBuffer",
    "load_image",
    "decode_image",
    "load_image_batch",
    "decode_image_batch",
    "to_numpy",
    "to_torch",
]


def to_numpy(buffer: CPUBuffer) -> Any:
    """A NumPy array sharing ``buffer``'s memory (no copy), same shape and dtype.

    Mirrors SPDL's ``spdl.io.to_numpy``. Raises ``ImportError`` without NumPy.
    """
    import numpy as np

    return np.asarray(buffer)


def to_torch(buffer: CPUBuffer) -> Any:
    """A CPU ``torch.Tensor`` sharing ``buffer``'s memory through DLPack (no copy).

    Mirrors SPDL's ``spdl.io.to_torch``. Raises ``ImportError`` without PyTorch.
    """
    import torch

    return torch.from_dlpack(buffer)
