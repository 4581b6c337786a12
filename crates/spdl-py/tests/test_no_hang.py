"""No hang anywhere: a process holding a pipeline it never stopped exits, a signal reaches a
consumer blocked on any kind of pipeline, and a worker killed mid-item gives an error instead of
a wait that never ends. Each scenario runs in a fresh interpreter (hang_child.py) under a time
limit: running past it is the failure (the limit bounds a hang; no time is measured)."""

import os
import pathlib
import signal
import subprocess
import sys

import pytest

CHILD = pathlib.Path(__file__).with_name("hang_child.py")
KINDS = ["threads", "executor", "region", "subprocess"]
CONTEXTS = ["fork", "spawn", "forkserver"]


def run_child(*args: str, limit: float) -> subprocess.CompletedProcess:
    # A session of its own, so that a hung scenario's whole process tree is killed.
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{args} did not end within {limit} s (a hang)\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("kind", KINDS)
def test_process_holding_an_unstopped_pipeline_exits(kind, ctx):
    # The child process (started with ctx) holds the pipeline in a module global and returns
    # without stopping it; its worker processes (also started with ctx) must not keep it alive.
    r = run_child("exit", kind, ctx, limit=10)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize("sig", ["ALRM", "INT"])
@pytest.mark.parametrize("kind", KINDS)
def test_signal_reaches_a_blocked_consumer(kind, sig):
    # The consumer waits for an item that takes a minute; the handler's exception (SIGALRM) or
    # KeyboardInterrupt (SIGINT) must reach it, and the process must then exit.
    r = run_child("signal", kind, sig, limit=10)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize("ctx", ["spawn", "forkserver"])
@pytest.mark.parametrize("kind", ["executor", "region", "subprocess"])
def test_worker_killed_mid_item_ends_the_iteration(kind, ctx):
    # The worker is killed while it runs an item: the consumer gets an error (or, for a
    # pipeline, the failed items counted), then the process exits.
    r = run_child("kill", kind, ctx, limit=10)
    assert r.returncode == 0, r.stderr[-3000:]
