#!/usr/bin/env python3
"""Sharded streaming and the decoded cache, side by side in one run.

    cargo xtask bench shards   # builds what it needs, then runs this script
    nice -n 19 PY bench/shards_cache.py --spdl target/release/spdl --bench-bins target/release \
        [--smoke] [--corpus ~/.cache/spdl-corpus/imagenet-like-2000] [--latency-ms 20] [--threads 2] \
        [--rounds 3] [--out bench/results/shards_cache.md]

``PY`` is a Python with ``numpy``, ``spdl_rs`` importable (a wheel, or ``PYTHONPATH`` on a
built package) and, optionally, ``turboloader`` (``python -m pip install turboloader``).

Part 1, remote vs local (``spdl load``, eval 224, u8, each run a fresh process, the systems in
alternating rounds): the corpus as single files from local disk; packed by ``spdl shard
--image-folder`` into 100-sample shards, read from local disk; the same shards over HTTP (the
Rust ``file_server`` of package ``spdl-benches``: whole files, ranges, keep-alive) and over S3
(the same ``file_server`` answering as a minimal S3 endpoint, and s3s-fs), with 2 shards opened
ahead and, for S3, none; and the corpus as single S3 objects (adaptive fetch concurrency, the
default, and ``--fetch-concurrency``). Each remote request is answered ``--latency-ms`` after it
arrived: by ``file_server`` itself (its ``DELAY_MS``), or, where a row says "by the proxy", by
the Rust ``latency_proxy`` (same package), which delays each client-to-server chunk (s3s-fs
cannot delay its answers; one ``file_server`` row behind the proxy shows what the proxy's
copies cost on the shared cores). Per system: images/s (the loader's report), the loader's own
CPU per image (user + system from ``os.wait4``), and the server's and the proxy's CPU per image
apart (``/proc/PID/stat`` before and after the run).
``--smoke``: 600 images, one round (under a minute). ``--bench-bins``: where the two binaries
are (``cargo build --release -p spdl-benches --bins``).

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


def wait_port(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_load(spdl: str, source: str, env: dict, threads: int, extra=(), watch=()) -> dict:
    """One ``spdl load`` in a fresh process: its report, its own CPU (rusage from wait4) and
    the CPU the processes ``watch`` (server, proxy; ``None``: no such process) spent meanwhile."""
    cmd = [spdl, "load", source, "--json", "-q", "--size", "224", "--transform", "eval", "-t", str(threads), *extra]
    before = [proc_cpu(p) if p else 0.0 for p in watch]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        # Not Popen.communicate: it would reap the child before wait4 could read its rusage.
        child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err)
        stdout = child.stdout.read().decode()
        child.stdout.close()
        _pid, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        after = [proc_cpu(p) if p else None for p in watch]
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {stderr[-2000:]}")
    report = json.loads(stdout)
    return {
        "images": report["images"],
        "failed": report["failed"],
        "seconds": report["seconds"],
        # Until the first batch was out: a remote source's first round trip falls here, once.
        "first": report.get("first_batch_seconds"),
        "batch": report.get("batch_size") or 32,
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "watched": [None if b1 is None else b1 - b0 for b0, b1 in zip(before, after)],
        # Where the adaptive fetch concurrency ended (None when fixed).
        "fetch": (report.get("fetch_concurrency") or {}).get("final"),
    }


def after_first(r: dict) -> float:
    """images/s after the first batch of a ``run_load`` result."""
    return (r["images"] - r["batch"]) / (r["seconds"] - r["first"])


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
    ap.add_argument("--bench-bins", default="target/release", help="where `latency_proxy` and `file_server` are")
    ap.add_argument("--fetch-concurrency", type=int, default=64, help="the fixed rows' requests in flight")
    ap.add_argument("--smoke", action="store_true", help="600 images of the corpus, 1 round: under a minute")
    ap.add_argument("--skip-shards", action="store_true")
    ap.add_argument("--skip-cache", action="store_true")
    ap.add_argument("--out", default="bench/results/shards_cache.md")
    args = ap.parse_args()
    if args.smoke:
        args.rounds = 1
    corpus = pathlib.Path(args.corpus)
    work = pathlib.Path(tempfile.mkdtemp(prefix="spdl-shards-bench-"))
    lines = [
        "# Remote vs local (shards, objects), and the decoded cache",
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


def small_corpus(corpus: pathlib.Path, dest: pathlib.Path, count: int) -> pathlib.Path:
    """The first ``count`` images of ``corpus`` (by path), their class folders kept."""
    paths = sorted(p for p in corpus.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))[:count]
    for p in paths:
        (dest / p.parent.relative_to(corpus)).mkdir(parents=True, exist_ok=True)
        shutil.copy(p, dest / p.relative_to(corpus))
    return dest


def bench_shards(args, corpus: pathlib.Path, work: pathlib.Path) -> list[str]:
    if args.smoke:
        corpus = small_corpus(corpus, work / "corpus", 600)
    data = work / "s3"
    shards = data / "bench" / "shards"
    subprocess.run(
        [args.spdl, "shard", str(corpus), str(shards), "--image-folder", "--samples-per-shard", "100"],
        check=True,
        capture_output=True,
    )
    shutil.copytree(corpus, data / "bench" / "files")
    n_images = len([p for p in corpus.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg")])
    n_shards = len(list(shards.glob("*.tar")))
    bins = pathlib.Path(args.bench_bins)
    s3_port, http_port, s3_proxy_port, http_proxy_port, delayed_port = (free_port() for _ in range(5))
    ms = f"{args.latency_ms:g}"
    procs = {}
    try:
        procs["s3s-fs"] = subprocess.Popen(
            [args.s3s_fs, "--host", "127.0.0.1", "--port", str(s3_port), "--access-key", "bench", "--secret-key", "bench-secret", str(data)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs["file server"] = subprocess.Popen([bins / "file_server", str(http_port), str(data)])
        procs["S3 proxy"] = subprocess.Popen([bins / "latency_proxy", str(s3_proxy_port), str(s3_port), str(args.latency_ms)])
        procs["HTTP proxy"] = subprocess.Popen([bins / "latency_proxy", str(http_proxy_port), str(http_port), str(args.latency_ms)])
        # The same server, answering each request --latency-ms after it arrived: no proxy.
        procs["delaying server"] = subprocess.Popen([bins / "file_server", str(delayed_port), str(data), str(args.latency_ms)])
        for port in (s3_port, http_port, s3_proxy_port, http_proxy_port, delayed_port):
            wait_port(port)
        def s3_env(port: int) -> dict:
            return dict(
                os.environ,
                AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
                AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench-secret",
                AWS_REGION="us-east-1",
            )

        # `file_server` answers S3 too (path style, no signature check, cheap on the shared
        # cores); s3s-fs is a full S3 server (signatures, and much more CPU per byte).
        lean, proxied, s3s = s3_env(delayed_port), s3_env(http_proxy_port), s3_env(s3_proxy_port)
        plain = dict(os.environ)
        braces = f"shard-{{000000..{n_shards - 1:06}}}.tar"
        s3_pids = (procs["s3s-fs"].pid, procs["S3 proxy"].pid)
        http_pids = (procs["file server"].pid, procs["HTTP proxy"].pid)
        delayed_pids = (procs["delaying server"].pid, None)
        fc = ("--fetch-concurrency", str(args.fetch_concurrency))
        n = args.fetch_concurrency
        # name: (source, extra arguments, environment, (server pid, proxy pid or None) or ())
        systems = {
            "single files, local disk": (str(corpus), ("--image-folder",), plain, ()),
            "shards, local disk": (str(shards / braces), (), plain, ()),
            f"shards, HTTP (+{ms} ms), read-ahead 2": (
                f"http://127.0.0.1:{delayed_port}/bench/shards/{braces}",
                ("--shard-readahead", "2"),
                plain,
                delayed_pids,
            ),
            f"shards, S3 (+{ms} ms), read-ahead 2": (f"s3://bench/shards/{braces}", ("--shard-readahead", "2"), lean, delayed_pids),
            f"shards, S3 (+{ms} ms), no read-ahead": (f"s3://bench/shards/{braces}", ("--shard-readahead", "0"), lean, delayed_pids),
            f"single objects, S3 (+{ms} ms), adaptive from 64": ("s3://bench/files/", (), lean, delayed_pids),
            f"single objects, S3 (+{ms} ms), {n} in flight": ("s3://bench/files/", fc, lean, delayed_pids),
            f"single objects, S3 (+{ms} ms by the proxy), {n} in flight": ("s3://bench/files/", fc, proxied, http_pids),
            f"shards, S3 via s3s-fs (+{ms} ms by the proxy), read-ahead 2": (
                f"s3://bench/shards/{braces}",
                ("--shard-readahead", "2"),
                s3s,
                s3_pids,
            ),
            f"single objects, S3 via s3s-fs (+{ms} ms by the proxy), adaptive from 64": ("s3://bench/files/", (), s3s, s3_pids),
        }
        names = list(systems)
        runs: dict[str, list] = {k: [] for k in systems}
        load = os.getloadavg()
        for r in range(args.rounds):
            # Alternating rounds, each starting one system later: drift on a shared machine
            # falls on every system alike.
            for name in names[r % len(names) :] + names[: r % len(names)]:
                src, extra, env, watch = systems[name]
                runs[name].append(run_load(args.spdl, src, env, args.threads, extra, watch))
        load_after = os.getloadavg()
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
    local = runs["single files, local disk"]
    out = [
        f"## {n_images} images ({n_shards} shards of 100): `spdl load` eval 224 u8, {args.threads} threads,"
        f" +{ms} ms per request",
        "",
        f"Load average (1 min) {load[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} cores."
        " \"x local files\" is the median over rounds of the ratio to local files in the same round"
        " (paired: drift of a shared machine cancels).",
        "",
        "| source | images/s (median) | min - max | x local files | first batch ms | x local after it | loader CPU ms/image | x local | server CPU ms/image | proxy CPU ms/image | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for name, rs in runs.items():
        ips = [r["images"] / r["seconds"] for r in rs]
        cpu = statistics.median(r["cpu"] / r["images"] * 1000 for r in rs)
        x_ips = statistics.median(
            (r["images"] / r["seconds"]) / (b["images"] / b["seconds"]) for r, b in zip(rs, local)
        )
        x_cpu = statistics.median((r["cpu"] / r["images"]) / (b["cpu"] / b["images"]) for r, b in zip(rs, local))
        first = statistics.median(r["first"] * 1000 for r in rs)
        x_after = statistics.median(after_first(r) / after_first(b) for r, b in zip(rs, local))
        watched = ["-", "-"]
        for i, w in enumerate(rs[0]["watched"]):
            if w is not None:
                watched[i] = f"{statistics.median(r['watched'][i] / r['images'] * 1000 for r in rs):.3f}"
        if rs[0]["fetch"] is not None:
            ends = sorted(r["fetch"] for r in rs)
            notes.append(f"- {name}: the adaptive limit ended at {', '.join(map(str, ends))} in flight (rounds, sorted).")
        out.append(
            f"| {name} | {statistics.median(ips):.0f} | {min(ips):.0f} - {max(ips):.0f} | {x_ips:.2f}"
            f" | {first:.0f} | {x_after:.2f} | {cpu:.3f} | {x_cpu:.2f} | {watched[0]} | {watched[1]} | {rs[0]['failed']} |"
        )
    out += [
        "",
        f"Each run is a fresh `{args.spdl} load SOURCE --json -q --size 224 --transform eval -t {args.threads}`;"
        " images/s from its report; loader CPU = user + system of that process (`wait4` rusage); server"
        " (the bench's `file_server`, which serves the HTTP shards and answers as a minimal S3 endpoint, or"
        " s3s-fs where named) and proxy (`latency_proxy`, which delays each request"
        f" by {ms} ms) CPU from `/proc/PID/stat` before and after the run. Without \"by the proxy\" the"
        f" server itself answers each request {ms} ms after it arrived (no proxy process). Sources: the"
        f" ImageFolder corpus; `{braces}` on local disk; the same shards over HTTP and S3;"
        f" `s3://bench/files/` with the default adaptive fetch concurrency (from 64) or"
        f" `--fetch-concurrency {n}`. \"first batch ms\": from the start of the run to the first batch"
        " out (the report's `first_batch_seconds`); \"x local after it\": the images/s of the rest"
        " of the run (images after the first batch over the time after it) against local files', paired"
        " as above: the rate once a remote source's first round trip, paid once per run, is behind it.",
        "",
        *notes,
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
