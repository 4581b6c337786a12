"""Ray Data decodes with spdl_rs; a training loop consumes the batches.

Ray Data runs the decoding (``ImageDecoder``: one GIL-free native call per batch) in tasks on
the cluster's CPUs and streams the decoded batches to the trainer, which reads them through
``iter_torch_batches`` (or ``iter_batches`` with NumPy when PyTorch is not installed). The run
checks that every sample of the listing arrived exactly once and counts the failed ones.

    pip install 'ray[data]'
    python crates/spdl-py/examples/ray_data.py [FOLDER] [--source listing|binary]

``--source listing`` (default): rows of paths from ``spdl_rs.sources.list_files``, read and
decoded natively in the ``map_batches`` task. ``--source binary``: Ray reads the files
(``read_binary_files``) and the task decodes the bytes.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import time
from typing import Any

import numpy as np
import ray

from spdl_rs import sources
from spdl_rs.ray import ImageDecoder, from_listing, read_binary

SAMPLES = pathlib.Path(__file__).resolve().parents[3] / "data" / "samples"


def build_dataset(
    listing: sources.SampleList, *, source: str = "listing", size: int = 64, batch_size: int = 4
) -> ray.data.Dataset:
    """The decoded dataset: rows ``{"path", "image": [size, size, 3] uint8, "error", ...}``."""
    if source == "listing":
        ds = from_listing(listing, override_num_blocks=2)
    elif source == "binary":
        ds = read_binary(listing)
    else:
        raise ValueError(f"source must be 'listing' or 'binary', got {source!r}")
    # One native thread per task: Ray runs one task per CPU it was given.
    decoder = ImageDecoder(size=size, transform="eval", num_threads=1)
    return ds.map_batches(decoder, batch_size=batch_size, batch_format="numpy", num_cpus=1)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _torch_collate():
    """A ``collate_fn`` for ``iter_torch_batches``: images to a tensor, the string columns
    (``path``, ``error``) stay lists (the default collate cannot make tensors of them)."""
    import torch
    from ray.data.collate_fn import NumpyBatchCollateFn

    class Collate(NumpyBatchCollateFn):
        def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
            return {
                "image": torch.from_numpy(np.ascontiguousarray(batch["image"])),
                "path": [str(p) for p in batch["path"]],
                "error": [str(e) for e in batch["error"]],
            }

    return Collate()


def train(ds: ray.data.Dataset, *, batch_size: int = 4, use_torch: bool | None = None) -> dict[str, Any]:
    """A stand-in training loop: consumes every batch, as a model would, and accounts for each
    sample. Returns ``{"seen": Counter(path), "failed": {path: reason}, "batches", "shape",
    "consumer"}``."""
    torch = _torch() if use_torch is not False else None
    if use_torch and torch is None:
        raise ImportError("use_torch=True needs PyTorch")
    if torch is not None:
        batches = ds.iter_torch_batches(batch_size=batch_size, collate_fn=_torch_collate())
    else:
        batches = ds.iter_batches(batch_size=batch_size, batch_format="numpy")
    seen: collections.Counter[str] = collections.Counter()
    failed: dict[str, str] = {}
    shape = None
    n_batches = 0
    total = 0.0
    for batch in batches:
        images, paths, errors = batch["image"], list(batch["path"]), list(batch["error"])
        ok = [e == "" for e in errors]
        # The "step": NCHW float, mean over the good samples only.
        if torch is not None:
            x = images.permute(0, 3, 1, 2).float() / 255
            total += float(x[torch.tensor(ok)].mean()) if any(ok) else 0.0
        else:
            x = images.transpose(0, 3, 1, 2).astype(np.float32) / 255
            total += float(x[np.array(ok)].mean()) if any(ok) else 0.0
        shape = tuple(images.shape[1:])
        seen.update(str(p) for p in paths)
        failed.update({str(p): str(e) for p, e in zip(paths, errors) if e})
        n_batches += 1
    return {
        "seen": seen,
        "failed": failed,
        "batches": n_batches,
        "shape": shape,
        "consumer": "iter_torch_batches" if torch is not None else "iter_batches (numpy)",
    }


def check_exactly_once(listing: sources.SampleList, result: dict[str, Any]) -> None:
    """Every sample of the listing arrived once, and nothing else arrived."""
    seen = result["seen"]
    repeated = sorted(p for p, n in seen.items() if n > 1)
    missing = sorted(set(listing.paths) - set(seen))
    extra = sorted(set(seen) - set(listing.paths))
    if repeated or missing or extra:
        raise AssertionError(f"not exactly once: repeated={repeated} missing={missing} extra={extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", default=str(SAMPLES))
    parser.add_argument("--source", choices=["listing", "binary"], default="listing")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    ray.init(num_cpus=2, include_dashboard=False)
    start = time.perf_counter()
    listing = sources.list_files(args.folder)
    ds = build_dataset(listing, source=args.source, size=args.size, batch_size=args.batch_size)
    result = train(ds, batch_size=args.batch_size)
    check_exactly_once(listing, result)
    print(
        json.dumps(
            {
                "samples": len(listing),
                "decoded": len(listing) - len(result["failed"]),
                "failed": result["failed"],
                "batches": result["batches"],
                "image_shape": result["shape"],
                "consumer": result["consumer"],
                "seconds": round(time.perf_counter() - start, 2),
            }
        )
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
