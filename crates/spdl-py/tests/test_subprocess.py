"""iterate_in_subprocess / run_pipeline_in_subprocess (SPDL's multi-threading in a subprocess)."""

from __future__ import annotations

import functools
import glob
import mmap
import os
import pickle
import signal
import time

import numpy as np
import pytest

from spdl_rs import io
from spdl_rs.pipeline import PipelineFailure, WorkerDied, iterate_in_subprocess, run_pipeline_in_subprocess
from spdl_rs.pipeline.defs import Aggregate, Pipe, PipelineConfig, SinkConfig, SourceConfig

from conftest import images


class PidRange:
    """Re-iterable: (pid, i) for i in range(n)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield os.getpid(), i


def pid_range(n):
    return PidRange(n)


class Slow:
    def __iter__(self):
        i = 0
        while True:
            yield i
            i += 1
            time.sleep(0.02)


def slow():
    return Slow()


class FailsAt:
    def __init__(self, k):
        self.k = k

    def __iter__(self):
        for i in range(10):
            if i == self.k:
                raise ValueError(f"bad item {i}")
            yield i


def fails_at(k):
    return FailsAt(k)


def boom():
    raise KeyError("no such dataset")


def never_yields():
    class Never:
        def __iter__(self):
            time.sleep(30)
            yield 0

    return Never()


def double(x):
    return 2 * x


@pytest.mark.parametrize("ctx", ["spawn", "fork"])
def test_epochs_reuse_one_worker(ctx):
    src = iterate_in_subprocess(functools.partial(pid_range, 5), mp_context=ctx, buffer_size=2)
    epochs = [list(src) for _ in range(3)]
    pids = {pid for e in epochs for pid, _ in e}
    assert len(pids) == 1 and os.getpid() not in pids and pids == {src.pid}
    for e in epochs:
        assert [i for _, i in e] == [0, 1, 2, 3, 4]
    src.shutdown()


def test_leaving_an_epoch_early():
    src = iterate_in_subprocess(functools.partial(pid_range, 50), mp_context="spawn", buffer_size=2)
    it = iter(src)
    assert [next(it)[1] for _ in range(3)] == [0, 1, 2]
    del it
    assert [i for _, i in src] == list(range(50))  # the next epoch starts from the beginning
    src.shutdown()


def test_worker_killed_is_reported():
    src = iterate_in_subprocess(slow, mp_context="spawn")
    it = iter(src)
    assert next(it) == 0
    os.kill(src.pid, signal.SIGKILL)
    with pytest.raises(WorkerDied, match="exit code -9"):
        for _ in it:
            pass
    assert src._process.exitcode == -signal.SIGKILL  # joined: no zombie left
    with pytest.raises(RuntimeError, match="shut down"):
        iter(src)


def test_errors_cross_the_boundary():
    src = iterate_in_subprocess(functools.partial(fails_at, 3), mp_context="spawn")
    got = []
    with pytest.raises(ValueError, match="bad item 3"):
        for i in src:
            got.append(i)
    assert got == [0, 1, 2]
    # the worker survives a failed epoch
    with pytest.raises(ValueError, match="bad item 3"):
        list(src)
    src.shutdown()
    bad = iterate_in_subprocess(boom, mp_context="spawn")
    with pytest.raises(RuntimeError, match="failed to initialize") as e:
        iter(bad)
    assert isinstance(e.value.__cause__, KeyError)


def test_timeout_terminates_worker():
    src = iterate_in_subprocess(never_yields, mp_context="spawn", timeout=1)
    with pytest.raises(TimeoutError):
        list(src)
    assert not src._process.is_alive()


def test_bad_arguments():
    with pytest.raises(ValueError, match="buffer_size"):
        iterate_in_subprocess(slow, buffer_size=0)
    with pytest.raises(TypeError, match="callable"):
        iterate_in_subprocess(3)  # type: ignore[arg-type]
    cfg = PipelineConfig(src=SourceConfig([1]), pipes=[], sink=SinkConfig(1))
    with pytest.raises(TypeError, match="bogus"):
        run_pipeline_in_subprocess(cfg, num_threads=1, bogus=1)


def _owner(arr):
    while isinstance(arr, np.ndarray):
        arr = arr.base
    return arr.obj if isinstance(arr, memoryview) else arr


def _shm_files(pid):
    return glob.glob(f"/dev/shm/spdl_rs_{pid}_*")


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_cpu_buffer_crosses_in_shared_memory(samples):
    paths = sorted(samples.glob("*.jpg"))[:3]
    want = np.asarray(io.load_image_batch(paths, 32, 24))
    src = iterate_in_subprocess(functools.partial(images, paths), mp_context="spawn")
    (got,) = list(src)
    (again,) = list(src)
    pid = src.pid
    src.shutdown()
    assert isinstance(got, np.ndarray) and got.shape == (3, 24, 32, 3) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(again, want)
    assert isinstance(_owner(got), mmap.mmap)  # the parent's array is the shared mapping itself
    assert _shm_files(pid) == []  # unlinked on arrival


class BigArrays:
    def __iter__(self):
        for i in range(20):
            yield i, np.full((256, 256), i, dtype=np.uint8)


def big_arrays():
    return BigArrays()


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_shared_memory_of_dropped_items_is_freed():
    src = iterate_in_subprocess(big_arrays, mp_context="spawn", buffer_size=3)
    it = iter(src)
    i, arr = next(it)
    assert i == 0 and arr.shape == (256, 256) and int(arr[5, 5]) == 0
    del it  # left early: the items already sent are dropped
    assert [(i, int(a[0, 0])) for i, a in src] == [(i, i) for i in range(20)]
    pid = src.pid
    it = iter(src)
    next(it)
    src.shutdown()  # with items in flight
    del it
    assert _shm_files(pid) == []


def test_run_pipeline_in_subprocess_epochs():
    cfg = PipelineConfig(
        src=SourceConfig(range(10)), pipes=[Pipe(double, concurrency=3), Aggregate(10)], sink=SinkConfig(2)
    )
    src = run_pipeline_in_subprocess(cfg, num_threads=2, mp_context="spawn")
    for _ in range(3):
        (batch,) = list(src)
        assert sorted(batch) == [2 * i for i in range(10)]
    src.shutdown()


def fail_on_three(x):
    if x == 3:
        raise ValueError("three")
    return x


def test_pipeline_failure_in_subprocess():
    cfg = PipelineConfig(src=SourceConfig(range(6)), pipes=[Pipe(fail_on_three)], sink=SinkConfig(2))
    src = run_pipeline_in_subprocess(cfg, num_threads=1, max_failures=0, mp_context="spawn")
    with pytest.raises(PipelineFailure, match="too many failures") as e:
        list(src)
    assert e.value.stage == "fail_on_three"
    assert [str(x) for x in e.value.exceptions] == ["three"]
    assert "raised in the worker process" in "".join(e.value.__notes__)
    src.shutdown()


def load_small(path):
    return io.load_image(path, 32, 24)


def test_native_source_pipeline_in_subprocess(samples):
    from spdl_rs import sources

    listing = sources.list_files(samples, extensions=["jpg"])
    clone = pickle.loads(pickle.dumps(listing))
    assert clone.paths == listing.paths and clone.labels == listing.labels and len(clone) == len(listing)
    cfg = PipelineConfig(
        src=SourceConfig(listing),
        pipes=[Pipe(load_small, concurrency=2, output_order="input"), Aggregate(len(listing))],
        sink=SinkConfig(1),
    )
    src = run_pipeline_in_subprocess(cfg, num_threads=2, mp_context="spawn")
    want = np.asarray(io.load_image_batch(listing.paths, 32, 24))
    for _ in range(2):
        (batch,) = list(src)
        assert len(batch) == len(listing) and all(isinstance(a, np.ndarray) for a in batch)
        np.testing.assert_array_equal(np.stack(batch), want)
    src.shutdown()


def test_continuous_source_in_subprocess_builds_once():
    cfg = PipelineConfig(
        src=SourceConfig(range(5), continuous=True), pipes=[Pipe(double, output_order="input")], sink=SinkConfig(2)
    )
    src = run_pipeline_in_subprocess(cfg, num_threads=1, mp_context="spawn")
    assert [list(src) for _ in range(3)] == [[0, 2, 4, 6, 8]] * 3
    src.shutdown()
