"""The Python GPU path: ``ops.to_device``, ``io.transfer_buffer`` and ``CUDABuffer``.

Three groups:

- no-GPU paths, run everywhere: what each call raises in a build without the ``cuda`` feature
  or on a machine without a driver (CI), and that a pipeline reports it naming the stage
  without hanging;
- the export code (DLPack capsules, ``__cuda_array_interface__``, argument checks) through
  ``_export_probe``, a host stand-in that runs ``CUDABuffer``'s code over a CPUBuffer;
- GPU tests, skipped (with the reason) unless a CUDA device is usable: round trips through
  ``torch.from_dlpack`` / ``__cuda_array_interface__``, pointer sharing, lifetimes.
"""

import ctypes
import gc
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import spdl_rs
from spdl_rs import io, ops
from spdl_rs._native import _export_probe
from spdl_rs.pipeline import PipelineBuilder, PipelineFailure

from conftest import REPO, SAMPLES

BUILT = io.cuda_built()
REASON = io.cuda_unavailable_reason()
HAS_GPU = REASON is None

requires_gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no usable CUDA device: {REASON}")
requires_no_gpu = pytest.mark.skipif(HAS_GPU, reason="a CUDA device is usable here")
requires_build = pytest.mark.skipif(not BUILT, reason="spdl_rs built without the `cuda` feature")
requires_no_build = pytest.mark.skipif(BUILT, reason="spdl_rs built with the `cuda` feature")

try:
    import torch

    HAS_TORCH_CUDA = HAS_GPU and torch.cuda.is_available()
except ImportError:  # pragma: no cover - torch is not in the test venv
    torch = None
    HAS_TORCH_CUDA = False
requires_torch = pytest.mark.skipif(not HAS_TORCH_CUDA, reason="needs torch with CUDA and a GPU")


PHOTOS = sorted(p for p in SAMPLES.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png")) if SAMPLES.is_dir() else []


def small_batch(n=3, h=4, w=5, normalize=False):
    """A [n, h, w, 3] uint8 CPUBuffer of real photos ([n, 3, h, w] float32 with normalize)."""
    if len(PHOTOS) < n:
        pytest.skip(f"bundled photos not found at {SAMPLES}")
    return io.load_image_batch(PHOTOS[:n], w, h, normalize=normalize, num_threads=1)


def collated(samples, load, batch_size, collate=None, **pipe_kw):
    """A builder of the bundled photos decoded by ``load`` (a native op, with ``pipe_kw``) in
    ``collate`` batches (default ``ops.collate()``) of ``batch_size``; no sink yet."""
    return (
        PipelineBuilder()
        .add_source(spdl_rs.sources.list_files(samples))
        .pipe(load, **pipe_kw)
        .aggregate(batch_size)
        .pipe(collate or ops.collate())
    )


# ---------------------------------------------------------------------------------------------
# Availability
# ---------------------------------------------------------------------------------------------


def test_availability_queries_never_raise():
    assert isinstance(io.cuda_built(), bool)
    assert isinstance(io.cuda_available(), bool)
    assert io.cuda_available() == (REASON is None)
    if not BUILT:
        assert "built without CUDA support" in REASON


# ---------------------------------------------------------------------------------------------
# No-GPU paths
# ---------------------------------------------------------------------------------------------


@requires_no_build
def test_without_the_feature_every_entry_point_says_how_to_rebuild():
    for call in (ops.to_device, lambda: ops.to_device("cuda:0"), lambda: io.transfer_buffer(small_batch())):
        with pytest.raises(RuntimeError, match="built without CUDA support.*--features cuda"):
            call()


@requires_build
@requires_no_gpu
def test_transfer_buffer_without_a_driver_raises_runtime_error():
    with pytest.raises(RuntimeError) as e:
        io.transfer_buffer(small_batch(), "cuda:0")
    msg = str(e.value)
    assert msg.startswith(("no CUDA driver: ", "invalid CUDA device")), msg


@requires_build
@requires_no_gpu
def test_to_device_op_is_built_without_touching_cuda_and_fails_on_the_first_batch():
    op = ops.to_device()  # opens nothing: fine before fork()
    assert op.name == "to_device"
    assert repr(op) == "spdl_rs.ops.to_device()"
    with pytest.raises(RuntimeError, match="^no CUDA driver: "):
        op(small_batch())
    # The outcome is kept: the second call says the same, at once.
    with pytest.raises(RuntimeError, match="^no CUDA driver: "):
        op(small_batch())


@requires_build
def test_disable_variable_forces_the_no_driver_path_in_a_fresh_process():
    code = (
        "import spdl_rs.io as io, spdl_rs.ops as ops\n"
        "assert not io.cuda_available()\n"
        "print(io.cuda_unavailable_reason())\n"
    )
    env = dict(os.environ, SPDL_CUDA_DISABLE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("no CUDA driver: "), out.stdout


@requires_build
def test_bad_device_arguments_raise_at_construction():
    for bad in ("cpu", "cuda:x", "tpu:0", -1):
        with pytest.raises(ValueError):
            ops.to_device(bad)
    with pytest.raises(TypeError):
        ops.to_device(True)
    for good in ("cuda", "cuda:0", "cuda:1", 0, 3, None, "gpu:2"):
        ops.to_device(good)


@requires_build
def test_local_rank_picks_the_device_and_a_bad_one_is_a_value_error(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "banana")
    with pytest.raises(ValueError, match="LOCAL_RANK"):
        ops.to_device()
    with pytest.raises(ValueError, match="LOCAL_RANK"):
        ops.to_device("cuda")
    ops.to_device(0)  # an explicit index does not read LOCAL_RANK
    monkeypatch.setenv("LOCAL_RANK", "1")
    ops.to_device()


@requires_build
@requires_no_gpu
@pytest.mark.skipif(io.ffmpeg_versions() is None, reason="spdl_rs built without FFmpeg")
def test_to_device_takes_decoded_video_and_fails_only_for_the_missing_driver():
    clip = REPO / "crates/spdl-io/tests/fixtures/media/clips/bbb_320x180_bframes.mp4"
    frames = ops.load_video(indices=[0, 1], width=32, height=32)(str(clip))
    with pytest.raises(RuntimeError, match="^no CUDA driver: "):
        ops.to_device("cuda:0")(frames)


@requires_build
@requires_no_gpu
@pytest.mark.parametrize("after_collate", [True, False])
def test_pipeline_reports_the_transfer_failure_naming_the_stage(samples, thread_baseline, after_collate):
    b = collated(samples, ops.load_image(32, 32), 1, concurrency=2)  # 14 batches
    if not after_collate:
        b = b.pipe(lambda batch: batch)  # a Python stage between: no pinned collate
    pipeline = b.pipe(ops.to_device("cuda:0")).add_sink(2).build(num_threads=2)
    start = time.monotonic()
    with pipeline.auto_stop():
        with pytest.raises(PipelineFailure) as e:
            for _ in pipeline:
                pass
        stage = pipeline.get_stats().stage("to_device")
    assert time.monotonic() - start < 30
    assert e.value.stage == "to_device"
    assert "to_device" in str(e.value)
    assert any(str(x).startswith("no CUDA driver: ") for x in e.value.exceptions), e.value.exceptions
    # It stopped taking input at the first failure (the default budget of this stage is 0): only
    # the batches already admitted into its group of blocking stages (two per stage: collate,
    # the Python stage, to_device) reached it after that.
    assert 1 <= stage.failures <= (4 if after_collate else 6) < 14


@requires_build
@requires_no_gpu
def test_a_stage_budget_lets_the_epoch_finish_with_every_batch_failed(samples):
    pipeline = (
        collated(samples, ops.load_image(16, 16), 5)
        .pipe(ops.to_device(), max_failures=100)
        .add_sink(2)
        .build(num_threads=2)
    )
    with pipeline.auto_stop():
        assert list(pipeline) == []
        stage = pipeline.get_stats().stage("to_device")
    n = len(spdl_rs.sources.list_files(samples))
    assert stage.failures == -(-n // 5)


# ---------------------------------------------------------------------------------------------
# The export code, over host memory (no GPU)
# ---------------------------------------------------------------------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _read_capsule(cap):
    name = _api.PyCapsule_GetName(cap)
    ptr = _api.PyCapsule_GetPointer(cap, name)
    if name == b"dltensor_versioned":
        m = _DLManagedVersioned.from_address(ptr)
        return name, m.dl_tensor, (m.major, m.minor)
    return name, _DLManaged.from_address(ptr).dl_tensor, None


@pytest.mark.parametrize("max_version,name", [(None, b"dltensor"), ((0, 8), b"dltensor"), ((1, 0), b"dltensor_versioned"), ((1, 3), b"dltensor_versioned")])
def test_capsules_describe_a_cuda_tensor(max_version, name):
    buf = small_batch()
    probe = _export_probe(buf, device_type=2, device_id=3, stream=0x1234)
    assert probe.__dlpack_device__() == (2, 3)
    cap = probe.__dlpack__(stream=7, max_version=max_version)
    got_name, t, version = _read_capsule(cap)
    assert got_name == name
    assert (t.device.device_type, t.device.device_id) == (2, 3)
    assert t.ndim == 4 and [t.shape[i] for i in range(4)] == [3, 4, 5, 3]
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (1, 8, 1)
    assert t.data == buf.data_ptr and t.byte_offset == 0
    assert not t.strides  # row-major contiguous
    if version is not None:
        assert version == (1, 0)


def test_cuda_array_interface_v3():
    buf = small_batch()
    probe = _export_probe(buf, device_type=2, device_id=0, stream=0xABC)
    cai = probe.__cuda_array_interface__
    assert cai == {
        "shape": (3, 4, 5, 3),
        "typestr": "|u1",
        "data": (buf.data_ptr, False),
        "strides": None,
        "version": 3,
        "stream": 0xABC,
    }
    assert _export_probe(buf, 2, 0, None).__cuda_array_interface__["stream"] is None
    norm = small_batch(n=1, normalize=True)
    cai = _export_probe(norm, 2, 0).__cuda_array_interface__
    assert cai["typestr"] == "<f4" and cai["shape"] == (1, 3, 4, 5)
    # Host memory has no CUDA array interface.
    with pytest.raises(BufferError):
        _export_probe(buf).__cuda_array_interface__


def test_dlpack_arguments_are_checked():
    probe = _export_probe(small_batch(), device_type=2, device_id=1)
    with pytest.raises(ValueError, match="stream=0"):
        probe.__dlpack__(stream=0)
    with pytest.raises(ValueError):
        probe.__dlpack__(stream=-5)
    with pytest.raises(TypeError):
        probe.__dlpack__(stream="default")
    with pytest.raises(BufferError, match="copy=True"):
        probe.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="device"):
        probe.__dlpack__(dl_device=(1, 0))
    with pytest.raises(TypeError):
        probe.__dlpack__(max_version=1)
    for ok in (None, -1, 1, 2, 0x7F00_0000_1000):
        probe.__dlpack__(stream=ok, dl_device=(2, 1), copy=False)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_capsule_round_trip_through_numpy_keeps_the_memory_alive(max_version):
    buf = small_batch()
    want = np.asarray(buf).copy()
    probe = _export_probe(buf)  # kDLCPU: numpy can consume it

    class Wrapper:
        def __dlpack_device__(self):
            return probe.__dlpack_device__()

        def __dlpack__(self, **kw):
            if max_version is None:
                kw.pop("max_version", None)
            else:
                kw["max_version"] = max_version
            return probe.__dlpack__(**kw)

    arr = np.from_dlpack(Wrapper())
    assert arr.ctypes.data == buf.data_ptr  # no copy
    del buf, probe
    gc.collect()
    np.testing.assert_array_equal(arr, want)  # the capsule's keep-alive holds the memory


def test_torch_consumes_the_capsules_with_the_arguments_it_passes():
    torch_ = pytest.importorskip("torch")
    buf = small_batch()
    want = np.asarray(buf).copy()
    calls = []

    class Spy:  # records what torch passes (max_version=(1, 0); stream too for CUDA)
        def __init__(self, probe):
            self.probe = probe

        def __dlpack_device__(self):
            return self.probe.__dlpack_device__()

        def __dlpack__(self, **kw):
            calls.append(kw)
            return self.probe.__dlpack__(**kw)

    t = torch_.from_dlpack(Spy(_export_probe(buf)))
    assert calls and calls[0].get("max_version") == (1, 0)
    assert t.data_ptr() == buf.data_ptr and tuple(t.shape) == buf.shape
    del buf
    gc.collect()
    assert (t.numpy() == want).all()


def test_unconsumed_capsules_are_freed():
    # Each capsule holds the memory until collected; many unconsumed ones must not leak.
    buf = small_batch(n=3, h=64, w=64)
    probe = _export_probe(buf)
    for _ in range(2000):
        probe.__dlpack__()
        probe.__dlpack__(max_version=(1, 0))


# ---------------------------------------------------------------------------------------------
# On a GPU
# ---------------------------------------------------------------------------------------------


@requires_gpu
def test_transfer_buffer_round_trip():
    buf = small_batch()
    dev = io.transfer_buffer(buf, 0)
    assert isinstance(dev, io.CUDABuffer)
    assert dev.shape == buf.shape and dev.dtype == "uint8" and dev.device == "cuda:0"
    assert dev.__dlpack_device__() == (2, 0)
    assert dev.nbytes == buf.nbytes and len(dev) == 3 and dev.keys == buf.keys
    np.testing.assert_array_equal(np.asarray(dev.to_host()), np.asarray(buf))
    cai = dev.__cuda_array_interface__
    assert cai["data"] == (dev.data_ptr, False) and cai["shape"] == buf.shape and cai["version"] == 3
    assert cai["stream"] is None  # transfer_buffer waits for the copy
    single = io.load_image(PHOTOS[0], 7, 6)
    dev1 = io.transfer_buffer(single)
    assert dev1.shape == (6, 7, 3)
    np.testing.assert_array_equal(np.asarray(dev1.to_host()), np.asarray(single))


@requires_gpu
@pytest.mark.parametrize("between", [False, True], ids=["pinned-collate", "python-stage-between"])
def test_to_device_pipeline_matches_the_cpu_pipeline(samples, thread_baseline, between):
    def run(to_gpu):
        load = ops.load_image(transform="eval", size=64)
        b = collated(samples, load, 4, ops.collate(normalize=True), concurrency=2, output_order="input")
        if to_gpu:
            if between:
                b = b.pipe(lambda batch: batch)  # a CPUBuffer reaches to_device
            b = b.pipe(ops.to_device("cuda:0"))
        p = b.add_sink(2).build(num_threads=2)
        with p.auto_stop():
            return [x.to_host() if to_gpu else x for x in p]

    cpu, gpu = run(False), run(True)
    assert len(cpu) == len(gpu) > 0
    for c, g in zip(cpu, gpu):
        assert g.shape == c.shape and g.dtype == "float32" and g.keys == c.keys
        np.testing.assert_array_equal(np.asarray(g), np.asarray(c))


@requires_gpu
def test_cuda_buffer_protocol_on_a_device():
    buf = small_batch()
    dev = io.transfer_buffer(buf)
    assert io.transfer_buffer(dev) is not None  # already there: passed on, no copy
    assert ops.to_device(0)(dev).data_ptr == dev.data_ptr
    dev.synchronize()
    for kw in ({}, {"stream": 1}, {"stream": 2}, {"stream": -1}, {"max_version": (1, 0)}):
        assert dev.__dlpack__(**kw) is not None
    with pytest.raises(ValueError):
        dev.__dlpack__(stream=0)
    with pytest.raises(BufferError):
        dev.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError):
        dev.__dlpack__(copy=True)
    assert "cuda:0" in repr(dev)


@requires_torch
def test_torch_from_dlpack_shares_device_memory():
    buf = small_batch()
    dev = io.transfer_buffer(buf, 0)
    t = torch.from_dlpack(dev)
    assert t.is_cuda and t.device.index == 0 and t.dtype == torch.uint8
    assert tuple(t.shape) == buf.shape
    assert t.data_ptr() == dev.data_ptr  # no copy
    assert torch.equal(t.cpu(), torch.from_numpy(np.asarray(buf).copy()))
    # The memory outlives the CUDABuffer while the tensor lives.
    del dev
    gc.collect()
    torch.cuda.synchronize()
    assert torch.equal(t.cpu(), torch.from_numpy(np.asarray(buf).copy()))
    # Writes through the tensor are visible through a second view of the same memory.
    dev = io.transfer_buffer(buf, 0)
    a = torch.from_dlpack(dev)
    a.add_(1)
    b = torch.as_tensor(dev, device="cuda")  # __cuda_array_interface__
    assert b.data_ptr() == a.data_ptr()
    assert torch.equal(b, a)


@requires_torch
def test_pipeline_batches_on_a_side_stream_are_ordered(samples):
    pipeline = collated(samples, ops.load_image(32, 32), 4).pipe(ops.to_device()).add_sink(2).build(num_threads=2)
    side = torch.cuda.Stream()
    with pipeline.auto_stop(), torch.cuda.stream(side):
        tensors = [(torch.from_dlpack(b), b.to_host()) for b in pipeline]
    torch.cuda.synchronize()
    assert tensors
    for t, host in tensors:
        assert torch.equal(t.cpu(), torch.from_numpy(np.asarray(host).copy()))
