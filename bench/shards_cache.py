#!/usr/bin/env python3
"""Sharded streaming and the decoded cache, side by side in one run.

    cargo xtask bench shards   # builds what it needs, then runs this script
    nice -n 19 PY bench/shards_cache.py --spdl target/release/spdl \
        [--corpus ~/.cache/spdl-corpus/imagenet-like-2000] [--latency-ms 20] [--threads 2] \
        [--rounds 3] [--out bench/results/shards_cache.md]

``PY`` is a Python with ``numpy``, ``spdl_rs`` importable (a wheel, or ``PYTHONPATH`` on a
built package) and, optionally, ``turboloader`` (``python -m pip install turboloader``).

Part 1, shards vs files (images/s of ``spdl load``, eval 224, u8, each run a fresh process):
the corpus packed by ``spdl shard --image-folder`` into 100-sample shards and served by s3s-fs
through a loopback proxy that delays every request by ``--latency-ms``, read as
``s3://bench/shards/shard-{000000..N}.tar`` (one sequential GET per shard, the next 2 shards
opened ahead, and again with ``--shard-readahead 0``: each opened in turn); the same corpus as
single files from local disk; and, for contrast, as single objects from the same S3 (one GET
per image, each paying the latency).

Part 2, training batches (random crop 224 of 256 + flip + ImageNet normalization, f32 NCHW,
batches of 64, ``--threads`` threads): from the decoded cache (``spdl_rs.io.DecodedCache``,
built once with ``build_decoded_cache(size=256)``); from the JPEGs
(``spdl_rs.io.load_image_batch(transform="train")``: decode + random resized crop + flip +
normalize); and from TurboLoader's RAW_U8 ``.tbl`` cache (``preprocess_to_tbl(image_size=256)``,
``TblRawImageLoader(image_size=224, hflip_prob=0.5)``: a serve-time resize, with and without
its ``train_aug`` random resized crop). images/s = images / wall time; CPU per image = user +
system CPU of the process during the run / images. Medians of ``--rounds``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def latency_proxy(listen: int, target: int, delay: float) -> None:
    """A TCP proxy on a thread of its own: each chunk from the client (a request) reaches the
    server ``delay`` seconds later."""

    async def pipe(reader, writer, wait):
        try:
            while data := await reader.read(1 << 16):
                if wait:
                    await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def handle(cr, cw):
        try:
            sr, sw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, sw, True), pipe(sr, cw, False))

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", listen)
        async with server:
            await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(main()), daemon=True).start()


def run_load(spdl: str, source: str, env: dict, threads: int, extra=()) -> dict:
    cmd = [spdl, "load", source, "--json", "-q", "--size", "224", "--transform", "eval", "-t", str(threads), *extra]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr[-2000:]}")
    report = json.loads(out.stdout)
    return {"images": report["images"], "failed": report["failed"], "seconds": report["seconds"], "wall": wall}


def timed(fn) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, images) of ``fn()`` (which returns images)."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    n = fn()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, n


def in_threads(batches: list, work, threads: int) -> int:
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(work, batches))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spdl", default="target/release/spdl")
    ap.add_argument("--corpus", default=str(pathlib.Path.home() / ".cache/spdl-corpus/imagenet-like-2000"))
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--s3s-fs", default=str(pathlib.Path.home() / ".cache/spdl-tools/bin/s3s-fs"))
    ap.add_argument("--skip-shards", action="store_true")
    ap.add_argument("--skip-cache", action="store_true")
    ap.add_argument("--out", default="bench/results/shards_cache.md")
    args = ap.parse_args()
    corpus = pathlib.Path(args.corpus)
    work = pathlib.Path(tempfile.mkdtemp(prefix="spdl-shards-bench-"))
    lines = [
        "# Shards from S3 vs files, and the decoded cache",
        "",
        f"`{' '.join(sys.argv)}` on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())};"
        f" corpus `{corpus}`; medians of {args.rounds} rounds.",
        "",
    ]
    try:
        if not args.skip_shards:
            lines += bench_shards(args, corpus, work)
        if not args.skip_cache:
            lines += bench_cache(args, corpus, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    print(text)
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(text)
    return 0


def bench_shards(args, corpus: pathlib.Path, work: pathlib.Path) -> list[str]:
    data = work / "s3"
    shards = data / "bench" / "shards"
    subprocess.run(
        [args.spdl, "shard", str(corpus), str(shards), "--image-folder", "--samples-per-shard", "100"],
        check=True,
        capture_output=True,
    )
    shutil.copytree(corpus, data / "bench" / "files")
    n_shards = len(list(shards.glob("*.tar")))
    s3_port, proxy_port = free_port(), free_port()
    server = subprocess.Popen(
        [args.s3s_fs, "--host", "127.0.0.1", "--port", str(s3_port), "--access-key", "bench", "--secret-key", "bench-secret", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", s3_port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        latency_proxy(proxy_port, s3_port, args.latency_ms / 1000)
        env = dict(
            os.environ,
            AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy_port}",
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench-secret",
            AWS_REGION="us-east-1",
        )
        pattern = f"s3://bench/shards/shard-{{000000..{n_shards - 1:06}}}.tar"
        systems = {
            f"shards from S3 (+{args.latency_ms:g} ms per request), read-ahead 2 shards": (pattern, ("--shard-readahead", "2")),
            f"shards from S3 (+{args.latency_ms:g} ms per request), no read-ahead": (pattern, ("--shard-readahead", "0")),
            "single files from local disk": (str(corpus), ("--image-folder",)),
            f"single objects from S3 (+{args.latency_ms:g} ms per request)": ("s3://bench/files/", ("--fetch-concurrency", "64")),
        }
        runs: dict[str, list] = {k: [] for k in systems}
        for _ in range(args.rounds):
            for name, (src, extra) in systems.items():
                runs[name].append(run_load(args.spdl, src, env, args.threads, extra))
    finally:
        server.kill()
        server.wait()
    out = [
        f"## ImageNet-like corpus ({n_shards} shards of 100): `spdl load` eval 224 u8, {args.threads} threads",
        "",
        "| source | images/s (median) | min - max | images | failed |",
        "|---|---|---|---|---|",
    ]
    for name, rs in runs.items():
        ips = [r["images"] / r["seconds"] for r in rs]
        out.append(
            f"| {name} | {statistics.median(ips):.1f} | {min(ips):.1f} - {max(ips):.1f} | {rs[0]['images']} | {rs[0]['failed']} |"
        )
    out += [
        "",
        f"Commands: `{args.spdl} load '{pattern}' --json -q --size 224 --transform eval -t {args.threads}"
        " --shard-readahead 2` (or `0`) with"
        " `AWS_ENDPOINT_URL` on the latency proxy; `spdl load CORPUS --image-folder ...`; `spdl load s3://bench/files/"
        " --fetch-concurrency 64 ...`.",
        "",
    ]
    return out


def bench_cache(args, corpus: pathlib.Path, work: pathlib.Path) -> list[str]:
    import numpy as np
    import spdl_rs.io as sio

    paths = sorted(str(p) for p in corpus.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))
    cache = work / "train.spdlcache"
    t0 = time.perf_counter()
    failures = sio.build_decoded_cache(paths, str(cache), size=256, transform="resize", num_threads=args.threads)
    build_s = time.perf_counter() - t0
    assert not failures, failures[:3]
    dc = sio.DecodedCache(cache)
    bs = 64
    order = np.random.default_rng(0).permutation(len(paths))
    batches = [order[i : i + bs].tolist() for i in range(0, len(order), bs)]

    def from_cache(epoch):
        def work(idx):
            buf = dc.load_batch(idx, epoch=epoch, crop=224, random_crop=True, flip=True, normalize=True, seed=1)
            np.asarray(buf)
            return len(idx)

        return lambda: in_threads(batches, work, args.threads)

    def from_jpegs(epoch):
        def work(idx):
            buf = sio.load_image_batch(
                [paths[i] for i in idx], size=224, transform="train", normalize=True, num_threads=1, seed=1, epoch=epoch
            )
            np.asarray(buf)
            return len(idx)

        return lambda: in_threads(batches, work, args.threads)

    systems = {"spdl_rs DecodedCache (crop 224 of 256 + flip + normalize)": from_cache, "spdl_rs JPEGs (decode + RRC 224 + flip + normalize)": from_jpegs}
    notes = [f"spdl_rs cache build: {len(paths)} JPEGs -> 256x256 in {build_s:.1f} s ({len(paths) / build_s:.0f} images/s, {args.threads} threads)"]
    try:
        import turboloader as tl

        tar = work / "all.tar"
        subprocess.run([args.spdl, "shard", str(corpus), str(work / "one"), "--image-folder", "--samples-per-shard", str(len(paths) + 1)], check=True, capture_output=True)
        shutil.move(str(next((work / "one").glob("*.tar"))), tar)
        tbl = work / "train.tbl"
        t0 = time.perf_counter()
        tl.preprocess_to_tbl(str(tar), str(tbl), image_size=256, num_workers=args.threads)
        notes.append(f"TurboLoader {tl.__version__} preprocess_to_tbl: {time.perf_counter() - t0:.1f} s")

        def turbo(train_aug):
            def f(epoch):
                def go():
                    loader = tl.TblRawImageLoader(
                        str(tbl), batch_size=bs, image_size=224, hflip_prob=0.5, train_aug=train_aug, seed=1, prefetch_batches=2
                    )
                    loader.set_epoch(epoch)
                    n = 0
                    for batch, _meta in loader:
                        n += len(batch)
                    return n

                return go

            return f

        systems[f"TurboLoader {tl.__version__} TblRawImageLoader (resize 256->224 + flip + normalize)"] = turbo(False)
        systems[f"TurboLoader {tl.__version__} TblRawImageLoader train_aug (RRC 224 + flip + normalize)"] = turbo(True)
    except ImportError as e:
        notes.append(f"TurboLoader skipped: {e}")
    results: dict[str, list] = {k: [] for k in systems}
    for r in range(args.rounds):
        for name, make in systems.items():
            results[name].append(timed(make(r)))
    out = [
        f"## Training batches: {len(paths)} images, batches of {bs}, f32 NCHW, {args.threads} threads",
        "",
        "| system | images/s (median) | min - max | CPU ms per image |",
        "|---|---|---|---|",
    ]
    for name, rs in results.items():
        ips = [n / w for w, _c, n in rs]
        cpu = statistics.median(c / n * 1000 for _w, c, n in rs)
        out.append(f"| {name} | {statistics.median(ips):.0f} | {min(ips):.0f} - {max(ips):.0f} | {cpu:.3f} |")
    out += ["", *[f"- {n}" for n in notes], ""]
    return out


if __name__ == "__main__":
    sys.exit(main())
