"""SPDL 0.8 side of `video_bench.rs`: frames/s of `spdl.io.load_video` on the
same clips with the same settings (224x224 RGB, bicubic, no padding; two
threads in all: 2 workers x 1 decoder thread, or 1 worker x 2 decoder
threads). Clips are read into memory first.

    python3 -m venv /tmp/spdl-venv && /tmp/spdl-venv/bin/pip install spdl==0.8.0 numpy
    /tmp/spdl-venv/bin/python3 video_bench_spdl.py DIR [--reps N]

Prints one "GROUP<TAB>MODE<TAB>FPS" line per measurement.
"""

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import spdl.io

FILTER = spdl.io.get_video_filter_desc(scale_width=224, scale_height=224, scale_mode=None)
MODES = [("2 workers x 1 decoder thread", 2, 1), ("1 worker x 2 decoder threads", 1, 2)]


def load(data, threads):
    cfg = spdl.io.decode_config(decoder_options={"threads": str(threads)})
    buf = spdl.io.load_video(data, decode_config=cfg, filter_desc=FILTER)
    return spdl.io.to_numpy(buf).shape[0]


def run(clips, reps, workers, threads):
    for data in clips:  # warm-up
        load(data, threads)
    jobs = [clips[j % len(clips)] for j in range(len(clips) * reps)]
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        frames = sum(pool.map(lambda d: load(d, threads), jobs))
    return frames / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    groups = {}
    for name in sorted(os.listdir(a.dir)):
        if not name.endswith(".mp4"):
            continue
        group = "720p" if "720" in name else "360p" if "360" in name else None
        if group:
            with open(os.path.join(a.dir, name), "rb") as f:
                groups.setdefault(group, []).append(f.read())
    print(f"spdl {getattr(spdl.io, '__version__', '0.8')}, filter: {FILTER}", file=sys.stderr)
    for group in sorted(groups):
        for mode, workers, threads in MODES:
            fps = run(groups[group], a.reps, workers, threads)
            print(f"{group}\t{mode}\t{fps:.1f}", flush=True)


if __name__ == "__main__":
    main()
