"""`Pipeline.state_dict()` / `load_state_dict()`: resume an epoch with no repeat and no skip."""

import inspect
import json
import time

import pytest
from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder


def _build(samples, order, decoded=None):
    def count(x):
        if decoded is not None:
            decoded.append(x.keys[0])
        return x

    return (
        PipelineBuilder()
        .add_source(sources.list_files(samples), continuous=True)
        .pipe(ops.read_file(), concurrency=4, output_order=order)
        .pipe(ops.decode_image(transform="eval", size=224), concurrency=4, output_order=order)
        .pipe(count)
        .add_sink(2)
        .build(num_threads=4)
    )


@pytest.mark.parametrize("order", ["input", "completion"])
@pytest.mark.parametrize("k", [0, 1, 5])
def test_resume_epoch_no_repeat_no_skip(samples, order, k):
    everything = sorted(sources.list_files(samples).paths)
    first = _build(samples, order)
    got1 = []
    with first.auto_stop():
        it = iter(first)
        for _ in range(k):
            got1.append(next(it).keys[0])
        state = first.state_dict()
    assert state["epoch"] == 0
    assert state["done_below"] + len(state["done_above"]) == k
    state = json.loads(json.dumps(state))  # a plain, JSON-serializable dict

    decoded = []
    second = _build(samples, order, decoded)
    t0 = time.perf_counter()
    second.load_state_dict(state)
    with second.auto_stop():
        it = iter(second)
        got2 = [next(it).keys[0]]
        first_item = time.perf_counter() - t0
        got2 += [b.keys[0] for b in it]
        total = time.perf_counter() - t0
        stats = second.get_stats()
        after = second.state_dict()
    print(f"resume ({order}, k={k}): first item after {first_item * 1e3:.1f} ms, rest of epoch in {total * 1e3:.1f} ms")
    assert len(got1) + len(got2) == len(everything)
    assert sorted(got1 + got2) == everything
    # Nothing done before was read or decoded again.
    assert sorted(decoded) == sorted(got2)
    assert stats.stage("decode_image").items_in == len(everything) - k
    assert stats.stage("read_file").items_in == len(everything) - k
    # The epoch finished: the state points at the next one.
    assert after == {"epoch": 1, "done_below": 0, "done_above": []}


def test_state_dict_between_epochs_and_errors(samples):
    n = len(sources.list_files(samples))
    p = _build(samples, "input")
    assert p.state_dict() == {"epoch": 0, "done_below": 0, "done_above": []}
    with p.auto_stop():
        assert len(list(p)) == n
        assert p.state_dict()["epoch"] == 1
        next(iter(p))  # epoch 1 running
        with pytest.raises(ValueError, match="before the epoch starts"):
            p.load_state_dict({"epoch": 0, "done_below": 0, "done_above": []})
        inside = p.state_dict()
    # After the block: the state at the stop (a checkpoint taken after the loop).
    assert p.state_dict() == inside
    assert inside["epoch"] == 1 and inside["done_below"] + len(inside["done_above"]) >= 1
    q = _build(samples, "input")
    with pytest.raises(ValueError, match="done_above"):
        q.load_state_dict({"epoch": 0, "done_below": 0})
    with pytest.raises(ValueError, match="epoch"):
        q.load_state_dict({"epoch": -1, "done_below": 0, "done_above": []})
    # Resuming at a later epoch: the epoch counter follows.
    q.load_state_dict({"epoch": 3, "done_below": n - 2, "done_above": []})
    with q.auto_stop():
        assert len(list(q)) == 2
        assert q.epoch == 4


def _one_epoch(root, order):
    """The pipeline of ``test_resume_in_a_fresh_process_mid_epoch``, in both processes (the
    fresh one runs this function's source)."""
    return (
        PipelineBuilder()
        .add_source(sources.list_files(root))
        .pipe(ops.read_file(), concurrency=4, output_order=order)
        .pipe(ops.decode_image(transform="eval", size=64), concurrency=4, output_order=order)
        .add_sink(2)
        .build(num_threads=4)
    )


_RESUME_IN_A_FRESH_PROCESS = inspect.getsource(_one_epoch) + """
import json, sys
from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder
state, root, order = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
p = _one_epoch(root, order)
p.load_state_dict(state)
with p.auto_stop():
    print(json.dumps([b.keys[0] for b in p]))
"""


@pytest.mark.parametrize("order", ["input", "completion"])
def test_resume_in_a_fresh_process_mid_epoch(samples, order):
    import subprocess
    import sys

    everything = sorted(sources.list_files(samples).paths)
    first = _one_epoch(samples, order)
    with first.auto_stop():
        it = iter(first)
        got1 = [next(it).keys[0] for _ in range(6)]
        # Items are in flight in the stages and the sink; the state covers only what we took.
        state = first.state_dict()
    r = subprocess.run(
        [sys.executable, "-c", _RESUME_IN_A_FRESH_PROCESS, json.dumps(state), str(samples), order],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    got2 = json.loads(r.stdout)
    assert not set(got1) & set(got2)
    assert sorted(got1 + got2) == everything
