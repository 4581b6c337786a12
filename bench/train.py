"""`cargo xtask bench train`: a training loop fed by spdl_rs or by PyTorch's DataLoader, with the
accelerator's step emulated by a wait that releases the GIL (``time.sleep``), so that the figure
is the loader's alone and needs no GPU.

Both loaders produce the same batches: the ImageNet train transform (random resized crop 224,
scale 0.08-1, ratio 3/4-4/3, horizontal flip), float32 ``[N, 3, 224, 224]`` normalized with the
ImageNet mean and std, a new shuffle each epoch.

- ``spdl_rs``: ``sources.Sampler`` + ``SampleList.select`` per epoch, ``ops.read_file`` and
  ``ops.decode_image(transform="train")`` on ``--threads`` Rust threads, ``ops.collate(normalize=True)``;
  the loop takes each batch with ``torch.from_dlpack`` (no copy).
- ``torch_dataloader``: a map-style dataset (``torchvision.io.decode_jpeg`` + transforms v2),
  ``DataLoader(num_workers=--workers, persistent_workers=True, shuffle=True)``.

Per run (a fresh process per system, step time and round): steps/s over the whole run (from
just before the loader is built to the last step of the last epoch: start-up included) and the
share of that wall time not spent in the emulated steps, i.e. waiting for data (for the next
batch, and for the loader to start each epoch). The table shows the median
of the rounds. Usage::

    python bench/train.py --corpus DIR [--epochs 2] [--step-ms 25,40] [--batch-size 16] \
        [--threads 2] [--workers 2] [--rounds 3] [--out bench/results/train]

writes ``OUT.md``, ``OUT.json`` and (with matplotlib) ``OUT.png``. ``--worker SYSTEM`` runs one
measurement and prints one JSON line (used by the driver).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SYSTEMS = ("spdl_rs", "torch_dataloader")
LABELS = {
    "spdl_rs": "spdl_rs (native stages, {threads} threads)",
    "torch_dataloader": "PyTorch DataLoader ({workers} workers, persistent)",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="training-loop benchmark: steps/s and time waiting for data")
    p.add_argument("--corpus", required=True, help="folder of JPEGs (searched recursively)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--step-ms", default="25,40", help="emulated accelerator step times, ms")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", type=int, default=2, help="spdl_rs threads")
    p.add_argument("--workers", type=int, default=2, help="DataLoader num_workers")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--limit", type=int, default=None, help="only the first N files")
    p.add_argument("--out", default=None, help="write OUT.md, OUT.json, OUT.png")
    p.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def list_files(root: str, limit: int | None) -> list[str]:
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.join(d, f) for f in files if f.lower().endswith((".jpg", ".jpeg"))]
    out.sort()
    return out[:limit] if limit else out


def spdl_rs_epochs(args: argparse.Namespace, files: list[str]):
    """Yields one iterator of torch batches per epoch."""
    import torch
    from spdl_rs import ops, sources
    from spdl_rs.pipeline import PipelineBuilder

    listing = sources.list_files(args.corpus)
    if args.limit:
        listing = listing.select(list(range(min(args.limit, len(listing)))))
    assert len(listing) == len(files), (len(listing), len(files))
    sampler = sources.Sampler(len(listing), shuffle=True, seed=0, rank=0, world_size=1)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        pipeline = (
            PipelineBuilder()
            .add_source(listing.select(list(sampler)))
            .pipe(ops.read_file(), concurrency=8)
            .pipe(ops.decode_image(transform="train", size=args.size, seed=epoch), concurrency=args.threads)
            .aggregate(args.batch_size)
            .pipe(ops.collate(normalize=True))
            .add_sink(3)
            .build(num_threads=args.threads)
        )
        with pipeline.auto_stop():
            yield (torch.from_dlpack(b) for b in pipeline)


def torch_dataloader_epochs(args: argparse.Namespace, files: list[str]):
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torchvision.io import ImageReadMode, decode_jpeg, read_file
    from torchvision.transforms import v2

    tf = v2.Compose([
        v2.RandomResizedCrop(args.size, scale=(0.08, 1.0), antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(MEAN, STD),
    ])

    class Files(Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return tf(decode_jpeg(read_file(files[i]), mode=ImageReadMode.RGB))

    loader = DataLoader(Files(), batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                        persistent_workers=args.workers > 0, generator=torch.Generator().manual_seed(0))
    for _ in range(args.epochs):
        yield iter(loader)


def worker(args: argparse.Namespace, step_ms: float) -> dict:
    import torch

    files = list_files(args.corpus, args.limit)
    epochs = spdl_rs_epochs if args.worker == "spdl_rs" else torch_dataloader_epochs
    step_s = step_ms / 1000
    steps = images = 0
    stepping = 0.0
    start = time.perf_counter()
    for batches in epochs(args, files):
        for batch in batches:
            assert batch.dtype == torch.float32 and tuple(batch.shape[1:]) == (3, args.size, args.size), batch.shape
            t0 = time.perf_counter()
            time.sleep(step_s)  # the accelerator's step; releases the GIL
            stepping += time.perf_counter() - t0
            steps += 1
            images += batch.shape[0]
    wall = time.perf_counter() - start
    # Everything but the steps is the loop waiting for data: for the next batch, and for the
    # loader to start (DataLoader workers, a pipeline per epoch).
    waited = wall - stepping
    return {"system": args.worker, "step_ms": step_ms, "steps": steps, "images": images, "seconds": wall,
            "wait_seconds": waited, "steps_per_s": steps / wall, "wait_fraction": waited / wall,
            "torch": torch.__version__}


def drive(args: argparse.Namespace) -> None:
    systems = [s for s in args.systems.split(",") if s]
    step_times = [float(s) for s in args.step_ms.split(",")]
    files = list_files(args.corpus, args.limit)
    if not files:
        sys.exit(f"no JPEG under {args.corpus}")
    base = [sys.executable, os.path.abspath(__file__), "--corpus", args.corpus, "--epochs", str(args.epochs),
            "--batch-size", str(args.batch_size), "--size", str(args.size), "--threads", str(args.threads),
            "--workers", str(args.workers)] + (["--limit", str(args.limit)] if args.limit else [])
    runs = []
    load_before = os.getloadavg()[0]
    for r in range(args.rounds):
        for step_ms in step_times:
            for system in systems:  # alternating, so drifts hit both
                cmd = base + ["--worker", system, "--step-ms", str(step_ms)]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"{system} failed:\n{out.stderr}")
                row = json.loads(out.stdout.strip().splitlines()[-1])
                row["round"] = r
                runs.append(row)
                print(f"round {r} {system} {step_ms:g} ms: {row['steps_per_s']:.1f} steps/s, "
                      f"{100 * row['wait_fraction']:.1f}% waiting", file=sys.stderr)

    summary = []
    for step_ms in step_times:
        for system in systems:
            rows = [x for x in runs if x["system"] == system and x["step_ms"] == step_ms]
            summary.append({
                "system": system, "step_ms": step_ms,
                "steps_per_s": statistics.median(x["steps_per_s"] for x in rows),
                "steps_per_s_min": min(x["steps_per_s"] for x in rows),
                "steps_per_s_max": max(x["steps_per_s"] for x in rows),
                "wait_fraction": statistics.median(x["wait_fraction"] for x in rows),
                "ideal_steps_per_s": 1000 / step_ms,
            })
    # Other work on the machine slows both loaders (they share the cores with it): say how much.
    machine = (f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
               f"torch {runs[0]['torch']}; 1-minute load average {load_before:.1f} before the runs, "
               f"{os.getloadavg()[0]:.1f} after")
    md = [
        "# bench train",
        "",
        f"A training loop over {len(files)} JPEGs of `{args.corpus}` for {args.epochs} epochs, batches of "
        f"{args.batch_size} (train transform: random resized crop {args.size}, flip; float32 NCHW normalized), "
        f"the accelerator's step emulated by a GIL-free `time.sleep`. Steps/s over the whole run (loader "
        f"start-up included), median of {args.rounds} round(s) (min–max), and the share of the wall time "
        f"not spent in the steps: waiting for the next batch or for the loader to start. Machine: {machine}. Date: {time.strftime('%Y-%m-%d %H:%M')}.",
        "",
        "Command: `cargo xtask bench train` "
        f"(`bench/train.py --epochs {args.epochs} --step-ms {args.step_ms} --batch-size {args.batch_size} "
        f"--threads {args.threads} --workers {args.workers} --rounds {args.rounds}`).",
        "",
        "| step | loader | steps/s (min–max) | of the ideal | waiting for data |",
        "|---|---|---|---|---|",
    ]
    for s in summary:
        label = LABELS[s["system"]].format(threads=args.threads, workers=args.workers)
        md.append(f"| {s['step_ms']:g} ms | {label} | {s['steps_per_s']:.1f} ({s['steps_per_s_min']:.1f}–"
                  f"{s['steps_per_s_max']:.1f}) | {100 * s['steps_per_s'] / s['ideal_steps_per_s']:.0f}% | "
                  f"{100 * s['wait_fraction']:.1f}% |")
    md += ["", "The ideal is 1000 / step ms: a loader that never makes the step wait.", ""]
    text = "\n".join(md)
    print(text)
    if args.out:
        with open(f"{args.out}.md", "w") as f:
            f.write(text)
        with open(f"{args.out}.json", "w") as f:
            json.dump({"runs": runs, "summary": summary, "machine": machine}, f, indent=1)
        chart(summary, systems, step_times, args, f"{args.out}.png")


def chart(summary: list[dict], systems: list[str], step_times: list[float], args, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        rows = [next(s for s in summary if s["system"] == system and s["step_ms"] == t) for t in step_times]
        xs = [j + i * width for j in range(len(step_times))]
        label = LABELS[system].format(threads=args.threads, workers=args.workers)
        axes[0].bar(xs, [r["steps_per_s"] for r in rows], width, label=label)
        axes[1].bar(xs, [100 * r["wait_fraction"] for r in rows], width, label=label)
    for ax, title in zip(axes, ("steps/s (higher is better)", "% of wall time waiting for data (lower is better)")):
        ax.set_xticks([j + width * (len(systems) - 1) / 2 for j in range(len(step_times))])
        ax.set_xticklabels([f"{t:g} ms step" for t in step_times])
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    args = parse_args()
    if args.worker:
        step_ms = float(args.step_ms.split(",")[0])
        print(json.dumps(worker(args, step_ms)))
    else:
        drive(args)


if __name__ == "__main__":
    main()
