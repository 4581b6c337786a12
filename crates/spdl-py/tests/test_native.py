"""Native stages run in Rust without the GIL."""

import shutil
import sys
import threading
import time

import numpy as np
import pytest

import spdl_rs
from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder, PipelineFailure


def native_pipeline(src, *, width=64, height=48, batch=4, sink=3, num_threads=2):
    return (
        PipelineBuilder()
        .add_source(src)
        .pipe(ops.read_file(), concurrency=2)
        .pipe(ops.decode_image(width, height), concurrency=num_threads)
        .aggregate(batch)
        .pipe(ops.collate())
        .add_sink(sink)
        .build(num_threads=num_threads)
    )


def test_native_stages_take_no_gil(samples, thread_baseline):
    listing = sources.list_files(samples)
    assert len(listing) >= 8
    p = native_pipeline(listing)
    before = spdl_rs._native._gil_acquisitions()
    with p.auto_stop():
        batches = list(p)
    assert spdl_rs._native._gil_acquisitions() - before == 0
    assert sum(b.shape[0] for b in batches) == len(listing)
    assert all(b.shape[1:] == (48, 64, 3) for b in batches)


def test_str_source_native_stages_only_source_takes_gil(samples, thread_baseline):
    paths = [str(p) for p in sorted(samples.glob("*.jpg"))]
    p = native_pipeline(paths)
    before = spdl_rs._native._gil_acquisitions()
    with p.auto_stop():
        n = sum(b.shape[0] for b in p)
    assert n == len(paths)
    # One acquisition per source item (plus iter() and the final StopIteration); none per stage.
    assert spdl_rs._native._gil_acquisitions() - before <= len(paths) + 2


def test_native_stages_progress_while_python_holds_the_gil(samples, thread_baseline):
    """A Python thread that never gives the GIL away does not stop native stages."""
    listing = sources.list_files(samples)
    p = native_pipeline(listing, batch=1, sink=len(listing) + 1, num_threads=2)
    old = sys.getswitchinterval()
    p.start()
    sys.setswitchinterval(1000.0)  # this thread keeps the GIL while it runs Python code
    try:
        t0 = time.monotonic()
        x = 0
        while time.monotonic() - t0 < 3.0:
            x += 1
        stats = p.get_stats()
    finally:
        sys.setswitchinterval(old)
    decoded = stats.stage("decode_image").items_out
    p.stop()
    assert decoded >= len(listing) // 2, f"only {decoded} images decoded while Python held the GIL"


def test_native_op_errors_name_the_sample(tmp_path, samples, thread_baseline):
    bad = tmp_path / "not_an_image.jpg"
    bad.write_bytes(b"<html>503 Service Unavailable</html>")
    good = sorted(samples.glob("*.jpg"))[0]
    missing = tmp_path / "missing.jpg"
    p = (
        PipelineBuilder()
        .add_source([str(good), str(bad), str(missing)])
        .pipe(ops.read_file())
        .pipe(ops.decode_image(32, 32))
        .add_sink(3)
        .build(num_threads=1)
    )
    with p.auto_stop():
        out = list(p)
        errors = p.last_errors()
    assert len(out) == 1 and out[0].shape == (32, 32, 3)
    assert any("not_an_image.jpg" in e and "unknown format" in e for e in errors), errors
    assert any("missing.jpg" in e for e in errors), errors


def test_native_failure_budget_raises_runtime_errors(tmp_path, thread_baseline):
    files = []
    for i in range(5):
        f = tmp_path / f"bad{i}.png"
        f.write_bytes(b"not a png")
        files.append(str(f))
    p = (
        PipelineBuilder()
        .add_source(files)
        .pipe(ops.load_image(8, 8), max_failures=1, name="load")
        .add_sink(3)
        .build(num_threads=1)
    )
    with p.auto_stop():
        with pytest.raises(PipelineFailure) as info:
            list(p)
    assert info.value.stage == "load"
    assert all(isinstance(e, RuntimeError) for e in info.value.exceptions)
    assert any("bad" in str(e) and ".png" in str(e) for e in info.value.exceptions)


def test_image_folder_labels_flow_into_batches(tmp_path, samples, thread_baseline):
    jpgs = sorted(samples.glob("*.jpg"))[:4]
    for cls, chunk in (("cat", jpgs[:2]), ("dog", jpgs[2:])):
        (tmp_path / cls).mkdir()
        for f in chunk:
            shutil.copy(f, tmp_path / cls / f.name)
    listing = sources.image_folder(tmp_path)
    assert listing.classes == ["cat", "dog"]
    assert listing.labels == [0, 0, 1, 1]
    p = (
        PipelineBuilder()
        .add_source(listing)
        .pipe(ops.load_image(16, 16), output_order="input")
        .aggregate(4)
        .pipe(ops.collate(normalize=True))
        .add_sink(1)
        .build(num_threads=2)
    )
    with p.auto_stop():
        (batch,) = list(p)
    assert batch.shape == (4, 3, 16, 16) and batch.dtype == "float32"
    assert batch.labels == [0, 0, 1, 1]
    assert [k.split("/")[-2] for k in batch.keys] == ["cat", "cat", "dog", "dog"]


def test_native_and_python_ops_mix(samples, thread_baseline):
    paths = [str(p) for p in sorted(samples.glob("*.jpg"))[:3]]

    def check(buf):
        a = np.asarray(buf)
        return a.shape, int(a.mean() >= 0)

    p = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.load_image(10, 20), output_order="input")
        .pipe(check, output_order="input")
        .add_sink(3)
        .build(num_threads=2)
    )
    with p.auto_stop():
        assert list(p) == [((20, 10, 3), 1)] * 3


def test_native_op_is_callable(samples):
    path = sorted(samples.glob("*.jpg"))[0]
    data = ops.read_file()(str(path))
    assert isinstance(data, bytes) and data[:2] == b"\xff\xd8"
    img = ops.decode_image(12, 10)(data)
    assert img.shape == (10, 12, 3)


def test_decode_image_batch_reuses_its_host_buffers(samples):
    """A batch is shared with NumPy without a copy, and its buffer goes back to the stage's
    pool when the last view of it is dropped: the next batch is decoded into it, not into
    fresh memory. A batch still held keeps its own memory and pixels."""
    op = ops.decode_image_batch(32, 32)
    data = [ops.read_file()(str(q)) for q in sorted(samples.glob("*.jpg"))[:4]]

    def address(batch):
        return np.asarray(batch).__array_interface__["data"][0]

    first = op(data)
    pixels = np.asarray(first).copy()
    reused = address(first)
    held = op(data)
    assert address(held) != reused
    del first
    again = op(data)
    assert address(again) == reused
    np.testing.assert_array_equal(np.asarray(again), pixels)
    np.testing.assert_array_equal(np.asarray(held), pixels)
    assert list(again.keys) == list(held.keys)


def test_decode_image_batch_writes_the_collated_batch_in_one_step(samples, thread_baseline, tmp_path):
    """``decode_image_batch`` after ``aggregate`` gives the batches ``decode_image`` +
    ``collate`` give (same pixels, keys and labels), with no GIL taken; a bad sample fails its
    batch, named and counted."""
    listing = sources.list_files(samples)

    def run(batch_stage, *, decode=None):
        b = PipelineBuilder().add_source(listing).pipe(ops.read_file(), concurrency=2, output_order="input")
        if decode is not None:
            b = b.pipe(decode, concurrency=2, output_order="input")
        p = b.aggregate(4).pipe(batch_stage, concurrency=2, output_order="input").add_sink(3).build(num_threads=2)
        before = spdl_rs._native._gil_acquisitions()
        with p.auto_stop():
            out = [(np.asarray(b), list(b.keys)) for b in p]
        assert spdl_rs._native._gil_acquisitions() - before == 0
        return out

    for normalize in (False, True):
        want = run(ops.collate(normalize=normalize), decode=ops.decode_image(40, 24))
        got = run(ops.decode_image_batch(40, 24, normalize=normalize))
        assert [k for _, k in got] == [k for _, k in want]
        for (g, _), (w, _) in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)

    with pytest.raises(ValueError, match="fixed output size"):
        ops.decode_image_batch()
    with pytest.raises(TypeError, match="bogus"):
        ops.decode_image_batch(8, 8, bogus=1)

    bad = tmp_path / "bad.jpg"
    bad.write_bytes((samples / sorted(p.name for p in samples.glob("*.jpg"))[0]).read_bytes()[:300])
    p = (
        PipelineBuilder()
        .add_source([str(bad)] + [str(q) for q in sorted(samples.glob("*.jpg"))[:3]])
        .pipe(ops.read_file())
        .aggregate(2)
        .pipe(ops.decode_image_batch(16, 16))
        .add_sink(3)
        .build(num_threads=1)
    )
    with p.auto_stop(), pytest.warns(RuntimeWarning, match=r"1 item\(s\) failed.*truncated: .*bad\.jpg"):
        shapes = [np.asarray(b).shape for b in p]
    assert shapes == [(2, 16, 16, 3)]
