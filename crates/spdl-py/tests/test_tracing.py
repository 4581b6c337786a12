"""spdl_rs.tracing: a Perfetto-readable trace of every op of every stage (SPDL's spdl.io.utils)."""

import json

from spdl_rs import ops, sources, trace_counter, trace_event, tracing
from spdl_rs.pipeline import PipelineBuilder


def test_trace_shows_native_and_python_ops_on_their_threads(samples, tmp_path):
    # No thread_baseline: the trace writer's thread lives for the process once tracing is used.
    listing = sources.list_files(samples)

    def touch(b):
        with trace_event("inside_python_op"):
            return len(b)

    path = tmp_path / "trace.json"
    with tracing(path, process_name="my_loader"):
        with trace_event("main_loop"):
            p = PipelineBuilder().add_source(listing).pipe(ops.read_file(), concurrency=2).pipe(touch).add_sink(3)
            p = p.build(num_threads=2)
            with p.auto_stop():
                sizes = list(p)
        trace_counter(0, 2.5)
    events = json.loads(path.read_text())
    assert events[0] == {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "my_loader"}}
    slices = [e for e in events if e["ph"] == "B"]
    names = {e["name"] for e in slices}
    assert {"read_file", "touch", "inside_python_op", "main_loop"} <= names
    assert sum(e["name"] == "read_file" for e in slices) == len(listing), "one slice per op call"
    assert sum(e["name"] == "touch" for e in slices) == len(sizes)
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert any(t.startswith("spdl-worker") for t in threads), threads
    read_tids = {e["tid"] for e in slices if e["name"] == "read_file"}
    main_tid = next(e["tid"] for e in slices if e["name"] == "main_loop")
    assert main_tid not in read_tids, "native ops run on worker threads"
    assert any(e["name"] == "counter 0" and e["args"]["value"] == "2.5" for e in events)
    # Tracing is off again: a second session records only its own events.
    second = tmp_path / "second.json"
    with tracing(second):
        with trace_event("again"):
            pass
    names2 = [e["name"] for e in json.loads(second.read_text()) if e["ph"] == "B"]
    assert names2 == ["again"]


def test_trace_gc_enable_false_and_a_file_descriptor(tmp_path):
    import gc
    import os

    from spdl_rs import trace_gc

    off = tmp_path / "off.json"
    with tracing(off, enable=False):
        with trace_event("nothing"):
            pass
    assert not off.exists()
    trace_gc()
    path = tmp_path / "fd.json"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        with tracing(fd, process_name="by_fd"):
            gc.collect()
    finally:
        os.close(fd)
    events = json.loads(path.read_text())
    assert events[0]["args"] == {"name": "by_fd"}
    assert any(e["ph"] == "B" and e["name"] == "gc" for e in events)
