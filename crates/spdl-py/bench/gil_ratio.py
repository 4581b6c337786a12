"""Throughput of a native decode pipeline alone and while a Python thread spins in
pure-Python code, as a ratio (1.0 = the spinning thread costs nothing).

    python crates/spdl-py/bench/gil_ratio.py [--root data/samples] [--num-threads 1] [--seconds 10]

On a machine with few cores, use fewer worker threads than cores so that the spinning thread
has a core of its own: the ratio then measures GIL interference, not CPU sharing.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import threading
import time

from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder


def run(listing, num_threads: int, seconds: float, batch: int) -> float:
    p = (
        PipelineBuilder()
        .add_source(listing, continuous=True)
        .pipe(ops.read_file(), concurrency=2)
        .pipe(ops.decode_image(224, 224), concurrency=num_threads)
        .aggregate(batch)
        .pipe(ops.collate())
        .add_sink(4)
        .build(num_threads=num_threads)
    )
    n = 0
    with p.auto_stop():
        for b in p:  # warm-up epoch
            pass
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for b in p:
                n += len(b)
        elapsed = time.perf_counter() - t0
    return n / elapsed


class Spinner:
    """A Python thread running a pure-Python loop (holds the GIL except at switch intervals)."""

    def __enter__(self) -> "Spinner":
        self._stop = threading.Event()
        self.count = 0
        self._t = threading.Thread(target=self._spin)
        self._t.start()
        return self

    def _spin(self) -> None:
        x = 0
        while not self._stop.is_set():
            x += 1
        self.count = x

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def control(paths, num_threads: int, seconds: float, batch: int) -> float:
    """Same decode work as one GIL-released call per batch, no pipeline: the CPU-sharing floor."""
    from spdl_rs import io

    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for i in range(0, len(paths), batch):
            n += len(io.load_image_batch(paths[i : i + batch], 224, 224, num_threads=num_threads))
    return n / (time.perf_counter() - t0)


def main() -> None:
    repo = pathlib.Path(__file__).resolve().parents[3]
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(repo / "data" / "samples"))
    ap.add_argument("--num-threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    listing = sources.list_files(args.root)
    paths = listing.paths
    res: dict[str, list[float]] = {k: [] for k in ("alone", "busy", "ctl_alone", "ctl_busy")}
    for _ in range(args.rounds):  # interleaved, so load from other processes hits both sides
        res["alone"].append(run(listing, args.num_threads, args.seconds, args.batch))
        with Spinner():
            res["busy"].append(run(listing, args.num_threads, args.seconds, args.batch))
        res["ctl_alone"].append(control(paths, args.num_threads, args.seconds, args.batch))
        with Spinner():
            res["ctl_busy"].append(control(paths, args.num_threads, args.seconds, args.batch))
    med = {k: statistics.median(v) for k, v in res.items()}
    gil = "on" if getattr(sys, "_is_gil_enabled", lambda: True)() else "off"
    print(
        f"python {sys.version.split()[0]} (GIL {gil}), {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}, num_threads={args.num_threads}, {len(listing)} images, "
        f"{args.rounds} rounds x {args.seconds:.0f} s, medians"
    )
    print(f"pipeline alone:                 {med['alone']:8.1f} images/s")
    print(f"pipeline + spinning thread:     {med['busy']:8.1f} images/s")
    print(f"control (load_image_batch) alone / + spinning: {med['ctl_alone']:.1f} / {med['ctl_busy']:.1f} images/s")
    ratio, floor = med["busy"] / med["alone"], med["ctl_busy"] / med["ctl_alone"]
    print(f"ratio: {ratio:.3f}   (CPU-sharing floor from the control: {floor:.3f}; ratio / floor = {ratio / floor:.3f})")


if __name__ == "__main__":
    main()
