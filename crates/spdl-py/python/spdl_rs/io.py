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

import functools
import math
import os
from typing import Any, Unpack

from . import _native
from ._native import (
    AudioFrames,
    CPUBuffer,
    CUDABuffer,
    VideoFrames,
    VideoPackets,
    cuda_available,
    cuda_built,
    cuda_unavailable_reason,
    decode_image,
    decode_image_batch,
    ffmpeg_versions,
    get_ffmpeg_filters as _get_ffmpeg_filters,
    get_ffmpeg_log_level,
    get_ffmpeg_versions,
    load_image,
    load_decoder_plugin,
    load_image_batch,
    random_resized_crop,
)
from ._native import set_ffmpeg_log_level as _set_ffmpeg_log_level
from ._native import transfer_buffer as _transfer_buffer
from ._options import (
    AudioOptions,
    BatchOptions,
    BytesSampleOptions,
    ClipOptions,
    ImageOptions,
    SampleOptions,
    VideoOptions,
    VideoOutputOptions,
    VideoStageOptions,
)
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
    "VideoPackets",
    "demux_video",
    "decode_packets",
    "ffmpeg_versions",
    "get_video_filter_desc",
    "get_audio_filter_desc",
    "get_filter_desc",
    "get_buffer_desc",
    "get_abuffer_desc",
    "get_ffmpeg_versions",
    "get_ffmpeg_filters",
    "get_ffmpeg_log_level",
    "set_ffmpeg_log_level",
    "built_with_cuda",
    "built_with_nvcodec",
    "built_with_nvjpeg",
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
    "ImageOptions",
    "SampleOptions",
    "BytesSampleOptions",
    "BatchOptions",
    "VideoOutputOptions",
    "VideoOptions",
    "ClipOptions",
    "VideoStageOptions",
    "AudioOptions",
]

#: A video/audio source: a local path, or the bytes of a whole file.
Src = str | os.PathLike[str] | bytes | bytearray | memoryview


def load_video(
    src: Src,
    timestamp: tuple[float, float] | None = None,
    *,
    name: str | None = None,
    **options: Unpack[VideoOptions],
) -> VideoFrames:
    """Decodes frames of a video into one ``uint8`` array, with the GIL released.

    ``src``: a path (``str`` / ``os.PathLike``, demuxed straight from the file) or the bytes of
    a whole file (``bytes`` without a copy; ``bytearray``, ``memoryview`` or a ``uint8``
    buffer are copied once). ``name`` names in-memory bytes in errors (default ``"<bytes>"``; SPDL's ``name``).

    Which frames: ``timestamp=(start, end)``, the frames with ``start <= pts < end``, seconds
    (``end`` may be ``float("inf")``; seeks first, so ``indices`` of the result is ``None``; as
    SPDL's ``load_video(src, timestamp=...)``), or one of the selections of ``options``
    (:class:`VideoOptions`: ``indices``, ``step``, ``played_at``), or every frame. The other
    ``options`` set the output (``width``, ``height``, ``pixel_format``, ``filter``,
    ``num_threads``, ``apply_rotation``) and ``filter_desc``.

    ``filter_desc``: an FFmpeg filter graph (libavfilter) run on the selected frames, as SPDL's
    ``filter_desc`` and ``ffmpeg -vf``, e.g. from :func:`get_video_filter_desc`. It sees the
    frames after the rotation; its output is converted to ``pixel_format`` inside the graph (as
    ``ffmpeg -vf DESC -pix_fmt rgb24``, so the bytes equal the command line's), then scaled to
    ``width`` / ``height`` when given. The result's ``pts`` are the filtered frames' and its
    ``indices`` ``None``. Works with all frames, ``timestamp`` and ``step``; with ``indices`` or
    ``played_at`` it raises ``ValueError``. Default ``None``: no graph (unlike SPDL, whose
    default is ``get_video_filter_desc()``, i.e. ``"format=pix_fmts=rgb24"``).

    Returns :class:`VideoFrames`: ``frames`` a zero-copy :class:`CPUBuffer` ``uint8``
    ``[T, H, W, C]``; ``pts`` seconds per frame; ``indices``; ``rotation``;
    ``num_decoded`` (the exact frame count when the whole stream was decoded).

    Raises ``FileNotFoundError`` / ``OSError`` naming a path that cannot be opened,
    ``ValueError`` naming the source and the reason for data that is not a usable video
    (``"empty"``, ``"unknown format"``, ``"truncated"``, ``"corrupt"``, ``"unsupported"``: no
    video stream) or an index / time out of range, ``ValueError`` naming the description for a
    ``filter_desc`` FFmpeg rejects (``"invalid argument: invalid filter description ..."``),
    ``TypeError`` for another ``src`` type or an unknown keyword, ``RuntimeError`` in a build
    without FFmpeg.

    ``indices`` and ``step`` seek to the key frame before the wanted frames (found from the
    demuxed packets), so a frame near the end of a long file costs about what one near the
    start costs; the frames equal those of a decode from the start.
    """
    return _native.load_media("load_video", src, timestamp, name=name, **options)


def load_video_clips(
    src: Src,
    num_clips: int,
    frames_per_clip: int,
    *,
    name: str | None = None,
    **options: Unpack[ClipOptions],
) -> VideoFrames:
    """Samples ``num_clips`` clips of ``frames_per_clip`` frames, ``stride`` frames apart,
    spread evenly over the video (first clip at frame 0, last one ending at the last frame;
    pytorchvideo's uniform clip sampling), in one decode pass with the GIL released.

    The frame count comes from the demuxed packets, never from duration x frame rate; a video
    shorter than one clip repeats its last frame. Returns :class:`VideoFrames` with ``frames``
    ``uint8`` ``[N, T, H, W, C]`` and ``pts`` / ``indices`` of the ``N * T`` frames, clip after
    clip. ``options``: :class:`ClipOptions` (``stride`` and the output keywords of
    :func:`load_video`). Other arguments and errors as :func:`load_video`; ``ValueError`` for a
    zero count.
    """
    return _native.load_media(
        "load_video_clips", src, name=name, num_clips=num_clips, frames_per_clip=frames_per_clip, **options
    )


def load_audio(
    src: Src,
    timestamp: tuple[float, float] | None = None,
    *,
    name: str | None = None,
    **options: Unpack[AudioOptions],
) -> AudioFrames:
    """Decodes the best audio stream of a file into a ``float32`` waveform, GIL released.

    ``src`` and ``name`` as :func:`load_video`. ``timestamp=(start, end)`` keeps the samples
    with ``start <= t < end`` (seconds). ``options`` (:class:`AudioOptions`): ``sample_rate``
    (Hz) and ``num_channels`` resample and remix through FFmpeg's swresample, like
    ``ffmpeg -ar R -ac C`` (a fresh resampler per call); ``filter_desc``, an FFmpeg filter
    graph (as ``ffmpeg -af`` and SPDL's ``filter_desc``, e.g. from
    :func:`get_audio_filter_desc`) run on the decoded samples (after ``timestamp``) as planar
    ``float32`` at the stream's rate; its output, in any sample format, is read as
    ``float32`` ``[C, S]``, then resampled to ``sample_rate`` / ``num_channels`` when given.

    Returns :class:`AudioFrames`: ``waveform`` a zero-copy :class:`CPUBuffer` ``float32``
    ``[C, S]`` (channels first, in [-1, 1]; 16-bit PCM scaled by 1/32768), ``sample_rate`` in
    Hz, ``start`` in seconds. Encoder delay/padding is trimmed as ffmpeg does (MP3 LAME tag).

    Raises as :func:`load_video` (``"unsupported"``: no audio stream; ``ValueError`` for a
    ``filter_desc`` FFmpeg rejects).
    """
    return _native.load_media("load_audio", src, timestamp, name=name, **options)


def demux_video(
    src: Src, *, timestamp: tuple[float, float] | None = None, name: str | None = None
) -> VideoPackets:
    """Demuxes the best video stream of ``src`` into :class:`VideoPackets` (compressed packets
    and the codec parameters), with the GIL released, as SPDL's ``spdl.io.demux_video``: all
    packets, or with ``timestamp=(start, end)`` (seconds) those needed for the frames with
    ``start <= pts < end`` (from the key frame before ``start``). Decode them later, on any
    thread and as often as needed, with :func:`decode_packets`.

    ``src`` and ``name`` as :func:`load_video`. Raises as :func:`load_video`; ``ValueError`` for
    an empty window. (SPDL's ``demux_config`` / ``bsf`` are not supported.)
    """
    return _native.demux_video(src, timestamp=timestamp, name=name)


def decode_packets(
    packets: VideoPackets,
    filter_desc: str | None = None,
    *,
    num_frames: int = -1,
    **options: Unpack[VideoOutputOptions],
) -> VideoFrames:
    """Decodes :class:`VideoPackets` into :class:`VideoFrames` (``frames`` ``uint8``
    ``[T, H, W, C]``, ``pts``), with the GIL released: the frames of the packets' time window
    (all when they have none), at most ``num_frames`` (``-1``: all). ``filter_desc`` and the
    output ``options`` (:class:`VideoOutputOptions`) work as in :func:`load_video`, and the
    frames equal ``load_video``'s for the same window. SPDL's ``decode_packets`` followed by
    ``convert_frames`` (SPDL's ``decode_config`` is not supported).

    Raises ``ValueError`` naming the source for undecodable data or a bad ``filter_desc``.
    """
    return _native.decode_packets(packets, filter_desc, num_frames=num_frames, **options)


# ---------------------------------------------------------------- FFmpeg filter descriptions


def _trim_args(timestamp: tuple[float, float]) -> str | None:
    """``start=..:end=..`` for the finite ends of ``timestamp``, or ``None``."""
    start, end = timestamp
    args = [f"{k}={v}" for k, v in (("start", start), ("end", end)) if not math.isinf(v)]
    return ":".join(args) or None


def get_video_filter_desc(
    *,
    frame_rate: tuple[int, int] | None = None,
    timestamp: tuple[float, float] | None = None,
    scale_width: int | None = None,
    scale_height: int | None = None,
    scale_algo: str = "bicubic",
    scale_mode: str | None = "pad",
    crop_width: int | None = None,
    crop_height: int | None = None,
    pix_fmt: str | None = "rgb24",
    num_frames: int | None = None,
    pad_mode: str | None = None,
    filter_desc: str | None = None,
) -> str | None:
    """An FFmpeg video filter description for ``load_video(filter_desc=...)``, built as SPDL's
    ``spdl.io.get_video_filter_desc`` builds it (same arguments, defaults and string), in
    this order: ``fps``, ``trim``, scale, crop, frame-count padding, ``filter_desc``,
    ``format``.

    - ``frame_rate=(num, den)``: ``fps=num/den``.
    - ``timestamp=(start, end)``: ``trim`` to those seconds (infinite ends left open).
    - ``scale_width`` / ``scale_height``: output size (``0`` or missing keeps that side; a
      negative ``-n`` keeps the aspect ratio, rounded to a multiple of ``n``), with
      ``scale_algo`` (swscale's flag name). ``scale_mode``: ``"pad"`` fits the frame inside
      and pads with ``pad_mode`` (default ``"black"``), ``"crop"`` covers the size and crops
      the excess, ``None`` scales as is; anything else raises ``ValueError``.
    - ``crop_width`` / ``crop_height``: a centre crop after scaling.
    - ``num_frames``: exactly that many frames, padding by repeating the last frame (or with
      ``pad_mode`` colour frames; needs FFmpeg's ``tpad``, else ``RuntimeError``).
    - ``filter_desc``: more filters, appended before the pixel format.
    - ``pix_fmt``: output pixel format (``"rgb24"``, ``"gray8"``, ``"rgba"``, ...); ``None``
      leaves it. ``load_video`` still converts to its ``pixel_format`` at the end.

    Returns the description, or ``None`` when nothing was asked.
    """
    parts: list[str] = []
    if frame_rate is not None:
        parts.append(f"fps={frame_rate[0]}/{frame_rate[1]}")
    if timestamp is not None and (trim := _trim_args(timestamp)) is not None:
        parts.append(f"trim={trim}")
    if scale_width is not None or scale_height is not None:
        size = f"w={scale_width or 0}:h={scale_height or 0}"
        scale = f"scale={size}:flags={scale_algo}"
        if scale_mode is None:
            parts.append(scale)
        elif scale_mode == "pad":
            parts.append(f"{scale}:force_original_aspect_ratio=decrease")
            parts.append(f"pad={size}:x=-1:y=-1:color={pad_mode or 'black'}")
        elif scale_mode == "crop":
            parts.append(f"{scale}:force_original_aspect_ratio=increase")
            parts.append(f"crop={size}")
        else:
            raise ValueError(f'scale_mode must be "pad", "crop" or None, got {scale_mode!r}')
    if crop_width is not None or crop_height is not None:
        parts.append(f"crop=w={crop_width or 0}:h={crop_height or 0}")
    if num_frames is not None:
        if "tpad" not in _ffmpeg_filter_set():
            raise RuntimeError("num_frames needs FFmpeg's tpad filter (FFmpeg 4.2 or later)")
        if pad_mode is None:
            parts.append("tpad=stop=-1:stop_mode=clone")
        else:
            parts.append(f"tpad=stop=-1:stop_mode=add:color={pad_mode}")
        parts.append(f"trim=end_frame={num_frames}")
    if filter_desc is not None:
        parts.append(filter_desc)
    if pix_fmt is not None:
        parts.append(f"format=pix_fmts={pix_fmt}")
    return ",".join(parts) or None


def get_audio_filter_desc(
    *,
    sample_rate: int | None = None,
    num_channels: int | None = None,
    sample_fmt: str | None = "fltp",
    timestamp: tuple[float, float] | None = None,
    num_frames: int | None = None,
    filter_desc: str | None = None,
) -> str | None:
    """An FFmpeg audio filter description for ``load_audio(filter_desc=...)``, built as SPDL's
    ``spdl.io.get_audio_filter_desc`` builds it (same arguments, defaults and string), in
    this order: channel count, rate, ``atrim``, length, ``filter_desc``, sample format.

    - ``num_channels``: ``aformat=channel_layouts=Nc``; ``sample_rate``: ``aresample`` (Hz).
    - ``timestamp=(start, end)``: ``atrim`` to those seconds (infinite ends left open).
    - ``num_frames``: exactly that many samples (padding with silence).
    - ``sample_fmt``: output sample format (default ``"fltp"``; ``None`` leaves it).

    Returns the description, or ``None`` when nothing was asked.
    """
    parts: list[str] = []
    if num_channels is not None:
        parts.append(f"aformat=channel_layouts={num_channels}c")
    if sample_rate is not None:
        parts.append(f"aresample={sample_rate}")
    if timestamp is not None and (trim := _trim_args(timestamp)) is not None:
        parts.append(f"atrim={trim}")
    if num_frames is not None:
        parts += ["apad", f"atrim=end_sample={num_frames}"]
    if filter_desc is not None:
        parts.append(filter_desc)
    if sample_fmt is not None:
        parts.append(f"aformat=sample_fmts={sample_fmt}")
    return ",".join(parts) or None


def get_filter_desc(packets: VideoPackets, **filter_args: Any) -> str | None:
    """The filter description for decoding ``packets`` (SPDL's ``spdl.io.get_filter_desc``):
    :func:`get_video_filter_desc` with ``filter_args``, without a ``trim`` (the packets' time
    window is applied when decoding). Only :class:`VideoPackets` exist in spdl_rs so far;
    anything else raises ``TypeError``."""
    if not isinstance(packets, VideoPackets):
        raise TypeError(f"get_filter_desc expects VideoPackets, got {type(packets).__name__}")
    return get_video_filter_desc(timestamp=None, **filter_args)


def get_buffer_desc(codec: Any, label: str | None = None, pix_fmt: str | None = None) -> str:
    """The ``buffer`` source filter description (the video input of a filter graph) for frames
    described by ``codec``, as SPDL's ``spdl.io.get_buffer_desc``: ``codec`` is any object with
    ``width``, ``height``, ``pix_fmt``, ``time_base`` ``(num, den)`` and
    ``sample_aspect_ratio`` ``(num, den)``. ``label`` names the node (``buffer@label``);
    ``pix_fmt`` overrides the codec's."""
    name = "buffer" if label is None else f"buffer@{label}"
    tb, sar = codec.time_base, codec.sample_aspect_ratio
    return (
        f"{name}=video_size={codec.width}x{codec.height}:pix_fmt={pix_fmt or codec.pix_fmt}"
        f":time_base={tb[0]}/{tb[1]}:pixel_aspect={sar[0]}/{sar[1]}"
    )


def get_abuffer_desc(codec: Any, *, label: str | None = None, sample_fmt: str | None = None) -> str:
    """The ``abuffer`` source filter description (the audio input of a filter graph), as SPDL's
    ``spdl.io.get_abuffer_desc``: ``codec`` is any object with ``time_base`` ``(num, den)``,
    ``sample_rate``, ``sample_fmt`` and ``channel_layout``. ``label`` names the node
    (``abuffer@label``); ``sample_fmt`` overrides the codec's."""
    name = "abuffer" if label is None else f"abuffer@{label}"
    tb = codec.time_base
    return (
        f"{name}=time_base={tb[0]}/{tb[1]}:sample_rate={codec.sample_rate}"
        f":sample_fmt={sample_fmt or codec.sample_fmt}:channel_layout={codec.channel_layout}"
    )


# ---------------------------------------------------------------- FFmpeg and build utilities


@functools.cache
def _ffmpeg_filter_set() -> frozenset[str]:
    return frozenset(_get_ffmpeg_filters())


def get_ffmpeg_filters() -> list[str]:
    """The names of the FFmpeg filters a ``filter_desc`` may use (SPDL's
    ``spdl.io.utils.get_ffmpeg_filters``). ``RuntimeError`` in a build without FFmpeg."""
    return _get_ffmpeg_filters()


def set_ffmpeg_log_level(val: int, /) -> None:
    """Sets FFmpeg's process-wide log level (SPDL's ``spdl.io.utils.set_ffmpeg_log_level``):
    ``-8`` quiet, ``0`` panic, ``8`` fatal, ``16`` error (spdl_rs's start value), ``24``
    warning, ``32`` info, ``40`` verbose, ``48`` debug, ``56`` trace. Read it back with
    :func:`get_ffmpeg_log_level`. ``RuntimeError`` in a build without FFmpeg."""
    _set_ffmpeg_log_level(val)


def built_with_cuda() -> bool:
    """Whether this spdl_rs was built with CUDA support (SPDL's
    ``spdl.io.utils.built_with_cuda``); :func:`cuda_available` says whether it can run here."""
    return cuda_built()


def built_with_nvcodec() -> bool:
    """SPDL's ``built_with_nvcodec``: always ``False``, spdl_rs has no NVDEC/NVENC decoding."""
    return False


def built_with_nvjpeg() -> bool:
    """SPDL's ``built_with_nvjpeg``: always ``False``, spdl_rs's Python API has no nvJPEG
    decoding."""
    return False


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
