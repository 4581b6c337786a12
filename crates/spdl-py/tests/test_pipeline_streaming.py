"""SPDL 0.8 semantics of spdl_rs.pipeline, part 2: sync generator ops stream each item as it is
yielded (on the Rust workers, in a thread executor, under task hooks); stop() from the
pipeline's own threads; ProcessGroupStatsMonitor; spdl_rs.io.utils; SPDL's PipelineFailure
form; every SPDL keyword accepted and an unknown one rejected."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
import json
import os
import threading
import time
from fractions import Fraction

import pytest

import spdl_rs
from spdl_rs.pipeline import (
    PipelineBuilder,
    PipelineFailure,
    ProcessGroupResourceUsage,
    ProcessGroupStatsMonitor,
    TaskHook,
    build_pipeline,
    config,
)
from spdl_rs.pipeline.defs import Aggregator

from conftest import wait_threads


def _no_hooks(_info):
    return []


def _waiting_gen(gate: threading.Event):
    """A generator op that yields its second item only once `gate` is set (after the consumer
    got the first): collected before moving on, it would fail the item after 20 s."""

    def gen(x):
        yield x * 10
        if not gate.wait(20):
            raise TimeoutError("the first item never reached the consumer")
        yield x * 10 + 1
        yield x * 10 + 2

    return gen


@pytest.mark.parametrize("where", ["workers", "thread_executor"])
def test_sync_generator_items_move_on_as_yielded(where, thread_baseline):
    gate = threading.Event()
    executor = concurrent.futures.ThreadPoolExecutor(1) if where == "thread_executor" else None
    p = PipelineBuilder().add_source([1]).pipe(_waiting_gen(gate), executor=executor).add_sink(1).build(num_threads=1)
    with p.auto_stop():
        assert p.get_item(timeout=20) == 10
        gate.set()
        assert list(p) == [11, 12]
        stage = p.get_stats().stages[1]
        assert (stage.items_in, stage.items_out, stage.failures) == (1, 3, 0)
    if executor is not None:
        executor.shutdown()


def _demux(x):
    for i in range(x % 4):
        if x == 7 and i == 2:
            raise ValueError("seven fails at its third item")
        yield None if i == 1 and x == 6 else 100 * x + i


@pytest.mark.parametrize("order", ["input", "completion"])
def test_sync_generator_items_failures_and_none(order):
    p = (
        PipelineBuilder()
        .add_source(range(12))
        .pipe(_demux, concurrency=3, output_order=order)
        .add_sink(3)
        .build(num_threads=2, task_hook_factory=_no_hooks)
    )
    with pytest.warns(RuntimeWarning, match="1 item"), p.auto_stop():
        got = list(p)
    want = []
    for x in range(12):
        n = 2 if x == 7 else x % 4
        want += [100 * x + i for i in range(n) if not (x == 6 and i == 1)]  # None is skipped, as SPDL
    assert (got if order == "input" else sorted(got)) == want
    stage = p.get_stats().stages[1]
    assert (stage.items_in, stage.items_out, stage.failures, stage.filtered) == (12, len(want), 1, 3)


def test_a_generator_in_an_executor_cannot_keep_input_order():
    with concurrent.futures.ThreadPoolExecutor(1) as ex, pytest.raises(ValueError, match="executor"):
        PipelineBuilder().add_source([1]).pipe(_demux, executor=ex, output_order="input")


def test_an_endless_generator_is_closed_when_the_pipeline_stops(thread_baseline):
    closed = threading.Event()

    def endless(x):
        try:
            i = 0
            while True:
                yield (x, i)
                i += 1
        finally:
            closed.set()

    p = PipelineBuilder().add_source([7]).pipe(endless).add_sink(2).build(num_threads=1)
    with p.auto_stop():
        first = [p.get_item(timeout=20) for _ in range(5)]
    assert first == [(7, i) for i in range(5)]
    assert closed.is_set(), "stop() closes a generator it left unfinished"


class _Recorder(TaskHook):
    def __init__(self, log):
        self.log = log

    @contextlib.asynccontextmanager
    async def task_hook(self, input_item=None):
        try:
            yield
        except BaseException as e:
            self.log.append((input_item, type(e).__name__))
            raise
        self.log.append((input_item, None))


def test_task_hooks_wrap_each_step_of_a_sync_generator():
    log = []

    def two(x):
        yield x
        yield -x

    p = (
        PipelineBuilder()
        .add_source([3])
        .pipe(two)
        .add_sink(3)
        .build(num_threads=1, task_hook_factory=lambda info: [_Recorder(log)] if info.stage_name == "two" else [])
    )
    with p.auto_stop():
        assert list(p) == [3, -3]
    # As SPDL's converted generator: one task per step, the last one ends with StopAsyncIteration.
    assert log == [(3, None), (3, None), (3, "StopAsyncIteration")]


# ------------------------------------------------------------------ stop() from own threads


def _consume(p):
    got = []
    with contextlib.suppress(EOFError):
        while True:
            got.append(p.get_item(timeout=20))
    return got


def test_stop_from_an_op_returns_and_ends_the_pipeline(thread_baseline):
    holder = {}
    returned = threading.Event()

    def op(x):
        if x == 5:
            holder["p"].stop()  # an engine worker thread: must not wait for itself
            returned.set()
        return x

    p = PipelineBuilder().add_source(range(10**6)).pipe(op).add_sink(1).build(num_threads=2, task_hook_factory=_no_hooks)
    holder["p"] = p
    p.start()
    got = _consume(p)
    assert returned.wait(20), "stop() from the op never returned"
    assert got == list(range(len(got))) and len(got) <= 8
    p.stop()  # from the consumer: joins what the background stop started
    with pytest.raises(EOFError):
        p.get_item(timeout=1)
    del holder["p"]


def test_stop_from_a_hook_an_aggregator_and_the_source(thread_baseline):
    class StopInHook(TaskHook):
        def __init__(self, holder):
            self.holder = holder

        @contextlib.asynccontextmanager
        async def task_hook(self, input_item=None):
            if input_item == 3:
                self.holder["p"].stop()  # the loop thread
            yield

    class StopInAggregator(Aggregator):
        def __init__(self, holder):
            self.holder = holder

        def accumulate(self, item):
            if item == 3:
                self.holder["p"].stop()  # the scheduler thread
            return item

        def flush(self):
            return None

    def source(holder):
        for i in range(10**6):
            if i == 3:
                holder["p"].stop()  # the source thread
            yield i

    builds = {
        "hook": lambda h: PipelineBuilder()
        .add_source(range(10**6))
        .pipe(lambda x: x)
        .add_sink(1)
        .build(num_threads=1, task_hook_factory=lambda info: [StopInHook(h)]),
        "aggregator": lambda h: PipelineBuilder()
        .add_source(range(10**6))
        .aggregate(StopInAggregator(h))
        .add_sink(1)
        .build(num_threads=1, task_hook_factory=_no_hooks),
        "source": lambda h: PipelineBuilder().add_source(source(h)).add_sink(1).build(num_threads=1),
    }
    for where, build in builds.items():
        holder = {}
        p = holder["p"] = build(holder)
        p.start()
        got = _consume(p)
        assert len(got) <= 8, (where, got)
        p.stop()
        holder.clear()


# ------------------------------------------------------------------ ProcessGroupStatsMonitor


async def _write_usage(path, usage):
    with open(path, "a") as f:
        f.write(json.dumps(vars(usage)) + "\n")


def test_process_group_stats_monitor(tmp_path):
    import multiprocessing as mp

    out = tmp_path / "usage.jsonl"

    def source():
        # Background tasks live while the stages run: the source waits for two snapshots
        # (a hang detector: the spawned monitor's start-up takes a few seconds here).
        yield 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 2):
            time.sleep(0.05)
        yield 1

    cb = functools.partial(_write_usage, str(out))
    monitor = functools.partial(ProcessGroupStatsMonitor, cb, 0.1, mp.get_context("spawn"))
    cfg = PipelineBuilder().add_source(source()).add_sink(3).get_config()
    p = build_pipeline(cfg, num_threads=1, background_tasks=[monitor])
    with p.auto_stop():
        assert list(p) == [0, 1]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) >= 2
    first, second = rows[0], rows[1]
    assert set(first) == {f.name for f in __import__("dataclasses").fields(ProcessGroupResourceUsage)}
    assert first["pgid"] == os.getpgrp() and first["pid"] != os.getpid()  # the monitor's own pid
    assert first["cpu_percent"] is None and first["net_rx_bytes"] is None  # nothing to diff yet
    assert second["cpu_percent"] is not None and second["cpu_percent"] >= 0
    assert first["num_procs"] >= 2  # this process and the monitor
    assert first["rss_bytes"] > 10 * 2**20
    if first["pss_bytes"] is not None:
        assert 0 < first["private_bytes"] <= first["pss_bytes"] <= first["rss_bytes"]


def test_process_group_resource_usage_fields():
    u = ProcessGroupResourceUsage(pid=1, pgid=2)
    assert (u.pid, u.pgid, u.cpu_percent, u.rss_bytes, u.num_procs) == (1, 2, None, None, None)


# ------------------------------------------------------------------ spdl_rs.io.utils, PipelineFailure


def test_io_utils_has_spdl_tracing(tmp_path):
    import spdl_rs.io.utils as utils
    from spdl_rs.io.utils import trace_counter, trace_event, trace_gc, tracing

    assert spdl_rs.io.utils is utils
    assert tracing is spdl_rs.tracing and trace_event is spdl_rs.trace_event
    assert trace_counter is spdl_rs.trace_counter and trace_gc is spdl_rs.trace_gc
    path = tmp_path / "t.json"
    with tracing(str(path), buffer_size=64, process_name="io_utils"):
        with trace_event("step"):
            pass
    events = json.loads(path.read_text())
    assert [e["name"] for e in events if e["ph"] == "B"] == ["step"]
    with pytest.raises(AttributeError, match="no_such_name"):
        utils.no_such_name  # noqa: B018


def test_pipeline_failure_takes_spdls_form():
    errs = [("decode", ValueError("bad")), ("decode", KeyError("k"))]
    e = PipelineFailure(errs)
    assert isinstance(e, ExceptionGroup)
    assert e.message == "pipeline stages failed" and e.stage == "decode"
    assert [type(x) for x in e.exceptions] == [ValueError, KeyError]
    assert e.exceptions[0].__notes__ == ["Pipeline stage: decode"]
    match, rest = e.split(ValueError)
    assert isinstance(match, PipelineFailure) and len(match.exceptions) == 1 and len(rest.exceptions) == 1


# ------------------------------------------------------------------ SPDL's checks and keywords


def test_build_needs_a_source_and_a_sink_and_auto_stop_starts():
    with pytest.raises(RuntimeError, match="Source is not set"):
        PipelineBuilder().add_sink(1).build(num_threads=1)
    with pytest.raises(RuntimeError, match="Sink is not set"):
        PipelineBuilder().add_source([1]).build(num_threads=1)
    with pytest.raises(ValueError, match="must be int"):
        PipelineBuilder().add_sink(2.0)
    p = PipelineBuilder().add_source([1]).add_sink(1).build(num_threads=1)
    p.start()
    with pytest.raises(RuntimeError, match="already started"):
        with p.auto_stop():
            pass
    p.stop()


def test_str_of_a_pipeline_shows_its_config_as_spdl():
    p = PipelineBuilder().add_source([1, 2]).pipe(abs, concurrency=2).aggregate(2).add_sink(3).build(num_threads=1)
    text = str(p)
    lines = text.splitlines()
    assert lines[0] == repr(p)
    assert lines[2].startswith(" - Source: SourceConfig(source=<list object at 0x")
    assert lines[1:2] + lines[3:] == [
        "PipelineConfig",
        " - Pipes:",
        "   - abs(concurrency=2)",
        "   - aggregate(op=collate(2), drop_last=False)",
        " - Sink: SinkConfig(buffer_size=3)",
    ]
    p.stop()


def _spdl_calls():
    """Every method of the sections, called with every SPDL keyword (SPDL's defaults)."""

    def make():
        return PipelineBuilder().add_source([1, 2], continuous=False)

    async def agen(x):
        yield x

    yield "add_source", lambda extra: PipelineBuilder().add_source([1], continuous=False, **extra)
    yield "pipe", lambda extra: make().pipe(
        lambda x: x, concurrency=1, executor=None, name="n", output_order="completion", max_failures=Fraction(1, 2), **extra
    )
    yield "aggregate", lambda extra: make().aggregate(2, drop_last=False, **extra)
    yield "add_sink", lambda extra: make().add_sink(buffer_size=3, **extra)
    yield "build", lambda extra: make().add_sink(3).build(
        num_threads=1,
        max_failures=-1,
        report_stats_interval=-1,
        queue_class=None,
        task_hook_factory=None,
        stage_id=0,
        use_thread_output_queue=False,
        **extra,
    ).stop()

    def pipeline():
        return make().add_sink(3).build(num_threads=1)

    def start(extra):
        p = pipeline()
        p.start(timeout=None, daemon=False, **extra)
        p.stop(timeout=None)

    def stop(extra):
        p = pipeline()
        p.stop(timeout=None, **extra)

    def auto_stop(extra):
        with pipeline().auto_stop(timeout=None, **extra):
            pass

    def get_item(extra):
        p = pipeline()
        with p.auto_stop():
            p.get_item(timeout=None, **extra)

    def get_iterator(extra):
        p = pipeline()
        with p.auto_stop():
            list(p.get_iterator(timeout=None, **extra))

    yield "start", start
    yield "stop", stop
    yield "auto_stop", auto_stop
    yield "get_item", get_item
    yield "get_iterator", get_iterator
    yield "tracing", lambda extra: spdl_rs.io.utils.tracing("/dev/null", buffer_size=4096, process_name=None, enable=False, **extra).__enter__()
    yield "ProcessGroupStatsMonitor", lambda extra: ProcessGroupStatsMonitor(_write_usage, interval=60, mp_context=None, **extra)
    yield "set_default_hook_class", lambda extra: config.set_default_hook_class(hook_class=config.get_default_hook_class(), **extra)
    yield "set_default_queue_class", lambda extra: config.set_default_queue_class(queue_class=config.get_default_queue_class(), **extra)
    yield "set_default_profile_hook", lambda extra: config.set_default_profile_hook(hook=config.get_default_profile_hook(), **extra)
    yield "set_default_profile_callback", lambda extra: config.set_default_profile_callback(
        callback=config.get_default_profile_callback(), **extra
    )
    yield "set_default_build_callback", lambda extra: config.set_default_build_callback(
        callback=config.get_default_build_callback(), **extra
    )
    yield "set_default_background_tasks", lambda extra: config.set_default_background_tasks(
        tasks=config.get_default_background_tasks(), **extra
    )


@pytest.mark.parametrize("name,call", list(_spdl_calls()), ids=[n for n, _ in _spdl_calls()])
def test_every_spdl_keyword_is_accepted_and_an_unknown_one_rejected(name, call):
    call({})
    with pytest.raises(TypeError, match="no_such_keyword"):
        call({"no_such_keyword": 1})
