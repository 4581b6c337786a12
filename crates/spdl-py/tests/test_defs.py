"""spdl_rs.pipeline.defs: config-defined pipelines (SPDL's spdl.pipeline.defs), build_pipeline,
PipelineBuilder.get_config, Merge, PathVariants, placement on a process pool."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import multiprocessing as mp
import os
import pathlib
import pickle
import sys
import time
from contextlib import asynccontextmanager

import pytest

from spdl_rs.pipeline import AsyncQueue, PipelineBuilder, TaskHook, build_pipeline, config, is_eof, profile_pipeline
from spdl_rs.pipeline.defs import (
    MAIN_PROCESS,
    Aggregate,
    Aggregator,
    Collate,
    Disaggregate,
    Merge,
    MergeConfig,
    PathVariants,
    Pipe,
    PipelineConfig,
    PlacementConfig,
    ProcessPoolExecutorConfig,
    SinkConfig,
    SourceConfig,
)


def double(x):
    return 2 * x


def plus_one(x):
    return x + 1


def negate(x):
    return -x


def pid_of(_):
    return os.getpid()


def pid_of_pair(x):
    return (x, os.getpid())


def odd_only(x):
    return x if x % 2 else None


def odd_numbers():
    yield from range(1, 10, 2)


def collect(cfg_bytes: bytes) -> list:
    cfg = pickle.loads(cfg_bytes)
    pipeline = build_pipeline(cfg, num_threads=2)
    with pipeline.auto_stop():
        return list(pipeline)


def _line(fn) -> int:
    return inspect.getsourcelines(fn)[1]


def test_reprs():
    p = Pipe(double, concurrency=2, output_order="input")
    assert repr(p) == f"double(concurrency=2, output_order='input', op=double at {__file__}:{_line(double)})"
    assert repr(Aggregate(3)) == "aggregate(op=collate(3), drop_last=False)"
    assert repr(Aggregate(Collate(4), drop_last=True)) == "aggregate(op=collate(4), drop_last=True)"
    assert repr(Disaggregate()) == "disaggregate"
    assert repr(MAIN_PROCESS) == "MAIN_PROCESS"
    assert repr(PlacementConfig(MAIN_PROCESS)) == "placement(MAIN_PROCESS)"
    ppe = ProcessPoolExecutorConfig(max_workers=2, mp_context="spawn")
    assert repr(PlacementConfig(ppe, buffer_size=4)) == (
        "placement(ProcessPoolExecutorConfig(max_workers=2, initializer=None, initargs=(), mp_context='spawn'), buffer_size=4)"
    )
    assert repr(SinkConfig(5)) == "SinkConfig(buffer_size=5)"
    src = SourceConfig([1, 2])
    assert repr(src).startswith("SourceConfig(source=<list object at 0x")
    gen = SourceConfig(odd_numbers())
    assert repr(gen) == f"SourceConfig(source=<generator at {__file__}:{_line(odd_numbers)}>)"
    cfg = PipelineConfig(src=src, pipes=[Pipe(double), Aggregate(2)], sink=SinkConfig(3))
    lines = repr(cfg).split("\n")
    assert lines[0] == "PipelineConfig"
    assert lines[1] == f" - Source: {src!r}"
    assert lines[2:] == [
        " - Pipes:",
        f"   - {Pipe(double)!r}",
        "   - aggregate(op=collate(2), drop_last=False)",
        " - Sink: SinkConfig(buffer_size=3)",
    ]
    merged = PipelineConfig(src=Merge([cfg, cfg]), pipes=[], sink=SinkConfig(1))
    mlines = repr(merged).split("\n")
    assert mlines[:4] == ["PipelineConfig", " - Source:", "   MergeConfig(", "     Pipeline 1:"]
    assert mlines[4] == "       PipelineConfig"
    assert mlines[-1] == " - Sink: SinkConfig(buffer_size=1)"
    pv = PathVariants(odd_only, [[Pipe(double)], [Pipe(negate)]])
    assert repr(pv) == f"PathVariants(path0=[{Pipe(double)!r}], path1=[{Pipe(negate)!r}])"


def test_validation():
    with pytest.raises(ValueError, match="output_order"):
        Pipe(double, output_order="random")
    with pytest.raises(ValueError, match="concurrency"):
        Pipe(double, concurrency=0)
    with pytest.raises(ValueError, match="buffer_size"):
        SinkConfig(-1)
    with pytest.raises(ValueError, match="Source must be"):
        SourceConfig(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        Merge([])
    with pytest.raises(TypeError, match="int or Aggregator"):
        Aggregate("3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="SourceConfig is not allowed"):
        PathVariants(odd_only, [[SourceConfig([1])]])
    with pytest.raises(ValueError, match="Path 1 is empty"):
        PathVariants(odd_only, [[Pipe(double)], []])
    with pytest.raises(TypeError, match="ProcessPoolExecutorConfig, an InterpreterPoolExecutorConfig or MAIN_PROCESS"):
        PlacementConfig("elsewhere")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="PipelineConfig"):
        build_pipeline(PipelineBuilder(), num_threads=1)  # type: ignore[arg-type]


def test_build_from_config_equals_builder():
    cfg = PipelineConfig(
        src=SourceConfig(range(20)),
        pipes=[Pipe(double, concurrency=3, output_order="input"), Pipe(odd_only), Aggregate(4), Disaggregate()],
        sink=SinkConfig(2),
    )
    p = build_pipeline(cfg, num_threads=3)
    with p.auto_stop():
        got = list(p)
    assert got == []  # doubles are even: all dropped
    cfg2 = PipelineConfig(
        src=SourceConfig(range(10)), pipes=[Pipe(plus_one, output_order="input"), Aggregate(3)], sink=SinkConfig(2)
    )
    p = build_pipeline(cfg2, num_threads=2)
    with p.auto_stop():
        assert list(p) == [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10]]
    b = PipelineBuilder().add_source(range(10)).pipe(plus_one, output_order="input").aggregate(3).add_sink(2)
    p = b.build(num_threads=2)
    with p.auto_stop():
        assert list(p) == [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10]]


def test_get_config_round_trip():
    class Pairs(Aggregator):
        def __init__(self):
            self.buf = []

        def accumulate(self, item):
            self.buf.append(item)
            if len(self.buf) == 2:
                out, self.buf = tuple(self.buf), []
                return out
            return None

        def flush(self):
            out, self.buf = self.buf, []
            return tuple(out) or None

    b = (
        PipelineBuilder()
        .add_source(range(7))
        .pipe(double, concurrency=2, output_order="input", max_failures=3)
        .aggregate(Pairs(), drop_last=False)
        .add_sink(4)
    )
    cfg = b.get_config()
    assert isinstance(cfg, PipelineConfig)
    assert isinstance(cfg.src, SourceConfig) and cfg.src.source == range(7)
    assert cfg.pipes[0]._args.concurrency == 2 and cfg.pipes[0]._max_failures == 3
    assert cfg.sink == SinkConfig(4)
    p = build_pipeline(cfg, num_threads=2)
    with p.auto_stop():
        assert list(p) == [(0, 2), (4, 6), (8, 10), (12,)]
    with pytest.raises(RuntimeError, match="Sink is not set"):
        PipelineBuilder().add_source([1]).get_config()


def test_profile_takes_config():
    cfg = PipelineConfig(src=SourceConfig(range(30)), pipes=[Pipe(double), Aggregate(5)], sink=SinkConfig(2))
    results = profile_pipeline(cfg, num_inputs=30)
    assert [r.name for r in results] == ["double", "aggregate(op=collate(5), drop_last=False)"]


def test_pickled_config_builds_in_spawned_process():
    cfg = PipelineConfig(
        src=SourceConfig(range(12)), pipes=[Pipe(double, concurrency=2), Aggregate(12)], sink=SinkConfig(2)
    )
    data = pickle.dumps(cfg)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        got = ex.submit(collect, data).result(timeout=120)
    assert len(got) == 1 and sorted(got[0]) == [2 * i for i in range(12)]


def test_merge_sub_pipelines():
    a = PipelineConfig(src=SourceConfig(range(5)), pipes=[Pipe(double)], sink=SinkConfig(2))
    b = PipelineConfig(src=SourceConfig(range(100, 104)), pipes=[Pipe(negate)], sink=SinkConfig(2))
    cfg = PipelineConfig(src=Merge([a, b]), pipes=[Pipe(plus_one, concurrency=2)], sink=SinkConfig(3))
    for _ in range(2):  # the merged source is rebuilt each time
        p = build_pipeline(cfg, num_threads=2)
        with p.auto_stop():
            got = sorted(p)
        assert got == sorted([2 * i + 1 for i in range(5)] + [-i + 1 for i in range(100, 104)])
    # the config of the builder that build_pipeline made gives the Merge back
    from spdl_rs.pipeline._build import config_to_builder

    assert config_to_builder(cfg).get_config().src is cfg.src
    assert isinstance(cfg.src, MergeConfig)


async def round_robin(name, input_queues, output_queue):
    active = list(input_queues)
    while active:
        for q in list(active):
            item = await q.get()
            if is_eof(item):
                active.remove(q)
            else:
                await output_queue.put(item)


async def first_three(name, input_queues, output_queue):
    for _ in range(3):
        await output_queue.put(await input_queues[0].get())


def test_merge_custom_op():
    a = PipelineConfig(src=SourceConfig([1, 2, 3]), pipes=[], sink=SinkConfig(1))
    b = PipelineConfig(src=SourceConfig([10, 20, 30, 40]), pipes=[], sink=SinkConfig(1))
    cfg = PipelineConfig(src=Merge([a, b], op=round_robin), pipes=[], sink=SinkConfig(1))
    p = build_pipeline(cfg, num_threads=1)
    with p.auto_stop():
        # round robin over queues whose order within a source is kept: 1, 10, 2, 20, 3, 30, 40
        assert list(p) == [1, 10, 2, 20, 3, 30, 40]
    # an op that returns early ends the source; the sub-pipelines are stopped
    big = PipelineConfig(src=SourceConfig(range(10_000)), pipes=[], sink=SinkConfig(1))
    cfg = PipelineConfig(src=Merge([big], op=first_three), pipes=[], sink=SinkConfig(1))
    p = build_pipeline(cfg, num_threads=1)
    with p.auto_stop():
        assert list(p) == [0, 1, 2]


def test_merge_sub_pipeline_failure_is_raised():
    def bad_source():
        yield 1
        raise ValueError("broken source")

    a = PipelineConfig(src=SourceConfig(bad_source()), pipes=[], sink=SinkConfig(1))
    cfg = PipelineConfig(src=Merge([a]), pipes=[], sink=SinkConfig(1))
    p = build_pipeline(cfg, num_threads=1)
    with pytest.raises(Exception):  # noqa: B017 (the source failure, as PipelineFailure)
        with p.auto_stop():
            list(p)


def even_odd(x):
    return x % 2


def route_batch(batch):
    return [x % 2 for x in batch]


def double_all(xs):
    return [2 * x for x in xs]


def negate_all(xs):
    return [-x for x in xs]


def test_path_variants():
    cfg = PipelineConfig(
        src=SourceConfig(range(8)),
        pipes=[PathVariants(even_odd, [[Pipe(double)], [Pipe(negate), Pipe(plus_one)]])],
        sink=SinkConfig(2),
    )
    p = build_pipeline(cfg, num_threads=2)
    with p.auto_stop():
        assert sorted(p) == sorted([0, 4, 8, 12] + [0, -2, -4, -6])
    b = PipelineBuilder().add_source([[0, 1, 2, 3]]).path_variants(route_batch, [[Pipe(double_all)], [Pipe(negate_all)]], batched=True)
    p = b.add_sink(1).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [[0, 4, -1, -3]]
    nested = PipelineConfig(
        src=SourceConfig([[1, 2], [3], [4, 6]]),
        pipes=[
            PathVariants(
                lambda batch: len(batch) % 2,
                [[Disaggregate(), PathVariants(even_odd, [[Pipe(double)], [Pipe(negate)]])], [Pipe(sum)]],
            )
        ],
        sink=SinkConfig(2),
    )
    p = build_pipeline(nested, num_threads=2)
    with p.auto_stop():
        assert sorted(p) == sorted([-1, 4, 3, 8, 12])  # [1, 2] and [4, 6] split and routed, [3] summed
    inner_batched = PathVariants(route_batch, [[Pipe(double_all)], [Pipe(negate_all)]], batched=True)
    outer = PipelineConfig(
        src=SourceConfig([[1, 2], [3], [4, 5]]),
        pipes=[PathVariants(lambda batch: len(batch) % 2, [[inner_batched], [Pipe(sum)]])],
        sink=SinkConfig(1),
    )
    p = build_pipeline(outer, num_threads=1)
    with p.auto_stop():
        assert list(p) == [[4, -1], 3, [8, -5]]
    bad = PathVariants(route_batch, [[Aggregate(2)], [Pipe(negate_all)]], batched=True)
    cfg = PipelineConfig(src=SourceConfig([[1]]), pipes=[bad], sink=SinkConfig(1))
    with pytest.raises(NotImplementedError, match="AggregateConfig.*recombined"):
        build_pipeline(cfg, num_threads=1)


async def async_route_batch(batch):
    await asyncio.sleep(0)
    return route_batch(batch)


async def async_double_all(xs):
    await asyncio.sleep(0)
    return [2 * x for x in xs]


async def async_halves(xs):
    for part in (xs[: len(xs) // 2], xs[len(xs) // 2 :]):
        await asyncio.sleep(0)
        yield [-x for x in part]


def drop_all(xs):
    return []


def test_batched_path_variants_run_async_ops_and_skip_emptied_batches():
    # As SPDL 0.8's batched mode: the router gets each batch, every path its sub-list (empty
    # ones too), the outputs are concatenated in path order, and a batch that every path
    # emptied is not passed on. Async routers, async ops and async generators run too.
    seen = []

    def record(xs):
        seen.append(list(xs))
        return xs

    b = PipelineBuilder().add_source([[0, 1, 2, 3], [5], [4]]).path_variants(
        async_route_batch, [[Pipe(record), Pipe(async_double_all)], [Pipe(async_halves)]], batched=True
    )
    p = b.add_sink(1).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [[0, 4, -1, -3], [-5], [8]]
    assert seen == [[0, 2], [], [4]]  # path 0 gets an empty sub-list for [5]

    b = PipelineBuilder().add_source([[1, 2], [3]]).path_variants(
        route_batch, [[Pipe(drop_all)], [Pipe(drop_all)]], batched=True
    )
    p = b.add_sink(1).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == []


async def async_double(x):
    await asyncio.sleep(0)
    return 2 * x


async def async_twice(x):
    for v in (x, x):
        await asyncio.sleep(0)
        yield v


async def async_even_odd(x):
    return x % 2


def test_path_variants_async_ops():
    # As SPDL: a path may hold coroutine and async-generator ops (and the router may be async).
    cfg = PipelineConfig(
        src=SourceConfig(range(6)),
        pipes=[PathVariants(even_odd, [[Pipe(async_double, concurrency=3)], [Pipe(async_twice), Pipe(negate)]])],
        sink=SinkConfig(2),
    )
    p = build_pipeline(cfg, num_threads=2)
    with p.auto_stop():
        assert sorted(p) == sorted([0, 4, 8] + [-1, -1, -3, -3, -5, -5])
    b = PipelineBuilder().add_source(range(4)).path_variants(async_even_odd, [[Pipe(async_double)], [Pipe(negate)]])
    p = b.pipe(plus_one).add_sink(1).build(num_threads=1)
    with p.auto_stop():
        assert sorted(p) == [-2, 0, 1, 5]
    # Items keep the order of the source through ordered path stages (and a sync drop).
    ordered = PipelineConfig(
        src=SourceConfig(range(10)),
        pipes=[PathVariants(even_odd, [[Pipe(async_double, output_order="input")], [Pipe(odd_only)]])],
        sink=SinkConfig(1),
    )
    p = build_pipeline(ordered, num_threads=1)
    with p.auto_stop():
        assert list(p) == [0, 1, 4, 3, 8, 5, 12, 7, 16, 9]


class Summer(Aggregator):
    def __init__(self):
        self.total = 0

    def accumulate(self, item):
        self.total += item
        return None

    def flush(self):
        out, self.total = self.total, 0
        return out


def test_path_variants_aggregate():
    # As SPDL: an Aggregate in a path groups the items routed to that path across the stream;
    # the partial group is flushed at the end (drop_last=False) or dropped (drop_last=True).
    cfg = PipelineConfig(
        src=SourceConfig(range(9)),
        pipes=[PathVariants(even_odd, [[Aggregate(2)], [Pipe(double), Aggregate(3, drop_last=True)]])],
        sink=SinkConfig(2),
    )
    p = build_pipeline(cfg, num_threads=1)
    with p.auto_stop():
        got = list(p)
    assert got == [[0, 2], [2, 6, 10], [4, 6], [8]]  # evens in pairs; doubled odds in threes, 14 dropped
    b = (
        PipelineBuilder()
        .add_source(range(10))
        .path_variants(even_odd, [[Aggregate(Summer())], [Aggregate(2), Disaggregate(), Pipe(negate)]])
        .add_sink(1)
    )
    p = b.build(num_threads=1)
    with p.auto_stop():
        got = list(p)
    # Summer's total comes at the end of the stream, before the odd path's last partial pair.
    assert got == [-1, -3, -5, -7, 20, -9]


def test_placement_runs_in_process_pool():
    b = (
        PipelineBuilder()
        .add_source(range(16))
        .to(ProcessPoolExecutorConfig(max_workers=2, mp_context="spawn"))
        .pipe(pid_of, concurrency=4)
        .to(MAIN_PROCESS)
        .pipe(lambda pid: (pid, os.getpid()))
        .add_sink(4)
    )
    cfg = b.get_config()
    assert [type(p).__name__ for p in cfg.pipes] == ["PlacementConfig", "PipeConfig", "PlacementConfig", "PipeConfig"]
    p = build_pipeline(cfg, num_threads=2)
    with p.auto_stop():
        got = list(p)
    assert len(got) == 16
    worker_pids = {w for w, _ in got}
    assert os.getpid() not in worker_pids and 1 <= len(worker_pids) <= 2
    assert {m for _, m in got} == {os.getpid()}
    closing = (
        PipelineBuilder()
        .add_source([1])
        .to(ProcessPoolExecutorConfig(max_workers=1, mp_context="spawn"))
        .pipe(double)
        .to(MAIN_PROCESS, buffer_size=2)
        .add_sink(1)
    )
    p = closing.build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [2]


def test_region_checks_as_spdl():
    pool = ProcessPoolExecutorConfig(max_workers=1, mp_context="spawn")

    def build(b):
        return b.add_sink(1).build(num_threads=1)

    with pytest.raises(ValueError, match="must be closed with `to\\(MAIN_PROCESS\\)` before `add_sink\\(\\)`"):
        build(PipelineBuilder().add_source([1]).to(pool).pipe(double))
    with pytest.raises(ValueError, match="An empty `to\\(...\\)` region has no stages"):
        build(PipelineBuilder().add_source([1]).to(pool).to(MAIN_PROCESS).pipe(double))
    with pytest.raises(ValueError, match="output_order='input'` cannot run inside a `to\\(\\)` region"):
        build(PipelineBuilder().add_source([1]).to(pool).pipe(double, output_order="input").to(MAIN_PROCESS))
    nested = PathVariants(even_odd, [[Pipe(double, output_order="input")], [Pipe(negate)]])
    cfg = PipelineConfig(
        src=SourceConfig([1]), pipes=[PlacementConfig(pool), nested, PlacementConfig(MAIN_PROCESS)], sink=SinkConfig(1)
    )
    with pytest.raises(ValueError, match="output_order='input'"):
        build_pipeline(cfg, num_threads=1)
    with concurrent.futures.ThreadPoolExecutor(1) as ex, pytest.raises(TypeError, match="not a live Executor"):
        PipelineBuilder().to(ex)  # type: ignore[arg-type]


def test_region_checks_run_at_get_config():
    # get_config() checks the regions as build() does, before anything is started.
    pool = ProcessPoolExecutorConfig(max_workers=1, mp_context="spawn")
    with pytest.raises(ValueError, match="must be closed with"):
        PipelineBuilder().add_source([1]).to(pool).pipe(double).add_sink(1).get_config()
    with pytest.raises(ValueError, match="has no stages"):
        PipelineBuilder().add_source([1]).to(pool).to(MAIN_PROCESS).add_sink(1).get_config()
    with pytest.raises(ValueError, match="output_order='input'"):
        PipelineBuilder().add_source([1]).to(pool).pipe(double, output_order="input").to(MAIN_PROCESS).add_sink(
            1
        ).get_config()
    nested = [[Pipe(double, output_order="input")], [Pipe(negate)]]
    with pytest.raises(ValueError, match="output_order='input'"):
        PipelineBuilder().add_source([1]).to(pool).path_variants(even_odd, nested).to(MAIN_PROCESS).add_sink(
            1
        ).get_config()
    # Two regions side by side, each with a stage, are fine.
    other = ProcessPoolExecutorConfig(max_workers=2, mp_context="spawn")
    cfg = PipelineBuilder().add_source([1]).to(pool).pipe(double).to(other).pipe(negate).to(MAIN_PROCESS).add_sink(1)
    assert len(cfg.get_config().pipes) == 5


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="subinterpreter regions run from Python 3.14")
def test_subinterpreter_region_refused_at_get_config_before_314():
    from spdl_rs.pipeline.defs import InterpreterPoolExecutorConfig

    b = PipelineBuilder().add_source([1]).to(InterpreterPoolExecutorConfig(max_workers=1)).pipe(double)
    b = b.to(MAIN_PROCESS).add_sink(1)
    with pytest.raises(RuntimeError, match="requires Python 3.14 or later"):
        b.get_config()
    with pytest.raises(RuntimeError, match="requires Python 3.14 or later"):
        b.build(num_threads=1)


def test_merged_sources_must_agree_on_continuous():
    once = PipelineConfig(src=SourceConfig([1, 2]), pipes=[], sink=SinkConfig(1))
    every_epoch = PipelineConfig(src=SourceConfig([3], continuous=True), pipes=[], sink=SinkConfig(1))
    cfg = PipelineConfig(src=Merge([once, every_epoch]), pipes=[], sink=SinkConfig(2))
    with pytest.raises(ValueError, match="Mixed continuous mode"):
        build_pipeline(cfg, num_threads=1)
    same = PipelineConfig(src=Merge([once, once]), pipes=[], sink=SinkConfig(2))
    p = build_pipeline(same, num_threads=1)
    with p.auto_stop():
        assert sorted(p) == [1, 1, 2, 2]


# Set in each region worker by record_in_worker (the region's initializer).
_RECORD_DIR: str | None = None


class _WorkerHook(TaskHook):
    """Counts its stage's tasks in a region worker; writes the count to a file named after
    the worker's pid when the stage ends (the worker exits)."""

    def __init__(self, info, interval=-1):
        self.info = info
        self.tasks = 0

    @asynccontextmanager
    async def stage_hook(self):
        yield
        if _RECORD_DIR is not None:
            name = f"task-{os.getpid()}-{self.info.stage_name}"
            pathlib.Path(_RECORD_DIR, name).write_text(str(self.tasks))

    @asynccontextmanager
    async def task_hook(self, input_item=None):
        self.tasks += 1
        yield


class _WorkerQueue(AsyncQueue):
    """Counts what passes through it in a region worker; written when the worker exits."""

    def __init__(self, info, *, buffer_size=1, interval=-1):
        super().__init__(info, buffer_size=buffer_size)
        self.taken = 0

    async def get(self):
        item = await super().get()
        self.taken += 1
        return item

    @asynccontextmanager
    async def stage_hook(self):
        yield
        if _RECORD_DIR is not None:
            pathlib.Path(_RECORD_DIR, f"queue-{os.getpid()}-{self.info.stage_name}").write_text(str(self.taken))


def record_in_worker(path):
    global _RECORD_DIR
    _RECORD_DIR = path
    config.set_default_hook_class(_WorkerHook)
    config.set_default_queue_class(_WorkerQueue)


@pytest.mark.parametrize("buffer_size", [1, 3])
def test_default_hooks_and_queues_run_in_region_workers(tmp_path, buffer_size):
    # As SPDL runs a region as a pipeline in each worker: the worker's default hook and queue
    # classes (set there by the region's initializer) run around each of the region's tasks.
    pool = ProcessPoolExecutorConfig(max_workers=2, mp_context="spawn", initializer=record_in_worker, initargs=(str(tmp_path),))
    b = PipelineBuilder().add_source(range(10)).to(pool, buffer_size=buffer_size).pipe(plus_one).pipe(double)
    p = b.to(MAIN_PROCESS).add_sink(10).build(num_threads=2)
    with p.auto_stop():
        assert sorted(p) == [2 * (x + 1) for x in range(10)]
    # The workers write their counts as they exit, after the stop.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        files = {f.name: int(f.read_text()) for f in tmp_path.iterdir() if f.read_text()}
        tasks = {n: sum(v for k, v in files.items() if k.startswith("task-") and k.endswith(n)) for n in ("plus_one", "double")}
        if tasks == {"plus_one": 10, "double": 10}:
            break
        time.sleep(0.05)
    assert tasks == {"plus_one": 10, "double": 10}
    assert {int(k.split("-")[1]) for k in files} - {os.getpid()} == {int(k.split("-")[1]) for k in files}
    assert sum(v for k, v in files.items() if k.startswith("queue-")) == 20


def twice(x):
    yield x
    yield x


def test_placement_buffer_size_fuses_transfers():
    b = (
        PipelineBuilder()
        .add_source(range(10))
        .to(ProcessPoolExecutorConfig(max_workers=2, mp_context="spawn"), buffer_size=4)
        .pipe(plus_one)
        .pipe(twice)
        .pipe(pid_of_pair)
        .to(MAIN_PROCESS)
        .pipe(lambda v: (*v, os.getpid()))
        .add_sink(3)
    )
    assert repr(b.get_config().pipes[0]).endswith(", buffer_size=4)")
    p = build_pipeline(b.get_config(), num_threads=2)
    with p.auto_stop():
        got = list(p)
    assert sorted(x for x, _, _ in got) == sorted(2 * [i + 1 for i in range(10)])
    assert os.getpid() not in {w for _, w, _ in got} and {m for _, _, m in got} == {os.getpid()}
    by_name = {s.name: s for s in p.get_stats().stages}
    fused = by_name["plus_one+twice+pid_of_pair"]
    assert (fused.items_in, fused.items_out) == (3, 20)  # 10 items in transfers of 4, 4 and 2


def fail_on_four(x):
    if x == 4:
        raise ValueError("four")
    return x


def test_closing_buffer_size_groups_results():
    # As SPDL, the closing marker's buffer_size sizes the transfers coming back: the stages
    # right before it run in a worker on transfers of up to 3 items, whose results return
    # together. One failing item fails its whole transfer ([4, 5, 6]), counted once.
    b = (
        PipelineBuilder()
        .add_source(range(8))
        .to(ProcessPoolExecutorConfig(max_workers=2, mp_context="spawn"))
        .pipe(plus_one)
        .aggregate(1)
        .disaggregate()
        .pipe(twice)
        .pipe(fail_on_four)
        .to(MAIN_PROCESS, buffer_size=3)
        .add_sink(3)
    )
    assert repr(b.get_config().pipes[-1]) == "placement(MAIN_PROCESS, buffer_size=3)"
    p = build_pipeline(b.get_config(), num_threads=2, max_failures=1)
    with p.auto_stop(), pytest.warns(RuntimeWarning, match=r"1 item\(s\) failed"):
        got = list(p)
    assert sorted(got) == sorted(2 * [1, 2, 3, 7, 8])  # plus_one gives 1..8; 4 fails [4, 5, 6]
    by_name = {s.name: s for s in p.get_stats().stages}
    fused = by_name["twice+fail_on_four"]
    assert (fused.items_in, fused.items_out, fused.failures) == (3, 10, 1)  # transfers of 3, 3 and 2
    assert by_name["plus_one"].items_out == 8  # one item per transfer into the region


def test_executor_with_native_op_is_refused():
    from spdl_rs import ops

    with concurrent.futures.ThreadPoolExecutor(1) as ex, pytest.raises(TypeError, match="native op"):
        PipelineBuilder().add_source(["a"]).pipe(ops.read_file(), executor=ex)


def test_async_op_in_config():
    async def aplus(x):
        await asyncio.sleep(0)
        return x + 1

    cfg = PipelineConfig(src=SourceConfig(range(5)), pipes=[Pipe(aplus, concurrency=3)], sink=SinkConfig(2))
    p = build_pipeline(cfg, num_threads=1)
    with p.auto_stop():
        assert sorted(p) == [1, 2, 3, 4, 5]


def test_merge_left_early_stops_everything():
    import threading

    big = PipelineConfig(src=SourceConfig(range(100_000)), pipes=[], sink=SinkConfig(2))
    cfg = PipelineConfig(src=Merge([big, big]), pipes=[], sink=SinkConfig(2))
    before = {t.name for t in threading.enumerate()}
    for _ in range(3):
        p = build_pipeline(cfg, num_threads=1)
        with p.auto_stop():
            got = [x for _, x in zip(range(4), p)]
        assert len(got) == 4 and set(got) <= set(range(100_000))
        # stop() returned: the sub-pipelines, feeders and the merge loop are gone
        left = {t.name for t in threading.enumerate()} - before
        assert not {n for n in left if n.startswith(("spdl_rs_merge", "asyncio_")) or "feed" in n}, left


def test_path_variants_in_process_pool():
    # The path stages (function ops wrapped with their route) pickle to the region's workers.
    cfg = PipelineConfig(
        src=SourceConfig(range(6)),
        pipes=[
            PlacementConfig(ProcessPoolExecutorConfig(max_workers=1, mp_context="spawn")),
            PathVariants(even_odd, [[Pipe(pid_of_pair)], [Pipe(negate)]]),
            PlacementConfig(MAIN_PROCESS),
        ],
        sink=SinkConfig(2),
    )
    p = build_pipeline(cfg, num_threads=2)
    with p.auto_stop():
        got = list(p)
    pairs = sorted(x for x in got if isinstance(x, tuple))
    assert sorted(x for x in got if not isinstance(x, tuple)) == [-5, -3, -1]
    assert [x for x, _ in pairs] == [0, 2, 4] and os.getpid() not in {pid for _, pid in pairs}


def test_path_variants_aggregate_flushes_every_epoch():
    # With a continuous source each epoch ends with the path's partial group, and the next
    # epoch starts empty (drop_last=True: the partial group is dropped, not carried over).
    p = (
        PipelineBuilder()
        .add_source(range(5), continuous=True)
        .path_variants(even_odd, [[Aggregate(2)], [Aggregate(2, drop_last=True)]])
        .add_sink(8)
        .build(num_threads=1)
    )
    with p.auto_stop():
        for epoch in range(3):
            assert list(p) == [[0, 2], [1, 3], [4]], f"epoch {epoch}"


def test_path_variants_bad_route_and_native_op():
    # A router index out of range fails that item (SPDL's IndexError); the others go on.
    p = (
        PipelineBuilder()
        .add_source(range(4))
        .path_variants(lambda x: 0 if x < 3 else 7, [[Pipe(double)], [Pipe(negate)]])
        .add_sink(4)
        .build(num_threads=1, max_failures=1)
    )
    with p.auto_stop(), pytest.warns(RuntimeWarning, match="Router returned index 7"):
        assert list(p) == [0, 2, 4]
    from spdl_rs import ops

    cfg = PipelineConfig(src=SourceConfig(["a"]), pipes=[PathVariants(even_odd, [[Pipe(ops.read_file())]])])
    with pytest.raises(NotImplementedError, match="native op"):
        build_pipeline(cfg, num_threads=1)
