"""Soak: 50 epochs over a few hundred files, some broken, through native and Python stages.
After the warm-up epochs the process must not grow: resident memory slope under 0.5 MB per
epoch, the same thread and file-descriptor counts after every epoch, the same failures every
epoch."""

import gc
import os
import shutil
import warnings

import numpy as np

from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder

from conftest import FIXTURES, REPO

EPOCHS = 50
WARM_UP = 2


def status_field(name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name):
                return int(line.split()[1])
    raise AssertionError(f"no {name} in /proc/self/status")


def make_dataset(root) -> tuple[int, int]:
    good = [REPO / "data/samples" / n for n in ("opencv_fruits.jpg", "opencv_home.jpg")] + [
        FIXTURES / p
        for p in (
            "02-truncated-jpeg-png/good.jpg",
            "02-truncated-jpeg-png/good.png",
            "05-png-16bit/rgb16.png",
            "07-png-palette-alpha/palette_trns.png",
        )
    ]
    truncated = (FIXTURES / "02-truncated-jpeg-png/truncated_60pct.jpg").read_bytes()
    bad = [("truncated.jpg", truncated), ("empty.png", b""), ("html.jpg", b"<html>503</html>")]
    for i in range(270):
        src = good[i % len(good)]
        shutil.copy(src, root / f"img_{i:03}{src.suffix}")
    for i in range(30):
        name, data = bad[i % len(bad)]
        (root / f"bad_{i:02}_{name}").write_bytes(data)
    return 270, 30


def test_fifty_epochs_do_not_grow(tmp_path, thread_baseline):
    n_good, n_bad = make_dataset(tmp_path)
    listing = sources.list_files(tmp_path)
    assert len(listing) == n_good + n_bad
    p = (
        PipelineBuilder()
        .add_source(listing, continuous=True)  # 50 epochs: one per get_iterator()
        .pipe(ops.read_file(), concurrency=4)
        .pipe(ops.decode_image(32, 32), concurrency=2)
        .pipe(np.asarray)  # a Python stage: the GIL path too
        .add_sink(4)
        .build(num_threads=2)
    )
    rss, threads, fds, failures = [], [], [], []
    failed_before = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the per-epoch failure summary
        with p.auto_stop():
            for epoch in range(EPOCHS):
                shapes = {a.shape for a in p}
                assert shapes == {(32, 32, 3)}, epoch
                failed = sum(s.failures for s in p.get_stats().stages)
                failures.append(failed - failed_before)
                failed_before = failed
                gc.collect()
                rss.append(status_field("VmRSS:") / 1024)
                threads.append(status_field("Threads:"))
                fds.append(len(os.listdir("/proc/self/fd")))
    assert failures == [n_bad] * EPOCHS
    after = np.array(rss[WARM_UP:])
    growth = np.polyfit(np.arange(len(after)), after, 1)[0]
    print(f"soak: RSS {after[0]:.1f} MB after epoch {WARM_UP}, {after[-1]:.1f} MB after {EPOCHS}, {growth:.4f} MB/epoch")
    assert growth < 0.5, f"RSS grows {growth:.3f} MB/epoch: {rss}"
    # No growth: a count may only drop (an idle worker of a blocking pool exits after its
    # keep-alive), never rise above what epoch WARM_UP had.
    assert max(threads[WARM_UP:]) <= threads[WARM_UP], threads
    assert fds[WARM_UP:] == [fds[WARM_UP]] * (EPOCHS - WARM_UP), fds
