"""Pipeline semantics: SPDL 0.8's names and behaviour."""

import asyncio
import gc
import itertools
import random
import subprocess
import sys
import threading
import time

import pytest

from spdl_rs.pipeline import Pipeline, PipelineBuilder, PipelineFailure

from conftest import os_threads, wait_threads


def build(src, *stages, num_threads=4, sink=3, continuous=False, **build_kw) -> Pipeline:
    b = PipelineBuilder().add_source(src, continuous=continuous)
    for s in stages:
        if isinstance(s, tuple):
            op, kw = s
            b = b.pipe(op, **kw)
        else:
            b = b.pipe(s)
    return b.add_sink(sink).build(num_threads=num_threads, **build_kw)


def test_readme_example_spdl_intro(thread_baseline):
    p = (
        PipelineBuilder()
        .add_source(range(12))
        .pipe(lambda x: 2 * x)
        .pipe(lambda x: x + 1)
        .aggregate(3)
        .add_sink(3)
        .build(num_threads=1)
    )
    with p.auto_stop():
        assert list(p) == [[1, 3, 5], [7, 9, 11], [13, 15, 17], [19, 21, 23]]


def test_output_order_input_restores_source_order(thread_baseline):
    def slow(x):
        time.sleep(random.random() * 0.01)
        return x

    p = build(range(100), (slow, dict(concurrency=8, output_order="input")))
    with p.auto_stop():
        assert list(p) == list(range(100))


def test_output_order_completion_lets_fast_items_pass(thread_baseline):
    def op(x):
        time.sleep(0.3 if x == 0 else 0.0)
        return x

    p = build(range(8), (op, dict(concurrency=4)))
    with p.auto_stop():
        out = list(p)
    assert sorted(out) == list(range(8))
    assert out[0] != 0, "completion order: item 0 is slow and should not come first"


def test_returning_none_filters(thread_baseline):
    p = build(range(20), lambda x: x if x % 3 == 0 else None)
    with p.auto_stop():
        assert sorted(p) == [0, 3, 6, 9, 12, 15, 18]
        stats = p.get_stats()
    assert stats.stage("<lambda>").filtered == 13


def test_generator_op_passes_each_yield(thread_baseline):
    def twice(x):
        yield x
        yield x + 100

    p = build(range(5), (twice, dict(output_order="input")))
    with p.auto_stop():
        assert list(p) == [0, 100, 1, 101, 2, 102, 3, 103, 4, 104]


def test_python_op_runs_on_a_worker_thread(thread_baseline):
    main = threading.get_ident()
    p = build(range(4), lambda x: threading.get_ident())
    with p.auto_stop():
        idents = set(p)
    assert main not in idents


def test_async_op_runs_concurrently_on_an_event_loop(thread_baseline):
    loops = set()

    async def op(x):
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.2)
        return x * 10

    p = build(range(16), (op, dict(concurrency=16, output_order="input")))
    t0 = time.monotonic()
    with p.auto_stop():
        assert list(p) == [x * 10 for x in range(16)]
    assert time.monotonic() - t0 < 1.5, "16 x 0.2 s with concurrency 16 should overlap"
    assert len(loops) == 1


def test_async_generator_op(thread_baseline):
    async def op(x):
        for i in range(x):
            await asyncio.sleep(0)
            yield (x, i)

    # One generator at a time (concurrency=1): its items in order (SPDL refuses
    # output_order="input" for an async generator).
    p = build([1, 2, 3], op)
    with p.auto_stop():
        assert list(p) == [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2)]


def test_async_source(thread_baseline):
    class Source:
        def __aiter__(self):
            return self.gen()

        async def gen(self):
            for i in range(5):
                await asyncio.sleep(0.001)
                yield i

    p = build(Source(), lambda x: x + 1, continuous=True)
    with p.auto_stop():
        assert sorted(p) == [1, 2, 3, 4, 5]
        assert sorted(p) == [1, 2, 3, 4, 5], "an async iterable is iterated again each epoch"


def test_async_op_failure_and_none(thread_baseline):
    async def op(x):
        if x == 3:
            raise KeyError("three")
        return None if x % 2 else x

    p = build(range(8), (op, dict(concurrency=4)))
    with p.auto_stop():
        assert sorted(p) == [0, 2, 4, 6]
        assert p.get_stats().stage("op").failures == 1


def test_failures_within_budget_drop_items(thread_baseline):
    def op(x):
        if x % 10 == 0:
            raise ValueError(f"bad sample {x}")
        return x

    p = build(range(50), (op, dict(concurrency=2, max_failures=10)))
    with p.auto_stop():
        out = sorted(p)
        stats = p.get_stats()
        errors = p.last_errors()
    assert out == [x for x in range(50) if x % 10]
    assert stats.stage("op").failures == 5
    assert any("ValueError: bad sample" in e for e in errors), errors


def test_stage_max_failures_raises_pipeline_failure_after_items(thread_baseline):
    def op(x):
        if x >= 5:
            raise ValueError(f"bad sample {x}")
        return x

    p = build(range(100), (op, dict(max_failures=2, name="decode", output_order="input")), num_threads=1)
    got = []
    with p.auto_stop():
        with pytest.raises(PipelineFailure) as info:
            for x in p:
                got.append(x)
    assert got == [0, 1, 2, 3, 4], "items produced before the failures come first"
    err = info.value
    assert isinstance(err, ExceptionGroup)
    assert err.stage == "decode"
    assert "decode" in str(err) and "max_failures=2" in str(err)
    assert all(isinstance(e, ValueError) for e in err.exceptions)
    assert any("bad sample" in str(e) for e in err.exceptions)


def test_pipeline_failure_supports_except_star():
    def op(x):
        raise TypeError("nope")

    p = build(range(10), op, max_failures=0)
    caught = []
    with p.auto_stop():
        try:
            list(p)
        except* TypeError as eg:
            caught.extend(eg.exceptions)
    assert caught and isinstance(caught[0], TypeError)


def test_build_max_failures_counts_all_stages(thread_baseline):
    p = (
        PipelineBuilder()
        .add_source(range(100))
        .pipe(lambda x: 1 // (x % 7))
        .add_sink(3)
        .build(num_threads=2, max_failures=3)
    )
    with p.auto_stop():
        with pytest.raises(PipelineFailure, match="max_failures=3"):
            list(p)


def test_source_failure_raises_pipeline_failure(thread_baseline):
    def source():
        yield 1
        yield 2
        raise OSError("listing broke")

    p = build(source(), lambda x: x)
    with p.auto_stop():
        with pytest.raises(PipelineFailure) as info:
            list(p)
    assert info.value.stage == "source"
    assert isinstance(info.value.exceptions[0], OSError)


def test_get_item_timeout_then_item(thread_baseline):
    def slow(x):
        time.sleep(0.5)
        return x

    p = build([1], slow)
    with p.auto_stop():
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            p.get_item(timeout=0.1)
        assert time.monotonic() - t0 < 0.4
        assert p.get_item(timeout=5) == 1
        with pytest.raises(EOFError):
            p.get_item(timeout=5)


def test_get_iterator_timeout(thread_baseline):
    p = build([1, 2], lambda x: time.sleep(1) or x)
    with p.auto_stop():
        with pytest.raises(TimeoutError):
            for _ in p.get_iterator(timeout=0.05):
                pass


def test_start_twice_raises_and_stop_is_idempotent(thread_baseline):
    p = build(range(3), lambda x: x)
    p.start()
    with pytest.raises(RuntimeError):
        p.start()
    p.stop()
    p.stop()
    with pytest.raises(EOFError):
        p.get_item()


def test_early_break_then_stop_is_prompt_and_leaks_no_thread(thread_baseline):
    p = build(itertools.count(), (lambda x: x, dict(concurrency=4)), num_threads=4)
    with p.auto_stop():
        for i, _ in enumerate(p):
            if i == 10:
                break
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 2.0


def test_stop_from_another_thread_wakes_the_consumer(thread_baseline):
    p = build([1], lambda x: time.sleep(1.5))
    p.start()
    threading.Timer(0.3, p.stop).start()
    t0 = time.monotonic()
    with pytest.raises(EOFError):
        p.get_item()
    assert time.monotonic() - t0 < 3.0
    p.stop()


def test_multi_epoch(thread_baseline):
    p = build([1, 2, 3], (lambda x: x * 2, dict(output_order="input")), continuous=True)
    with p.auto_stop():
        for _ in range(3):
            assert list(p) == [2, 4, 6]
        assert p.epoch == 3


def test_iterator_source_is_exhausted_after_one_epoch(thread_baseline):
    p = build(iter([1, 2, 3]), lambda x: x, continuous=True)
    with p.auto_stop():
        assert sorted(p) == [1, 2, 3]
        assert list(p) == []


def test_aggregate_disaggregate_drop_last(thread_baseline):
    b = PipelineBuilder().add_source(range(10)).aggregate(4, drop_last=True)
    p = b.add_sink(2).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    p = PipelineBuilder().add_source(range(10)).aggregate(3).disaggregate().add_sink(2).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == list(range(10))


def test_stats_are_python_objects(thread_baseline):
    p = build(range(30), (lambda x: x, dict(name="ident", concurrency=2)))
    with p.auto_stop():
        list(p)
        stats = p.get_stats()
    names = [s.name for s in stats.stages]
    assert names[0] == "source" and "ident" in names
    ident = stats.stage("ident")
    assert (ident.items_in, ident.items_out, ident.failures, ident.concurrency) == (30, 30, 0, 2)
    assert ident.task_time.mean >= 0 and 0 <= ident.busy_fraction <= 1
    assert stats.queues and stats.queues[-1].name.endswith("->sink")
    assert "ident" in str(stats)


def test_consumer_waits_with_the_gil_released(thread_baseline):
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    p = build([1], lambda x: time.sleep(0.6) or x)
    t = threading.Thread(target=spin)
    t.start()
    try:
        with p.auto_stop():
            before = counter[0]
            assert p.get_item() == 1
            during = counter[0] - before
    finally:
        stop.set()
        t.join()
    assert during > 10_000, "a Python thread must run while the consumer waits"


def test_garbage_collected_pipeline_stops(thread_baseline):
    base = os_threads()
    p = build(itertools.count(), lambda x: x, num_threads=3)
    p.get_item()
    assert os_threads() > base
    del p
    gc.collect()
    assert wait_threads(base) <= base


def test_running_pipeline_at_exit_does_not_hang():
    code = (
        "import itertools, time\n"
        "from spdl_rs.pipeline import PipelineBuilder\n"
        "async def aop(x):\n    return x\n"
        "p = PipelineBuilder().add_source(itertools.count()).pipe(lambda x: time.sleep(0.01) or x, concurrency=2)"
        ".pipe(aop, concurrency=2).add_sink(2).build(num_threads=2)\n"
        "p.start(); print(p.get_item(), flush=True)\n"
        "q = PipelineBuilder().add_source(itertools.count()).add_sink(2).build(num_threads=1)\n"
        "q.get_item()\n"
        "# exit with both pipelines running\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().isdigit()


def test_builder_errors():
    with pytest.raises(RuntimeError, match="Source is not set"):  # as SPDL's get_config()
        PipelineBuilder().build(num_threads=1)
    with pytest.raises(ValueError):
        PipelineBuilder().add_source([1]).pipe(lambda x: x, output_order="random")
    with pytest.raises(TypeError):
        PipelineBuilder().add_source([1]).pipe(42)
    with pytest.raises(TypeError):
        PipelineBuilder().add_source(42)


def test_failed_items_are_reported_at_the_end_of_the_epoch():
    """With the default max_failures=-1 failures are skipped and counted; one warning per epoch
    tells the user how many and why."""

    def boom(x):
        raise KeyError(f"boom on {x}")

    p = PipelineBuilder().add_source(range(3)).pipe(boom).add_sink(2).build(num_threads=1)
    with p.auto_stop():
        with pytest.warns(RuntimeWarning, match=r"3 item\(s\) failed and were skipped \(boom: 3\).*boom on"):
            assert list(p) == []
        assert p.get_stats().stage("boom").failures == 3
