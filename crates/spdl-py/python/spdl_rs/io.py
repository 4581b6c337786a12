"""Image loading with the GIL released, and the zero-copy :class:`CPUBuffer` / :class:`CUDABuffer`.

``load_image`` / ``decode_image`` return ``[H, W, C]`` buffers; ``load_image_batch`` returns
``[N, H, W, C]`` (or normalized ``[N, C, H, W]`` ``float32``); ``decode_image_batch`` does the
same for a batch of bytes (or paths) and reports failed samples instead of raising. ``numpy.asarray(buf)``,
``numpy.from_dlpack(buf)`` and ``torch.from_dlpack(buf)`` share the buffer's memory.
``random_resized_crop`` tells which box ``transform="train"`` takes for a sample, so that
masks or bounding boxes can follow the image.

GPU (a wheel built with the ``cuda`` feature): ``transfer_buffer(buf, device)`` copies a
``CPUBuffer`` to a :class:`CUDABuffer`; ``torch.from_dlpack(cuda_buf)`` shares device memory.
``cuda_available()`` / ``cuda_unavailable_reason()`` say whether that can work here. SPDL's
GPU names are here too (``cuda_config``, ``device_config=`` on the loaders, ``cpu_storage``,
``transfer_tensor_h2d`` / ``transfer_tensor_d2h``, ``to_jax``, ``to_numba``,
``decode_image_nvjpeg``, ``load_image_batch_nvjpeg``, the NVDEC functions, ``nv12_to_rgb``):
see ``spdl_rs/_gpu.py``.

Array, archive and WAV fast paths (parsed in Rust with the GIL released, zero-copy NumPy
views over the caller's bytes): ``load_npy``, ``load_npz`` / ``NpzFile``, ``iter_tarfile``,
``load_wav`` / ``parse_wav`` / ``WAVHeader``.

Many-epoch training: :class:`DecodedCache` serves a file written once by ``spdl cache`` (images
decoded and resized to one shape) as training batches, with random crop, flip and normalize
applied at read time and no decode.

Video and audio (``load_video``, ``load_video_clips``, ``load_audio``) decode through the system
FFmpeg and need a build with the Cargo feature ``decode-ffmpeg`` (``cargo xtask wheel`` builds
one; ``pip install ./crates/spdl-py
--config-settings=maturin.build-args=--features=decode-ffmpeg``). Without it they raise
``RuntimeError`` saying so; :func:`ffmpeg_versions` returns ``None``.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, Unpack

from . import _native
from ._native import (
    CPUBuffer,
    CUDABuffer,
    DecodedAudio,
    DecodedCache,
    DecodedVideo,
    build_decoded_cache,
    cuda_available,
    cuda_built,
    cuda_unavailable_reason,
    decode_image,
    decode_image_batch,
    ffmpeg_versions,
    get_ffmpeg_log_level,
    get_ffmpeg_versions,
    load_decoder_plugin,
    random_resized_crop,
)
from ._io_utils import built_with_cuda, get_ffmpeg_filters, set_ffmpeg_log_level
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
from . import _gpu
from ._gpu import *  # noqa: F403  (the GPU half: its __all__ is part of this one)
from ._gpu import CPUStorage
from ._tar import iter_tarfile
from ._wav import WAVHeader, load_wav, parse_wav

# SPDL's packet/frame-level media API (`spdl_rs._native` has it in FFmpeg builds only).
_MEDIA_API = (
    "VideoFrames",
    "AudioFrames",
    "ImageFrames",
    "convert_frames",
    "convert_array",
    "create_reference_video_frame",
    "create_reference_audio_frame",
    "FilterGraph",
    "DemuxConfig",
    "demux_config",
    "VideoCodec",
    "AudioCodec",
    "ImageCodec",
    "VideoPackets",
    "AudioPackets",
    "ImagePackets",
    "Demuxer",
    "demux_video",
    "demux_audio",
    "demux_image",
    "BSF",
    "apply_bsf",
    "DecodeConfig",
    "decode_config",
    "decode_packets",
    "sample_decode_video",
    "Decoder",
    "VideoDecoder",
    "AudioDecoder",
    "VideoEncodeConfig",
    "AudioEncodeConfig",
    "video_encode_config",
    "audio_encode_config",
    "Encoder",
    "VideoEncoder",
    "AudioEncoder",
    "Muxer",
    "encode_image",
)


def _missing_media_api(name: str) -> Callable[..., Any]:
    """What ``name`` of the media API is in a build without FFmpeg: every call raises
    ``RuntimeError`` saying how to get a build with it, naming the call's keywords (none is
    taken, so none is ignored)."""

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        call = ", ".join([*(["..."] if args else []), *(f"{k}=..." for k in kwargs)])
        raise RuntimeError(
            f"spdl_rs.io.{name}({call}): this spdl_rs was built without FFmpeg; rebuild with the "
            "Cargo feature `decode-ffmpeg` (`cargo xtask wheel` builds one)"
        )

    unavailable.__name__ = name
    return unavailable


try:
    from ._native import (
        VideoFrames,
        AudioFrames,
        ImageFrames,
        convert_frames,
        convert_array,
        create_reference_video_frame,
        create_reference_audio_frame,
        FilterGraph,
        DemuxConfig,
        demux_config,
        VideoCodec,
        AudioCodec,
        ImageCodec,
        VideoPackets,
        AudioPackets,
        ImagePackets,
        Demuxer,
        demux_video,
        demux_audio,
        demux_image,
        BSF,
        apply_bsf,
        DecodeConfig,
        decode_config,
        decode_packets,
        sample_decode_video,
        Decoder,
        VideoDecoder,
        AudioDecoder,
        VideoEncodeConfig,
        AudioEncodeConfig,
        video_encode_config,
        audio_encode_config,
        Encoder,
        VideoEncoder,
        AudioEncoder,
        Muxer,
        encode_image,
    )
except ImportError:  # a build without FFmpeg: the names raise RuntimeError when called
    for _name in _MEDIA_API:
        globals()[_name] = _missing_media_api(_name)
    del _name

_convert_frames = convert_frames


def convert_frames(frames: Any, storage: Any = None) -> CPUBuffer:
    """SPDL's ``convert_frames``: frame objects (or a list of them, stacked on a new first
    axis) as one zero-copy :class:`CPUBuffer` (layouts in ``VideoFrames`` / ``AudioFrames`` /
    ``ImageFrames``). With ``storage`` (a :class:`CPUStorage` from :func:`cpu_storage`) the
    data is copied into it and the buffer shares the storage's memory (``ValueError`` when it
    is too small). ``ValueError`` for frames of a pixel/sample format without an array layout
    (add ``format=pix_fmts=rgb24`` / ``aformat=sample_fmts=fltp`` to the filter)."""
    out = _convert_frames(frames)
    if storage is None:
        return out
    if not isinstance(storage, CPUStorage):
        raise TypeError(f"storage must be a CPUStorage (cpu_storage), got {type(storage).__name__}")
    return _native._copy_into_storage(storage, out)


_NativeDecoder = Decoder
_FILTER_DEFAULT = object()


def Decoder(codec: Any, *, filter_desc: Any = _FILTER_DEFAULT, decode_config: Any = None) -> Any:
    """SPDL's ``spdl.io.Decoder(codec, *, filter_desc=<default>, decode_config=None)``: a
    streaming decoder of the class of ``codec``'s kind, as SPDL returns: :class:`VideoDecoder`
    for a :class:`VideoCodec`, :class:`AudioDecoder` for an :class:`AudioCodec` (both
    subclasses of the native ``Decoder``, which decodes an :class:`ImageCodec`'s packets).
    Methods: ``streaming_decode_packets(packets)``, ``flush()``, ``decode(packets)``.
    ``filter_desc`` as :func:`decode_packets` (default: SPDL's ``rgb24`` / ``fltp``
    conversion); ``None`` for no filter. Raises ``TypeError`` for an object that is not a
    codec, ``ValueError`` for a decoder or option FFmpeg does not know."""
    if not isinstance(_NativeDecoder, type):  # a build without FFmpeg: raises RuntimeError
        return _NativeDecoder(codec)
    if isinstance(codec, VideoCodec):
        cls = VideoDecoder
    elif isinstance(codec, AudioCodec):
        cls = AudioDecoder
    else:
        cls = _NativeDecoder
    if filter_desc is _FILTER_DEFAULT:
        return cls(codec, decode_config=decode_config)
    return cls(codec, filter_desc=filter_desc, decode_config=decode_config)


__all__ = [
    "CPUBuffer",
    "DecodedCache",
    "build_decoded_cache",
    "load_image",
    "decode_image",
    "load_image_batch",
    "decode_image_batch",
    "random_resized_crop",
    "CUDABuffer",
    "cuda_built",
    "cuda_available",
    "cuda_unavailable_reason",
    "DecodedVideo",
    "DecodedAudio",
    "load_video",
    "load_video_clips",
    "load_audio",
    *_MEDIA_API,
    "save_image",
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
# The GPU half (spdl_rs/_gpu.py): cuda_config, transfer_*, nvJPEG, NVDEC, NV12.
__all__ += _gpu.__all__

_LG = logging.getLogger(__name__)

#: A video/audio source: a local path, or the bytes of a whole file.
Src = str | os.PathLike[str] | bytes | bytearray | memoryview


def load_video(
    src: Src,
    timestamp: tuple[float, float] | None = None,
    *,
    name: str | None = None,
    **options: Unpack[VideoOptions],
) -> DecodedVideo:
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

    ``apply_rotation=True`` turns frames as the stream's display matrix says, as players do (the
    result's ``rotation`` says by how much). By default frames are not turned, as SPDL 0.8 (its
    ``load_video`` and ``decode_packets`` return the coded frames, e.g. ``32x64`` for the
    90-degree clips of ``../shared/data/hard/13-video-rotation-metadata``); the result's
    ``stream_rotation`` reports the angle either way. The packet API (``decode_packets``, ``Decoder``) never rotates, as SPDL's;
    ``VideoCodec.rotation`` tells the angle. ``demux_config`` / ``decode_config`` (from
    :func:`demux_config` / :func:`decode_config`) force a container format, demuxer options, a
    decoder and its options.

    ``filter_desc``: an FFmpeg filter graph (libavfilter) run on the selected frames, as SPDL's
    ``filter_desc`` and ``ffmpeg -vf``, e.g. from :func:`get_video_filter_desc`. It sees the
    frames after the rotation; its output is converted to ``pixel_format`` inside the graph (as
    ``ffmpeg -vf DESC -pix_fmt rgb24``, so the bytes equal the command line's), then scaled to
    ``width`` / ``height`` when given. The result's ``pts`` are the filtered frames' and its
    ``indices`` ``None``. Works with all frames, ``timestamp`` and ``step``; with ``indices`` or
    ``played_at`` it raises ``ValueError``. Default: no graph (the frames are converted to
    ``pixel_format``, RGB by default, as SPDL's default ``"format=pix_fmts=rgb24"`` gives).

    SPDL's call form, ``filter_desc`` given without spdl_rs's own keywords (``demux_config`` /
    ``decode_config`` may come with it), decodes as SPDL's ``load_video`` does: the packets of
    the window through the filter, frames never rotated, and ``frames`` in the filter's output
    format with SPDL's layout (``[T, H, W, 3]`` for ``rgb24``, ``[T, 1, H + H/2, W]`` for
    ``yuv420p``, ``[T, C, H, W]`` for planar formats); ``filter_desc=None`` gives the decoder's
    own format.

    ``demux_config`` (from :func:`demux_config`: forced container ``format``, demuxer
    ``format_options``, I/O ``buffer_size``) and ``decode_config`` (from :func:`decode_config`:
    ``decoder`` by name, ``decoder_options``, which override ``num_threads``) as SPDL's; ``None``
    probes the container and uses the codec's own decoder. An unknown format, decoder or option
    raises ``ValueError`` naming it; another type ``TypeError``.

    Returns :class:`DecodedVideo`: ``frames`` a zero-copy :class:`CPUBuffer` ``uint8``
    ``[T, H, W, C]``; ``pts`` seconds per frame; ``indices``; ``rotation``;
    ``num_decoded`` (the exact frame count when the whole stream was decoded).
    The result is also SPDL's CPU buffer itself (``__array_interface__`` and DLPack of
    ``frames``): ``to_numpy(video)``, ``numpy.asarray(video)`` and ``to_torch(video)`` give
    the ``[T, H, W, C]`` ``uint8`` frames without a copy, as SPDL's ``load_video`` buffer.

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
    return _load_media("video", src, timestamp, name, options)


# The keywords of SPDL's load_video / load_audio (besides device_config, which the wrapper
# takes): given with filter_desc and nothing else, the call is SPDL's form.
_SPDL_MEDIA_KEYS = frozenset({"filter_desc", "demux_config", "decode_config"})


def _load_media(kind: str, src: Any, timestamp: Any, name: str | None, options: dict[str, Any]) -> Any:
    """``load_video`` / ``load_audio`` (``kind``): SPDL's call form (``filter_desc=`` and only
    SPDL's keywords) through ``_load_media_spdl``, SPDL's layout; else spdl_rs's own."""
    if "filter_desc" in options and set(options) <= _SPDL_MEDIA_KEYS:
        demux_config, decode_config = options.get("demux_config"), options.get("decode_config")
        return _native._load_media_spdl(kind, src, timestamp, options["filter_desc"], demux_config, decode_config, name)
    return _native.load_media(f"load_{kind}", src, timestamp, name=name, **options)


def load_video_clips(
    src: Src,
    num_clips: int,
    frames_per_clip: int,
    *,
    name: str | None = None,
    **options: Unpack[ClipOptions],
) -> DecodedVideo:
    """Samples ``num_clips`` clips of ``frames_per_clip`` frames, ``stride`` frames apart,
    spread evenly over the video (first clip at frame 0, last one ending at the last frame;
    pytorchvideo's uniform clip sampling), in one decode pass with the GIL released.

    The frame count comes from the demuxed packets, never from duration x frame rate; a video
    shorter than one clip repeats its last frame. Returns :class:`DecodedVideo` with ``frames``
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
) -> DecodedAudio:
    """Decodes the best audio stream of a file into a ``float32`` waveform, GIL released.

    ``src`` and ``name`` as :func:`load_video`. ``timestamp=(start, end)`` keeps the samples
    with ``start <= t < end`` (seconds). ``options`` (:class:`AudioOptions`): ``sample_rate``
    (Hz) and ``num_channels`` resample and remix through FFmpeg's swresample, like
    ``ffmpeg -ar R -ac C`` (a fresh resampler per call); ``filter_desc``, an FFmpeg filter
    graph (as ``ffmpeg -af`` and SPDL's ``filter_desc``, e.g. from
    :func:`get_audio_filter_desc`) run on the decoded samples (after ``timestamp``) as planar
    ``float32`` at the stream's rate; its output, in any sample format, is read as
    ``float32`` ``[C, S]``, then resampled to ``sample_rate`` / ``num_channels`` when given.

    SPDL's call form, ``filter_desc`` given without ``sample_rate`` / ``num_channels``
    (``demux_config`` / ``decode_config`` may come with it), decodes as SPDL's ``load_audio``
    does: the packets of the window through the filter, and ``waveform`` is the filter's
    output in its own sample format, ``[C, S]`` for planar formats (``fltp``, ``s16p``, ...)
    and ``[S, C]`` for packed ones (``s16``, ``flt``, ...), typed as the format (``int16`` for
    ``s16``, ``float32`` for ``flt``/``fltp``, ...); ``filter_desc=None`` gives the decoder's
    own format (e.g. ``int16`` ``[S, C]`` for 16-bit WAV).

    Returns :class:`DecodedAudio`: ``waveform`` a zero-copy :class:`CPUBuffer` ``float32``
    ``[C, S]`` (channels first, in [-1, 1]; 16-bit PCM scaled by 1/32768; or as above in
    SPDL's call form), ``sample_rate`` in Hz, ``start`` in seconds. Encoder delay/padding is
    trimmed as ffmpeg does (MP3 LAME tag). The result is also SPDL's CPU buffer itself
    (``__array_interface__`` and DLPack of ``waveform``): ``to_numpy(audio)``,
    ``numpy.asarray(audio)`` and ``to_torch(audio)`` share ``waveform``'s memory.

    ``demux_config`` / ``decode_config``: as :func:`load_video`.

    Raises as :func:`load_video` (``"unsupported"``: no audio stream; ``ValueError`` for a
    ``filter_desc`` FFmpeg rejects).
    """
    return _load_media("audio", src, timestamp, name, options)



def save_image(
    path: str | os.PathLike[str],
    data: Any,
    pix_fmt: str = "rgb24",
    *,
    bit_rate: int = -1,
    compression_level: int = -1,
    qscale: int = -1,
    gop_size: int = -1,
    max_b_frames: int = -1,
    colorspace: str | None = None,
    color_primaries: str | None = None,
    color_trc: str | None = None,
) -> None:
    """Writes one picture to ``path`` (SPDL's ``spdl.io.save_image``): format and encoder from
    the extension (``.png`` is lossless). ``data``: ``uint8`` ``[H, W, 3]`` for ``rgb24`` /
    ``bgr24``, ``[H, W]`` for ``gray`` / ``gray8``, ``[3, H, W]`` for ``yuv444p``. The keyword
    arguments are :func:`video_encode_config`'s. Raises ``ValueError`` for a shape that does
    not fit ``pix_fmt``, an unknown extension or an unwritable path."""
    import numpy as np

    arr = np.ascontiguousarray(data)
    if pix_fmt in ("gray", "gray8") and arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3:
        raise ValueError(f"save_image expects a 3-D array (2-D for gray), got shape {arr.shape}")
    planar = pix_fmt in ("yuv444p", "gbrp")
    height, width = (arr.shape[1], arr.shape[2]) if planar else (arr.shape[0], arr.shape[1])
    config = video_encode_config(
        height=height,
        width=width,
        bit_rate=bit_rate,
        compression_level=compression_level,
        qscale=qscale,
        gop_size=gop_size,
        max_b_frames=max_b_frames,
        colorspace=colorspace,
        color_primaries=color_primaries,
        color_trc=color_trc,
    )
    encode_image(path, arr, pix_fmt, encode_config=config)


def load_image(
    path: Src,
    width: int | None = None,
    height: int | None = None,
    *,
    filter_desc: Any = _FILTER_DEFAULT,
    demux_config: Any = None,
    decode_config: Any = None,
    name: str | None = None,
    **kwargs: Any,
) -> CPUBuffer:
    """Loads one image as a zero-copy :class:`CPUBuffer`, with the GIL released.

    spdl_rs's form, ``load_image(path, width=None, height=None, **kwargs)``: ``uint8`` ``[H, W,
    C]`` decoded by libjpeg-turbo / image-rs; ``width`` / ``height`` and the keyword arguments
    (``color``, ``filter``, ``lenient``, ``transform``, ``size``, ``seed``, ``index``,
    ``epoch``) are those of the native loader (see ``spdl_rs._native.load_image``). With
    ``filter_desc`` besides them, the FFmpeg filter string runs on the decoded (and resized)
    image, whose ``rgb24`` / ``gray`` layout it keeps.

    SPDL's form (SPDL's ``load_image(src, *, demux_config=None, decode_config=None,
    filter_desc=<default>, name=None)``: any of ``filter_desc``, ``demux_config``,
    ``decode_config``, ``name`` without the native keywords, or ``src`` as bytes): FFmpeg
    demuxes and decodes the picture and runs ``filter_desc`` (default
    ``"format=pix_fmts=rgb24"``), so pixels equal ``ffmpeg -vf``'s; ``filter_desc=None`` keeps
    the decoder's pixel format, in SPDL's layout: ``[H, W, C]`` for packed RGB, ``[C, H, W]``
    for planar formats (``[3, H, W]`` ``yuvj444p``, ``uint16`` ``[1, H, W]`` for ``gray16``),
    ``[H, W, 1]`` for ``gray``, ``[1, H + H/2, W]`` for ``yuvj420p`` / ``nv12`` (chroma under luma),
    ``[1, 2H, W]`` for ``yuvj422p``. ``demux_config`` (e.g. ``format="rawvideo"`` with
    ``pixel_format`` / ``video_size`` options) reads headless raw pictures.

    Errors: ``OSError`` subclasses naming the path, ``ValueError`` naming the source for data
    that does not decode or a filter description FFmpeg rejects; ``TypeError`` for the SPDL
    keywords ``demux_config`` / ``decode_config`` / ``name`` together with native keywords.
    """
    spdl_form = (
        demux_config is not None
        or decode_config is not None
        or name is not None
        or isinstance(path, (bytes, bytearray, memoryview))
        or (filter_desc is not _FILTER_DEFAULT and width is None and height is None and not kwargs)
    )
    if spdl_form:
        extra = [k for k, v in (("width", width), ("height", height)) if v is not None] + sorted(kwargs)
        if extra:
            raise TypeError(
                f"load_image: {extra} cannot be combined with SPDL's demux_config/decode_config/"
                "name or bytes input; resize with filter_desc (get_video_filter_desc) instead"
            )
        desc = "format=pix_fmts=rgb24" if filter_desc is _FILTER_DEFAULT else filter_desc
        out, errors = _ffmpeg_images([path], desc, demux_config, decode_config, names=[name], stack=False)
        if errors:
            raise errors[0][1]
        return out[0]
    img = _native.load_image(path, width, height, **kwargs)
    if filter_desc is _FILTER_DEFAULT or filter_desc is None:
        return img
    return _filter_images_or_raise([img], filter_desc, stack=False)[0]


# The native loader's keywords besides width/height (spdl_rs's form of load_image_batch).
_NATIVE_BATCH_KEYS = frozenset(
    {"color", "filter", "lenient", "normalize", "num_threads", "transform", "size", "seed", "epoch"}
)
_UNSET: Any = object()


def load_image_batch(
    srcs: Sequence[Src],
    *size: int | None,
    width: int | None = _UNSET,
    height: int | None = _UNSET,
    pix_fmt: str | None = _UNSET,
    demux_config: Any = None,
    decode_config: Any = None,
    filter_desc: Any = _FILTER_DEFAULT,
    strict: bool = _UNSET,
    **kwargs: Any,
) -> CPUBuffer:
    """Loads images into one :class:`CPUBuffer`, with the GIL released. Two forms:

    **spdl_rs's form**, ``load_image_batch(paths, width, height, **kwargs)`` (the size given
    positionally, or any native keyword: ``color``, ``filter``, ``lenient``, ``normalize``,
    ``num_threads``, ``transform``, ``size``, ``seed``, ``epoch``): the libjpeg-turbo /
    image-rs loader, ``uint8`` ``[N, H, W, C]`` resized (stretched) to ``width`` x ``height``
    (or normalized ``[N, C, H, W]`` ``float32``); see ``spdl_rs._native.load_image_batch``.
    ``filter_desc`` then runs on each decoded image (only ``color``, ``filter`` and
    ``lenient`` may come with it: ``TypeError`` naming others). SPDL's keywords ``pix_fmt``,
    ``demux_config``, ``decode_config``, ``strict`` raise ``TypeError`` in this form.

    **SPDL's form**, SPDL's ``load_image_batch(srcs, *, width, height, pix_fmt="rgb24",
    demux_config=None, decode_config=None, filter_desc=<default>, storage=None, strict=True)``
    (size as keywords, possibly ``None``): FFmpeg decodes each source (path or bytes) on
    native threads and runs the filter of SPDL's ``get_video_filter_desc(scale_width=width,
    scale_height=height, pix_fmt=pix_fmt)``: with a size, the picture is scaled (bicubic) to
    fit inside ``width`` x ``height`` keeping its aspect ratio and padded with black, centred
    (as SPDL); without one, pictures keep their size (all must share it). ``pix_fmt=None``
    keeps the decoder's format in SPDL's layouts (see :func:`load_image`), e.g. ``[N, 3, H,
    W]`` for ``yuvj444p`` JPEGs, ``[N, H, W, 3]`` for RGB PNGs. An explicit ``filter_desc``
    replaces that filter (``width`` / ``height`` / ``pix_fmt`` must then be ``None`` or left
    out: ``TypeError`` otherwise, rather than ignored as SPDL does). A source that fails is
    logged (``spdl_rs.io`` logger); with ``strict=True`` (default) any failure raises
    ``RuntimeError`` naming the first one, with ``strict=False`` the batch holds the others
    (``RuntimeError`` when none decodes). ``ValueError`` for an empty ``srcs`` or pictures of
    different sizes.
    """
    if len(size) > 2:
        raise TypeError(f"load_image_batch takes at most 2 positional sizes, got {len(size)}")
    native_form = bool(size) or bool(set(kwargs) & _NATIVE_BATCH_KEYS)
    if native_form:
        spdl_only = [
            k
            for k, v in (("pix_fmt", pix_fmt), ("strict", strict), ("demux_config", demux_config),
                         ("decode_config", decode_config))
            if v is not _UNSET and v is not None
        ]
        if spdl_only:
            raise TypeError(
                f"load_image_batch: SPDL's {spdl_only} go with SPDL's form (width=/height= as "
                "keywords, none of the native keywords)"
            )
        w, h = (list(size) + [None, None])[:2]
        if width is not _UNSET:
            w = width
        if height is not _UNSET:
            h = height
        if filter_desc is _FILTER_DEFAULT or filter_desc is None:
            return _native.load_image_batch(srcs, w, h, **kwargs)
        extra = set(kwargs) - {"color", "filter", "lenient"}
        if extra:
            raise TypeError(f"load_image_batch: {sorted(extra)} cannot be combined with filter_desc")
        images = [_native.load_image(p, w, h, **kwargs) for p in srcs]
        return _filter_images_or_raise(images, filter_desc, stack=True)
    if kwargs:
        raise TypeError(f"load_image_batch got unexpected keyword arguments {sorted(kwargs)}")
    if not srcs:
        raise ValueError("load_image_batch: `srcs` must not be empty")
    w = None if width is _UNSET else width
    h = None if height is _UNSET else height
    if filter_desc is _FILTER_DEFAULT:
        fmt = "rgb24" if pix_fmt is _UNSET else pix_fmt
        desc = get_video_filter_desc(scale_width=w, scale_height=h, pix_fmt=fmt)
    else:
        given = [k for k, v in (("width", w), ("height", h), ("pix_fmt", pix_fmt))
                 if v is not _UNSET and v is not None]
        if given:
            raise TypeError(
                f"load_image_batch: {given} have no effect with an explicit filter_desc; put the "
                "scaling / format in the filter (get_video_filter_desc) or pass None"
            )
        desc = filter_desc
    srcs = list(srcs)
    buf, errors = _ffmpeg_images(srcs, desc, demux_config, decode_config, stack=True)
    for i, err in errors:
        shown = f"bytes object at {id(srcs[i])}" if not isinstance(srcs[i], (str, os.PathLike)) else repr(str(srcs[i]))
        _LG.error("Failed to decode an image from %s: %s.", shown, err)
    if errors and (strict is _UNSET or strict):
        i, err = errors[0]
        raise RuntimeError(
            f"Failed to load some images ({len(errors)} of {len(srcs)}; strict=True), the first "
            f"{srcs[i]!r}: {err}"
        ) from err
    if buf is None:
        raise RuntimeError(f"Failed to load all the images ({len(srcs)})")
    return buf


def _ffmpeg_images(srcs: list[Any], desc: str | None, demux_config: Any, decode_config: Any, **kw: Any) -> Any:
    """``_native._load_images_ffmpeg``, or ``RuntimeError`` in a build without FFmpeg."""
    run = getattr(_native, "_load_images_ffmpeg", None)
    if run is None:
        raise RuntimeError(
            "SPDL's image loading form (filter_desc / pix_fmt / demux_config / strict / bytes) needs "
            "the FFmpeg build of spdl_rs (Cargo feature `decode-ffmpeg`)"
        )
    return run(srcs, desc, demux_config, decode_config, **kw)


def _filter_images_or_raise(images: list[Any], filter_desc: str, stack: bool) -> Any:
    run = getattr(_native, "_filter_images", None)
    if run is None:
        raise RuntimeError(
            "filter_desc needs the FFmpeg build of spdl_rs (Cargo feature `decode-ffmpeg`)"
        )
    return run(images, filter_desc, stack)


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


def get_filter_desc(packets: Any, **filter_args: Any) -> str | None:
    """The filter description for decoding ``packets`` (SPDL's ``spdl.io.get_filter_desc``):
    :func:`get_video_filter_desc` (``VideoPackets`` / ``ImagePackets``, without a trim: the
    packets' time window is applied by :func:`decode_packets` itself) or
    :func:`get_audio_filter_desc` (``AudioPackets``) with ``filter_args`` and, as SPDL writes
    it, an ``atrim`` to the packets' ``timestamp`` window when they have one (so the string
    also gives ``ffmpeg -af`` the window's samples; :func:`decode_packets` has already cut
    there, so the trim keeps every sample). ``TypeError`` for anything else."""
    if isinstance(packets, AudioPackets):
        return get_audio_filter_desc(timestamp=packets.timestamp, **filter_args)
    if isinstance(packets, (VideoPackets, ImagePackets)):
        return get_video_filter_desc(timestamp=None, **filter_args)
    raise TypeError(
        "get_filter_desc expects VideoPackets, AudioPackets or ImagePackets, "
        f"got {type(packets).__name__}"
    )


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
    return frozenset(get_ffmpeg_filters())


def to_numpy(buffer: CPUBuffer) -> Any:
    """A NumPy array sharing ``buffer``'s memory (no copy), same shape and dtype.

    Mirrors SPDL's ``spdl.io.to_numpy``. Raises ``ImportError`` without NumPy, ``TypeError``
    for an object that exports no array (``None``, a number).
    """
    import numpy as np

    arr = np.asarray(buffer)
    if arr.dtype == object:
        raise TypeError(f"to_numpy expects a CPUBuffer or another array buffer, got {type(buffer).__name__}")
    return arr


def to_torch(buffer: CPUBuffer) -> Any:
    """A CPU ``torch.Tensor`` sharing ``buffer``'s memory through DLPack (no copy).

    Mirrors SPDL's ``spdl.io.to_torch``. Raises ``ImportError`` without PyTorch.
    """
    import torch

    return torch.from_dlpack(buffer)


# SPDL's `device_config=` (and `storage=` on the image loaders): decode on the CPU, then copy
# (see _gpu.with_device_config).
load_image = _gpu.with_device_config(load_image, storage=True)
load_image_batch = _gpu.with_device_config(load_image_batch, storage=True)
load_video = _gpu.with_device_config(load_video)
load_audio = _gpu.with_device_config(load_audio)

# SPDL's ``spdl.io.utils`` as ``spdl_rs.io.utils`` (``import spdl_rs.io.utils`` finds it here).
from . import _io_utils as utils  # noqa: E402

sys.modules[__name__ + ".utils"] = utils
