"""Type stubs of the compiled extension ``spdl_rs._native`` (use the public submodules)."""

import sys
from collections.abc import Callable, Iterator, Sequence
from os import PathLike
from typing import Any, Generic, Self, TypeVar, Unpack, final, type_check_only

from . import _options as _o

@final
class CPUBuffer:
    """Contiguous row-major CPU array: one image ``[H, W, C]`` or a batch ``[N, H, W, C]``
    (``uint8``; ``uint16`` for 16-bit images) or a normalized batch ``[N, C, H, W]``
    (``float32``). Zero-copy through the buffer protocol, ``__array_interface__`` and DLPack;
    the memory lives as long as any view. Mirrors SPDL's ``spdl.io.CPUBuffer``."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> str:
        """``"uint8"``, ``"uint16"`` or ``"float32"``."""
    @property
    def data_ptr(self) -> int:
        """Address of the first element."""
    @property
    def nbytes(self) -> int: ...
    @property
    def keys(self) -> list[str]:
        """Sample keys (paths), batch order."""
    @property
    def labels(self) -> list[int | None]: ...
    @property
    def __array_interface__(self) -> dict[str, Any]: ...
    def __len__(self) -> int: ...
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A ``"dltensor"`` capsule sharing the memory. Raises ``BufferError`` for
        ``copy=True`` or a non-CPU ``dl_device``."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """``(1, 0)``: kDLCPU, device 0."""
    if sys.version_info >= (3, 12):  # PEP 688; the buffer protocol itself works on 3.11
        def __buffer__(self, flags: int, /) -> memoryview: ...

@type_check_only
class _CudaExport:
    """Stub-only (no such class at run time): the export protocols of ``CUDABuffer``, which
    ``_ExportProbe`` runs over host memory."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Version 3; ``stream`` is the copy stream, or ``None`` once the copy is complete."""
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A ``"dltensor"`` capsule (``"dltensor_versioned"`` for ``max_version >= (1, 0)``)
        sharing the device memory. ``stream``: the consumer's stream (``None``/``1`` legacy
        default, ``2`` per-thread default, else a ``cudaStream_t``), made to wait on the GPU
        for the copy; ``-1``: no synchronization; ``0``: ``ValueError``. ``BufferError`` for
        ``copy=True`` or another ``dl_device``."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """``(2, device_index)``: kDLCUDA."""

@final
class CUDABuffer(_CudaExport):
    """Contiguous row-major array in CUDA device memory: a batch ``[N, H, W, C]`` (``uint8``;
    ``uint16`` for 16-bit images) or a normalized batch ``[N, C, H, W]`` (``float32``), made by
    ``ops.to_device()`` or ``io.transfer_buffer()``. Zero-copy through DLPack (``kDLCUDA``)
    and ``__cuda_array_interface__`` (v3); the device memory stays valid until this object and
    every tensor made from it are dropped, and is freed after the work queued by then on the
    consumer streams given to ``__dlpack__``."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> str:
        """``"uint8"``, ``"uint16"`` or ``"float32"``."""
    @property
    def device(self) -> str:
        """``"cuda:N"``."""
    @property
    def device_index(self) -> int: ...
    @property
    def data_ptr(self) -> int:
        """Device address of the first element."""
    @property
    def nbytes(self) -> int: ...
    @property
    def stream(self) -> int:
        """The copy stream (``CUstream`` handle) the data is written on."""
    @property
    def keys(self) -> list[str]: ...
    @property
    def labels(self) -> list[int | None]: ...
    def __len__(self) -> int: ...
    def synchronize(self) -> None:
        """Blocks (GIL released) until the copy is complete. ``RuntimeError`` on a CUDA error."""
    def to_host(self) -> CPUBuffer:
        """A copy in CPU memory (for checks). ``RuntimeError`` on a CUDA error."""

@final
class _ExportProbe(_CudaExport):
    """Test stand-in: a CPUBuffer's memory through CUDABuffer's export code."""

@final
class NativeOp:
    """A native pipeline stage (see :mod:`spdl_rs.ops`); calling it runs it once without the GIL."""

    @property
    def name(self) -> str: ...
    def __call__(self, item: Any, /) -> Any: ...
    def _set_recipe(self, recipe: Any) -> None: ...
    def __reduce__(self) -> tuple[Any, tuple[()]]: ...

def _sample_list(
    paths: Sequence[str | PathLike[str]], labels: Sequence[int | None], classes: Sequence[str]
) -> SampleList:
    """Rebuilds a pickled ``SampleList`` (its ``__reduce__``). Raises ``ValueError`` when
    ``paths`` and ``labels`` differ in length."""

@final
class SampleList:
    """An ordered list of samples (path and optional label), iterated natively as a source."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> str | tuple[str, int]: ...
    def __iter__(self) -> Iterator[str | tuple[str, int]]: ...
    @property
    def paths(self) -> list[str]: ...
    @property
    def labels(self) -> list[int | None]: ...
    @property
    def classes(self) -> list[str]: ...
    def select(self, indices: Sequence[int]) -> SampleList:
        """The samples at ``indices``, in that order (e.g. ``list(sampler)``). Raises ``IndexError``."""

@final
class Sampler:
    """One rank's share of each epoch of a dataset of ``len`` samples, as torch's
    ``DistributedSampler`` (``spdl_sources::Sampler``).

    ``rank``/``world_size`` default to the ``RANK``/``WORLD_SIZE`` environment variables set
    by ``torchrun`` (a single process when unset; ``ValueError`` when only one is set or they
    are invalid). Every rank must use the same ``len``, ``shuffle`` and ``seed``. Each epoch is
    shuffled by ``(seed, epoch)`` (or ``0..len`` without ``shuffle``) and dealt round-robin.
    When ``len`` does not divide by ``world_size``: ``drop_last=False`` pads every rank to the
    same count, repeating samples from the start of the order and marking them ``padded``
    (see :meth:`iter_with_info`); ``drop_last=True`` leaves the tail out.
    """

    def __init__(self, len: int, **options: Unpack[_o.SamplingOptions]) -> None: ...
    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch (its shuffle), starting it afresh."""
    @property
    def epoch(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    def __len__(self) -> int:
        """This rank's items per epoch (padding included)."""
    def __iter__(self) -> Iterator[int]:
        """This rank's dataset indices not yet delivered, in order."""
    def iter_with_info(self) -> Iterator[tuple[int, int, bool]]:
        """``(index, position, padded)``: ``position`` in the epoch's global order (for
        :meth:`mark_delivered`); ``padded`` marks a repeat that only evens out the ranks."""
    def mark_delivered(self, position: int) -> None:
        """Records that the item at global ``position`` was delivered (for :meth:`state`)."""
    def state(self, pipeline_state: dict[str, Any] | None = None) -> str:
        """This rank's resumable state (``SamplerState``), a JSON string of about 200 bytes.
        With ``pipeline_state`` (the ``state_dict()`` of a pipeline fed with this sampler's
        share as listed when it started), it also records what that pipeline delivered; the
        sampler is not changed. ``ValueError`` for a malformed state or a position past the
        share."""
    @staticmethod
    def from_state(state: str) -> Sampler:
        """The sampler a :meth:`state` was taken from, where it left off (same world size).
        Raises ``ValueError`` for an invalid state."""
    @staticmethod
    def resume(
        progress: str,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = False,
    ) -> Sampler:
        """Rank ``rank`` of a new world of ``world_size`` ranks (default: ``RANK`` /
        ``WORLD_SIZE``), dealing what ``progress`` (from :func:`merge_states`) left of the epoch:
        across the new ranks every remaining sample comes exactly once (plus marked padding, or
        with ``drop_last=True`` up to ``world_size - 1`` left out). Raises ``ValueError``."""

@final
class TimeSummary:
    """Per-item task time of a stage, seconds."""

    mean: float
    p50: float
    p90: float
    p99: float

@final
class StageStats:
    """Counters of one stage."""

    name: str
    concurrency: int
    items_in: int
    items_out: int
    filtered: int
    failures: int
    tasks: int
    task_time: TimeSummary
    busy_fraction: float

@final
class QueueStats:
    """Counters of one queue (``"a->b"``); waits in seconds."""

    name: str
    capacity: int
    items: int
    occupancy_rate: float
    mean_put_wait: float
    mean_get_wait: float
    p90_put_wait: float
    p99_put_wait: float
    p90_get_wait: float
    p99_get_wait: float
    elapsed: float

@final
class PipelineStats:
    """A snapshot of all stages (source first) and queues; ``str()`` is a table."""

    stages: list[StageStats]
    queues: list[QueueStats]
    text: str
    def stage(self, name: str) -> StageStats | None: ...

@final
class _Pipeline:
    def start(self) -> None: ...
    def next(self, timeout: float | None = None) -> Any: ...
    def stop(self) -> BaseException | None:
        """Stops and joins; returns the ``PipelineFailure`` no read has raised, if any."""
    def request_stop(self) -> None:
        """Stops the stages without joining (from the pipeline's own threads)."""
    def on_engine_thread(self) -> bool:
        """Whether the caller runs on the engine's scheduler, worker or source thread."""
    @property
    def stopped(self) -> bool: ...
    @property
    def epoch(self) -> int: ...
    def stats(self) -> PipelineStats: ...
    def last_errors(self) -> list[str]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...

_Path = str | PathLike[str]

def load_image(
    path: _Path, width: int | None = None, height: int | None = None, **options: Unpack[_o.SampleOptions]
) -> CPUBuffer:
    """Reads and decodes one image to ``[H, W, C]`` (GIL released). Raises ``OSError`` /
    ``ValueError`` naming the path, ``TypeError`` for an unknown keyword."""

def decode_image(
    data: bytes, width: int | None = None, height: int | None = None, **options: Unpack[_o.BytesSampleOptions]
) -> CPUBuffer:
    """Decodes encoded image bytes to ``[H, W, C]`` (GIL released). Raises ``ValueError``
    naming ``key``."""

def load_image_batch(
    paths: Sequence[_Path], width: int | None = None, height: int | None = None, **options: Unpack[_o.BatchOptions]
) -> CPUBuffer:
    """Loads ``[N, height, width, C]`` ``uint8`` (or normalized ``[N, C, height, width]``
    ``float32``) on native threads, GIL released. Raises naming the first failed sample."""

def random_resized_crop(
    width: int, height: int, *, size: int = 224, seed: int = 0, index: int = 0, epoch: int = 0
) -> tuple[int, int, int, int, bool]:
    """``(left, top, crop_width, crop_height, hflip)`` in source pixels: the box and flip that
    ``transform="train"`` draws for sample ``index`` of ``epoch`` (no decoding). Raises
    ``ValueError`` for a zero ``width``, ``height`` or ``size``."""

def decode_image_batch(
    data: Sequence[bytes] | None = None,
    width: int | None = None,
    height: int | None = None,
    *,
    paths: Sequence[_Path] | None = None,
    keys: Sequence[str] | None = None,
    indices: Sequence[int] | None = None,
    **options: Unpack[_o.BatchOptions],
) -> tuple[CPUBuffer, list[tuple[int, str]]]:
    """Decodes ``data`` (or reads and decodes ``paths``) to one row per input, in one GIL-free
    call on native threads; failed rows are zeros and listed as ``(row, message)``."""

def op_read_file() -> NativeOp: ...
def op_image(
    from_bytes: bool, width: int | None = None, height: int | None = None, **options: Unpack[_o.ImageOptions]
) -> NativeOp: ...
def op_collate(*, normalize: bool = False) -> NativeOp: ...
def op_image_batch(
    width: int | None = None,
    height: int | None = None,
    *,
    normalize: bool = False,
    **options: Unpack[_o.ImageOptions],
) -> NativeOp: ...
def op_load_npy() -> NativeOp: ...
def op_load_wav(time_offset_seconds: float | None = None, duration_seconds: float | None = None) -> NativeOp: ...
def list_files(
    root: _Path, extensions: Sequence[str] | None = None, *, include_hidden: bool = False
) -> SampleList:
    """Files under ``root`` with an accepted extension, sorted by path bytes. Hidden entries
    (``.``-names, ``._*``, ``.ipynb_checkpoints/``, ``__MACOSX/``) are skipped unless
    ``include_hidden``; a link loop is cut with a ``RuntimeWarning``; a broken link is listed
    and fails when read."""

def image_folder(
    root: _Path,
    extensions: Sequence[str] | None = None,
    allow_empty: bool = False,
    *,
    include_hidden: bool = False,
) -> SampleList:
    """torchvision ``ImageFolder`` layout: class ``i`` = ``i``-th sub-folder by name; hidden
    folders are no class unless ``include_hidden``."""

def merge_states(states: Sequence[str]) -> str:
    """Merges the :meth:`Sampler.state` of every rank of a job into the epoch's progress (a
    JSON string) for :meth:`Sampler.resume` under a new world size. Raises ``ValueError`` when a
    rank is missing or repeated or the states are not of one job and epoch."""

def build_pipeline(
    source: Any,
    stages: list[Any],  # spdl_rs.pipeline._stage.Stage records
    *,
    sink_size: int,
    num_threads: int,
    max_failures: Any | None,  # a spdl_rs.pipeline._stage.MaxFailures
    report_stats_interval: float,
    prefetch_epochs: bool = False,
) -> _Pipeline: ...
def _trace_start(path: str | None, fd: int | None, buffer_kib: int) -> None: ...
def _trace_stop() -> None: ...
@final
class TraceSlice:
    def end(self) -> None: ...

def _trace_begin(name: str) -> TraceSlice: ...
def _trace_counter(i: int, value: float) -> None: ...
__version__: str
"""The spdl-rs crates' version this extension was built from (e.g. ``"0.1.0"``)."""

def init_logging(level: str = "info") -> None:
    """Sends the engine's log (each failure, stats reports) to stderr; first call only."""

def _gil_acquisitions() -> int:
    """Times pipeline threads took the GIL since import (tests)."""

def op_to_device(device: str | int | None = None) -> NativeOp: ...
def transfer_buffer(
    buffer: CPUBuffer, device: str | int | None = None, *, allocator: Any = None, stream: int = 0
) -> CUDABuffer:
    """Copies a CPUBuffer to a CUDA device (GIL released, waits for the copy), into memory from
    ``allocator`` (``(alloc_fn, free_fn)``, called with ``stream``) when given. ``RuntimeError``
    without CUDA support, driver or device; ``ValueError`` for a bad ``device``."""

def cuda_built() -> bool:
    """Whether this build has the ``cuda`` feature."""

def cuda_available() -> bool:
    """Built with CUDA, a driver, and at least one device (initializes the driver). Never raises."""

def cuda_unavailable_reason() -> str | None:
    """Why no CUDA device can be used, or ``None``."""

def _export_probe(
    buffer: CPUBuffer, device_type: int = 1, device_id: int = 0, stream: int | None = None
) -> _ExportProbe:
    """Test stand-in of CUDABuffer's export code over host memory."""

# Video and audio (feature `decode-ffmpeg`; without it these raise RuntimeError).

_Src = str | PathLike[str] | bytes | bytearray | memoryview

@type_check_only
class _Decoded:
    """Stub-only (no such class at run time): what ``DecodedVideo`` and ``DecodedAudio`` have."""

    @property
    def codec(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def label(self) -> int | None: ...
    @property
    def __array_interface__(self) -> dict[str, Any]:
        """The samples' array interface (SPDL's loaders return the buffer itself)."""
    def __dlpack__(
        self, *, stream: Any = None, max_version: tuple[int, int] | None = None, dl_device: Any = None, copy: bool | None = None
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...

@final
class DecodedVideo(_Decoded):
    """Decoded frames (``load_video``): ``frames`` ``uint8`` ``[T, H, W, C]`` (``[N, T, H, W, C]`` for clips),
    ``pts`` in seconds, decoded-frame ``indices`` (``None`` after a time-window seek)."""

    @property
    def frames(self) -> CPUBuffer: ...
    @property
    def shape(self) -> list[int]: ...
    @property
    def pts(self) -> list[float]: ...
    @property
    def indices(self) -> list[int] | None: ...
    @property
    def rotation(self) -> int: ...
    @property
    def stream_rotation(self) -> int: ...
    @property
    def num_decoded(self) -> int | None: ...
    def __len__(self) -> int: ...

@final
class DecodedAudio(_Decoded):
    """Decoded waveform (``load_audio``): ``waveform`` ``float32`` ``[C, S]`` (or the filter's sample
    format: ``[C, S]`` planar, ``[S, C]`` packed), ``sample_rate`` in Hz."""

    @property
    def waveform(self) -> CPUBuffer: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def sample_rate(self) -> int: ...
    @property
    def num_channels(self) -> int: ...
    @property
    def num_samples(self) -> int: ...
    @property
    def start(self) -> float: ...
    @property
    def duration(self) -> float: ...

def load_media(
    func: str, src: _Src, timestamp: tuple[float, float] | None = None, *, name: str | None = None, **options: Any
) -> Any:
    """The native half of ``io.load_video`` / ``load_video_clips`` / ``load_audio`` (``func``):
    ``DecodedVideo`` or ``DecodedAudio``."""

# SPDL's packet/frame-level media API (FFmpeg builds only).

_Window = tuple[float, float]

# Stub-only bases (no such classes at run time, as in SPDL): the members that the video / audio
# / image codec, packet and frame classes share, stated once (the extension writes each of them
# once too, `media_props.rs`).

@type_check_only
class _Picture:
    """Stub-only: the picture of a video / image codec, packets or frames."""

    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def pix_fmt(self) -> str: ...

@type_check_only
class _Sound:
    """Stub-only: the sound of an audio codec, packets or frames."""

    @property
    def sample_rate(self) -> int: ...
    @property
    def num_channels(self) -> int: ...

@type_check_only
class _Codec:
    """Stub-only: what every codec class has."""

    @property
    def name(self) -> str: ...
    @property
    def time_base(self) -> tuple[int, int]: ...

_C = TypeVar("_C", bound=_Codec)

@type_check_only
class _PacketsOf(Generic[_C]):
    """Stub-only: what every packet class has (``_C``: its codec class)."""

    def __len__(self) -> int: ...
    @property
    def codec(self) -> _C | None: ...
    def clone(self) -> Self: ...

@type_check_only
class _StreamPacketsOf(_PacketsOf[_C]):
    """Stub-only: what the video and audio packet classes add."""

    @property
    def timestamp(self) -> _Window | None: ...
    def get_timestamps(self, *, raw: bool = False) -> list[float]: ...

@type_check_only
class _FramesBase:
    """Stub-only: what every frame class has."""

    def clone(self) -> Self: ...

@type_check_only
class _FrameSequence(_FramesBase):
    """Stub-only: what the video and audio frame classes add."""

    @property
    def num_frames(self) -> int: ...
    @property
    def time_base(self) -> tuple[int, int]: ...
    def get_pts(self) -> list[int]: ...
    def get_timestamps(self) -> list[float]: ...
    def __len__(self) -> int: ...

@type_check_only
class _PictureFrames(_FramesBase, _Picture):
    """Stub-only: what the video and image frame classes add."""

    @property
    def num_planes(self) -> int: ...

@final
class VideoFrames(_FrameSequence, _PictureFrames):
    """Decoded video frames kept as FFmpeg frames (SPDL's ``VideoFrames``)."""

    def __getitem__(self, key: int | slice | Sequence[int]) -> VideoFrames | ImageFrames: ...

@final
class AudioFrames(_FrameSequence, _Sound):
    """Decoded audio frames (SPDL's ``AudioFrames``)."""

    @property
    def num_samples(self) -> int: ...
    @property
    def sample_fmt(self) -> str: ...

@final
class ImageFrames(_PictureFrames):
    """One decoded picture (SPDL's ``ImageFrames``)."""

    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def pts(self) -> float: ...

_Frames = VideoFrames | AudioFrames | ImageFrames

def convert_frames(frames: _Frames | Sequence[_Frames], storage: None = None) -> CPUBuffer:
    """Frames as one ``CPUBuffer`` (SPDL's ``convert_frames``)."""

def convert_array(vals: Any, storage: None = None) -> CPUBuffer:
    """An ``int64`` array as a ``float32`` ``CPUBuffer`` (SPDL's ``convert_array``)."""

def create_reference_video_frame(
    array: Any, *, pix_fmt: str, frame_rate: tuple[int, int], pts: int
) -> VideoFrames:
    """``VideoFrames`` referring to a ``uint8`` array in place (kept alive by the frames)."""

def create_reference_audio_frame(
    array: Any, *, sample_fmt: str, sample_rate: int, pts: int
) -> AudioFrames:
    """One ``AudioFrames`` frame referring to a 2-D array in place (kept alive by the frame)."""

def _filter_images(images: Sequence[Any], filter_desc: str, stack: bool = False) -> Any:
    """FFmpeg filter string on decoded 8-bit images (backs ``load_image(filter_desc=)``)."""

def _load_images_ffmpeg(
    srcs: Sequence[Any],
    filter_desc: str | None,
    demux_config: DemuxConfig | None = None,
    decode_config: DecodeConfig | None = None,
    *,
    names: Sequence[str | None] | None = None,
    stack: bool = True,
    num_threads: int | None = None,
) -> tuple[Any, list[tuple[int, BaseException]]]:
    """FFmpeg decode + filter of each source on native threads (SPDL's form of ``load_image`` /
    ``load_image_batch``): ``(stacked CPUBuffer or None, errors)``, or with ``stack=False`` a list
    of ``CPUBuffer | None``."""

def _load_media_spdl(
    kind: str,
    src: Any,
    timestamp: tuple[float, float] | None,
    filter_desc: str | None,
    demux_config: DemuxConfig | None = None,
    decode_config: DecodeConfig | None = None,
    name: str | None = None,
) -> DecodedVideo | DecodedAudio:
    """SPDL's form of ``load_video`` / ``load_audio`` (``kind`` ``"video"`` / ``"audio"``) with
    ``filter_desc=``: the filter's pixel or sample format, SPDL's layout."""

@final
class FilterGraph:
    """A user-described FFmpeg filter graph (SPDL's ``FilterGraph``)."""

    def __init__(self, filter_desc: str) -> None: ...
    def add_frames(self, frames: _Frames, *, key: str | None = None) -> None: ...
    def flush(self) -> None: ...
    def get_frames(self, *, key: str | None = None) -> _Frames | None: ...
    def dump(self) -> str: ...
    @property
    def input_names(self) -> list[str]: ...
    @property
    def output_names(self) -> list[str]: ...

@final
class DemuxConfig:
    """Container opening settings (SPDL's ``DemuxConfig``)."""

    def __init__(
        self,
        format: str | None = None,
        format_options: dict[str, str] | None = None,
        buffer_size: int = 8096,
    ) -> None: ...

def demux_config(
    format: str | None = None, format_options: dict[str, str] | None = None, buffer_size: int = 8096
) -> DemuxConfig:
    """SPDL's ``demux_config``."""

@final
class VideoCodec(_Codec, _Picture):
    """A video stream's codec (SPDL's ``VideoCodec``)."""

    @property
    def frame_rate(self) -> tuple[int, int]: ...
    @property
    def sample_aspect_ratio(self) -> tuple[int, int]: ...
    @property
    def rotation(self) -> int: ...

@final
class AudioCodec(_Codec, _Sound):
    """An audio stream's codec (SPDL's ``AudioCodec``)."""

    @property
    def sample_fmt(self) -> str: ...
    @property
    def channel_layout(self) -> str: ...

@final
class ImageCodec(_Codec, _Picture):
    """An image's codec (SPDL's ``ImageCodec``)."""

    @property
    def sample_aspect_ratio(self) -> tuple[int, int]: ...

@final
class VideoPackets(_StreamPacketsOf[VideoCodec], _Picture):
    """Demuxed video packets (SPDL's ``VideoPackets``); picklable."""

    @property
    def frame_rate(self) -> tuple[int, int]: ...
    @staticmethod
    def deserialize(data: bytes) -> VideoPackets: ...
    @staticmethod
    def deserialize_view(data: memoryview) -> VideoPackets: ...

@final
class AudioPackets(_StreamPacketsOf[AudioCodec], _Sound):
    """Demuxed audio packets (SPDL's ``AudioPackets``); picklable."""

    @staticmethod
    def deserialize(data: bytes) -> AudioPackets: ...
    @staticmethod
    def deserialize_view(data: memoryview) -> AudioPackets: ...

@final
class ImagePackets(_PacketsOf[ImageCodec], _Picture):
    """An image's packet (SPDL's ``ImagePackets``); picklable."""

    @staticmethod
    def deserialize(data: bytes) -> ImagePackets: ...
    @staticmethod
    def deserialize_view(data: memoryview) -> ImagePackets: ...

_Packets = VideoPackets | AudioPackets | ImagePackets

@final
class Demuxer:
    """An open container (SPDL's ``Demuxer``)."""

    def __init__(
        self, src: _Src, *, demux_config: DemuxConfig | None = None, name: str | None = None
    ) -> None: ...
    def demux_video(self, window: _Window | None = None, *, bsf: str | None = None) -> VideoPackets: ...
    def demux_audio(self, window: _Window | None = None, *, bsf: str | None = None) -> AudioPackets: ...
    def demux_image(self, *, bsf: str | None = None) -> ImagePackets: ...
    def has_audio(self) -> bool: ...
    @property
    def video_stream_index(self) -> int: ...
    @property
    def audio_stream_index(self) -> int: ...
    @property
    def video_codec(self) -> VideoCodec: ...
    @property
    def audio_codec(self) -> AudioCodec: ...
    @property
    def image_codec(self) -> ImageCodec: ...
    def streaming_demux(
        self, indices: int | Sequence[int] | None = None, *, duration: float = -1, num_packets: int = -1
    ) -> StreamingDemuxIter: ...
    def __enter__(self) -> Demuxer: ...
    def __exit__(self, *args: object) -> None: ...

@final
class StreamingDemuxIter:
    """The iterator of ``Demuxer.streaming_demux``: packets of the asked streams, a window at a
    time (a dict by stream index when several are asked)."""

    def __iter__(self) -> StreamingDemuxIter: ...
    def __next__(self) -> Any: ...

def demux_video(
    src: _Src,
    *,
    timestamp: _Window | None = None,
    demux_config: DemuxConfig | None = None,
    bsf: str | None = None,
    name: str | None = None,
) -> VideoPackets:
    """SPDL's ``demux_video``."""

def demux_audio(
    src: _Src,
    *,
    timestamp: _Window | None = None,
    demux_config: DemuxConfig | None = None,
    bsf: str | None = None,
    name: str | None = None,
) -> AudioPackets:
    """SPDL's ``demux_audio``."""

def demux_image(
    src: _Src, *, demux_config: DemuxConfig | None = None, bsf: str | None = None, name: str | None = None
) -> ImagePackets:
    """SPDL's ``demux_image``."""

@final
class BSF:
    """A bit-stream filter (SPDL's ``BSF``)."""

    def __init__(self, codec: VideoCodec | AudioCodec | ImageCodec, bsf: str) -> None: ...
    def filter(self, packets: _Packets, flush: bool = False) -> _Packets | None: ...
    def flush(self) -> _Packets | None: ...

def apply_bsf(packets: _Packets, bsf: str) -> _Packets:
    """SPDL's ``apply_bsf``."""

@final
class DecodeConfig:
    """Decoder settings (SPDL's ``DecodeConfig``)."""

    def __init__(
        self, decoder: str | None = None, decoder_options: dict[str, str] | None = None
    ) -> None: ...

def decode_config(
    decoder: str | None = None, decoder_options: dict[str, str] | None = None
) -> DecodeConfig:
    """SPDL's ``decode_config``."""

def decode_packets(
    packets: _Packets,
    filter_desc: str | None = "__PLACEHOLDER__",
    decode_config: DecodeConfig | None = None,
    *,
    num_frames: int = -1,
) -> _Frames:
    """SPDL's ``decode_packets``."""

def sample_decode_video(
    packets: VideoPackets,
    indices: Sequence[int],
    *,
    decode_config: DecodeConfig | None = None,
    filter_desc: str | None = "__PLACEHOLDER__",
) -> list[ImageFrames]:
    """SPDL's ``sample_decode_video``."""

class Decoder:
    """A streaming decoder: the base of ``VideoDecoder`` / ``AudioDecoder`` (image codecs)."""

    def __init__(
        self,
        codec: VideoCodec | AudioCodec | ImageCodec,
        *,
        filter_desc: str | None = "__PLACEHOLDER__",
        decode_config: DecodeConfig | None = None,
    ) -> None: ...
    def decode(self, packets: _Packets) -> _Frames: ...
    def streaming_decode_packets(self, packets: _Packets) -> Iterator[_Frames]: ...
    def flush(self) -> Iterator[_Frames]: ...

@final
class VideoDecoder(Decoder):
    """SPDL's ``VideoDecoder``."""

@final
class AudioDecoder(Decoder):
    """SPDL's ``AudioDecoder``."""

@final
class VideoEncodeConfig:
    """Video encoder settings (SPDL's ``VideoEncodeConfig``)."""

@final
class AudioEncodeConfig:
    """Audio encoder settings (SPDL's ``AudioEncodeConfig``)."""

def video_encode_config(
    *,
    height: int,
    width: int,
    frame_rate: tuple[int, int] | None = None,
    pix_fmt: str | None = None,
    bit_rate: int = -1,
    compression_level: int = -1,
    qscale: int = -1,
    gop_size: int = -1,
    max_b_frames: int = -1,
    colorspace: str | None = None,
    color_primaries: str | None = None,
    color_trc: str | None = None,
) -> VideoEncodeConfig:
    """SPDL's ``video_encode_config``."""

def audio_encode_config(
    *,
    num_channels: int,
    sample_fmt: str | None = None,
    sample_rate: int | None = None,
    bit_rate: int = -1,
    compression_level: int = -1,
    qscale: int = -1,
) -> AudioEncodeConfig:
    """SPDL's ``audio_encode_config``."""

class Encoder:
    """An encoder from ``Muxer.add_encode_stream``: the base of ``VideoEncoder`` / ``AudioEncoder``."""

    def encode(self, frames: _Frames) -> _Packets | None: ...
    def flush(self) -> _Packets | None: ...
    @property
    def frame_size(self) -> int: ...
    @property
    def codec(self) -> VideoCodec | AudioCodec: ...

@final
class VideoEncoder(Encoder):
    """SPDL's ``VideoEncoder``."""

@final
class AudioEncoder(Encoder):
    """SPDL's ``AudioEncoder``."""

@final
class Muxer:
    """A container being written (SPDL's ``Muxer``)."""

    def __init__(self, dst: str | PathLike[str], /, *, format: str | None = None) -> None: ...
    def add_encode_stream(
        self,
        config: VideoEncodeConfig | AudioEncodeConfig,
        *,
        encoder: str | None = None,
        encoder_config: dict[str, str] | None = None,
    ) -> VideoEncoder | AudioEncoder: ...
    def add_remux_stream(self, codec: VideoCodec | AudioCodec) -> None: ...
    def open(self, muxer_config: dict[str, str] | None = None) -> Muxer: ...
    def write(self, index: int, packets: _Packets) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Muxer: ...
    def __exit__(self, *args: object) -> None: ...

def encode_image(
    path: str | PathLike[str], data: Any, pix_fmt: str = "rgb24", *, encode_config: VideoEncodeConfig | None = None
) -> None:
    """SPDL's ``encode_image``."""

def ffmpeg_versions() -> str | None:
    """FFmpeg library versions, or ``None`` when built without FFmpeg."""

def get_ffmpeg_versions() -> dict[str, tuple[int, int, int]]:
    """``{"libavcodec": (major, minor, micro), ...}``; ``RuntimeError`` without FFmpeg."""

def get_ffmpeg_filters() -> list[str]:
    """FFmpeg's filter names; ``RuntimeError`` without FFmpeg."""

def get_ffmpeg_log_level() -> int:
    """FFmpeg's log level; ``RuntimeError`` without FFmpeg."""

def set_ffmpeg_log_level(val: int, /) -> None:
    """Sets FFmpeg's log level; ``RuntimeError`` without FFmpeg."""

def op_media(name: str, timestamp: tuple[float, float] | None = None, **options: Any) -> NativeOp:
    """The stages ``ops.load_video`` / ``decode_video`` / ``load_audio`` / ``decode_audio``
    (``name``)."""

def load_decoder_plugin(path: _Path) -> str:
    """Loads a decoder plugin (a shared library built with ``spdl_io::export_decoder_plugin!``)
    and returns its name. Every image loader of the process then decodes its format, chosen
    by content. Raises ``ValueError`` naming the path when the file is not such a plugin.
    Only load libraries you trust: loading runs their code."""
    ...

# Array, archive and WAV fast paths (`spdl_rs.io.load_npy` / `load_npz` / `iter_tarfile` /
# `load_wav` / `parse_wav`). `_ArrayInfo` is `(owner, typestr, shape, fortran_order, offset)`:
# the elements are at `offset` in the caller's buffer (`owner is None`) or in `owner`.
_ArrayInfo = tuple[CPUBuffer | None, str, list[int], bool, int]

def _parse_npy(data: Any) -> _ArrayInfo: ...

class _NpzIndex:
    def __init__(self, data: Any, max_uncompressed_bytes: int) -> None: ...
    def names(self) -> list[str]: ...
    def member(self, key: str) -> _ArrayInfo | None: ...

class _TarMembers:
    def __init__(self, data: Any) -> None: ...
    def __iter__(self) -> _TarMembers: ...
    def __next__(self) -> tuple[str, int, int]: ...

class _TarStream:
    def __init__(self, file: Any) -> None: ...
    def __iter__(self) -> _TarStream: ...
    def __next__(self) -> tuple[str, bytes]: ...

class WAVHeader:
    """WAV file header information."""

    @property
    def audio_format(self) -> int:
        """Audio format code (1=PCM, 3=IEEE float, 0xFFFE=extensible)."""
    @property
    def num_channels(self) -> int:
        """Number of audio channels."""
    @property
    def sample_rate(self) -> int:
        """Sample rate in Hz."""
    @property
    def byte_rate(self) -> int:
        """Byte rate (sample_rate * num_channels * bits_per_sample / 8)."""
    @property
    def block_align(self) -> int:
        """Block alignment (num_channels * bits_per_sample / 8)."""
    @property
    def bits_per_sample(self) -> int:
        """Bits per sample."""
    @property
    def data_size(self) -> int:
        """Size of audio data in bytes, as declared."""

def parse_wav(data: Any) -> WAVHeader: ...
def _load_wav(
    data: Any, time_offset_seconds: float | None = None, duration_seconds: float | None = None
) -> _ArrayInfo: ...

class DecodedCache:
    """A decoded cache file (``spdl cache``) served as training batches, crop/flip/normalize at read time."""

    def __init__(self, path: str | PathLike[str], *, verify: bool = True) -> None: ...
    def __len__(self) -> int: ...
    @property
    def shape(self) -> tuple[int, int, int]: ...
    def label(self, index: int) -> int | None: ...
    def load_batch(
        self,
        indices: Sequence[int],
        *,
        epoch: int = 0,
        crop: int | None = None,
        random_crop: bool = False,
        flip: bool = False,
        normalize: bool = False,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        seed: int = 0,
    ) -> CPUBuffer: ...

def build_decoded_cache(
    paths: Sequence[str | PathLike[str]],
    out: str | PathLike[str],
    *,
    size: int = 256,
    transform: str = "resize",
    labels: Sequence[int] | None = None,
    num_threads: int | None = None,
) -> list[str]: ...

@final
class _TarShardIter:
    """One epoch of a ``TarShards``: a dict per sample (``__key__``, ``__shard__``,
    ``__state__``, one entry per field)."""

    def __iter__(self) -> _TarShardIter: ...
    def __next__(self) -> dict[str, Any]: ...

@final
class TarShards:
    """Tar shards in the WebDataset layout (local; HTTP/S3 with those features), as a pipeline source."""

    def __init__(
        self,
        pattern: str,
        *,
        shuffle_buffer: int = 0,
        shard_readahead: int = 2,
        required: Sequence[str] | None = None,
        **options: Unpack[_o.SamplingOptions],
    ) -> None: ...
    @property
    def shards(self) -> list[str]: ...
    def epoch_shards(self, epoch: int) -> list[int]: ...
    def set_epoch(self, epoch: int) -> None: ...
    def resume(
        self,
        state: tuple[int, int, int]
        | tuple[int, int, int, int]
        | tuple[int, int, int, int, bytes]
        | tuple[int, int, int, int, bytes, int],
    ) -> None: ...
    @property
    def failures(self) -> list[str]: ...
    def __iter__(self) -> Iterator[dict[str, Any]]: ...

# --- SPDL's GPU names (src/config.rs, src/gpu_decode.rs; wrapped by _gpu.py) ---

@final
class CUDAConfig:
    """SPDL's ``CUDAConfig``: a CUDA device index and stream, from ``cuda_config``."""

    @property
    def device_index(self) -> int: ...
    @property
    def stream(self) -> int: ...
    @property
    def allocator(self) -> tuple[Callable[[int, int, int], int], Callable[[int], None]] | None: ...

def cuda_config(
    device_index: int,
    stream: int = 2,
    allocator: tuple[Callable[[int, int, int], int], Callable[[int], None]] | None = None,
) -> CUDAConfig:
    """SPDL's ``cuda_config``: ``allocator=(alloc_fn, free_fn)`` supplies the device memory of
    transfers. ``TypeError`` for an ``allocator`` that is not a pair of callables;
    ``ValueError`` for a negative index or stream."""

@final
class CPUStorage:
    """SPDL's ``CPUStorage``: host memory (pinned or not), a writable 1-D ``uint8`` buffer."""

    @property
    def nbytes(self) -> int: ...
    @property
    def pinned(self) -> bool: ...
    @property
    def data_ptr(self) -> int: ...
    def __len__(self) -> int: ...
    if sys.version_info >= (3, 12):  # PEP 688; the buffer protocol itself works on 3.11
        def __buffer__(self, flags: int, /) -> memoryview: ...

def cpu_storage(size: int, pin_memory: bool = True) -> CPUStorage:
    """SPDL's ``cpu_storage``. Pinned needs a CUDA driver (``RuntimeError`` naming why)."""

def built_with_nvjpeg() -> bool: ...
def built_with_nvcodec() -> bool: ...
def nvjpeg_fallback_reason(data: bytes | bytearray | memoryview) -> str | None:
    """Why the nvJPEG loaders would decode ``data`` on the CPU (``None``: on the GPU)."""

def nvjpeg_stats() -> dict[str, float]:
    """``batches``, ``gpu_images``, ``cpu_fallbacks``, ``seconds`` of this process."""

def _decode_image_nvjpeg(
    data: list[Any],
    keys: list[str],
    device_index: int,
    scale_width: int,
    scale_height: int,
    single: bool,
    bgr: bool = False,
) -> CUDABuffer: ...
class _NvdecSpec:
    def __init__(self, device_index: int, crop: tuple[int, int, int, int], scale: tuple[int, int]) -> None: ...
    def open(self, codec: str, width: int, height: int) -> None: ...
    def decode(self, packets: VideoPackets, frames_per_batch: int) -> list[tuple[CUDABuffer, list[float]]]: ...
    def session(self, packets: VideoPackets, frames_per_batch: int) -> _NvdecSession: ...

class _NvdecSession:
    def feed(self, packets: VideoPackets) -> list[tuple[CUDABuffer, list[float]]]: ...
    def flush(self) -> list[tuple[CUDABuffer, list[float]]]: ...

def _packets_annexb(packets: VideoPackets) -> bytes: ...
def _nv12_to_planar(data: Any, coeff: int = 1, bgr: bool = False) -> CPUBuffer: ...
def _copy_into_storage(storage: CPUStorage, buffer: CPUBuffer) -> CPUBuffer: ...
