"""The keyword arguments each domain's functions share, listed once.

The functions of :mod:`spdl_rs.io` and :mod:`spdl_rs.ops` take these as ``**options`` and pass
them to the native module, which converts them into spdl-io's options (one place per domain:
``crates/spdl-py/src/options.rs``) and raises ``TypeError`` naming any keyword it does not
know, ``ValueError`` for a value it does not accept. Leaving a keyword out gives the default
written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict


class ImageOptions(TypedDict, total=False):
    """How an image is decoded and transformed (``load_image``, ``decode_image``, the batch
    functions and the ``ops`` image stages), with ``width`` / ``height`` given apart.

    - ``color``: ``"rgb"`` (default, ``C`` = 3), ``"gray"`` (1), ``"rgba"`` (4) or
      ``"unchanged"`` (the file's channels and depth; ``uint16`` for 16-bit PNG/TIFF);
    - ``filter``: the resampling filter, ``"nearest"``, ``"bilinear"`` (default),
      ``"bicubic"``, ``"lanczos"``;
    - ``lenient``: accept truncated JPEGs, the rest gray (default ``False``; Pillow's
      ``LOAD_TRUNCATED_IMAGES``);
    - ``transform``: ``"resize"`` (default: to ``width x height``, or ``size x size``, else the
      decoded size), ``"eval"`` (the shorter side to ``size * 256 / 224``, then a centre crop
      ``size x size``) or ``"train"`` (torchvision's ``RandomResizedCrop(size)`` with a random
      horizontal flip drawn from ``(seed, epoch, index)``); for eval/train, ``size`` may be
      given as ``width == height``;
    - ``size``: the side of a square output (default ``None``);
    - ``seed``: the seed of the ``"train"`` draws (default 0).
    """

    color: str
    filter: str
    lenient: bool
    transform: str
    size: int | None
    seed: int


class SampleOptions(ImageOptions, total=False):
    """:class:`ImageOptions` of one image, and where the sample sits for ``"train"``:
    ``index`` and ``epoch`` (default 0 each)."""

    index: int
    epoch: int


class BytesSampleOptions(SampleOptions, total=False):
    """:class:`SampleOptions` of in-memory bytes, and ``key``: the name of the sample in error
    messages (default ``"<bytes>"``)."""

    key: str


class BatchOptions(ImageOptions, total=False):
    """:class:`ImageOptions` of a batch (the size must be fixed: ``width`` and ``height``, or
    ``size``), and:

    - ``normalize``: ``[N, C, H, W]`` ``float32`` normalized with the ImageNet mean and
      standard deviation instead of ``[N, H, W, C]`` ``uint8`` (default ``False``);
    - ``num_threads``: native threads (default ``None``: the CPUs, at most 8);
    - ``epoch``: the epoch of the ``"train"`` draws (default 0); sample ``i`` is drawn with
      ``index = i`` (or its dataset index where one is given).
    """

    normalize: bool
    num_threads: int | None
    epoch: int


class VideoOutputOptions(TypedDict, total=False):
    """The frames' output format (``load_video``, ``load_video_clips``, ``decode_packets``, the
    ``ops`` video stages):

    - ``width`` / ``height``: pixels after rotation (one alone keeps the aspect ratio; default:
      the displayed size);
    - ``pixel_format``: ``"rgb"`` (default) or ``"bgr"`` (``C`` = 3), ``"gray"`` (``C`` = 1);
    - ``filter``: the scaling filter, ``"nearest"``, ``"bilinear"``, ``"bicubic"`` (default),
      ``"area"``;
    - ``num_threads``: decoder threads (default 1, best when a pipeline decodes many videos at
      once; 0: FFmpeg picks);
    - ``apply_rotation``: turn frames as the stream's display matrix says, as players do
      (default ``False``, as SPDL 0.8: the coded frames; ``stream_rotation`` reports the angle);
    - ``demux_config`` / ``decode_config``: SPDL's config objects (from
      ``spdl_rs.io.demux_config`` / ``decode_config``): container format and demuxer options,
      decoder and its options (default ``None``: FFmpeg's choice).
    """

    width: int | None
    height: int | None
    pixel_format: str
    filter: str
    num_threads: int
    apply_rotation: bool
    demux_config: Any
    decode_config: Any


class VideoOptions(VideoOutputOptions, total=False):
    """:class:`VideoOutputOptions`, which frames (at most one of ``timestamp`` and these;
    default: every frame, in presentation order) and an FFmpeg filter graph:

    - ``indices``: these decoded-frame indices (from 0, presentation order), in this order,
      repeats allowed (decord's ``get_batch``);
    - ``step``: frames 0, ``step``, 2 x ``step``, ...;
    - ``played_at``: for each time ``t`` (seconds), the frame on screen at ``t``
      (``pts <= t < next pts``);
    - ``filter_desc``: a libavfilter graph run on the selected frames (as SPDL's
      ``filter_desc`` and ``ffmpeg -vf``); with ``indices`` or ``played_at`` it raises
      ``ValueError``. Default ``None``: no graph.
    """

    indices: Sequence[int] | None
    step: int | None
    played_at: Sequence[float] | None
    filter_desc: str | None


class ClipOptions(VideoOutputOptions, total=False):
    """:class:`VideoOutputOptions` of clips, and ``stride``: frames between the frames of a
    clip (default 1)."""

    stride: int


class VideoStageOptions(VideoOptions, total=False):
    """:class:`VideoOptions` of a video stage; with ``num_clips`` and ``frames_per_clip`` (and
    ``stride``), clips as ``load_video_clips`` instead of a frame selection."""

    num_clips: int | None
    frames_per_clip: int | None
    stride: int


class AudioOptions(TypedDict, total=False):
    """How audio is decoded (``load_audio``, the ``ops`` audio stages):

    - ``sample_rate`` (Hz) and ``num_channels``: resample and remix through FFmpeg's
      swresample, as ``ffmpeg -ar R -ac C`` (default ``None``: the stream's);
    - ``filter_desc``: a libavfilter graph (as ``ffmpeg -af`` and SPDL's ``filter_desc``) run
      on the decoded samples as planar ``float32`` at the stream's rate, before the
      resampling (default ``None``);
    - ``demux_config`` / ``decode_config``: as :class:`VideoOutputOptions`.
    """

    sample_rate: int | None
    num_channels: int | None
    filter_desc: str | None
    demux_config: Any
    decode_config: Any


class SamplingOptions(TypedDict, total=False):
    """Which share of each epoch a rank gets (``spdl_rs.sources.Sampler``, ``TarShards``), as
    torch's ``DistributedSampler``:

    - ``rank`` / ``world_size``: this process and the number of processes (both ``None``, the
      default: ``torchrun``'s ``RANK`` / ``WORLD_SIZE``, one process when unset);
    - ``shuffle``: shuffle each epoch by ``(seed, epoch)`` (default ``True``);
    - ``seed``: the shuffle's seed (default 0), the same on every rank;
    - ``drop_last``: leave out the tail that does not divide by ``world_size`` (default
      ``False``: pad every rank to the same count, repeating samples from the start).
    """

    rank: int | None
    world_size: int | None
    shuffle: bool
    seed: int
    drop_last: bool
