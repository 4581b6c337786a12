"""Image loading with the GIL released, and the zero-copy :class:`CPUBuffer` / :class:`CUDABuffer`.

``load_image`` / ``decode_image`` return ``[H, W, C]`` buffers; ``load_image_batch`` returns
``[N, H, W, C]`` (or normalized ``[N, C, H, W]`` ``float32``); ``decode_image_batch`` does the
same for a batch of bytes (or paths) and reports failed samples instead of raising. ``numpy.asarray(buf)``,
``numpy.from_dlpack(buf)`` and ``torch.from_dlpack(buf)`` share the buffer's memory.
``random_resized_crop`` tells which box ``transform="train"`` takes for a sample, so that
masks or bounding boxes can follow the image.

GPU (a wheel built with the ``cuda`` feature): ``transfer_buffer(buf, device)`` copies a
``CPUBuffer`` to a :class:`CUDABuffer`; ``torch.from_dlpack(cuda_buf)`` shares device memory.
``cuda_available()`` / ``cuda_unavailable_reason()`` say whether that can work here.
"""

from __future__ import annotations

from typing import Any

from ._native import (
    CPUBuffer,
    CUDABuffer,
    cuda_available,
    cuda_built,
    cuda_unavailable_reason,
    decode_image,
    decode_image_batch,
    load_image,
    load_image_batch,
    random_resized_crop,
)
from ._native import transfer_buffer as _transfer_buffer

__all__ = [
    "CPUBuffer",
    "CUDABuffer",
    "load_image",
    "decode_image",
    "load_image_batch",
    "decode_image_batch",
    "random_resized_crop",
    "to_numpy",
    "to_torch",
    "transfer_buffer",
    "cuda_built",
    "cuda_available",
    "cuda_unavailable_reason",
]


def transfer_buffer(buffer: CPUBuffer, device: str | int | None = None) -> CUDABuffer:
    """Copies ``buffer`` to a CUDA device: a :class:`CUDABuffer` of the same shape and dtype.

    A one-off copy for use outside a pipeline (in a pipeline, :func:`spdl_rs.ops.to_device`
    collates into pinned memory first). ``device``: ``"cuda:N"``, ``N``, ``"cuda"`` or
    ``None`` (the ``LOCAL_RANK`` device, 0 when unset). The GIL is released and the call
    returns once the copy is complete (through a pinned staging buffer when one is free, else
    from pageable memory; up to 8 staging buffers per device are kept for later calls).

    Raises ``RuntimeError`` in a build without the ``cuda`` feature (the message says how to
    rebuild), without a driver (``"no CUDA driver: ..."``), for a device index out of range
    (``"invalid CUDA device ..."``) or a failed driver call; ``ValueError`` for a bad
    ``device``; ``TypeError`` when ``buffer`` is not a ``CPUBuffer``. Mirrors SPDL's
    ``spdl.io.transfer_buffer``.
    """
    return _transfer_buffer(buffer, device)


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
