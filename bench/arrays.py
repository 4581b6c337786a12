#!/usr/bin/env python3
"""NPY / NPZ loading from memory in threads: ``spdl_rs.io`` against ``numpy.load`` (and SPDL
0.8's ``spdl.io`` when it can be imported), side by side in one run.

    target/spdl-venv/bin/python bench/arrays.py [--threads 1,2,4] [--seconds 1.5] \
        [--rounds 3] [--spdl08 /work/spdl-src/unpacked] [--out bench/results/arrays.md]

What it measures (the setting of SPDL's data-format case study): arrays already in memory as
bytes (e.g. downloaded), loaded by T threads of a ``ThreadPoolExecutor``, each thread looping
over its own copy of 32 serialized samples until the time is up; arrays/s = arrays loaded by
all threads / wall time (an NPZ sample counts its members). Each figure is the median of
``--rounds`` rounds; in a round every system runs once per configuration, alternating.

Systems: ``numpy.load(io.BytesIO(data))`` (NPZ: every member read), ``spdl_rs.io.load_npy``
(zero-copy view; and ``copy=True``), ``spdl_rs.io.load_npz``, and SPDL 0.8's ``spdl.io``
equivalents. Samples: an ``image`` ``uint8`` ``[3, 480, 640]`` and a ``small`` ``float32``
``[64, 64]`` array; NPZ samples hold ``image``, ``segmentation`` ``uint8`` ``[480, 640]`` and a
``label`` ``int64``, stored (``savez``) and deflated (``savez_compressed``).
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

SAMPLES = 32


def make_samples(kind: str) -> list[bytes]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(SAMPLES):
        buf = io.BytesIO()
        if kind == "npy-image":
            np.save(buf, rng.integers(0, 255, size=(3, 480, 640), dtype=np.uint8))
        elif kind == "npy-small":
            np.save(buf, rng.standard_normal((64, 64), dtype=np.float32))
        else:
            image = rng.integers(0, 255, size=(3, 480, 640), dtype=np.uint8)
            # Smooth enough to compress (a real segmentation map is mostly flat).
            seg = np.repeat(rng.integers(0, 20, size=(480, 1), dtype=np.uint8), 640, axis=1)
            save = np.savez if kind == "npz-stored" else np.savez_compressed
            save(buf, image=image, segmentation=seg, label=np.int64(7))
        out.append(buf.getvalue())
    return out


def systems(spdl08) -> dict:
    import spdl_rs.io as rs

    def np_npz(b):
        z = np.load(io.BytesIO(b))
        return [z[k] for k in z.files]

    def rs_npz(b):
        z = rs.load_npz(b)
        return [z[k] for k in z.files]

    table = {
        "npy": {
            "numpy.load": lambda b: [np.load(io.BytesIO(b))],
            "spdl_rs.load_npy": lambda b: [rs.load_npy(b)],
            "spdl_rs.load_npy(copy=True)": lambda b: [rs.load_npy(b, copy=True)],
        },
        "npz": {"numpy.load": np_npz, "spdl_rs.load_npz": rs_npz},
    }
    if spdl08 is not None:

        def s8_npz(b):
            z = spdl08.load_npz(b)
            return [z[k] for k in z.files]

        table["npy"]["spdl 0.8 load_npy"] = lambda b: [spdl08.load_npy(b)]
        table["npz"]["spdl 0.8 load_npz"] = s8_npz
    return table


def run(fn, samples: list[bytes], threads: int, seconds: float) -> float:
    """Arrays/s of `fn` over `samples`, `threads` threads for `seconds`."""
    deadline = [0.0]

    def worker(_: int) -> int:
        n = 0
        while True:
            for b in samples:
                arrays = fn(b)
                for a in arrays:
                    a.flat[0]  # touch: the array exists
                n += len(arrays)
            if time.perf_counter() >= deadline[0]:
                return n

    with ThreadPoolExecutor(threads) as pool:
        # Warm the pool and the code paths.
        list(pool.map(lambda _: fn(samples[0]), range(threads)))
        start = time.perf_counter()
        deadline[0] = start + seconds
        total = sum(pool.map(worker, range(threads)))
        elapsed = time.perf_counter() - start
    return total / elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", default="1,2,4")
    p.add_argument("--seconds", type=float, default=1.5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--spdl08", default="/work/spdl-src/unpacked", help="a folder holding SPDL 0.8's `spdl` package")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "arrays.md"))
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    spdl08, why = None, ""
    if args.spdl08 and os.path.isdir(args.spdl08):
        sys.path.append(args.spdl08)
        try:
            import spdl.io as spdl08  # noqa: F811
        except Exception as e:  # a missing shared library, another Python version
            why = f"SPDL 0.8 not importable from {args.spdl08}: {e}"
    else:
        why = "SPDL 0.8 not found (--spdl08)"
    table = systems(spdl08)
    kinds = ["npy-image", "npy-small", "npz-stored", "npz-deflated"]
    data = {k: make_samples(k) for k in kinds}
    results: dict = {}
    for r in range(args.rounds):
        for kind in kinds:
            for t in threads:
                for name, fn in table[kind[:3]].items():
                    v = run(fn, data[kind], t, args.seconds)
                    results.setdefault((kind, name, t), []).append(v)
                    print(f"round {r + 1} {kind:13} {name:28} threads={t}: {v:10.0f} arrays/s", flush=True)

    lines = [
        "# NPY / NPZ loading from memory, arrays/s (higher is better)",
        "",
        f"`{' '.join(['python', 'bench/arrays.py'] + sys.argv[1:])}`: {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}; "
        f"median of {args.rounds} rounds of {args.seconds} s. Sizes per sample: "
        + ", ".join(f"{k} {len(data[k][0]) / 1e3:.0f} kB" for k in kinds)
        + ". An NPZ sample counts its 3 members."
        + (f" ({why})" if why else ""),
        "",
    ]
    for kind in kinds:
        names = list(table[kind[:3]])
        base = "numpy.load"
        lines.append(f"## {kind}")
        lines.append("")
        lines.append("| system | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}" for t in threads) + " |")
        lines.append("|---|" + "---:|" * len(threads))
        for name in names:
            cells = []
            for t in threads:
                v = statistics.median(results[(kind, name, t)])
                ref = statistics.median(results[(kind, base, t)])
                cells.append(f"{v:,.0f} ({v / ref:.1f}x)")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
