"""Where Python work should run, images/s side by side in one run:

1. a GIL-holding pure-Python transform (a per-pixel loop over a small RGB image) on the
   pipeline's threads vs in a process pool: ``PipelineBuilder.to(ProcessPoolExecutorConfig)``
   (one item per transfer, and ``buffer_size=8``: eight per transfer) and
   ``pipe(executor=PriorityProcessPoolExecutor(...).get_executor())``;
2. a native decode pipeline (read, decode + resize to 224, batches of 8) in this process vs
   in a worker process (``run_pipeline_in_subprocess``; batches cross as NumPy arrays).

    python crates/spdl-py/bench/subprocess_pool.py [--root data/samples] [--workers 2] [--images 400] [--repeat 3]

Each figure is the median of ``--repeat`` runs, the two variants alternating. On a machine with
few cores, the process pool can only gain up to the number of free cores.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pathlib
import statistics
import time

from spdl_rs import ops, sources
from spdl_rs.pipeline import (
    PipelineBuilder,
    PriorityProcessPoolExecutor,
    build_pipeline,
    run_pipeline_in_subprocess,
)
from spdl_rs.pipeline.defs import MAIN_PROCESS, ProcessPoolExecutorConfig

SIDE = 96  # pixels of the synthetic images of part 1


def brighten(img: bytes) -> int:
    """Pure Python, holds the GIL: a clipped gain on every byte; returns the sum."""
    total = 0
    for v in img:
        v = v * 5 // 4
        total += 255 if v > 255 else v
    return total


def images(n: int) -> list[bytes]:
    return [bytes((i * 7 + j) % 256 for j in range(SIDE * SIDE * 3)) for i in range(n)]


def run_gil(items: list[bytes], workers: int, mode: str) -> float:
    """``mode``: "threads", "pool" (``to()``, one item per transfer), "pool8" (``to(...,
    buffer_size=8)``) or "priority" (``pipe(executor=PriorityProcessPoolExecutor ...)``)."""
    b = PipelineBuilder().add_source(items)
    prio = None
    if mode in ("pool", "pool8"):
        b.to(ProcessPoolExecutorConfig(max_workers=workers), buffer_size=8 if mode == "pool8" else 1)
    if mode == "priority":
        prio = PriorityProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        b.pipe(brighten, concurrency=2 * workers, executor=prio.get_executor())
    else:
        b.pipe(brighten, concurrency=2 * workers)
    if mode in ("pool", "pool8"):
        b.to(MAIN_PROCESS)
    p = b.add_sink(8).build(num_threads=workers)
    with p.auto_stop():
        it = iter(p)
        next(it)  # the pool's processes have started
        t0 = time.perf_counter()
        n = 1 + sum(1 for _ in it)
        elapsed = time.perf_counter() - t0
    if prio is not None:
        prio.shutdown()
    assert n == len(items)
    return (n - 1) / elapsed


def decode_config(paths: list[str], threads: int):
    b = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=threads)
        .pipe(ops.decode_image(224, 224), concurrency=threads)
        .aggregate(8)
        .pipe(ops.collate(), concurrency=1)
        .add_sink(4)
    )
    return b.get_config()


def count_images(batches) -> int:
    return sum(len(b) for b in batches)


def run_decode(paths: list[str], threads: int, subprocess: bool) -> float:
    cfg = decode_config(paths, threads)
    if subprocess:
        src = run_pipeline_in_subprocess(cfg, num_threads=threads, buffer_size=4)
        count_images(src)  # warm-up epoch: the worker has started
        t0 = time.perf_counter()
        n = count_images(src)
        elapsed = time.perf_counter() - t0
        src.shutdown()
    else:
        count_images(_epoch(cfg, threads))
        t0 = time.perf_counter()
        n = count_images(_epoch(cfg, threads))
        elapsed = time.perf_counter() - t0
    assert n == len(paths), n
    return n / elapsed


def _epoch(cfg, threads):
    p = build_pipeline(cfg, num_threads=threads)
    with p.auto_stop():
        yield from p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[3] / "data" / "samples"))
    parser.add_argument("--workers", type=int, default=2, help="threads / processes")
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, workers: {args.workers}")

    items = images(args.images // 2)
    files = [str(p) for p in sources.list_files(args.root, extensions=["jpg"])]
    paths = (files * (args.images // len(files) + 1))[: args.images // 8 * 8]
    gil_modes = ("threads", "pool", "pool8", "priority")
    runs: dict[str, list[float]] = {k: [] for k in (*gil_modes, "inproc", "sub")}
    for _ in range(args.repeat):
        for mode in gil_modes:
            runs[mode].append(run_gil(items, args.workers, mode))
        runs["inproc"].append(run_decode(paths, args.workers, subprocess=False))
        runs["sub"].append(run_decode(paths, args.workers, subprocess=True))
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"pure-Python transform ({SIDE}x{SIDE} RGB), {len(items)} images, median of {args.repeat}:")
    print(f"  threads                    {med['threads']:8.1f} images/s")
    print(f"  process pool (to)          {med['pool']:8.1f} images/s  ({med['pool'] / med['threads']:.2f}x)")
    print(f"  process pool (to, buf 8)   {med['pool8']:8.1f} images/s  ({med['pool8'] / med['threads']:.2f}x)")
    print(f"  PriorityProcessPool        {med['priority']:8.1f} images/s  ({med['priority'] / med['threads']:.2f}x)")
    print(f"decode + resize 224, batches of 8, {len(paths)} images, median of {args.repeat}:")
    print(f"  in process                 {med['inproc']:8.1f} images/s")
    print(f"  run_pipeline_in_subprocess {med['sub']:8.1f} images/s  ({med['sub'] / med['inproc']:.2f}x)")


if __name__ == "__main__":
    main()
