"""Fork safety: a pipeline built before os.fork() never deadlocks the child."""

import os
import sys
import time

import pytest

from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def test_child_of_a_running_pipeline_exits_promptly(samples):
    listing = sources.list_files(samples)
    parent = (
        PipelineBuilder()
        .add_source(listing)
        .pipe(ops.load_image(32, 32), concurrency=2)
        .pipe(lambda x: x)
        .add_sink(2)
        .build(num_threads=2)
    )
    parent.start()
    parent.get_item(timeout=30)  # threads are busy when we fork

    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            try:
                parent.get_item(timeout=1)
                code = 2  # must not work: the parent's threads do not exist here
            except RuntimeError:
                child = (
                    PipelineBuilder()
                    .add_source(listing)
                    .pipe(ops.load_image(8, 8), concurrency=2)
                    .aggregate(4)
                    .pipe(ops.collate())
                    .add_sink(2)
                    .build(num_threads=2)
                )
                with child.auto_stop():
                    n = sum(b.shape[0] for b in child)
                parent.stop()  # never joins the parent's threads
                del parent
                code = 0 if n == len(listing) else 3
        except BaseException as e:  # noqa: BLE001
            print("child failed:", repr(e), file=sys.stderr)
        os._exit(code)
    status = _wait(pid, 30)
    parent.stop()
    assert status == 0, f"child exit status {status} (None: hung)"
