"""Executors of pipeline stages: SPDL's priority pools (PriorityThreadPoolExecutor,
PriorityProcessPoolExecutor, PriorityExecutorEntrypoint), the subinterpreter names on Pythons
before 3.14, and native ops inside configs built in a spawned process."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import pathlib
import pickle
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

from spdl_rs import ops, sources
from spdl_rs.pipeline import (
    PipelineBuilder,
    PriorityExecutorEntrypoint,
    PriorityInterpreterPoolExecutor,
    PriorityProcessPoolExecutor,
    PriorityThreadPoolExecutor,
    build_pipeline,
    iterate_in_subinterpreter,
    run_pipeline_in_subinterpreter,
    run_pipeline_in_subprocess,
)
from spdl_rs.pipeline.defs import (
    MAIN_PROCESS,
    Aggregate,
    InterpreterPoolExecutorConfig,
    Pipe,
    PipelineConfig,
    PlacementConfig,
    SinkConfig,
    SourceConfig,
)

SAFETY = 60  # seconds: only to turn a hang into a failure, never an assertion on speed

OLD_PYTHON = sys.version_info < (3, 14)
SPAWN = multiprocessing.get_context("spawn")  # no fork while the pipeline's threads run


def tagged(tag, i):
    return (tag, i, os.getpid())


def wait_for_file(path):
    """Blocks a worker until ``path`` exists (a gate that crosses processes)."""
    while not os.path.exists(path):
        time.sleep(0.01)
    return os.getpid()


def die(_):
    os._exit(3)


def double(x):
    return 2 * x


# -- PriorityThreadPoolExecutor ------------------------------------------------------------
def test_thread_pool_serves_later_entrypoints_first():
    pool = PriorityThreadPoolExecutor(max_workers=1)
    up, down = pool.get_executor(), pool.get_executor()
    assert isinstance(up, PriorityExecutorEntrypoint) and (up.priority, down.priority) == (1, 2)
    gate, running = threading.Event(), threading.Event()
    order: list = []

    def hold():
        running.set()
        gate.wait()

    first = up.submit(hold)  # occupies the only worker while the rest queue up
    assert running.wait(SAFETY), "the worker took the first task"
    futs = [up.submit(order.append, ("up", i)) for i in range(3)]
    futs += [down.submit(order.append, ("down", i)) for i in range(3)]
    explicit = pool.get_executor(priority=10)
    futs += [explicit.submit(order.append, ("p10", 0))]
    gate.set()
    concurrent.futures.wait([first, *futs])
    assert order == [("p10", 0), ("down", 0), ("down", 1), ("down", 2), ("up", 0), ("up", 1), ("up", 2)]
    pool.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        up.submit(order.append, 1)


def test_thread_pool_runs_pipeline_stages(thread_baseline):
    with PriorityThreadPoolExecutor(max_workers=3, thread_name_prefix="prio") as pool:
        names: set = set()

        def where(x):
            names.add(threading.current_thread().name.rsplit("_", 1)[0])
            return x * 2

        p = (
            PipelineBuilder()
            .add_source(range(20))
            .pipe(where, executor=pool.get_executor(), concurrency=3)
            .pipe(lambda x: x + 1, executor=pool.get_executor(), concurrency=3)
            .add_sink(3)
            .build(num_threads=2)
        )
        with p.auto_stop():
            got = sorted(p)
    assert got == [2 * i + 1 for i in range(20)]
    assert names == {"prio"}


def test_thread_pool_initializer_failure_breaks_pool():
    def bad_init():
        raise ValueError("no init")

    pool = PriorityThreadPoolExecutor(max_workers=1, initializer=bad_init)
    fut = pool.get_executor().submit(double, 2)
    with pytest.raises(concurrent.futures.thread.BrokenThreadPool, match="no init"):
        fut.result(timeout=30)
    with pytest.raises(concurrent.futures.thread.BrokenThreadPool):
        pool.get_executor().submit(double, 3)
    pool.shutdown()


def test_thread_pool_cancel_futures_on_shutdown():
    pool = PriorityThreadPoolExecutor(max_workers=1)
    ex = pool.get_executor()
    gate = threading.Event()
    running = ex.submit(gate.wait)
    queued = [ex.submit(double, i) for i in range(4)]
    threading.Timer(0.05, gate.set).start()
    pool.shutdown(wait=True, cancel_futures=True)
    assert running.result() is True
    assert all(f.cancelled() for f in queued)


def test_entrypoints_of_one_pool_unpickle_to_one_pool():
    pool = PriorityThreadPoolExecutor(max_workers=2)
    a, b = pool.get_executor(), pool.get_executor(priority=7)
    a2, b2 = pickle.loads(pickle.dumps((a, b)))
    assert a2._pool is pool and b2._pool is pool and b2.priority == 7  # same process: the live pool
    assert a2.submit(double, 21).result() == 42
    pool.shutdown()


def test_priority_pool_in_config_runs_in_subprocess():
    pool = PriorityThreadPoolExecutor(max_workers=2)
    cfg = PipelineConfig(
        src=SourceConfig(range(10)),
        pipes=[Pipe(double, executor=pool.get_executor(), concurrency=2), Aggregate(10)],
        sink=SinkConfig(1),
    )
    src = run_pipeline_in_subprocess(cfg, num_threads=1, mp_context="spawn")
    for _ in range(2):  # two epochs, one worker process with one unpickled pool
        (batch,) = list(src)
        assert sorted(batch) == [2 * i for i in range(10)]
    src.shutdown()
    pool.shutdown()


def test_used_thread_pool_works_in_forked_worker():
    pool = PriorityThreadPoolExecutor(max_workers=2)
    ex = pool.get_executor()
    assert ex.submit(double, 4).result() == 8  # the parent's pool has threads now
    cfg = PipelineConfig(src=SourceConfig(range(6)), pipes=[Pipe(double, executor=ex, concurrency=2)], sink=SinkConfig(1))
    src = run_pipeline_in_subprocess(cfg, num_threads=1, mp_context="fork")
    assert sorted(src) == [0, 2, 4, 6, 8, 10]  # the child made its own threads
    src.shutdown()
    pool.shutdown()


# -- PriorityProcessPoolExecutor -----------------------------------------------------------
def test_process_pool_priority_order_and_pids():
    with tempfile.TemporaryDirectory() as d:
        gate = os.path.join(d, "go")
        pool = PriorityProcessPoolExecutor(max_workers=1, mp_context=SPAWN)
        up, down = pool.get_executor(), pool.get_executor()
        done: list = []
        first = up.submit(wait_for_file, gate)
        futs = []
        for i in range(3):
            futs.append(up.submit(tagged, "up", i))
        for i in range(3):
            futs.append(down.submit(tagged, "down", i))
        for f in futs:  # the only worker runs them one by one: completion order = dispatch order
            f.add_done_callback(lambda f: done.append(f.result()[:2]))
        pathlib.Path(gate).touch()
        worker = first.result(timeout=120)
        concurrent.futures.wait(futs, timeout=120)
        pool.shutdown()
    assert worker != os.getpid()
    assert done == [("down", 0), ("down", 1), ("down", 2), ("up", 0), ("up", 1), ("up", 2)]
    assert {f.result()[2] for f in futs} == {worker}


def test_process_pool_stage_runs_in_other_processes():
    pool = PriorityProcessPoolExecutor(max_workers=2, mp_context=SPAWN)
    p = (
        PipelineBuilder()
        .add_source(range(12))
        .pipe(double, executor=pool.get_executor(), concurrency=2)
        .pipe(lambda x: tagged("x", x), executor=None)
        .add_sink(3)
        .build(num_threads=2)
    )
    with p.auto_stop():
        got = sorted(x for _, x, _ in p)
    assert got == [2 * i for i in range(12)]
    pids = {pool.get_executor().submit(os.getpid).result() for _ in range(4)}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    pool.shutdown()


def test_process_pool_takes_the_arguments_of_process_pool_executor():
    # Positional as ProcessPoolExecutor takes them; pickled by name; unknown ones named.
    pool = PriorityProcessPoolExecutor(1, SPAWN)
    assert pickle.loads(pickle.dumps(pool)) is pool
    assert pool.get_executor().submit(double, 21).result(timeout=120) == 42
    pool.shutdown()
    with pytest.raises(TypeError, match="PriorityProcessPoolExecutor: .*'max_worker'"):
        PriorityProcessPoolExecutor(max_worker=2)


def test_process_pool_worker_death_is_reported():
    pool = PriorityProcessPoolExecutor(max_workers=1, mp_context=SPAWN)
    fut = pool.get_executor().submit(die, 0)
    with pytest.raises(concurrent.futures.process.BrokenProcessPool):
        fut.result(timeout=120)
    with pytest.raises(concurrent.futures.process.BrokenProcessPool):
        pool.get_executor().submit(double, 1).result(timeout=30)
    pool.shutdown()


# -- subinterpreters -----------------------------------------------------------------------
@pytest.mark.skipif(not OLD_PYTHON, reason="the 3.13- error path")
def test_subinterpreter_names_raise_spdl_errors_before_314():
    v = f"{sys.version_info.major}.{sys.version_info.minor}"
    with pytest.raises(RuntimeError, match=f"^PriorityInterpreterPoolExecutor requires Python 3.14 or later. Current version: {v}$"):
        PriorityInterpreterPoolExecutor(max_workers=2)
    with pytest.raises(RuntimeError, match=f"^iterate_in_subinterpreter requires Python 3.14 or later. Current version: {v}$"):
        iterate_in_subinterpreter(lambda: [1])
    cfg = PipelineConfig(src=SourceConfig([1]), pipes=[], sink=SinkConfig(1))
    with pytest.raises(RuntimeError, match="requires Python 3.14 or later"):
        run_pipeline_in_subinterpreter(cfg, num_threads=1)
    with pytest.raises(TypeError, match="mp_context"):
        run_pipeline_in_subinterpreter(cfg, num_threads=1, mp_context="spawn")
    region = PipelineConfig(
        src=SourceConfig([1, 2]),
        pipes=[PlacementConfig(InterpreterPoolExecutorConfig(max_workers=1)), Pipe(double), PlacementConfig(MAIN_PROCESS)],
        sink=SinkConfig(1),
    )
    assert repr(region.pipes[0]) == "placement(InterpreterPoolExecutorConfig(max_workers=1, initializer=None, initargs=()))"
    with pytest.raises(RuntimeError, match=r"^Subinterpreter regions \(`\.to\(InterpreterPoolExecutorConfig\(\.\.\.\)\)`\) require"):
        build_pipeline(region, num_threads=1)


# -- native ops pickle ---------------------------------------------------------------------
def test_native_ops_pickle_as_their_constructor_call():
    for op in (ops.read_file(), ops.decode_image(32, 24), ops.load_image(16, 16, color="gray"), ops.collate(normalize=True)):
        clone = pickle.loads(pickle.dumps(op))
        assert type(clone) is ops.NativeOp and clone is not op and clone.name == op.name


def test_native_ops_config_builds_in_spawned_process(samples):
    listing = sources.list_files(samples, extensions=["jpg"])
    cfg = (
        PipelineBuilder()
        .add_source(listing)
        .pipe(ops.read_file(), concurrency=2, output_order="input")
        .pipe(ops.decode_image(32, 24), concurrency=2, output_order="input")
        .aggregate(len(listing))
        .pipe(ops.collate())
        .add_sink(1)
        .get_config()
    )
    src = run_pipeline_in_subprocess(cfg, num_threads=2, mp_context="spawn")
    # The same config built here: the native image stages decode JPEGs at libjpeg-turbo's
    # finer DCT scales, which `io.load_image_batch` (SPDL's pixels) does not.
    here = build_pipeline(cfg, num_threads=2)
    with here.auto_stop():
        (want,) = [np.asarray(b) for b in here]
    assert want.shape == (len(listing), 24, 32, 3) and want.any()
    for _ in range(2):
        (batch,) = list(src)
        assert isinstance(batch, np.ndarray) and batch.shape == (len(listing), 24, 32, 3)
        np.testing.assert_array_equal(batch, want)
    assert src.pid != os.getpid()
    src.shutdown()


# -- standard executors and builders in run_pipeline_in_subprocess -------------------------
def double_and_pid(x):
    return (2 * x, os.getpid())


def thread_and_pid(x):
    return (x, threading.current_thread().name.rsplit("_", 1)[0], os.getpid())


def test_standard_executors_in_config_are_rebuilt_in_worker():
    cfg = PipelineConfig(
        src=SourceConfig(range(8)),
        pipes=[
            Pipe(double_and_pid, executor=concurrent.futures.ProcessPoolExecutor(2, mp_context=SPAWN), concurrency=2),
            Pipe(thread_and_pid, executor=concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="cfgpool")),
            Pipe(str),  # a builtin: pickles
        ],
        sink=SinkConfig(2),
    )
    with pytest.raises(ValueError, match="daemon"):
        run_pipeline_in_subprocess(cfg, num_threads=2, mp_context="spawn", daemon=True)
    cfg = PipelineConfig(src=cfg.src, pipes=cfg.pipes[:2], sink=cfg.sink)
    src = run_pipeline_in_subprocess(cfg, num_threads=2, mp_context="spawn")
    for _ in range(2):
        got = list(src)
        assert sorted(x for (x, _), _, _ in got) == [2 * i for i in range(8)]
        assert {name for _, name, _ in got} == {"cfgpool"}
        assert {pid for _, _, pid in got} == {src.pid}  # the thread pool lives in the worker
        pool_pids = {pid for (_, pid), _, _ in got}
        assert 1 <= len(pool_pids) <= 2 and not pool_pids & {src.pid, os.getpid()}
    src.shutdown()
    # The pool's processes (the worker's children) are reaped with the worker, not left
    # behind waiting for work (SAFETY bounds a wait for the system to collect them).
    deadline = time.monotonic() + SAFETY
    while any(os.path.exists(f"/proc/{pid}") for pid in pool_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pool_pids if os.path.exists(f"/proc/{pid}")]


def test_used_standard_executor_is_refused():
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        ex.submit(double, 1).result()
        cfg = PipelineConfig(src=SourceConfig([1]), pipes=[Pipe(double, executor=ex)], sink=SinkConfig(1))
        with pytest.raises(ValueError, match="already started threads"):
            run_pipeline_in_subprocess(cfg, num_threads=1)


def test_builder_is_taken_with_deprecation_warning():
    b = PipelineBuilder().add_source(range(5)).pipe(double).add_sink(2)
    with pytest.warns(DeprecationWarning, match="get_config"):
        src = run_pipeline_in_subprocess(b, num_threads=1, mp_context="spawn")
    assert sorted(src) == [0, 2, 4, 6, 8]
    src.shutdown()
