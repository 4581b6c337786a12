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

Array, archive and WAV fast paths (parsed in Rust with the GIL released, zero-copy NumPy
views over the caller's bytes): ``load_npy``, ``load_npz`` / ``NpzFile``, ``iter_tarfile``,
``load_wav`` / ``parse_wav`` / ``WAVHeader``.

Video and audio (``load_video``, ``load_video_clips``, ``load_audio``) decode through the system
FFmpeg and need a build with the Cargo feature ``decode-ffmpeg`` (``cargo xtask wheel`` builds
one; ``pip install ./crates/spdl-py
--config-settings=maturin.build-args=--features=decode-ffmpeg``). Without it they raise
``RuntimeError`` saying so; :func:`ffmpeg_versions` returns ``None``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from . import _native
from ._native import (
    AudioFrames,
    CPUBuffer,
    CUDABuffer,
    VideoFrames,
    cuda_available,
    cuda_built,
    cuda_unavailable_reason,
    decode_image,
    decode_image_batch,
    ffmpeg_versions,
    load_image,
    load_decoder_plugin,
    load_image_batch,
    random_resized_crop,
)
from ._native import transfer_buffer as _transfer_buffer
from ._array import NpzFile, load_npy, load_npz
from ._tar import iter_tarfile
from ._wav import WAVHeader, load_wav, parse_wav

__all__ = [
    "CPUBuffer",
    "load_image",
    "decode_image",
    "load_image_batch",
    "decode_image_batch",
    "random_resized_crop",
    "CUDABuffer",
    "transfer_buffer",
    "cuda_built",
    "cuda_available",
    "cuda_unavailable_reason",
    "VideoFrames",
    "AudioFrames",
    "load_video",
    "load_video_clips",
    "load_audio",
    "ffmpeg_versions",
    "to_numpy",
    "to_torch",
    "load_decoder_plugin",
    "load_npy",
    "load_npz",
    "NpzFile",
    "iter_tarfile",
    "load_wav",
    "parse_wav",
    "WAVHeader",
]

#: A video/audio source: a local path, or the bytes of a whole file.
Src = str | os.PathLike[str] | bytes | bytearray | memoryview


def load_video(
    src: Src,
    timestamp: tuple[float, float] | None = None,
    *,
    indices: Sequence[int] | None = None,
    step: int | None = None,
    played_at: Sequence[float] | None = None,
    width: int | None = None,
    height: int | None = None,
    pixel_format: str = "rgb",
    filter: str = "bicubic",
    num_threads: int = 1,
    apply_rotation: bool = True,
    name: str | None = None,
) -> VideoFrames:
    """Decodes frames of a video into one ``uint8`` array, with the GIL released.

    ``src``: a path (``str`` / ``os.PathLike``, demuxed straight from the file) or the bytes of
    a whole file (``bytes`` without a copy; ``bytearray``, ``memoryview`` or a ``uint8``
    buffer are copied once). ``name`` names in-memory bytes in errors (default ``"<bytes>"``; SPDL's ``name``).

    Which frames (at most one of these; default: every frame, in presentation order):

    - ``timestamp=(start, end)``: frames with ``start <= pts < end``, seconds (``end`` may be
      ``float("inf")``); seeks first, so ``indices`` of the result is ``None``. As SPDL's
      ``load_video(src, timestamp=...)``;
    - ``indices=[...]``: these decoded-frame indices (from 0, presentation order), in this
      order, repeats allowed (decord's ``get_batch``);
    - ``step=k``: frames 0, k, 2k, ...;
    - ``played_at=[t, ...]``: for each time ``t`` (seconds), the frame on screen at ``t``
      (``pts <= t < next pts``).

    Output: ``width`` / ``height`` in pixels after rotation (one alone keeps the aspect ratio;
    default: the displayed size), ``pixel_format`` ``"rgb"`` / ``"bgr"`` (C = 3) or
    ``"gray"`` (C = 1), scaled with ``filter`` (``"nearest"``, ``"bilinear"``, ``"bicubic"``,
    ``"area"``). ``num_threads``: decoder threads (0: FFmpeg picks; 1 is best when a pipeline
    decodes many videos at once). ``apply_rotation``: turn frames as the stream's display
    matrix says, as players do (the result's ``rotation`` says by how much).

    Returns :class:`VideoFrames`: ``frames`` a zero-copy :class:`CPUBuffer` ``uint8``
    ``[T, H, W, C]``; ``pts`` seconds per frame; ``indices``; ``rotation``;
    ``num_decoded`` (the exact frame count when the whole stream was decoded).

    Raises ``FileNotFoundError`` / ``OSError`` naming a path that cannot be opened,
    ``ValueError`` naming the source and the reason for data that is not a usable video
    (``"empty"``, ``"unknown format"``, ``"truncated"``, ``"corrupt"``, ``"unsupported"``: no
    video stream) or an index / time out of range, ``TypeError`` for another ``src`` type,
    ``RuntimeError`` in a build without FFmpeg.
    """
    return _native.load_video(
        src,
        timestamp,
        indices=None if indices is None else list(indices),
        step=step,
        played_at=None if played_at is None else list(played_at),
        width=width,
        height=height,
        pixel_format=pixel_format,
        filter=filter,
        num_threads=num_threads,
        apply_rotation=apply_rotation,
        name=name,
    )


def load_video_clips(
    src: Src,
    num_clips: int,
    frames_per_clip: int,
    *,
    stride: int = 1,
    width: int | None = None,
    height: int | None = None,
    pixel_format: str = "rgb",
    filter: str = "bicubic",
    num_threads: int = 1,
    apply_rotation: bool = True,
    name: str | None = None,
) -> VideoFrames:
    """Samples ``num_clips`` clips of ``frames_per_clip`` frames, ``stride`` frames apart,
    spread evenly over the video (first clip at frame 0, last one ending at the last frame;
    pytorchvideo's uniform clip sampling), in one decode pass with the GIL released.

    The frame count comes from the demuxed packets, never from duration x frame rate; a video
    shorter than one clip repeats its last frame. Returns :class:`VideoFrames` with ``frames``
    ``uint8`` ``[N, T, H, W, C]`` and ``pts`` / ``indices`` of the ``N * T`` frames, clip after
    clip. Other arguments and errors as :func:`load_video`; ``ValueError`` for a zero count.
    """
    return _native.load_video_clips(
        src,
        num_clips,
        frames_per_clip,
        stride=stride,
        width=width,
        height=height,
        pixel_format=pixel_format,
        filter=filter,
        num_threads=num_threads,
        apply_rotation=apply_rotation,
        name=name,
    )


def load_audio(
    src: Src,
    timestamp: tuple[float, float] | None = None,
    *,
    sample_rate: int | None = None,
    num_channels: int | None = None,
    name: str | None = None,
) -> AudioFrames:
    """Decodes the best audio stream of a file into a ``float32`` waveform, GIL released.

    ``src`` and ``name`` as :func:`load_video`. ``timestamp=(start, end)`` keeps the samples
    with ``start <= t < end`` (seconds). ``sample_rate`` (Hz) and ``num_channels`` resample and
    remix through FFmpeg's swresample, like ``ffmpeg -ar R -ac C`` (a fresh resampler per call).

    Returns :class:`AudioFrames`: ``waveform`` a zero-copy :class:`CPUBuffer` ``float32``
    ``[C, S]`` (channels first, in [-1, 1]; 16-bit PCM scaled by 1/32768), ``sample_rate`` in
    Hz, ``start`` in seconds. Encoder delay/padding is trimmed as ffmpeg does (MP3 LAME tag).

    Raises as :func:`load_video` (``"unsupported"``: no audio stream).
    """
    return _native.load_audio(src, timestamp, sample_rate=sample_rate, num_channels=num_channels, name=name)


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
