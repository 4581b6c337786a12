"""Native pipeline stages: give them to :py:meth:`spdl_rs.pipeline.PipelineBuilder.pipe`.

They run entirely in Rust on the pipeline's worker threads. Items that are already native
(``str`` paths from the source, samples of :mod:`spdl_rs.sources` listings, the bytes of
``read_file()``, the images of ``decode_image()``, the lists of ``aggregate()``) are processed
without taking the GIL; a Python object as input (``pathlib.Path``, ``bytes`` made in Python)
is read with the GIL once. Outputs become Python objects only when a Python op or the consumer
takes them (images and batches as zero-copy :class:`spdl_rs.io.CPUBuffer`).

Typical chain::

    PipelineBuilder()
        .add_source(spdl_rs.sources.list_files("data/samples"))
        .pipe(ops.read_file(), concurrency=4)
        .pipe(ops.decode_image(224, 224), concurrency=4)
        .aggregate(8)
        .pipe(ops.collate())
        .add_sink(4)
        .build(num_threads=4)

Video and audio stages (``load_video``, ``decode_video``, ``load_audio``, ``decode_audio``) need
a build with FFmpeg (see :mod:`spdl_rs.io`); without it, making one raises ``RuntimeError``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Unpack

from ._native import NativeOp
from ._native import op_collate as _collate
from ._native import op_image as _image
from ._native import op_image_batch as _image_batch
from ._native import op_load_npy as _load_npy
from ._native import op_load_wav as _load_wav
from ._native import op_media as _media
from ._native import op_read_file as _read_file
from ._native import op_to_device as _to_device
from ._options import AudioOptions, ImageOptions, VideoStageOptions


__all__ = [
    "NativeOp",
    "read_file",
    "decode_image",
    "load_image",
    "collate",
    "decode_image_batch",
    "to_device",
    "load_video",
    "decode_video",
    "load_audio",
    "decode_audio",
    "load_npy",
    "load_wav",
]


def _picklable(ctor: Callable[..., NativeOp]) -> Callable[..., NativeOp]:
    """``ctor`` whose ops pickle as the call that made them (``ctor(*args, **kwargs)`` again
    in the unpickling process), so a pipeline config holding native ops can be built in a
    worker process (``run_pipeline_in_subprocess``)."""

    @functools.wraps(ctor)
    def make(*args: object, **kwargs: object) -> NativeOp:
        op = ctor(*args, **kwargs)
        op._set_recipe(functools.partial(make, *args, **kwargs))
        return op

    return make


@_picklable
def read_file() -> NativeOp:
    """A stage reading each path (``str``, ``os.PathLike`` or a listed sample) into its bytes.

    Output: the file's bytes (native; ``bytes`` if a Python op or the consumer takes them).
    Failure (counted against ``max_failures``): the message names the path, e.g.
    ``"data/x.jpg: not found"``.
    """
    return _read_file()


@_picklable
def decode_image(
    width: int | None = None, height: int | None = None, **options: Unpack[ImageOptions]
) -> NativeOp:
    """A stage decoding encoded image bytes (from :func:`read_file`) into an image.

    Output: ``[H, W, C]`` ``uint8`` (``[height, width, C]`` when both are given; ``C`` = 3 for
    ``color="rgb"``, 1 for ``"gray"``, 4 for ``"rgba"``). ``options``: the keywords of
    :class:`spdl_rs.io.ImageOptions` (``color``, ``filter``, ``lenient``, ``transform``,
    ``size``, ``seed``). Failure: the message names the file and the reason (``truncated``,
    ``unknown format``...). Raises ``ValueError`` now for bad arguments, ``TypeError`` for an
    unknown keyword. Mirrors SPDL's ``spdl.io.decode_image`` as a stage.

    The ``"train"`` draws of a sample depend only on ``(seed, epoch, index)``: when the
    pipeline's source is a :mod:`spdl_rs.sources` listing, ``index`` is the sample's position in
    the epoch and ``epoch`` the pipeline epoch, so the pixels do not depend on concurrency,
    completion order or a resume (:meth:`Pipeline.load_state_dict`). With any other source (a
    Python iterable), ``index`` is a running count of the items this op has processed (in
    arrival order, so not reproducible with ``concurrency > 1`` upstream) and ``epoch`` is 0.
    """
    return _image(True, width, height, **options)


@_picklable
def load_image(
    width: int | None = None, height: int | None = None, **options: Unpack[ImageOptions]
) -> NativeOp:
    """A stage reading and decoding each path in one step (``read_file`` + ``decode_image``).

    Output and arguments as :func:`decode_image`. Mirrors SPDL's ``spdl.io.load_image``.
    """
    return _image(False, width, height, **options)


@_picklable
def collate(*, normalize: bool = False) -> NativeOp:
    """A stage stacking a list of decoded images (``aggregate(n)`` after ``decode_image``) into
    one :class:`spdl_rs.io.CPUBuffer`.

    Output: ``[N, H, W, C]`` ``uint8``, or ``[N, C, H, W]`` ``float32`` normalized with the
    ImageNet mean/std when ``normalize=True``; ``keys`` and ``labels`` in batch order.
    Failure: images of different shapes (the message names the first odd one), or an input
    that is not a list of decoded images.
    """
    return _collate(normalize=normalize)


@_picklable
def decode_image_batch(
    width: int | None = None,
    height: int | None = None,
    *,
    normalize: bool = False,
    **options: Unpack[ImageOptions],
) -> NativeOp:
    """A stage decoding a list of encoded images (``aggregate(n)`` after :func:`read_file`)
    straight into one :class:`spdl_rs.io.CPUBuffer`: each image is decoded and transformed into
    its row of the batch buffer, with no copy after decoding (``decode_image`` + ``collate``
    copy every image once more). The buffer comes from a pool of the stage (up to 16 buffers):
    NumPy, DLPack and PyTorch views share it without a copy, and it is reused for a later batch
    once the last view of it is dropped (a batch held longer simply keeps its memory; past 16
    held, batches take fresh memory). When :func:`to_device` follows, the rows are written into
    the device's pinned memory instead, ready for the asynchronous copy.

    Output: ``[N, height, width, C]`` ``uint8``, or ``[N, C, height, width]`` ``float32``
    normalized with the ImageNet mean/std when ``normalize=True``; ``keys`` and ``labels`` in
    batch order. ``options``: the keywords of :class:`spdl_rs.io.ImageOptions`; the output size
    must be fixed (``width`` and ``height``, or ``size``). Strict, as SPDL's
    ``spdl.io.load_image_batch``: a sample that fails fails the batch (counted against
    ``max_failures``), the message naming the failed samples. Raises ``ValueError`` now when
    the size is not fixed or an option is bad, ``TypeError`` for an unknown keyword.
    """
    return _image_batch(width, height, normalize=normalize, **options)


@_picklable
def to_device(device: str | int | None = None) -> NativeOp:
    """A stage copying each batch to a CUDA device: put it right after :func:`collate`.

    Output: a :class:`spdl_rs.io.CUDABuffer` of the same shape and dtype in device memory
    (``[N, H, W, C]`` ``uint8``, or ``[N, C, H, W]`` ``float32`` with
    ``collate(normalize=True)``); ``torch.from_dlpack(batch)`` is a CUDA tensor without a
    copy. Input: the batch of ``collate()`` (or a :class:`spdl_rs.io.CPUBuffer` from Python
    code, a decoded image, or decoded video / audio: its ``frames`` / ``waveform`` are copied,
    e.g. ``[T, H, W, C]`` ``uint8``).

    ``device``: ``"cuda:N"``, ``N``, ``"cuda"`` or ``None`` (the ``LOCAL_RANK`` device, 0 when
    unset: one GPU per rank under ``torchrun``).

    When ``collate()`` comes directly before, it writes each batch into page-locked (pinned)
    memory of this device (a pool of 8 buffers, reused), and the stage copies it with an
    asynchronous DMA on a dedicated copy stream, then waits for the copy (GIL released) before
    passing the batch on; the consumer's ``__dlpack__(stream=...)`` is still ordered after the
    copy on the GPU. Any other input (or a batch when all pinned buffers are in use) is first
    copied into a pinned buffer, or sent from pageable memory when none is free.

    No CUDA context is created before the first batch (a pipeline can be built before
    ``fork()``). Errors:

    - ``RuntimeError`` now, in a build of ``spdl_rs`` without the ``cuda`` feature (the
      message says how to rebuild); ``ValueError`` for a bad ``device`` or ``LOCAL_RANK``.
    - At the first batch: no driver (``"no CUDA driver: ..."``), no such device
      (``"invalid CUDA device: cuda:3: 1 device(s) visible"``), a failed driver call. Unlike a bad
      sample, a failure here stops the pipeline at once (the iterator raises
      :class:`spdl_rs.pipeline.PipelineFailure` with ``stage="to_device"``) unless ``pipe()``
      is given ``max_failures``. Calling the op directly (``op(batch)``) raises
      ``RuntimeError``.
    """
    return _to_device(device)


@_picklable
def load_video(
    timestamp: tuple[float, float] | None = None, **options: Unpack[VideoStageOptions]
) -> NativeOp:
    """A stage decoding each video path (``str``, ``os.PathLike`` or a listed sample), GIL-free.

    Output: a :class:`spdl_rs.io.DecodedVideo` (``frames`` ``uint8`` ``[T, H, W, C]``, ``pts``
    in seconds, ``label`` of a labelled listing). ``timestamp`` and ``options``
    (:class:`spdl_rs.io.VideoStageOptions`: frame selection, output and ``filter_desc``) as
    :func:`spdl_rs.io.load_video`; with ``num_clips`` and ``frames_per_clip`` (and
    ``stride``), clips as :func:`spdl_rs.io.load_video_clips` (``[N, T, H, W, C]``).
    Failure (counted against ``max_failures``): the message names the file and the reason.
    Raises ``ValueError`` now for bad arguments, ``TypeError`` for an unknown keyword,
    ``RuntimeError`` in a build without FFmpeg.
    """
    return _media("load_video", timestamp, **options)


@_picklable
def decode_video(
    timestamp: tuple[float, float] | None = None, **options: Unpack[VideoStageOptions]
) -> NativeOp:
    """A stage decoding the bytes of each video file (from :func:`read_file`, or ``bytes``
    from a Python op), demuxed from memory without a temporary file. Arguments and output as
    :func:`load_video`.
    """
    return _media("decode_video", timestamp, **options)


@_picklable
def load_audio(timestamp: tuple[float, float] | None = None, **options: Unpack[AudioOptions]) -> NativeOp:
    """A stage decoding each audio path, GIL-free.

    Output: a :class:`spdl_rs.io.DecodedAudio` (``waveform`` ``float32`` ``[C, S]``,
    ``sample_rate`` in Hz). ``timestamp`` and ``options`` (:class:`spdl_rs.io.AudioOptions`:
    ``sample_rate``, ``num_channels``, ``filter_desc``) as :func:`spdl_rs.io.load_audio`; each
    file gets its own resampler, so no state carries from one file to the next. Failure: the
    message names the file and the reason. Raises ``RuntimeError`` in a build without FFmpeg.
    """
    return _media("load_audio", timestamp, **options)


@_picklable
def decode_audio(timestamp: tuple[float, float] | None = None, **options: Unpack[AudioOptions]) -> NativeOp:
    """A stage decoding the bytes of each audio file (from :func:`read_file`). Arguments and
    output as :func:`load_audio`.
    """
    return _media("decode_audio", timestamp, **options)


@_picklable
def load_npy() -> NativeOp:
    """A stage turning ``.npy`` file bytes (from :func:`read_file`, or ``bytes``) into a NumPy
    array, as :func:`spdl_rs.io.load_npy` does, without the GIL.

    The header is parsed in Rust on the worker threads; the file's bytes become the array's
    memory (writable, no copy unless the elements are misaligned) when a Python op or the
    consumer takes the item. Failure (counted against ``max_failures``): the message names the
    file and the reason, e.g. ``"truncated: data/x.npy: ..."``.
    """
    return _load_npy()


@_picklable
def load_wav(time_offset_seconds: float | None = None, duration_seconds: float | None = None) -> NativeOp:
    """A stage turning WAV file bytes (from :func:`read_file`, or ``bytes``) into a NumPy array
    ``[frames, channels]``, as :func:`spdl_rs.io.load_wav` does (same window arguments, in
    seconds; 24-bit becomes left-justified ``int32``), without the GIL.

    Failure (counted against ``max_failures``): the message names the file and the reason.
    """
    return _load_wav(time_offset_seconds, duration_seconds)
