"""Zero-copy output: buffer protocol, __array_interface__, DLPack."""

import gc
import importlib.util

import numpy as np
import pytest

from spdl_rs import io

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture
def batch(samples):
    paths = sorted(samples.glob("*.jpg"))[:3]
    return io.load_image_batch(paths, 32, 24)


def test_shape_dtype_keys(batch, samples):
    assert batch.shape == (3, 24, 32, 3)
    assert batch.dtype == "uint8"
    assert len(batch) == 3 and batch.nbytes == 3 * 24 * 32 * 3
    assert batch.keys[0].endswith(".jpg") and batch.labels == [None] * 3


def test_numpy_asarray_shares_memory(batch):
    a = np.asarray(batch)
    assert a.shape == (3, 24, 32, 3) and a.dtype == np.uint8
    assert a.ctypes.data == batch.data_ptr
    m = memoryview(batch)
    assert m.shape == (3, 24, 32, 3) and m.format == "B" and not m.readonly
    assert np.frombuffer(m, dtype=np.uint8).ctypes.data == batch.data_ptr


def test_array_interface_shares_memory(batch):
    class Wrapper:
        __array_interface__ = batch.__array_interface__

    a = np.asarray(Wrapper())
    assert a.ctypes.data == batch.data_ptr and a.shape == batch.shape


def test_numpy_from_dlpack_shares_memory(batch):
    assert batch.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(batch)
    assert a.ctypes.data == batch.data_ptr
    assert a.shape == (3, 24, 32, 3) and a.dtype == np.uint8


def test_writes_are_visible_through_every_view(batch):
    a, b = np.asarray(batch), np.from_dlpack(batch)
    a[0, 0, 0, 0] = 7
    assert b[0, 0, 0, 0] == 7


def test_memory_outlives_the_buffer_object(samples):
    paths = sorted(samples.glob("*.jpg"))[:2]
    buf = io.load_image_batch(paths, 16, 16)
    expected = np.array(buf, copy=True)
    via_buffer, via_dlpack = np.asarray(buf), np.from_dlpack(buf)
    del buf
    gc.collect()
    junk = [io.load_image_batch(paths, 16, 16) for _ in range(4)]  # reuse freed memory if any
    np.testing.assert_array_equal(via_buffer, expected)
    np.testing.assert_array_equal(via_dlpack, expected)
    del junk


def test_unused_dlpack_capsule_is_freed(batch):
    for _ in range(100):
        cap = batch.__dlpack__()
        del cap
    gc.collect()


def test_float32_normalized_batch(samples):
    paths = sorted(samples.glob("*.jpg"))[:2]
    buf = io.load_image_batch(paths, 8, 8, normalize=True)
    a = np.from_dlpack(buf)
    assert a.dtype == np.float32 and a.shape == (2, 3, 8, 8)
    raw = np.asarray(io.load_image_batch(paths, 8, 8)).astype(np.float32) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    ref = ((raw - mean) / std).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(a, ref, atol=1e-5)


def test_dlpack_copy_true_is_refused(batch):
    with pytest.raises(BufferError):
        batch.__dlpack__(copy=True)


def test_dlpack_takes_the_standard_keywords_only(batch):
    # The array API's keywords, each None by default; anything else is a TypeError naming it.
    cap = batch.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None)
    assert type(cap).__name__ == "PyCapsule"
    with pytest.raises(TypeError, match="'strem'"):
        batch.__dlpack__(strem=None)
    with pytest.raises(TypeError):
        batch.__dlpack__(None)  # keyword-only, as the standard says
    with pytest.raises(TypeError, match="dl_device"):
        batch.__dlpack__(dl_device="cpu")
    with pytest.raises(TypeError, match="copy"):
        batch.__dlpack__(copy="no")
    assert batch.__dlpack__(dl_device=(1, 0), copy=False) is not None
    # Host memory checks the stream first, then the device, then the version.
    with pytest.raises(TypeError, match="stream"):
        batch.__dlpack__(stream="x", copy=True)
    with pytest.raises(BufferError):
        batch.__dlpack__(copy=True, max_version=1)


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
def test_torch_from_dlpack_shares_memory(batch):
    import torch

    t = torch.from_dlpack(batch)
    assert t.data_ptr() == batch.data_ptr
    assert t.shape == (3, 24, 32, 3) and t.dtype == torch.uint8
    expected = t.clone()
    del batch
    gc.collect()
    assert torch.equal(t, expected)
    assert io.to_torch is not None
