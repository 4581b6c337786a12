"""Shared-memory arenas for iterate_in_subprocess (SPDL 0.8's SharedMemoryRingBuffer and
SharedMemorySegmentPool, ``iterate_in_subprocess(..., arena=)``)."""

from __future__ import annotations

import functools
import gc
import os
import pickle
import signal
import subprocess
import sys

import numpy as np
import pytest

from spdl_rs import io
from spdl_rs.pipeline import (
    SharedMemoryRingBuffer,
    SharedMemorySegmentPool,
    WorkerDied,
    iterate_in_subprocess,
)

from conftest import images

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")


def _item(i: int) -> dict:
    """Deterministic item ``i``: an image-like array, a float array, big and small bytes."""
    rng = np.random.default_rng(i)
    return {
        "i": i,
        "img": rng.integers(0, 256, size=(48, 64, 3), dtype=np.uint8),
        "f": rng.standard_normal((40, 33)).astype(np.float32),  # 5280 bytes: not a multiple of 64
        "raw": rng.bytes(10_000 + i),
        "small": b"x" * 10,
        "nested": [(i, rng.integers(0, 2**31, size=2048, dtype=np.int64))],
    }


class Items:
    """Re-iterable: the same n items each epoch."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield _item(i)


def items(n):
    return Items(n)


def _assert_item(got: dict, i: int) -> None:
    want = _item(i)
    assert got["i"] == i and got["small"] == want["small"] and got["raw"] == want["raw"]
    assert type(got["raw"]) is bytes
    for k in ("img", "f"):
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        np.testing.assert_array_equal(got[k], want[k])
    (j, arr), = got["nested"]
    assert j == i
    np.testing.assert_array_equal(arr, want["nested"][0][1])


def _shm_names() -> set[str]:
    """Shared-memory segments under /dev/shm (not multiprocessing's named semaphores, which
    live as long as the queue and lock objects do)."""
    return {n for n in os.listdir("/dev/shm") if not n.startswith("sem.")}


def _arena_names(arena) -> set[str]:
    return set(arena._names())


def _shm_mappings() -> list[tuple[int, int, str]]:
    """(start, end, path) of this process's mappings of /dev/shm files."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/dev/shm/"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi, parts[5]))
    return out


@pytest.mark.parametrize("ctx", ["spawn", "fork"])
@pytest.mark.parametrize("kind", ["ring", "pool"])
def test_payloads_round_trip_over_epochs(kind, ctx):
    before = _shm_names()
    arena = (
        SharedMemoryRingBuffer(6 * 64 * 1024, acquire_timeout=30)
        if kind == "ring"
        else SharedMemorySegmentPool(64 * 1024, 6, acquire_timeout=30)
    )
    names = _arena_names(arena)
    assert names <= _shm_names()
    src = iterate_in_subprocess(functools.partial(items, 12), arena=arena, mp_context=ctx, buffer_size=2)
    for _ in range(3):  # each epoch holds every item: the arena wraps around / rotates
        got = []
        for it in src:
            got.append(it)
            if kind == "pool":
                del got[:-3]  # the pool has 6 segments: keep at most 3 items alive
        if kind == "ring":
            assert [g["i"] for g in got] == list(range(12))
            for g in got:
                _assert_item(g, g["i"])
        else:
            for g in got:
                _assert_item(g, g["i"])
            assert [g["i"] for g in got] == [9, 10, 11]
        del got
    src.shutdown()
    gc.collect()
    assert not (names & _shm_names())
    assert _shm_names() - before == set()


def test_pool_arrays_are_views_on_shared_memory():
    pool = SharedMemorySegmentPool(64 * 1024, 4, acquire_timeout=30)
    seg_paths = {f"/dev/shm/{n}" for n in pool._seg_names}
    src = iterate_in_subprocess(functools.partial(items, 3), arena=pool, mp_context="spawn")
    got = list(src)
    maps = [(lo, hi) for lo, hi, path in _shm_mappings() if path in seg_paths]
    for g in got:
        _assert_item(g, g["i"])
        for arr in (g["img"], g["f"], g["nested"][0][1]):
            assert not arr.flags.owndata
            addr = arr.ctypes.data
            # the array's data lies inside a mapping of one of the pool's segments: no copy
            assert any(lo <= addr and addr + arr.nbytes <= hi for lo, hi in maps)
            assert addr % 64 == 0
    src.shutdown()


def test_ring_arrays_are_copied_out():
    ring = SharedMemoryRingBuffer(1 << 17, acquire_timeout=30)
    path = f"/dev/shm/{ring._name}"
    src = iterate_in_subprocess(functools.partial(items, 3), arena=ring, mp_context="spawn")
    got = list(src)
    maps = [(lo, hi) for lo, hi, p in _shm_mappings() if p == path]
    assert maps  # the ring is mapped here ...
    for g in got:
        _assert_item(g, g["i"])
        addr = g["img"].ctypes.data  # ... but the arrays own private copies
        assert not any(lo <= addr < hi for lo, hi in maps)
    src.shutdown()


def test_cpu_buffer_arrives_as_a_view_on_the_pool(samples):
    paths = sorted(samples.glob("*.jpg"))[:3]
    want = np.asarray(io.load_image_batch(paths, 32, 24))
    pool = SharedMemorySegmentPool(1 << 16, 2, acquire_timeout=30)
    seg_paths = {f"/dev/shm/{n}" for n in pool._seg_names}
    src = iterate_in_subprocess(functools.partial(images, paths), arena=pool, mp_context="spawn")
    for _ in range(2):
        (got,) = list(src)
        assert isinstance(got, np.ndarray) and got.shape == (3, 24, 32, 3) and got.dtype == np.uint8
        np.testing.assert_array_equal(got, want)
        maps = [(lo, hi) for lo, hi, p in _shm_mappings() if p in seg_paths]
        assert any(lo <= got.ctypes.data < hi for lo, hi in maps)
        del got
    src.shutdown()


def test_cpu_buffer_is_offloaded_in_a_worker_that_never_imported_numpy(samples):
    # A subprocess worker may make a CPUBuffer without importing NumPy itself.
    code = (
        "import sys; from spdl_rs import io; from spdl_rs.pipeline._arena import _leaf\n"
        f"buf = io.load_image_batch([{str(sorted(samples.glob('*.jpg'))[0])!r}], 32, 24)\n"
        "assert 'numpy' not in sys.modules\n"
        "kind, (dtype, shape), view = _leaf(buf)\n"
        "print(kind, dtype, shape, view.nbytes)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ndarray", "uint8", "(1,", "24,", "32,", "3)", str(24 * 32 * 3)]


def test_pool_segment_reused_only_after_views_are_gone():
    pool = SharedMemorySegmentPool(64 * 1024, 1, acquire_timeout=30)
    src = iterate_in_subprocess(functools.partial(items, 4), arena=pool, mp_context="spawn", buffer_size=1)
    it = iter(src)
    first = next(it)
    view = first["img"][10:20]  # a view that outlives the item keeps the segment
    del first
    gc.collect()
    assert pool._shm_ctrl.buf[0] == 1  # segment 0 still in use
    want = _item(0)["img"][10:20]
    np.testing.assert_array_equal(view, want)
    del view
    gc.collect()
    rest = []
    for x in it:  # one segment: each item must be dropped before the next can come
        _assert_item(x, x["i"])
        rest.append(x["i"])
        del x
    assert rest == [1, 2, 3]
    src.shutdown()


@pytest.mark.parametrize("timeout", [0, 0.5])
def test_full_pool_raises_buffer_error(timeout):
    pool = SharedMemorySegmentPool(64 * 1024, 1, acquire_timeout=timeout)
    src = iterate_in_subprocess(functools.partial(items, 3), arena=pool, mp_context="spawn", buffer_size=2)
    it = iter(src)
    held = next(it)  # holds the only segment
    _assert_item(held, 0)
    with pytest.raises(RuntimeError, match="BufferError: .*arena full") as e:  # as SPDL's arena transport
        next(it)
    assert isinstance(e.value.__cause__, BufferError)
    del held, it
    names = _arena_names(pool)
    src.shutdown()
    gc.collect()
    assert not (names & _shm_names())


def test_ring_too_small_raises_buffer_error():
    ring = SharedMemoryRingBuffer(8192, acquire_timeout=0)
    names = _arena_names(ring)
    src = iterate_in_subprocess(functools.partial(items, 2), arena=ring, mp_context="spawn")
    with pytest.raises(RuntimeError, match="exceeds ring capacity") as e:
        list(src)
    assert isinstance(e.value.__cause__, BufferError)
    src.shutdown()
    assert not (names & _shm_names())


def test_pool_segment_too_small_raises_buffer_error():
    pool = SharedMemorySegmentPool(16 * 1024, 2, acquire_timeout=0)
    src = iterate_in_subprocess(functools.partial(items, 2), arena=pool, mp_context="spawn")
    with pytest.raises(RuntimeError, match="segment_size") as e:
        list(src)
    assert isinstance(e.value.__cause__, BufferError)
    src.shutdown()


def test_leaving_epochs_early_frees_the_arena():
    # 2 segments, buffer_size 2: items left in flight must be given back or the next
    # epoch would stall (and raise BufferError after 10 s).
    pool = SharedMemorySegmentPool(64 * 1024, 3, acquire_timeout=10)
    src = iterate_in_subprocess(functools.partial(items, 8), arena=pool, mp_context="spawn", buffer_size=2)
    for _ in range(4):
        it = iter(src)
        _assert_item(next(it), 0)
        del it
    got = [x["i"] for x in src]
    assert got == list(range(8))
    src.shutdown()


class SlowItems:
    def __iter__(self):
        import time

        i = 0
        while True:
            yield _item(i % 4)
            i += 1
            time.sleep(0.02)


def slow_items():
    return SlowItems()


@pytest.mark.parametrize("kind", ["ring", "pool"])
def test_worker_killed_mid_epoch_is_reported_and_cleaned_up(kind):
    arena = (
        SharedMemoryRingBuffer(1 << 18, acquire_timeout=30)
        if kind == "ring"
        else SharedMemorySegmentPool(64 * 1024, 4, acquire_timeout=30)
    )
    names = _arena_names(arena)
    src = iterate_in_subprocess(slow_items, arena=arena, mp_context="spawn")
    it = iter(src)
    held = next(it)
    _assert_item(held, 0)
    os.kill(src.pid, signal.SIGKILL)
    with pytest.raises(WorkerDied, match="exit code -9"):
        for _ in it:
            pass
    assert src._process.exitcode == -signal.SIGKILL  # joined: no zombie
    # The names are gone at once; a held view keeps its memory valid until dropped.
    assert not (names & _shm_names())
    _assert_item(held, 0)
    del held


def test_bad_arguments():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="capacity"):
            SharedMemoryRingBuffer(bad)
        with pytest.raises(ValueError, match="segment_size"):
            SharedMemorySegmentPool(bad, 2)
        with pytest.raises(ValueError, match="count"):
            SharedMemorySegmentPool(1024, bad)
    with pytest.raises(ValueError, match="acquire_timeout"):
        SharedMemoryRingBuffer(1024, acquire_timeout=-1)
    with pytest.raises(ValueError, match="acquire_timeout"):
        SharedMemorySegmentPool(1024, 2, acquire_timeout=-0.5)
    with pytest.raises(TypeError, match="arena must be"):
        iterate_in_subprocess(functools.partial(items, 1), arena=bytearray(10))
    with SharedMemoryRingBuffer(1 << 16) as ring:
        src = iterate_in_subprocess(functools.partial(items, 1), arena=ring, mp_context="spawn")
        with pytest.raises(ValueError, match="already used"):
            iterate_in_subprocess(functools.partial(items, 1), arena=ring, mp_context="spawn")
        src.shutdown()
    with pytest.raises(RuntimeError):  # a process-shared condition only pickles while spawning
        pool = SharedMemorySegmentPool(1024, 1)
        pool._bind(__import__("multiprocessing").get_context("spawn"))
        try:
            pickle.dumps(pool)
        finally:
            pool.close()
            pool.unlink()


def test_close_and_unlink_without_a_worker():
    before = _shm_names()
    with SharedMemorySegmentPool(4096, 3) as pool:
        assert len(_arena_names(pool) & _shm_names()) == 4
    with SharedMemoryRingBuffer(4096) as ring:
        assert _arena_names(ring) <= _shm_names()
    assert _shm_names() - before == set()


def _big(i):
    return np.full((128, 128), i, dtype=np.uint8)


def test_run_pipeline_in_subprocess_with_an_arena():
    from spdl_rs.pipeline import run_pipeline_in_subprocess
    from spdl_rs.pipeline.defs import Pipe, PipelineConfig, SinkConfig, SourceConfig

    cfg = PipelineConfig(src=SourceConfig(range(6)), pipes=[Pipe(_big)], sink=SinkConfig(2))
    pool = SharedMemorySegmentPool(32 * 1024, 4, acquire_timeout=30)
    names = _arena_names(pool)
    src = run_pipeline_in_subprocess(cfg, num_threads=2, mp_context="spawn", arena=pool)
    for _ in range(2):
        got = sorted(int(a[0, 0]) for a in src if a.shape == (128, 128) and not a.flags.owndata)
        assert got == list(range(6))
    src.shutdown()
    gc.collect()
    assert not (names & _shm_names())
