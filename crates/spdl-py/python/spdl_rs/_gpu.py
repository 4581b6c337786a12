"""The GPU half of ``spdl_rs.io``, with SPDL 0.8's names and signatures (``spdl.io``'s
``cuda_config``, ``cpu_storage``, ``transfer_*``, ``to_jax`` / ``to_numba``, nvJPEG, NVDEC and
NV12 functions). Re-exported by :mod:`spdl_rs.io`; see each function for what differs.

Errors when the GPU path cannot run are ``RuntimeError`` naming why: ``"no CUDA driver: ..."``,
``"nvJPEG unavailable: ..."``, ``"NVDEC unavailable: libnvcuvid.so.1 not found ..."``, or the
build (the ``cuda`` / ``decode-nvjpeg`` features).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from . import _native
from ._native import (
    CPUBuffer,
    CPUStorage,
    CUDABuffer,
    CUDAConfig,
    built_with_nvcodec,
    built_with_nvjpeg,
    cpu_storage,
    cuda_available,
    cuda_config,
    nvjpeg_fallback_reason,
    nvjpeg_stats,
)

__all__ = [
    "CUDAConfig",
    "cuda_config",
    "CPUStorage",
    "cpu_storage",
    "transfer_buffer",
    "transfer_buffer_cpu",
    "transfer_tensor",
    "transfer_tensor_h2d",
    "transfer_tensor_d2h",
    "to_jax",
    "to_numba",
    "decode_image_nvjpeg",
    "load_image_batch_nvjpeg",
    "nvjpeg_fallback_reason",
    "nvjpeg_stats",
    "NvDecDecoder",
    "nvdec_decoder",
    "decode_packets_nvdec",
    "streaming_load_video_nvdec",
    "nv12_to_rgb",
    "nv12_to_bgr",
    "built_with_nvjpeg",
    "built_with_nvcodec",
]

T = TypeVar("T")


def _device_of(device: Any, device_config: CUDAConfig | None, fn: str) -> Any:
    """The ``device`` argument for the native copy: from ``device_config`` (SPDL's keyword) or
    ``device`` (spdl_rs's), never both."""
    if device_config is None:
        return device
    if device is not None:
        raise TypeError(f"{fn}: pass either device or device_config, not both")
    if not isinstance(device_config, CUDAConfig):
        raise TypeError(
            f"{fn}: device_config must be a CUDAConfig (spdl_rs.io.cuda_config), "
            f"got {type(device_config).__name__}"
        )
    return device_config.device_index


def transfer_buffer(
    buffer: CPUBuffer,
    device: str | int | None = None,
    *,
    device_config: CUDAConfig | None = None,
) -> CUDABuffer:
    """Copies ``buffer`` to a CUDA device: a :class:`CUDABuffer` of the same shape and dtype.

    SPDL's ``transfer_buffer(buffer, *, device_config)``; spdl_rs also takes ``device``
    (``"cuda:N"``, ``N``, ``"cuda"`` or ``None``: the ``LOCAL_RANK`` device, 0 when unset);
    passing both raises ``TypeError``. The GIL is released and the call returns once the copy
    is complete (through a pinned staging buffer when one is free, else from pageable memory;
    up to 8 staging buffers per device are kept for later calls), so the result is ready for
    work on any stream, ``device_config.stream`` included.

    A one-off copy for use outside a pipeline (in a pipeline, :func:`spdl_rs.ops.to_device`
    collates into pinned memory first).

    Raises ``RuntimeError`` in a build without the ``cuda`` feature (the message says how to
    rebuild), without a driver (``"no CUDA driver: ..."``), for a device index out of range
    (``"invalid CUDA device ..."``) or a failed driver call; ``ValueError`` for a bad
    ``device``; ``TypeError`` when ``buffer`` is not a ``CPUBuffer``.

    With a ``device_config`` made with ``allocator=(alloc_fn, free_fn)`` (SPDL's keyword, e.g.
    PyTorch's caching allocator), the device memory is ``alloc_fn(size_in_bytes, device_index,
    stream)`` (``stream``: the config's) and goes back with ``free_fn(ptr)`` once the
    ``CUDABuffer`` and every view of it are gone; an exception from ``alloc_fn`` raises
    ``ValueError`` naming the size and device. Without a driver the call raises the driver
    error before ``alloc_fn`` is called.
    """
    target = _device_of(device, device_config, "transfer_buffer")
    allocator = getattr(device_config, "allocator", None)
    if allocator is None:
        return _native.transfer_buffer(buffer, target)
    return _native.transfer_buffer(buffer, target, allocator=allocator, stream=device_config.stream)


def transfer_buffer_cpu(buffer: CUDABuffer) -> CPUBuffer:
    """SPDL's ``transfer_buffer_cpu``: a copy of ``buffer`` in host memory
    (:meth:`CUDABuffer.to_host`). ``TypeError`` for anything but a ``CUDABuffer``."""
    if not isinstance(buffer, CUDABuffer):
        raise TypeError(f"transfer_buffer_cpu expects a CUDABuffer, got {type(buffer).__name__}")
    return buffer.to_host()


def with_device_config(fn: Callable[..., Any], *, storage: bool = False) -> Callable[..., Any]:
    """``fn`` (a CPU loader) with SPDL's ``device_config=`` keyword (and, with ``storage``,
    SPDL's ``storage=``): decoded on the CPU as before; with ``storage`` (a
    :class:`CPUStorage`) the result is copied into it and the returned ``CPUBuffer`` shares the
    storage's memory; with ``device_config`` it is then copied with :func:`transfer_buffer` (a
    ``CUDABuffer`` is returned). For video and audio the frames / waveform buffer is what is
    copied."""
    import inspect

    @functools.wraps(fn)
    def wrapper(*args: Any, device_config: CUDAConfig | None = None, **kwargs: Any) -> Any:
        into = kwargs.pop("storage", None) if storage else None
        out = fn(*args, **kwargs)
        if into is not None:
            if not isinstance(into, CPUStorage):
                raise TypeError(f"storage must be a CPUStorage (cpu_storage), got {type(into).__name__}")
            out = _native._copy_into_storage(into, out)
        if device_config is None:
            return out
        for attr in ("frames", "waveform"):
            if hasattr(out, attr) and not isinstance(out, CPUBuffer):
                out = getattr(out, attr)
                break
        return transfer_buffer(out, device_config=device_config)

    try:  # show the new keywords in help() and inspect.signature
        sig = inspect.signature(fn)
        kw = inspect.Parameter.KEYWORD_ONLY
        extra = [inspect.Parameter("device_config", kw, default=None)]
        if storage:
            extra.append(inspect.Parameter("storage", kw, default=None))
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
        wrapper.__signature__ = sig.replace(parameters=[*params[:at], *extra, *params[at:]])  # type: ignore[attr-defined]
    except (TypeError, ValueError):  # a native function without a text signature
        pass
    doc = wrapper.__doc__ or ""
    wrapper.__doc__ = doc + (
        "\n\n``device_config``: a :class:`CUDAConfig` (SPDL's keyword): the result is copied "
        "to that device and a ``CUDABuffer`` is returned (see :func:`transfer_buffer`)."
    )
    if storage:
        wrapper.__doc__ += (
            "\n\n``storage``: a :class:`CPUStorage` (SPDL's keyword): the decoded data is copied "
            "into it and the ``CPUBuffer`` returned shares its memory (``ValueError`` when it "
            "is too small); a later call with the same storage overwrites it."
        )
    return wrapper


# ---------------------------------------------------------------------------------------------
# PyTorch tensors to and from the GPU (SPDL 0.8's transfer_tensor_h2d / transfer_tensor_d2h).
# ---------------------------------------------------------------------------------------------


def _map_leaves(fn: Callable[[Any], Any], obj: Any) -> Any:
    """``obj`` rebuilt with ``fn`` applied to every leaf: through lists, tuples (named tuples
    keep their type), dicts and other mappings (``defaultdict`` keeps its factory), and
    dataclass instances (init fields through the constructor, the others set after)."""
    cls = type(obj)
    if isinstance(obj, list):
        return cls(_map_leaves(fn, v) for v in obj)
    if isinstance(obj, tuple):
        if hasattr(obj, "_fields"):
            return cls(*(_map_leaves(fn, v) for v in obj))
        return cls(_map_leaves(fn, v) for v in obj)
    if isinstance(obj, defaultdict):
        return cls(obj.default_factory, {k: _map_leaves(fn, v) for k, v in obj.items()})
    if isinstance(obj, Mapping):
        return cls({k: _map_leaves(fn, v) for k, v in obj.items()})
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = dataclasses.fields(obj)
        new = cls(**{f.name: _map_leaves(fn, getattr(obj, f.name)) for f in fields if f.init})
        for f in fields:
            if not f.init:
                setattr(new, f.name, _map_leaves(fn, getattr(obj, f.name)))
        return new
    return fn(obj)


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            "transfer_tensor_h2d / transfer_tensor_d2h need PyTorch (pip install torch)"
        ) from e
    return torch


class _H2D:
    """One thread's host-to-device copier: its own CUDA stream, and the last ``num_caches``
    batches kept referenced (so that the caching allocator does not hand their memory to
    another stream while the consumer may still read them)."""

    def __init__(self, torch: Any, device: Any, num_caches: int) -> None:
        self.torch = torch
        self.device = device
        self.stream = torch.cuda.Stream(device)
        self.recent: list[Any] = []
        self.num_caches = num_caches

    def __call__(self, batch: T) -> T:
        torch = self.torch
        staged: list[Any] = []

        def copy(x: Any) -> Any:
            if isinstance(x, torch.Tensor) and x.device.type == "cpu":
                pinned = x if x.is_pinned() else x.pin_memory()
                staged.append(pinned)  # alive until the copy below is done
                return pinned.to(self.device, non_blocking=True)
            return x

        with torch.cuda.stream(self.stream):
            out = _map_leaves(copy, batch)
        self.stream.synchronize()
        self.recent.append(out)
        del self.recent[: max(0, len(self.recent) - self.num_caches)]
        return out


_LOCAL = threading.local()


def transfer_tensor_h2d(batch: T, /, *, num_caches: int = 4) -> T:
    """Copies the CPU ``torch.Tensor`` leaves of ``batch`` to the GPU on a dedicated stream
    (SPDL 0.8's ``spdl.io.transfer_tensor_h2d``, as its PyTorch guide uses it).

    ``batch``: a tensor, or lists, tuples (named tuples too), dicts and dataclasses of them
    (other leaves are passed through). Each CPU tensor is page-locked (``pin_memory()``,
    unless it already is) and copied with ``.to(device, non_blocking=True)`` on a CUDA stream
    made once per calling thread; the stream is synchronized before returning, so the result
    can be used from any stream. Calling it from a background thread (e.g. a pipeline stage)
    overlaps the copies with the training step. The device is ``cuda:LOCAL_RANK`` (0 when
    unset). ``num_caches``: how many recent results this thread keeps referenced (SPDL's
    guard against the caching allocator reusing memory across streams); ``>= 1``.

    Returns an object of the same structure and types with CUDA tensors.

    Raises ``ImportError`` without PyTorch, ``RuntimeError("The local rank ... is not below the
    number of available GPUs (0)")`` when there is no such CUDA device (as SPDL), ``ValueError``
    for ``num_caches < 1``.
    """
    if num_caches < 1:
        raise ValueError(f"num_caches must be >= 1, got {num_caches}")
    copier = getattr(_LOCAL, "h2d", None)
    if copier is None:
        torch = _torch()
        rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
        count = torch.cuda.device_count()
        if rank >= count:
            raise RuntimeError(
                f"The local rank ({rank}) is not below the number of available GPUs ({count})."
            )
        copier = _H2D(torch, torch.device("cuda", rank), num_caches)
        _LOCAL.h2d = copier
    copier.num_caches = num_caches
    return copier(batch)


def transfer_tensor(batch: T, /, *, num_caches: int = 4) -> T:
    """Deprecated alias of :func:`transfer_tensor_h2d` (as in SPDL 0.8); warns
    ``FutureWarning``."""
    warnings.warn(
        "transfer_tensor is deprecated; use transfer_tensor_h2d instead.",
        FutureWarning,
        stacklevel=2,
    )
    return transfer_tensor_h2d(batch, num_caches=num_caches)


def transfer_tensor_d2h(
    batch: T,
    /,
    *,
    device: Any = None,
    stream: Any = None,
    producer_event: Any = None,
) -> T:
    """Copies the ``torch.Tensor`` leaves of ``batch`` that are on ``device`` to the CPU on a
    dedicated stream (SPDL 0.8's ``spdl.io.transfer_tensor_d2h``).

    ``device``: the CUDA device (``None``: ``cuda:LOCAL_RANK``); other leaves pass through.
    ``stream``: a ``torch.cuda.Stream`` of that device to copy on (needs ``device``), else one
    made per thread and device. ``producer_event``: a ``torch.cuda.Event`` marking when the
    tensors are ready; by default one is recorded on the caller's current stream (record it on
    the producing thread when calling this from another thread). The copy stream waits for it,
    the copies are ``non_blocking`` (the results are page-locked), and the stream is
    synchronized before returning.

    Returns ``batch`` itself when PyTorch has no CUDA device (as SPDL) or nothing was on
    ``device``. Raises ``ValueError`` for ``stream`` without ``device``, a non-CUDA ``device``
    or a stream on another device; ``RuntimeError`` for a device index out of range;
    ``ImportError`` without PyTorch.
    """
    if stream is not None and device is None:
        raise ValueError("transfer_tensor_d2h: device must be given with stream")
    torch = _torch()
    if not torch.cuda.is_available():
        return batch
    if device is None:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0") or 0))
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"transfer_tensor_d2h: expected a CUDA device, got {device}")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    count = torch.cuda.device_count()
    if not 0 <= device.index < count:
        raise RuntimeError(f"CUDA device index {device.index} is invalid for {count} devices.")
    if stream is None:
        streams = getattr(_LOCAL, "d2h", None)
        if streams is None:
            streams = _LOCAL.d2h = {}
        stream = streams.get(device)
        if stream is None:
            stream = streams[device] = torch.cuda.Stream(device)
    elif stream.device != device:
        raise ValueError(f"the stream is on {stream.device}, not on {device}")
    if producer_event is None:
        producer_event = torch.cuda.Event()
        producer_event.record(torch.cuda.current_stream(device))
    waited = False

    def copy(x: Any) -> Any:
        nonlocal waited
        if not isinstance(x, torch.Tensor) or x.device != device:
            return x
        if not waited:
            stream.wait_event(producer_event)
            waited = True
        return x.to("cpu", non_blocking=True)

    try:
        with torch.cuda.stream(stream):
            out = _map_leaves(copy, batch)
    finally:
        if waited:
            stream.synchronize()
    return out if waited else batch


# ---------------------------------------------------------------------------------------------
# Array conversions.
# ---------------------------------------------------------------------------------------------


def to_jax(buffer: Any) -> Any:
    """A ``jax.Array`` of ``buffer`` (SPDL's ``spdl.io.to_jax``): a ``CPUBuffer`` (or any object
    with ``__array_interface__`` / the buffer protocol) through NumPy; a ``CUDABuffer`` (or
    any ``__dlpack__`` object on a GPU) through DLPack, so it stays on its device (needs a
    CUDA-enabled jaxlib). JAX copies host data into its own buffer. Raises ``ImportError``
    naming JAX when it is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise ImportError("to_jax needs JAX (pip install jax)") from e
    if hasattr(buffer, "__cuda_array_interface__") or (
        hasattr(buffer, "__dlpack_device__") and buffer.__dlpack_device__()[0] == 2
    ):
        return jax.dlpack.from_dlpack(buffer)
    import numpy as np

    return jnp.asarray(np.asarray(buffer))


def to_numba(buffer: Any) -> Any:
    """SPDL's ``spdl.io.to_numba``: a Numba ``DeviceNDArray`` sharing a ``CUDABuffer``'s
    device memory (``__cuda_array_interface__``, no copy), or, for a ``CPUBuffer``, a NumPy
    array sharing its memory (what Numba's CPU functions take). Raises ``ImportError`` naming
    Numba for a device buffer when Numba is not installed."""
    if hasattr(buffer, "__cuda_array_interface__"):
        try:
            from numba import cuda
        except ImportError as e:
            raise ImportError("to_numba needs Numba for a CUDA buffer (pip install numba)") from e
        return cuda.as_cuda_array(buffer)
    import numpy as np

    return np.asarray(buffer)


# ---------------------------------------------------------------------------------------------
# nvJPEG.
# ---------------------------------------------------------------------------------------------


def _jpeg_bytes(src: Any) -> tuple[Any, str]:
    """The bytes of one source (a path is read) and its name for errors."""
    if isinstance(src, (str, os.PathLike)):
        with open(src, "rb") as f:
            return f.read(), os.fspath(src)
    if isinstance(src, (bytes, bytearray, memoryview)):
        return src, "<bytes>"
    raise TypeError(f"src must be a path or bytes-like, got {type(src).__name__}")


def _check_config(device_config: Any, fn: str) -> CUDAConfig:
    if device_config is None:
        raise ValueError(f"{fn}: device_config must be provided (spdl_rs.io.cuda_config(...))")
    if not isinstance(device_config, CUDAConfig):
        raise TypeError(
            f"{fn}: device_config must be a CUDAConfig, got {type(device_config).__name__}"
        )
    # nvJPEG / NVDEC write into device memory of their own: a caller's allocator would not be
    # used, so say so rather than ignore it (without a device, the driver error comes first).
    if device_config.allocator is not None and cuda_available():
        raise TypeError(
            f"{fn}: cuda_config(allocator=...) is used by transfer_buffer and the loaders' "
            "device_config= copies; nvJPEG/NVDEC decode into their own device memory: pass a "
            "cuda_config without allocator"
        )
    return device_config


def _is_bgr(pix_fmt: Any, fn: str) -> bool:
    """SPDL's ``pix_fmt`` of the nvJPEG path: ``"rgb"`` or ``"bgr"`` (any case)."""
    if not isinstance(pix_fmt, str) or pix_fmt.lower() not in ("rgb", "bgr"):
        raise ValueError(f"{fn}: pix_fmt must be 'rgb' or 'bgr', got {pix_fmt!r}")
    return pix_fmt.lower() == "bgr"


def decode_image_nvjpeg(
    src: str | bytes | memoryview | Sequence[bytes | memoryview],
    *,
    device_config: CUDAConfig | None = None,
    scale_width: int = -1,
    scale_height: int = -1,
    pix_fmt: str = "rgb",
) -> CUDABuffer:
    """Decodes JPEG(s) with nvJPEG into device memory (SPDL's ``decode_image_nvjpeg``).

    ``src``: a path, bytes-like (one image), or a sequence of bytes-like / paths (a batch).
    ``device_config``: the device (required, as SPDL). ``scale_width`` / ``scale_height``:
    resize on the GPU (both, or neither: then every image of a batch must have the first
    one's size). ``pix_fmt``: the order of the planes, ``"rgb"`` (default) or ``"bgr"``
    (case-insensitive, as SPDL documents ``"RGB"`` / ``"BGR"``); anything else raises
    ``ValueError``.

    Returns a ``CUDABuffer`` ``[3, H, W]`` ``uint8`` for one image, ``[N, 3, H, W]`` for a
    batch: planar (channel-first), SPDL's layout (spdl_rs's CPU loaders are channel-last
    ``[N, H, W, 3]``). Files nvJPEG
    does not take (progressive, arithmetic, CMYK, corrupt: :func:`nvjpeg_fallback_reason`) are
    decoded by the CPU decoder into the same buffer and counted in :func:`nvjpeg_stats`.
    EXIF orientation is not applied.

    Raises ``RuntimeError`` when it cannot run: ``"nvJPEG unavailable: ..."`` (built without
    ``decode-nvjpeg``, or libnvjpeg not found), ``"no CUDA driver: ..."``; ``ValueError`` for
    a missing ``device_config``, an unknown ``pix_fmt``, bad sizes, a file neither decoder can read (naming it).
    """
    cfg = _check_config(device_config, "decode_image_nvjpeg")
    bgr = _is_bgr(pix_fmt, "decode_image_nvjpeg")
    single = isinstance(src, (str, os.PathLike, bytes, bytearray, memoryview))
    items = [_jpeg_bytes(s) for s in ([src] if single else list(src))]
    return _native._decode_image_nvjpeg(
        [d for d, _ in items],
        [k for _, k in items],
        cfg.device_index,
        scale_width,
        scale_height,
        single,
        bgr,
    )


def load_image_batch_nvjpeg(
    srcs: Sequence[str | bytes | memoryview],
    *,
    device_config: CUDAConfig,
    width: int,
    height: int,
    pix_fmt: str = "rgb",
) -> CUDABuffer:
    """SPDL's ``load_image_batch_nvjpeg``: the images ``srcs`` (paths or bytes) decoded on the
    GPU and resized to ``width x height``, as one ``CUDABuffer`` ``[N, 3, height, width]``
    ``uint8``, planes in ``pix_fmt`` order (``"rgb"`` or ``"bgr"``) (see :func:`decode_image_nvjpeg` for the layout, the CPU fallback and errors)."""
    if isinstance(srcs, (str, bytes, bytearray, memoryview)):
        raise TypeError("load_image_batch_nvjpeg: srcs must be a sequence of sources")
    return decode_image_nvjpeg(
        list(srcs),
        device_config=device_config,
        scale_width=width,
        scale_height=height,
        pix_fmt=pix_fmt,
    )


# ---------------------------------------------------------------------------------------------
# NVDEC.
# ---------------------------------------------------------------------------------------------


class NvDecDecoder:
    """SPDL's ``NvDecDecoder``, made by :func:`nvdec_decoder` (not directly): an NVDEC decoder
    for one codec on one device, with the crop and scale it was made with. Two workflows, as
    SPDL: ``decode_packets(packets)`` decodes and flushes in one call; streaming is
    ``init_buffer(num_frames)``, then ``streaming_decode_packets(packets)`` for each chunk
    (the NVDEC parser and decoder stay alive between calls, owned by this object), then
    ``flush()``. Both streaming methods return iterators of ``CUDABuffer`` batches of
    ``num_frames`` NV12 frames ``[num_frames, H + H/2, W]`` ``uint8``; only ``flush`` yields a
    shorter last batch. After ``flush`` the next ``streaming_decode_packets`` starts a new
    stream (same ``num_frames``)."""

    def __init__(self) -> None:
        raise RuntimeError("use spdl_rs.io.nvdec_decoder(cuda_config, codec) to make an NvDecDecoder")

    @classmethod
    def _make(cls, spec: Any) -> NvDecDecoder:
        self = cls.__new__(cls)
        self._spec = spec  # a checked _native._NvdecSpec: device, crop and scale
        self._num_frames: int | None = None
        self._session: Any = None
        return self

    def _decode(self, packets: Any, frames_per_batch: int) -> list[tuple[CUDABuffer, list[float]]]:
        return self._spec.decode(packets, frames_per_batch)

    def decode_packets(self, packets: Any) -> CUDABuffer:
        """Every frame of ``packets`` (``VideoPackets`` from ``demux_video``; H.264/HEVC are
        converted to Annex-B, as SPDL's bitstream filter does) decoded by NVDEC, in display
        order, as one ``CUDABuffer`` ``[N, H + H/2, W]`` ``uint8`` NV12 (``H``, ``W``: after
        crop and scale). Packets demuxed with a time window give every decoded frame, from
        the key frame before the window on (no trimming to the window yet). AV1 from MP4
        relies on the sequence header being in the key frame packets (``av1C`` is not read).
        ``RuntimeError`` naming the reason when NVDEC cannot decode it."""
        ((buf, _),) = self._decode(packets, 2**62)
        return buf

    def init_buffer(self, num_frames: int) -> None:
        """SPDL's ``init_buffer``: sets the batch size (frames per ``CUDABuffer``) of the
        streaming methods and drops any stream in progress (its undelivered frames are
        discarded). ``ValueError`` for ``num_frames < 1``."""
        if isinstance(num_frames, bool) or not isinstance(num_frames, int):
            raise TypeError(f"num_frames must be an int, got {type(num_frames).__name__}")
        if num_frames < 1:
            raise ValueError(f"num_frames must be >= 1, got {num_frames}")
        self._num_frames = num_frames
        self._session = None

    def _feed(self, packets: Any) -> list[CUDABuffer]:
        if self._num_frames is None:
            raise RuntimeError(
                "NvDecDecoder.streaming_decode_packets: call init_buffer(num_frames) first"
            )
        if self._session is None:
            self._session = self._spec.session(packets, self._num_frames)
        return [buf for buf, _ in self._session.feed(packets)]

    def streaming_decode_packets(self, packets: Any) -> Iterator[CUDABuffer]:
        """SPDL's ``streaming_decode_packets``: feeds ``packets`` (``VideoPackets``, the next
        chunk of the stream, in decode order) to the live NVDEC session (made at the first
        call after ``init_buffer`` / ``flush``, from this chunk's codec, size and extradata)
        and returns an iterator of the full batches decoded so far: ``CUDABuffer``
        ``[num_frames, H + H/2, W]`` ``uint8`` NV12, display order. The frames that do not fill
        a batch wait on the device for the next call. ``RuntimeError`` without
        ``init_buffer``; ``ValueError`` for packets of another codec; the errors of
        ``decode_packets`` otherwise (the stream is then dropped)."""
        try:
            return iter(self._feed(packets))
        except Exception:
            self._session = None
            raise

    def flush(self) -> Iterator[CUDABuffer]:
        """SPDL's ``flush``: sends the end of stream to NVDEC and returns an iterator of the
        remaining frames in batches of ``num_frames``, the last one shorter; the stream is
        then closed. Empty when no stream is in progress."""
        session, self._session = self._session, None
        if session is None:
            return iter(())
        return iter([buf for buf, _ in session.flush()])


def _codec_size(codec: Any) -> tuple[str, int, int]:
    """``(name, width, height)`` of SPDL's ``VideoCodec``-like object, or of ``VideoPackets``."""
    if hasattr(codec, "get_timestamps") and hasattr(codec, "codec"):
        codec = codec.codec  # VideoPackets -> its VideoCodec
    try:
        return str(codec.name), int(codec.width), int(codec.height)
    except AttributeError as e:
        raise TypeError(
            "codec must have name, width and height (SPDL's VideoCodec), or be VideoPackets"
        ) from e


def nvdec_decoder(
    cuda_config: CUDAConfig,
    codec: Any,
    *,
    use_cache: bool = True,
    crop_left: int = 0,
    crop_top: int = 0,
    crop_right: int = 0,
    crop_bottom: int = 0,
    scale_width: int = -1,
    scale_height: int = -1,
) -> NvDecDecoder:
    """SPDL's ``nvdec_decoder``: an NVDEC decoder for ``codec`` (an object with ``name``,
    ``width``, ``height``, or the ``VideoPackets`` to decode) on ``cuda_config``'s device,
    cropping ``crop_*`` pixels then scaling to ``scale_width x scale_height`` (``-1``: keep;
    the output width and height must be even: NV12). ``use_cache`` is SPDL's per-thread
    decoder reuse (a decoder is always new here; each ``decode_packets`` is one session).

    Checks first, with no GPU needed: the codec is one NVDEC decodes, the crop leaves
    something, and the coded and output sizes are within the default limits (178,956,970
    pixels, 1 GiB): ``ValueError`` naming them. Then ``RuntimeError``: ``"NVDEC unavailable:
    libnvcuvid.so.1 not found ..."`` (no NVIDIA driver), ``"no CUDA driver: ..."``, or
    ``"unsupported: ..."`` in a build without NVDEC (``built_with_nvcodec()`` is False).
    The sizes in the bitstream are checked again before the decoder allocates its surfaces.
    """
    del use_cache  # no decoder is cached: each call makes (and checks) a new one
    cfg = _check_config(cuda_config, "nvdec_decoder")
    name, width, height = _codec_size(codec)
    crop = (crop_left, crop_top, crop_right, crop_bottom)
    for k, v in zip(("crop_left", "crop_top", "crop_right", "crop_bottom"), crop):
        if v < 0:
            raise ValueError(f"nvdec_decoder: {k} must be >= 0, got {v}")
    spec = _native._NvdecSpec(cfg.device_index, crop, (scale_width, scale_height))
    spec.open(name, width, height)
    return NvDecDecoder._make(spec)


def decode_packets_nvdec(
    packets: Any,
    *,
    device_config: CUDAConfig,
    pix_fmt: str = "rgb",
    crop_left: int = 0,
    crop_top: int = 0,
    crop_right: int = 0,
    crop_bottom: int = 0,
    scale_width: int = -1,
    scale_height: int = -1,
) -> CUDABuffer:
    """SPDL's ``decode_packets_nvdec``: ``VideoPackets`` decoded by NVDEC and converted to
    ``pix_fmt`` (``"rgb"`` / ``"bgr"``): a ``CUDABuffer`` ``[N, 3, H, W]`` ``uint8`` on
    ``device_config``'s device (the NV12 to RGB step is :func:`nv12_to_rgb`'s, which runs on
    the host for now). ``ValueError`` for another ``pix_fmt``; otherwise the checks and
    errors of :func:`nvdec_decoder` and ``NvDecDecoder.decode_packets``."""
    if pix_fmt not in ("rgb", "bgr"):
        raise ValueError(f"pix_fmt must be 'rgb' or 'bgr', got {pix_fmt!r}")
    decoder = nvdec_decoder(
        device_config,
        packets,
        crop_left=crop_left,
        crop_top=crop_top,
        crop_right=crop_right,
        crop_bottom=crop_bottom,
        scale_width=scale_width,
        scale_height=scale_height,
    )
    nv12 = decoder.decode_packets(packets)
    convert = nv12_to_bgr if pix_fmt == "bgr" else nv12_to_rgb
    return convert(nv12, device_config=device_config)


def streaming_load_video_nvdec(
    src: Any,
    device_config: CUDAConfig,
    *,
    num_frames: int,
    post_processing_params: dict[str, int | bool] | None = None,
    use_cache: bool = True,
) -> Iterator[CUDABuffer]:
    """SPDL's ``streaming_load_video_nvdec``: batches of ``num_frames`` NV12 frames
    (``CUDABuffer`` ``[num_frames, H + H/2, W]`` ``uint8``, the last batch shorter) decoded by
    NVDEC from ``src`` (path or bytes). ``post_processing_params``: :func:`nvdec_decoder`'s
    ``crop_*`` / ``scale_*``. The checks run on the first ``next()``: ``ValueError`` for
    ``num_frames < 1`` or an unknown parameter, then those of :func:`nvdec_decoder` (the
    container is opened first to read the codec and size: a ``decode-ffmpeg`` build, else
    ``RuntimeError``).

    As SPDL, the video stream is demuxed ``num_frames`` packets at a time
    (``Demuxer(src).streaming_demux(video_stream_index, num_packets=num_frames)``), each chunk
    is fed to one NVDEC session (``streaming_decode_packets``, then ``flush``) and each batch
    is yielded as soon as it is decoded: about one chunk of compressed packets is in host
    memory and about one batch of decoded frames on the device at a time."""
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    params = dict(post_processing_params or {})
    allowed = {"crop_left", "crop_top", "crop_right", "crop_bottom", "scale_width", "scale_height"}
    if unknown := set(params) - allowed:
        raise ValueError(f"post_processing_params: unknown keys {sorted(unknown)}")
    demuxer_class = getattr(_native, "Demuxer", None)
    if demuxer_class is None:
        raise RuntimeError(
            "streaming_load_video_nvdec: this spdl_rs was built without FFmpeg, which demuxes "
            "the video (the `decode-ffmpeg` feature; built_with_nvcodec() is False)"
        )
    binary = isinstance(src, (bytes, bytearray, memoryview))
    with demuxer_class(src if binary else os.fspath(src)) as demuxer:
        decoder = nvdec_decoder(device_config, demuxer.video_codec, use_cache=use_cache, **params)
        decoder.init_buffer(num_frames)
        chunks = demuxer.streaming_demux(demuxer.video_stream_index, num_packets=num_frames)
        for packets in chunks:
            yield from decoder.streaming_decode_packets(packets)
    yield from decoder.flush()


# ---------------------------------------------------------------------------------------------
# NV12 to RGB / BGR.
# ---------------------------------------------------------------------------------------------


def _nv12_convert(buffers: Any, device_config: CUDAConfig | None, coeff: int, bgr: bool) -> Any:
    on_gpu = isinstance(buffers, CUDABuffer)
    if on_gpu:
        if device_config is None:
            raise ValueError("device_config must be provided for a CUDABuffer")
        host = buffers.to_host()
    else:
        host = buffers
    out = _native._nv12_to_planar(host, coeff, bgr)
    if device_config is None:
        return out
    return transfer_buffer(out, device_config=device_config)


def nv12_to_rgb(
    buffers: Any,
    *,
    device_config: CUDAConfig | None = None,
    coeff: int = 1,
    sync: bool = False,
) -> Any:
    """NV12 frames ``[N, H + H/2, W]`` ``uint8`` (the Y plane, then the interleaved UV plane at
    half resolution) to planar RGB ``[N, 3, H, W]`` ``uint8`` (SPDL's ``nv12_to_rgb``).

    Limited range, matrix ``coeff`` (SPDL's values: 1 BT.709, the default; 4 FCC; 5 BT.470BG;
    6 BT.601; 7 SMPTE 240M; 9, 10 BT.2020; other values mean BT.709; 8 (YCgCo) raises
    ``ValueError``). ``R = 255/219 (Y-16) + 255/224 * 2(1-Kr) (V-128)`` and so on; SPDL's
    kernel scales chroma by 255/219 instead, so saturated colours differ by up to 5 levels.

    ``buffers``: host frames (a ``CPUBuffer``, NumPy array or any C-contiguous ``uint8``
    buffer; ``[H + H/2, W]`` is one frame) are converted on the CPU; the result is a
    ``CPUBuffer``, or, with ``device_config``, copied to that device. A ``CUDABuffer``
    (needs ``device_config``, as SPDL) is copied to the host, converted, and copied back: no
    GPU kernel yet. Every path completes before returning, so ``sync`` (SPDL's wait for the
    kernel) is always satisfied.
    """
    del sync  # every path is synchronous (see above)
    return _nv12_convert(buffers, device_config, coeff, bgr=False)


def nv12_to_bgr(
    buffers: Any,
    *,
    device_config: CUDAConfig | None = None,
    coeff: int = 1,
    sync: bool = False,
) -> Any:
    """:func:`nv12_to_rgb` with the channels in BGR order (SPDL's ``nv12_to_bgr``)."""
    del sync  # every path is synchronous
    return _nv12_convert(buffers, device_config, coeff, bgr=True)
