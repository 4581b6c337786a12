"""SPDL 0.8's pipeline API in spdl_rs.pipeline: builder and pipeline semantics, hooks, stats,
global config. Each test checks one behaviour SPDL 0.8's source and docs give."""

import asyncio
import inspect
import logging
import re
import threading
import warnings
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from fractions import Fraction

import numpy as np
import pytest

import spdl_rs
from spdl_rs import io, ops, sources
from spdl_rs.pipeline import (
    build_pipeline,
    AsyncQueue,
    BackgroundTask,
    PipelineBuilder,
    PipelineFailure,
    QueuePerfStats,
    StageInfo,
    StatsQueue,
    TaskHook,
    TaskPerfStats,
    TaskStatsHook,
    config,
    create_task,
    is_eof,
    is_epoch_end,
)
from spdl_rs.pipeline.defs import Aggregate, Aggregator, Collate, Disaggregate, Merge, PathVariants, Pipe, PipelineConfig, SinkConfig, SourceConfig

SAFETY = 60  # seconds: only to turn a hang into a failure, never an assertion on speed


def run(builder, **build_kw):
    p = builder.add_sink(3).build(num_threads=build_kw.pop("num_threads", 2), **build_kw)
    with p.auto_stop():
        return list(p.get_iterator(timeout=SAFETY))


def wait_for(cond, what):
    deadline = time.monotonic() + SAFETY
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


# --- failure budgets -----------------------------------------------------------------------


def fail_on(xs):
    def op(x):
        if x in xs:
            raise ValueError(f"bad {x}")
        return x

    return op


def test_build_max_failures_counts_the_failures_of_all_stages(thread_baseline):
    """SPDL 0.8 (_FailCounter): a stage without its own budget compares the failures of every
    stage with build(max_failures=)."""

    def two_stage(limit):
        b = PipelineBuilder().add_source(range(50))
        b.pipe(fail_on({1, 2}), name="a", output_order="input").pipe(fail_on({10, 11}), name="b", output_order="input")
        return b.add_sink(3).build(num_threads=1, max_failures=limit)

    p = two_stage(3)  # 2 + 2 = 4 failures > 3
    with p.auto_stop(), pytest.raises(PipelineFailure, match="max_failures=3") as info:
        list(p)
    assert info.value.stage == "b"
    p = two_stage(4)  # 4 failures are allowed
    with p.auto_stop():
        assert list(p) == [x for x in range(50) if x not in (1, 2, 10, 11)]


def test_pipe_max_failures_overrides_the_pipeline_budget(thread_baseline):
    b = PipelineBuilder().add_source(range(30)).pipe(fail_on({3, 4, 5}), max_failures=3)
    assert len(run(b, max_failures=0)) == 27
    b = PipelineBuilder().add_source(range(30)).pipe(fail_on({3, 4, 5}), max_failures=-1)
    assert len(run(b, max_failures=0)) == 27, "a negative stage budget is no limit"
    b = PipelineBuilder().add_source(range(30)).pipe(fail_on({3, 4, 5}), max_failures=2, name="s")
    with pytest.raises(PipelineFailure, match="max_failures=2"):
        run(b)


def test_fraction_budget_is_a_rate_checked_after_100_calls(thread_baseline):
    every_5th = fail_on(set(range(0, 1000, 5)))  # 20% fail
    every_20th = fail_on(set(range(0, 1000, 20)))  # 5% fail
    b = PipelineBuilder().add_source(range(1000)).pipe(every_20th, max_failures=Fraction(1, 10))
    assert len(run(b)) == 950
    b = PipelineBuilder().add_source(range(1000)).pipe(every_5th, max_failures=Fraction(1, 10), name="rate")
    got = []
    with pytest.raises(PipelineFailure, match="max_failure_rate=0.1") as info:
        p = b.add_sink(3).build(num_threads=1)
        with p.auto_stop():
            for x in p:
                got.append(x)
    assert info.value.stage == "rate"
    assert len(got) >= 79, "probation: nothing stops before 100 calls"
    assert len(got) < 800
    # The pipeline-wide rate: failures over the calls of all stages.
    b = PipelineBuilder().add_source(range(1000)).pipe(every_5th)
    with pytest.raises(PipelineFailure, match="max_failure_rate"):
        run(b, max_failures=Fraction(1, 10))
    assert len(run(PipelineBuilder().add_source(range(1000)).pipe(every_20th), max_failures=Fraction(1, 10))) == 950


@pytest.mark.parametrize("bad", [Fraction(0), Fraction(3, 2), Fraction(-1, 2)])
def test_fraction_out_of_range_raises_value_error(bad):
    with pytest.raises(ValueError, match=r"range \(0, 1\]"):
        PipelineBuilder().add_source([1]).pipe(str, max_failures=bad)
    with pytest.raises(ValueError, match=r"range \(0, 1\]"):
        PipelineBuilder().add_source([1]).add_sink(1).build(num_threads=1, max_failures=bad)
    with pytest.raises(TypeError, match="max_failures"):
        PipelineBuilder().add_source([1]).pipe(str, max_failures=0.5)


# --- sources and epochs --------------------------------------------------------------------


def test_default_source_is_single_pass(thread_baseline):
    p = PipelineBuilder().add_source([1, 2, 3]).pipe(lambda x: x * 10).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert sorted(p) == [10, 20, 30]
        assert list(p) == [], "SPDL: exhausted for good after one pass"
        with pytest.raises(EOFError):
            p.get_item(timeout=SAFETY)


def test_continuous_source_gives_every_epoch(thread_baseline):
    seen_epochs = []

    class Epochs:
        def __iter__(self):
            seen_epochs.append(len(seen_epochs))
            return iter([1, 2, 3])

    p = (
        PipelineBuilder()
        .add_source(Epochs(), continuous=True)
        .pipe(lambda x: x * 10, output_order="input")
        .aggregate(2)
        .add_sink(3)
        .build(num_threads=2)
    )
    with p.auto_stop():
        for epoch in range(4):
            assert list(p.get_iterator(timeout=SAFETY)) == [[10, 20], [30]], f"epoch {epoch}"
        assert p.epoch == 4
    assert seen_epochs == [0, 1, 2, 3], "iter(source) is called once per epoch"


def test_continuous_sample_list_and_state_between_epochs(samples, thread_baseline):
    listing = sources.list_files(samples)
    p = PipelineBuilder().add_source(listing, continuous=True).pipe(ops.read_file()).add_sink(0).build(num_threads=2)
    with p.auto_stop():
        assert len(list(p)) == len(listing)
        assert p.state_dict() == {"epoch": 1, "done_below": 0, "done_above": []}
        assert len(list(p)) == len(listing)
    single = PipelineBuilder().add_source(listing).pipe(ops.read_file()).add_sink(3).build(num_threads=2)
    with single.auto_stop():
        assert len(list(single)) == len(listing)
        assert list(single) == []


def test_prefetched_epochs_of_a_sample_list_are_exact_and_resumable(samples, thread_baseline):
    """A `SampleList` source over several epochs: every epoch holds every file once, in order,
    and a state taken mid-epoch resumes with no repeat and no skip (with a sink room enough
    for the next epoch, were it prefetched)."""
    listing = sources.list_files(samples)

    def build():
        return (
            PipelineBuilder()
            .add_source(listing, continuous=True)
            .pipe(ops.read_file(), output_order="input")
            .add_sink(len(listing) + 2)  # room for the next epoch to be sourced ahead
            .build(num_threads=2)
        )

    p = build()
    with p.auto_stop():
        first = list(p)
        assert len(first) == len(listing)
        for epoch in range(1, 4):
            assert p.state_dict() == {"epoch": epoch, "done_below": 0, "done_above": []}
            assert list(p) == first, f"epoch {epoch}"
        it = p.get_iterator(timeout=SAFETY)
        taken = [next(it) for _ in range(3)]
        state = p.state_dict()
    assert state == {"epoch": 4, "done_below": 3, "done_above": []}
    again = build()
    again.load_state_dict(state)
    with again.auto_stop():
        assert taken + list(again) == first
        assert again.epoch == 5


def test_a_plain_iterable_is_never_iterated_before_its_epoch(thread_baseline):
    """A plain iterable may change between epochs (a sampler's `set_epoch`): it is iterated
    only once the consumer starts the epoch, so each epoch sees the change made before it."""

    class Shifted:
        offset = 0

        def __iter__(self):
            return iter(range(self.offset, self.offset + 5))

    src = Shifted()
    p = (
        PipelineBuilder()
        .add_source(src, continuous=True)
        .pipe(lambda x: x, output_order="input")
        .add_sink(32)  # room for the source to run ahead, if it did
        .build(num_threads=2)
    )
    with p.auto_stop():
        for epoch in range(4):
            src.offset = 100 * epoch
            assert list(p) == [100 * epoch + i for i in range(5)], f"epoch {epoch}"


# --- ops -----------------------------------------------------------------------------------


def test_async_generator_items_move_on_as_they_are_yielded(thread_baseline):
    """The generator waits for the consumer to receive its first item: collected into a list,
    the first item would never come."""
    received_first = threading.Event()

    async def agen(x):
        yield (x, "first")
        while not received_first.is_set():
            await asyncio.sleep(0.001)
        yield (x, "second")

    p = PipelineBuilder().add_source([7]).pipe(agen).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert p.get_item(timeout=SAFETY) == (7, "first")
        received_first.set()
        assert p.get_item(timeout=SAFETY) == (7, "second")
        with pytest.raises(EOFError):
            p.get_item(timeout=SAFETY)
    assert [s.name for s in p.get_stats().stages] == ["source", "agen"], "no extra flatten stage"


def test_async_generator_concurrency_failures_and_none(thread_baseline):
    async def agen(x):
        for i in range(x):
            await asyncio.sleep(0)
            yield None if i == 1 else (x, i)  # None is skipped, as in SPDL
        if x == 3:
            raise KeyError("three")

    got = run(PipelineBuilder().add_source([1, 2, 3, 4]).pipe(agen, concurrency=3))
    assert sorted(got) == [(1, 0), (2, 0), (3, 0), (3, 2), (4, 0), (4, 2), (4, 3)]
    with pytest.raises(ValueError, match="output_order"):
        PipelineBuilder().add_source([1]).pipe(agen, output_order="input")


def test_container_op_is_indexed():
    table = {1: "one", 2: "two"}
    assert sorted(run(PipelineBuilder().add_source([1, 2]).pipe(table))) == ["one", "two"]


def test_executor_runs_sync_ops_in_it(thread_baseline):
    def where(x):
        return threading.current_thread().name.split("_")[0], x

    def gen(x):
        yield x
        yield -x

    with ThreadPoolExecutor(2, thread_name_prefix="mine") as ex:
        got = run(PipelineBuilder().add_source(range(4)).pipe(where, executor=ex, concurrency=2))
        assert sorted(got) == [("mine", x) for x in range(4)]
        assert sorted(run(PipelineBuilder().add_source([1, 2]).pipe(gen, executor=ex))) == [-2, -1, 1, 2]

        async def aop(x):
            return x

        with pytest.raises(ValueError, match="executor"):
            PipelineBuilder().add_source([1]).pipe(aop, executor=ex)
        with pytest.raises(TypeError, match="executor"):
            PipelineBuilder().add_source([1]).pipe(ops.read_file(), executor=ex)
    with pytest.raises(TypeError, match="executor"):
        PipelineBuilder().add_source([1]).pipe(where, executor="threads")


def test_add_sink_zero_is_unlimited(thread_baseline):
    p = PipelineBuilder().add_source(range(500)).pipe(lambda x: x).add_sink(0).build(num_threads=1)
    with p.auto_stop():
        # Nothing consumed yet: every item fits in the sink.
        wait_for(lambda: p.get_stats().stages[1].items_out == 500, "500 items in the sink")
        assert p.get_stats().queues[-1].capacity == 2**30
        assert sorted(p) == list(range(500))
    with pytest.raises(ValueError):
        PipelineBuilder().add_sink(-1)


class Concat(Aggregator):
    """SPDL's documented example: join strings until their size reaches a threshold."""

    def __init__(self, threshold=10):
        self.threshold, self.buf, self.flushes = threshold, [], 0

    def accumulate(self, item):
        if item == "boom":
            raise ValueError("boom")
        self.buf.append(item)
        if sum(map(len, self.buf)) >= self.threshold:
            out, self.buf = "".join(self.buf), []
            return out
        return None

    def flush(self):
        self.flushes += 1
        out, self.buf = "".join(self.buf), []
        return out or None


def test_custom_aggregator(thread_baseline):
    words = ["a", "bb", "ccc", "dddd", "e", "ff"]
    assert run(PipelineBuilder().add_source(words).aggregate(Concat())) == ["abbcccdddd", "eff"]
    agg = Concat()
    assert run(PipelineBuilder().add_source(words).aggregate(agg, drop_last=True)) == ["abbcccdddd"]
    assert agg.flushes == 0, "drop_last: flush is not called"
    concat = Concat()
    p = PipelineBuilder().add_source(["a", "boom", "bbbbbbbbbb"]).aggregate(concat).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == ["abbbbbbbbbb"]
        # SPDL's stage name for an aggregator: aggregate(op=<its repr>, drop_last=...)
        assert p.get_stats().stage(f"aggregate(op={concat!r}, drop_last=False)").failures == 1


def test_aggregator_is_flushed_at_each_epoch_of_a_continuous_source(thread_baseline):
    agg = Concat(threshold=100)
    p = PipelineBuilder().add_source(["x", "y"], continuous=True).aggregate(agg).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == ["xy"]
        assert list(p) == ["xy"]
    assert agg.flushes == 2


def test_collate_aggregator_and_int_are_the_same(thread_baseline):
    assert run(PipelineBuilder().add_source(range(7)).aggregate(Collate(3))) == [[0, 1, 2], [3, 4, 5], [6]]
    assert run(PipelineBuilder().add_source(range(7)).aggregate(3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError):
        PipelineBuilder().aggregate("3")


def test_collate_takes_images_from_python_ops(samples, thread_baseline):
    paths = [str(p) for p in sorted(samples.glob("*.jpg"))[:4]]

    def load(path):
        return io.load_image(path, width=32, height=24)

    p = PipelineBuilder().add_source(paths).pipe(load, output_order="input").aggregate(4).pipe(ops.collate())
    (batch,) = run(p)
    arr = np.asarray(batch)
    assert arr.shape == (4, 24, 32, 3)
    for i, path in enumerate(paths):
        assert np.array_equal(arr[i], np.asarray(io.load_image(path, width=32, height=24)))

    def array(i):
        return np.full((5, 6, 3), i, dtype=np.uint8)

    (batch,) = run(PipelineBuilder().add_source(range(3)).pipe(array, output_order="input").aggregate(3).pipe(ops.collate()))
    assert np.array_equal(np.asarray(batch)[:, 0, 0, 0], [0, 1, 2])
    bad = PipelineBuilder().add_source([0]).pipe(lambda i: np.zeros((2, 2, 3), np.float32)).aggregate(1)
    p = bad.pipe(ops.collate(), max_failures=0).add_sink(1).build(num_threads=1)
    with p.auto_stop(), pytest.raises(PipelineFailure, match="uint8"):
        list(p)


# --- Pipeline ------------------------------------------------------------------------------


def test_start_and_stop_timeouts(thread_baseline):
    p = PipelineBuilder().add_source([1, 2]).add_sink(3).build(num_threads=1)
    p.start(timeout=SAFETY, daemon=True)
    assert sorted(p) == [1, 2]
    p.stop(timeout=SAFETY)
    with pytest.raises(TypeError):
        p.start(not_a_keyword=1)


def test_stop_raises_an_unobserved_failure_once(thread_baseline):
    def boom(x):
        raise RuntimeError("boom")

    p = PipelineBuilder().add_source(range(10)).pipe(boom, max_failures=0).add_sink(3).build(num_threads=1)
    p.start()
    wait_for(lambda: p.get_stats().stage("boom").failures >= 1, "the failure")
    with pytest.raises(PipelineFailure, match="max_failures=0"):
        p.stop()
    p.stop()  # only once
    # Observed by a read: stop() does not raise it again.
    p = PipelineBuilder().add_source(range(10)).pipe(boom, max_failures=0).add_sink(3).build(num_threads=1)
    with pytest.raises(PipelineFailure):
        list(p)
    with pytest.raises(PipelineFailure):
        p.get_item(), "later reads raise the same failure"
    p.stop()


def test_get_stats_after_stop_gives_the_final_figures(thread_baseline):
    p = PipelineBuilder().add_source(range(20)).pipe(fail_on({3}), name="op").add_sink(3).build(num_threads=2)
    with p.auto_stop():
        assert len(list(p)) == 19
    stats = p.get_stats()
    op = stats.stage("op")
    assert (op.items_in, op.items_out, op.failures, op.tasks) == (20, 19, 1, 20)
    assert any("bad 3" in e for e in p.last_errors())
    q = stats.queues[-1]
    assert q.items >= 19 and q.elapsed > 0  # items, plus the skipped one's and the epoch's markers
    assert 0 <= q.p90_put_wait <= q.p99_put_wait and 0 <= q.p90_get_wait <= q.p99_get_wait


# --- hooks and stats -----------------------------------------------------------------------


class Counting(TaskHook):
    def __init__(self, info):
        self.info = info
        self.stage_enter = self.stage_exit = 0
        self.inputs, self.times, self.errors = [], [], []

    @asynccontextmanager
    async def stage_hook(self):
        self.stage_enter += 1
        try:
            yield
        finally:
            self.stage_exit += 1

    @asynccontextmanager
    async def task_hook(self, input_item=None):
        t0 = time.monotonic()
        try:
            yield
        except StopAsyncIteration:
            raise
        except Exception as e:
            self.errors.append(type(e).__name__)
            raise
        finally:
            self.inputs.append(input_item)
            self.times.append(time.monotonic() - t0)


def test_task_hooks_run_once_per_task_with_the_task_inside(samples, thread_baseline):
    made: dict[str, Counting] = {}

    def factory(info):
        made[info.stage_name] = h = Counting(info)
        return [h]

    def slow(x):
        time.sleep(0.02)
        if x == 4:
            raise ValueError("four")
        return str(sorted(samples.glob("*.jpg"))[x])

    async def aop(path):
        await asyncio.sleep(0.01)
        return path

    p = (
        PipelineBuilder()
        .add_source(range(6))
        .pipe(slow, concurrency=2)
        .pipe(aop, concurrency=3)
        .pipe(ops.read_file())
        .aggregate(2)
        .disaggregate()
        .aggregate(5)
        .add_sink(3)
        .build(num_threads=2, task_hook_factory=factory)
    )
    with p.auto_stop():
        batches = list(p)
        assert sum(map(len, batches)) == 5
        assert all(h.stage_enter == 1 and h.stage_exit == 1 for h in made.values()), "single pass: stage ended"
    assert sorted(made["slow"].inputs) == list(range(6))
    assert made["slow"].errors == ["ValueError"]
    assert min(made["slow"].times) >= 0.02, "the task runs inside task_hook"
    assert len(made["aop"].inputs) == 5 and min(made["aop"].times) >= 0.01
    assert made["read_file"].inputs == [None] * 5, "native op: called once per task, no Python input"
    assert len(made["aggregate(op=collate(2), drop_last=False)"].inputs) == 5, "aggregate with hooks: one task per accumulate"
    # disaggregate with hooks: one task per step, the last (StopAsyncIteration) of each of the
    # 3 lists included, as SPDL's async generator stages.
    assert len(made["disaggregate"].inputs) == 5 + 3
    assert all(isinstance(x, list) for x in made["disaggregate"].inputs)
    assert all(h.stage_exit == 1 for h in made.values()), "stage_hook exits once"


def test_a_failing_stage_hook_fails_the_pipeline(thread_baseline):
    class Broken(TaskHook):
        @asynccontextmanager
        async def stage_hook(self):
            raise OSError("no metrics server")
            yield

        @asynccontextmanager
        async def task_hook(self, input_item=None):
            yield

    p = PipelineBuilder().add_source([1]).pipe(str).add_sink(1).build(num_threads=1, task_hook_factory=lambda i: [Broken()])
    with p.auto_stop():
        with pytest.raises(PipelineFailure, match="no metrics server") as info:
            p.get_item(timeout=SAFETY)
        assert isinstance(info.value.exceptions[0], OSError)


def test_iterating_a_finished_single_pass_pipeline_again_warns_once():
    # SPDL yields nothing the second time; a training loop would silently run empty epochs.
    p = PipelineBuilder().add_source([1, 2]).add_sink(2).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [1, 2]
        with pytest.warns(RuntimeWarning, match=r"continuous=True.*get_iterator\(\)"):
            assert list(p) == []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert list(p) == []  # once per pipeline
    q = PipelineBuilder().add_source([1, 2], continuous=True).add_sink(2).build(num_threads=1)
    with q.auto_stop(), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(q) == [1, 2] and list(q) == [1, 2]


def test_stage_infos_given_to_the_factory():
    infos = []
    p = (
        PipelineBuilder()
        .add_source([1])
        .pipe(lambda x: x, name="a", concurrency=3)
        .aggregate(1)
        .add_sink(1)
        .build(num_threads=1, stage_id=10, task_hook_factory=lambda info: infos.append(info) or [])
    )
    with p.auto_stop():
        assert list(p) == [[1]]
    # As SPDL: only a pipe stage running more than one task at a time has a concurrency.
    assert [(i.stage_id, i.stage_name, i.concurrency) for i in infos] == [
        ("11", "a", 3),
        ("12", "aggregate(op=collate(1), drop_last=False)", None),
    ]
    assert infos[0].pipeline_id == infos[1].pipeline_id
    assert str(infos[0]) == f"{infos[0].pipeline_id}:11:a[3]"
    assert isinstance(infos[0], StageInfo)


def recording(base):
    """``(cls, reports, reported)``: a subclass of ``base`` (``TaskStatsHook``, ``StatsQueue``)
    whose interval reports are appended to the list ``reports``, each setting the event
    ``reported``."""
    reports = []
    reported = threading.Event()

    class Recording(base):
        async def interval_stats_callback(self, stats):
            reports.append(stats)
            reported.set()

    return Recording, reports, reported


def test_task_stats_hook_is_fed_by_the_engine(thread_baseline):
    """Without a per-task hook, native stages take no GIL; the hook still gets the figures."""
    hooks = []
    Laps, laps, got_lap = recording(TaskStatsHook)

    def factory(info):
        h = Laps(info, interval=0.01)
        hooks.append(h)
        return [h]

    def op(x):
        if x == 0:
            got_lap.wait(SAFETY)  # the first report comes while the stage runs
        if x == 7:
            raise ValueError("seven")
        return x

    p = PipelineBuilder().add_source(range(10)).pipe(op, name="op").add_sink(3).build(num_threads=1, task_hook_factory=factory)
    with p.auto_stop():
        assert len(list(p)) == 9
    (h,) = hooks
    assert (h.num_tasks, h.num_success) == (10, 9)
    assert h.ave_time > 0
    assert laps and all(isinstance(s, TaskPerfStats) for s in laps)
    assert sum(s.num_tasks for s in laps) <= 10


def test_default_hooks_cost_native_stages_nothing(samples, caplog, thread_baseline):
    listing = sources.list_files(samples)
    p = PipelineBuilder().add_source(listing).pipe(ops.read_file(), concurrency=2).add_sink(3).build(num_threads=2)
    before = spdl_rs._native._gil_acquisitions()
    with caplog.at_level(logging.INFO, logger="spdl_rs.pipeline"), p.auto_stop():
        assert len(list(p)) == len(listing)
    assert spdl_rs._native._gil_acquisitions() == before
    # The default TaskStatsHook and StatsQueue log their final figures, as SPDL's.
    text = caplog.text
    assert f"Completed {len(listing):5d} tasks" in text and "Occupancy rate" in text


def test_stats_queue_reports_queue_perf_stats(thread_baseline):
    Q, got, reported = recording(StatsQueue)

    def op(x):
        if x == 0:
            reported.wait(SAFETY)
        return x

    def make(info, buffer_size):
        return Q(info, buffer_size=buffer_size, interval=0.01)

    p = PipelineBuilder().add_source(range(20)).pipe(op).add_sink(3).build(num_threads=1, queue_class=make)
    with p.auto_stop():
        assert sorted(p) == list(range(20))
    assert got
    s = got[0]
    assert s.elapsed > 0 and s.num_items >= 0 and 0.0 <= s.occupancy_rate <= 1.0
    assert s.qps == (s.num_items / s.elapsed)
    assert QueuePerfStats(1.0, 10, 0, 0, 0, 0, 0, 0, 0.5).qps == 10.0


def test_queue_class_overriding_put_is_refused():
    class Bad(AsyncQueue):
        async def put(self, item):
            pass

    with pytest.raises(TypeError, match="put"):
        PipelineBuilder().add_source([1]).add_sink(1).build(num_threads=1, queue_class=Bad)
    with pytest.raises(TypeError, match="AsyncQueue"):
        PipelineBuilder().add_source([1]).add_sink(1).build(num_threads=1, queue_class=dict)


def test_queue_class_stage_hook_runs(thread_baseline):
    events = []

    class Q(AsyncQueue):
        @asynccontextmanager
        async def stage_hook(self):
            events.append(("enter", self.info.stage_name, self.buffer_size))
            yield
            events.append(("exit", self.info.stage_name))

    p = PipelineBuilder().add_source([1, 2]).pipe(lambda x: x, name="op", concurrency=2).add_sink(5)
    p = p.build(num_threads=1, queue_class=Q)
    with p.auto_stop():
        assert sorted(p) == [1, 2]
    # As SPDL: the queue class stands for every queue, the sink's too (SPDL's size 2 between
    # stages, the sink's own size).
    assert sorted(e for e in events if e[0] == "enter") == [("enter", "op", 2), ("enter", "sink", 5), ("enter", "src", 2)]
    assert ("exit", "op") in events and ("exit", "sink") in events


def test_sentinels_are_never_items():
    assert not is_eof(None) and not is_epoch_end(0)
    seen = run(PipelineBuilder().add_source([1, 2], continuous=False).pipe(lambda x: (is_eof(x), is_epoch_end(x))))
    assert seen == [(False, False), (False, False)]


# --- config, background tasks, create_task -------------------------------------------------


def test_config_defaults_round_trip(monkeypatch, thread_baseline):
    assert config.get_default_hook_class() is TaskStatsHook
    assert config.get_default_queue_class() is StatsQueue
    made = []

    class Mine(TaskStatsHook):
        def __init__(self, info, interval=-1):
            super().__init__(info, interval)
            made.append(info.stage_name)

    try:
        config.set_default_hook_class(Mine)
        run(PipelineBuilder().add_source([1]).pipe(lambda x: x, name="op"))
        assert made == ["op"]
        config.set_default_hook_class(None)
        assert config.get_default_hook_class() is None
        assert run(PipelineBuilder().add_source([1]).pipe(lambda x: x)) == [1]
    finally:
        config.set_default_hook_class()
    built = []
    try:
        config.set_default_build_callback(built.append)
        b = PipelineBuilder().add_source([1]).pipe(str, name="s")
        run(b)
        assert repr(built[0]).split("\n")[2:] == [" - Pipes:", "   - s(concurrency=1)", " - Sink: SinkConfig(buffer_size=3)"]
    finally:
        config.set_default_build_callback(None)
    for setter, getter, value in [
        (config.set_default_profile_hook, config.get_default_profile_hook, object()),
        (config.set_default_profile_callback, config.get_default_profile_callback, print),
    ]:
        setter(value)
        assert getter() is value
        setter(None)
    monkeypatch.setenv("SPDL_PIPELINE_DIAGNOSTIC_MODE", "1")
    monkeypatch.setenv("SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS", "12")
    assert config.is_diagnostic_mode_enabled() and config.diagnostic_mode_num_sources() == 12
    monkeypatch.setenv("SPDL_PIPELINE_DIAGNOSTIC_MODE", "off")
    assert not config.is_diagnostic_mode_enabled()
    with pytest.raises(TypeError):
        config.set_default_queue_class(list)  # type: ignore[arg-type]

    class BadQ(StatsQueue):
        def get_nowait(self):
            pass

    # A queue class taking items is for region workers (items pass through it there): taken as
    # the default, refused by a build in this process, where items never pass through Python.
    config.set_default_queue_class(BadQ)
    try:
        with pytest.raises(TypeError, match="overrides get_nowait"):
            PipelineBuilder().add_source([1]).add_sink(1).build(num_threads=1)
    finally:
        config.set_default_queue_class(StatsQueue)


def test_background_tasks_run_with_the_pipeline(thread_baseline):
    started = threading.Event()
    cancelled = []

    class Monitor(BackgroundTask):
        async def run(self):
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

    try:
        config.set_default_background_tasks([Monitor])
        assert config.get_default_background_tasks() == [Monitor]
        p = PipelineBuilder().add_source([1]).add_sink(1).build(num_threads=1)
        with p.auto_stop():
            assert started.wait(SAFETY)
            assert list(p) == [1]
        assert cancelled == [True]
    finally:
        config.set_default_background_tasks(None)


def test_create_task_logs_failures(caplog, monkeypatch):
    async def boom():
        raise ValueError("kaboom")

    async def main():
        t = create_task(boom(), name="mytask")
        await asyncio.gather(t, return_exceptions=True)
        await asyncio.sleep(0)

    config.set_compact_log(True)
    try:
        with caplog.at_level(logging.ERROR, logger="spdl_rs.pipeline"):
            asyncio.run(main())
    finally:
        config.set_compact_log(None)
    assert "mytask" in caplog.text and "ValueError: kaboom" in caplog.text


# --- profiling -----------------------------------------------------------------------------


def test_profile_pipeline_sweeps_each_stage(thread_baseline):
    from spdl_rs.pipeline import ProfileHook, ProfileResult, profile_pipeline

    calls = []

    class Hook(ProfileHook):
        @contextmanager
        def stage_profile_hook(self, stage, concurrency):
            calls.append((stage, concurrency))
            yield

        @contextmanager
        def pipeline_profile_hook(self):
            calls.append("pipeline")
            yield

    def double(x):
        return 2 * x

    b = PipelineBuilder().add_source(range(100)).pipe(double, concurrency=2).aggregate(10).add_sink(3)
    seen = []
    results = profile_pipeline(b.get_config(), num_inputs=40, callback=seen.append, hook=Hook())
    assert [r.name for r in results] == ["double", "aggregate(op=collate(10), drop_last=False)"] and seen == list(results)
    assert all(isinstance(r, ProfileResult) for r in results)
    assert [s.concurrency for s in results[0].stats] == [32, 16, 8, 4, 1]
    assert [s.concurrency for s in results[1].stats] == [1]
    assert all(s.qps > 0 and 0.0 <= s.occupancy_rate <= 1.0 for r in results for s in r.stats)
    assert results[0].recommended_concurrency in (32, 16, 8, 4, 1)
    best = max(s.qps for s in results[0].stats)
    rec = next(s for s in results[0].stats if s.concurrency == results[0].recommended_concurrency)
    assert rec.qps >= 0.95 * best
    assert calls[0] == "pipeline" and ("double", 32) in calls and ("aggregate(op=collate(10), drop_last=False)", 1) in calls
    with pytest.raises(RuntimeError, match="Sink is not set"):
        PipelineBuilder().add_source([1]).get_config()


def test_diagnostic_mode_profiles_then_exits(monkeypatch):
    monkeypatch.setenv("SPDL_PIPELINE_DIAGNOSTIC_MODE", "1")
    monkeypatch.setenv("SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS", "5")
    p = PipelineBuilder().add_source(range(10)).pipe(str).add_sink(3).build(num_threads=1)
    with pytest.raises(SystemExit):
        with p.auto_stop():
            list(p)


# --- signatures ----------------------------------------------------------------------------

SPDL_SIGNATURES = {
    PipelineBuilder.add_source: ["self", "source", "continuous"],
    PipelineBuilder.pipe: ["self", "op", "concurrency", "executor", "name", "output_order", "max_failures"],
    PipelineBuilder.aggregate: ["self", "input", "drop_last"],
    PipelineBuilder.disaggregate: ["self"],
    PipelineBuilder.add_sink: ["self", "buffer_size"],
    PipelineBuilder.build: [
        "self",
        "num_threads",
        "max_failures",
        "report_stats_interval",
        "queue_class",
        "task_hook_factory",
        "stage_id",
        "use_thread_output_queue",
    ],
    spdl_rs.pipeline.Pipeline.stop: ["self", "timeout"],
    spdl_rs.pipeline.Pipeline.auto_stop: ["self", "timeout"],
    spdl_rs.pipeline.Pipeline.get_item: ["self", "timeout"],
    spdl_rs.pipeline.Pipeline.get_iterator: ["self", "timeout"],
    TaskStatsHook.__init__: ["self", "info", "interval"],
    StatsQueue.__init__: ["self", "info", "buffer_size", "interval"],
    AsyncQueue.__init__: ["self", "info", "buffer_size"],
    spdl_rs.pipeline.profile_pipeline: ["cfg", "num_inputs", "callback", "hook"],
    spdl_rs.tracing: ["output", "buffer_size", "process_name", "enable"],
    spdl_rs.trace_event: ["name"],
    spdl_rs.trace_counter: ["i", "val"],
    create_task: [
        "coro",
        "name",
        "log_cancelled",
        "suppress_repeated_logs",
        "suppression_threshold",
        "suppression_warning_interval",
    ],
}


# spdl_rs-only keywords: after SPDL's parameters, keyword-only, defaulting to SPDL's behaviour.
SPDL_RS_ONLY = {PipelineBuilder.build: ["prefetch_epochs"]}


@pytest.mark.parametrize("fn", list(SPDL_SIGNATURES), ids=lambda f: f.__qualname__)
def test_signatures_match_spdl(fn):
    params = inspect.signature(fn).parameters
    extras = SPDL_RS_ONLY.get(fn, [])
    assert list(params) == SPDL_SIGNATURES[fn] + extras
    for name in extras:
        assert params[name].kind is params[name].KEYWORD_ONLY and params[name].default is False
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), "no **kwargs swallow"


def test_every_spdl_keyword_is_accepted_and_unknown_ones_are_rejected(thread_baseline):
    b = PipelineBuilder().add_source([1, 2], continuous=False)
    b.pipe(lambda x: x, concurrency=2, executor=None, name="id", output_order="input", max_failures=Fraction(1, 2))
    b.aggregate(2, drop_last=False).disaggregate().add_sink(buffer_size=2)
    p = b.build(
        num_threads=1,
        max_failures=-1,
        report_stats_interval=-1,
        queue_class=StatsQueue,
        task_hook_factory=lambda info: [TaskStatsHook(info)],
        stage_id=0,
        use_thread_output_queue=True,
    )
    p.start(timeout=SAFETY, daemon=False)
    assert list(p.get_iterator(timeout=SAFETY)) == [1, 2]
    p.stop(timeout=SAFETY)
    for call in [
        lambda: PipelineBuilder().add_source([1], shuffle=True),
        lambda: PipelineBuilder().pipe(str, executor_config=None),
        lambda: PipelineBuilder().aggregate(2, pad=True),
        lambda: PipelineBuilder().add_sink(3, timeout=1),
        lambda: PipelineBuilder().add_source([1]).build(num_threads=1, prefetch=2),
    ]:
        with pytest.raises(TypeError, match="unexpected keyword"):
            call()


def test_prefetch_epochs_loads_the_next_epoch_while_this_one_ends(samples, thread_baseline):
    """``build(prefetch_epochs=True)`` (spdl_rs only): epoch e + 1's first items load while the
    consumer takes epoch e's tail; each epoch still delivers exactly its items."""
    listing = sources.list_files(samples)
    calls = []

    def tag(path):
        calls.append(path)
        return path

    def build(prefetch):
        return (
            PipelineBuilder()
            .add_source(listing, continuous=True)
            .pipe(tag, output_order="input")
            .add_sink(len(listing) + 1)
            .build(num_threads=2, prefetch_epochs=prefetch)
        )

    for prefetch in (False, True):
        calls.clear()
        p = build(prefetch)
        with p.auto_stop():
            first = list(p.get_iterator(timeout=SAFETY))
            # The first epoch is over; the second loads only when prefetching.
            deadline = time.monotonic() + SAFETY
            while prefetch and len(calls) < 2 * len(listing) and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(0.05)
            assert len(calls) == (2 if prefetch else 1) * len(listing), prefetch
            second = list(p.get_iterator(timeout=SAFETY))
            assert len(first) == len(second) == len(listing)
            assert sorted(map(str, first)) == sorted(map(str, second))
            assert p.state_dict()["epoch"] == 2

    with pytest.raises(ValueError, match="continuous source"):
        PipelineBuilder().add_source(listing).pipe(tag).add_sink(1).build(num_threads=1, prefetch_epochs=True)
    with pytest.raises(TypeError, match="prefetch_epochs must be a bool"):
        PipelineBuilder().add_source(listing, continuous=True).pipe(tag).add_sink(1).build(num_threads=1, prefetch_epochs=1)


def test_final_stats_names_and_counts_as_spdl(caplog):
    # The stats lines tools parse: SPDL numbers a Merge's sub-pipelines within the merging
    # pipeline (no sink of their own), reports the merge, a path_variants router and its
    # merge with no task, each path's queue and stages with what the path received, every
    # queue with its end marker but the sink's.
    def neg(x):
        return -x

    def inc(x):
        return x + 1

    def as_list(x):
        return x if isinstance(x, list) else [x]

    def keep(x):
        return x

    negs = PipelineConfig(src=SourceConfig(range(4)), pipes=[Pipe(neg), Aggregate(2)], sink=SinkConfig(2))
    incs = PipelineConfig(src=SourceConfig(range(3)), pipes=[Pipe(inc, concurrency=2)], sink=SinkConfig(2))
    variants = PathVariants(lambda x: 0 if x < 0 else 1, [[Pipe(keep, name="low")], [Pipe(keep, name="high"), Pipe(keep, name="high2")]])
    cfg = PipelineConfig(src=Merge([negs, incs]), pipes=[Pipe(as_list), Disaggregate(), variants], sink=SinkConfig(8))
    caplog.set_level(logging.INFO, logger="spdl_rs.pipeline")
    p = build_pipeline(cfg, num_threads=2)
    with p.auto_stop():
        assert sorted(p) == [-3, -2, -1, 0, 1, 2, 3]
    pid = None
    got = {}
    for rec in caplog.records:
        m = re.match(r"\[(\d+):(\d+):(.*)\]\t(?:Completed|Processed) +(\d+) ", rec.getMessage())
        if m:
            pid = m.group(1)
            got[f"{m.group(2)}:{m.group(3)}"] = int(m.group(4))
    agg = "aggregate(op=collate(2), drop_last=False)"
    assert got == {
        "0:merge": 0, "0:merge_queue": 6,
        "1:src_queue": 5, "2:neg": 4, "2:neg_queue": 5, f"3:{agg}": 5, f"3:{agg}_queue": 3,
        "4:src_queue": 4, "5:inc[2]": 3, "5:inc[2]_queue": 4,
        "6:as_list": 5, "6:as_list_queue": 6, "7:disaggregate": 7, "7:disaggregate_queue": 8,
        "8:path_variants": 0, "8:path_variants_path0_queue": 4, "8:path_variants_path1_queue": 5,
        "9:low": 3, "9:low_queue": 4, "10:high": 4, "10:high_queue": 5, "11:high2": 4, "11:high2_queue": 5,
        "12:path_variants_merge": 0, "12:path_variants_merge_queue": 8, "13:sink_queue": 7,
    }, got
    assert pid is not None


def test_each_failed_task_is_logged_as_spdl(caplog):
    # SPDL logs each failed task at ERROR, "Task [<stage>:<n>] failed." with the traceback,
    # n counting the stage's tasks from 1.
    def odd_fails(x):
        if x % 2:
            raise ValueError(f"odd {x}")
        return x

    async def three_fails(x):
        if x == 3:
            raise KeyError(x)
        return x

    caplog.set_level(logging.INFO, logger="spdl_rs.pipeline")
    b = PipelineBuilder().add_source(range(5)).pipe(three_fails).pipe(odd_fails)
    p = b.add_sink(5).build(num_threads=1)
    with p.auto_stop(), pytest.warns(RuntimeWarning, match=r"2 item\(s\) failed"):
        assert list(p) == [0, 2, 4]
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    got = sorted(r.getMessage() for r in failed)
    assert len(got) == 2
    assert re.fullmatch(r"Task \[\d+:1:three_fails:4\] failed\.", got[0]), got
    assert re.fullmatch(r"Task \[\d+:2:odd_fails:2\] failed\.", got[1]), got
    assert {type(r.exc_info[1]) for r in failed} == {KeyError, ValueError}
