"""Shared by the worker scripts of `bench/images.py`: arguments, the file listing, the timing
loop and the one-line JSON report. Each worker is run as a fresh process:

    python bench/systems/NAME.py --corpus DIR --config eval|train|eval_f32|train_f32 --threads N \
        [--batch-size 32] [--size 224] [--seed 0] [--limit N] [--dump FILE.npy]

and prints exactly one JSON line on stdout:

    {"images": 2000, "batches": 63, "seconds": 3.2, "first_batch_seconds": 0.05,
     "import_seconds": 0.4, "import_cpu_seconds": 0.4, "layout": "NHWC", "dtype": "uint8", ...}

`seconds` and `first_batch_seconds` count from just before the loader is built (after the
imports) to the last / first batch in the consumer's hands. `import_seconds` is the time of
the worker's own imports (the interpreter's start is in the harness's start-up figure).
`--dump FILE.npy` saves the first batch (the first `batch-size` files of the sorted listing,
in listing order) as NHWC uint8 or NCHW float32 for the cross-system pixel check.

The configurations (same for every system):

- ``eval``: resize the shorter side to 256 (bilinear, antialiased), center crop 224, u8.
- ``train``: random resized crop 224 (scale 0.08-1, ratio 3/4-4/3), horizontal flip p=0.5,
  seeded, u8.
- ``eval_f32``: ``eval``, then ``(x/255 - mean) / std`` with the ImageNet mean/std, f32 NCHW.
- ``train_f32``: ``train``, then the same normalization, f32 NCHW.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

_T0 = time.perf_counter()
_CPU0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
CONFIGS = ("eval", "train", "eval_f32", "train_f32")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", required=True)
    p.add_argument("--config", choices=CONFIGS, required=True)
    p.add_argument("--threads", type=int, default=1, help="threads, or DataLoader num_workers")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=None, help="only the first N files")
    p.add_argument("--dump", default=None, help="save the first batch here (.npy) and stop")
    p.add_argument("--boxes", default=None, help="train: crop boxes and flips per listing position (JSON)")
    return p.parse_args(argv)


def list_files(root: str, limit: int | None = None) -> list[str]:
    """Every .jpg/.jpeg under root, sorted by path (the order `spdl load` uses)."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in files:
            if f.lower().endswith((".jpg", ".jpeg")):
                out.append(os.path.join(d, f))
    out.sort()
    return out[:limit] if limit else out


def imports_done() -> dict:
    """Call right after the worker's heavy imports."""
    return {
        "import_seconds": time.perf_counter() - _T0,
        "import_cpu_seconds": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - _CPU0,
    }


def shorter_side(size: int) -> int:
    """256 for 224, as `spdl load --transform eval` computes it."""
    return (size * 256 + 223) // 224


def run(args: argparse.Namespace, batches, to_numpy, meta: dict, layout: str, dtype: str) -> None:
    """Times an iterable of batches (built lazily: `batches` is a zero-argument function
    returning the iterable, called after the clock starts) and prints the report.

    `to_numpy(batch)` gives the batch as a NumPy array (only used with --dump)."""
    n_images = 0
    n_batches = 0
    first = None
    start = time.perf_counter()
    it = batches()
    for b in it:
        if first is None:
            first = time.perf_counter() - start
            if args.dump:
                _dump(args.dump, to_numpy(b), layout)
                break
        n_images += len(b)
        n_batches += 1
    del it
    seconds = time.perf_counter() - start
    report = dict(meta)
    report.update(
        images=n_images,
        batches=n_batches,
        seconds=seconds,
        first_batch_seconds=first,
        layout=layout,
        dtype=dtype,
    )
    print(json.dumps(report), flush=True)


def spdl_rs_batches(args: argparse.Namespace, source, read, decode, collate):
    """The pipeline of the spdl_rs systems, native or Python stages alike: `source` ->
    `read` -> `decode` -> aggregate(batch size) -> `collate` on `args.threads` threads (input
    order with --dump); yields the batches and stops the pipeline when dropped."""
    from spdl_rs.pipeline import PipelineBuilder

    order = "input" if args.dump else "completion"
    pipeline = (
        PipelineBuilder()
        .add_source(source)
        .pipe(read, concurrency=max(4, args.threads), output_order=order)
        .pipe(decode, concurrency=args.threads, output_order=order)
        .aggregate(args.batch_size)
        .pipe(collate)
        .add_sink(4)
        .build(num_threads=args.threads)
    )
    with pipeline.auto_stop():
        yield from pipeline


def _dump(path: str, arr, layout: str) -> None:
    import numpy as np

    arr = np.asarray(arr)
    # Canonical forms: u8 as NHWC, f32 as NCHW.
    if arr.dtype == np.uint8 and layout == "NCHW":
        arr = arr.transpose(0, 2, 3, 1)
    if arr.dtype != np.uint8 and layout == "NHWC":
        arr = arr.transpose(0, 3, 1, 2)
    np.save(path, np.ascontiguousarray(arr))


def fail(reason: str, code: int = 3) -> None:
    """Exit code 3 with a reason on stdout: the harness marks the system as skipped."""
    print(json.dumps({"skipped": reason}), flush=True)
    sys.exit(code)


def eval_resize_dims(w: int, h: int, size: int) -> tuple[int, int]:
    """(width, height) after resizing the shorter side to `shorter_side(size)`, rounded down as
    torchvision's `Resize(256)` does (500x375 -> 341x256)."""
    s = shorter_side(size)
    if w <= h:
        return s, int(s * h / w)
    return int(s * w / h), s


def rrc_params(w: int, h: int, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params with a `random.Random`: (x, y, cw, ch)."""
    import math

    area = w * h
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        ar = math.exp(rng.uniform(*log_ratio))
        cw = int(round(math.sqrt(target * ar)))
        ch = int(round(math.sqrt(target / ar)))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, w - cw), rng.randint(0, h - ch), cw, ch
    in_ratio = w / h
    if in_ratio < min(ratio):
        cw, ch = w, int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        ch, cw = h, int(round(h * max(ratio)))
    else:
        cw, ch = w, h
    return (w - cw) // 2, (h - ch) // 2, cw, ch


_BOXES: list | None = None


def train_box(args: argparse.Namespace, index: int, w: int, h: int) -> tuple[int, int, int, int, bool]:
    """(x, y, cw, ch, hflip) of sample `index` (its position in the listing) for ``train``.

    With ``--boxes`` (written by the harness from ``spdl_rs.io.random_resized_crop``, the draws
    of spdl-rs's seeded RandomResizedCrop) every system crops exactly the boxes that `spdl load`
    and `spdl_rs` crop, so their pixels can be compared. Without it: torchvision's parameters
    from the sample's own generator."""
    global _BOXES
    if args.boxes:
        if _BOXES is None:
            with open(args.boxes) as f:
                _BOXES = json.load(f)
        x, y, cw, ch, flip = _BOXES[index]
        return x, y, cw, ch, bool(flip)
    rng = sample_rng(args.seed, index)
    x, y, cw, ch = rrc_params(w, h, rng)
    return x, y, cw, ch, rng.random() < 0.5


def sample_rng(seed: int, index: int):
    """The random generator of sample `index` (each image's crop and flip depend only on the
    seed and its position in the listing, not on thread timing)."""
    import random

    return random.Random(seed * 1_000_003 + index)


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a JPEG's SOF marker, without decoding."""
    i = 2
    n = len(data)
    while i + 9 < n:
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        seg = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h = int.from_bytes(data[i + 5 : i + 7], "big")
            w = int.from_bytes(data[i + 7 : i + 9], "big")
            return w, h
        i += 2 + seg
    raise ValueError("no SOF marker")


def normalize_nhwc_u8(batch):
    """[N, H, W, 3] u8 -> [N, 3, H, W] f32 with the ImageNet mean/std (NumPy)."""
    import numpy as np

    x = np.asarray(batch).transpose(0, 3, 1, 2).astype(np.float32)
    scale = np.array([1 / (255 * s) for s in STD], np.float32).reshape(1, 3, 1, 1)
    shift = np.array([m / s for m, s in zip(MEAN, STD)], np.float32).reshape(1, 3, 1, 1)
    x *= scale
    x -= shift
    return x
