"""spdl_rs vs SPDL 0.8.0 on SPDL's own media paths: the same code, only the import differs.

    python bench/spdl_paths.py --ours /work/dev-venv/bin/python \
        --spdl /work/spdl-base/bin/python [--reps 5] [--rows load_video,...] [--json out.json]

`--ours` is an interpreter with spdl_rs (FFmpeg build), `--spdl` one with `spdl==0.8.0`. Every
measurement is a fresh process of one side running one row (a warm-up call, then timed calls);
the sides alternate within each repetition (the order flips every repetition), so both see the
same machine load, and each row reports the median over `--reps` and the ratio ours / SPDL, and
the CPU time of the process per item (`getrusage`, all threads) with the ratio SPDL / ours: on a
busy machine a process gets a share of the cores whatever its thread count, and the rate then
follows the CPU per item.
Only the ratios of one run are comparable when the machine is busy (`uptime`).

Rows (each written as SPDL's examples write it, `io` being `spdl.io` or `spdl_rs.io`):

- `load_video tN`: `io.to_numpy(io.load_video(data, decode_config=io.decode_config(
  decoder_options={"threads": "N"})))` on the bytes of a 640x480 5 s H.264 clip (testsrc,
  x264 ultrafast, as `examples/benchmark_video.py` makes it), 2 worker threads (calls/s);
- `decode_packets tN`: `io.convert_frames(io.decode_packets(io.demux_video(data),
  decode_config=...))` on the same bytes, 2 worker threads (calls/s);
- `load_image_batch`: `load_image_batch(32 JPEGs, width=224, height=224)` (letterboxed RGB);
- `load_image_batch filter_desc`: `examples/imagenet_classification.py`'s CPU path:
  `load_image_batch(32 JPEGs, width=None, height=None, pix_fmt=None, strict=True,
  filter_desc=get_video_filter_desc(scale_width=256, scale_height=256, crop_width=224,
  crop_height=224, pix_fmt="rgb24"))` (images/s);
- `load_audio`: `io.to_numpy(io.load_audio(path))` on a 30 s 44.1 kHz stereo 16-bit WAV
  (calls/s);
- `iter_tarfile convert`: `examples/benchmark_tarfile.py`'s "bytes w/ convert": `for _, c in
  io.iter_tarfile(data): bytes(c)` over 64 members of 1 MiB, 4 worker threads (archives/s).

The JPEGs are the first 32 of `/work/shared/data/photos` (or `--photos DIR`).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

WORK = pathlib.Path(tempfile.gettempdir()) / "spdl-paths-bench"
ROWS = [
    "load_video t1",
    "load_video t2",
    "load_video t4",
    "decode_packets t1",
    "decode_packets t2",
    "decode_packets t4",
    "load_image_batch",
    "load_image_batch filter_desc",
    "load_audio",
    "iter_tarfile convert",
]


def prepare(photos: pathlib.Path) -> dict:
    """Makes the inputs once (in WORK) and returns their paths."""
    WORK.mkdir(exist_ok=True)
    video = WORK / "testsrc_640x480_5s.mp4"
    if not video.exists():
        subprocess.run(
            ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
             "testsrc=duration=5:size=640x480:rate=30", "-c:v", "libx264", "-preset", "ultrafast",
             "-pix_fmt", "yuv420p", str(video)],
            check=True,
        )
    wav = WORK / "sine_44100_stereo_30s.wav"
    if not wav.exists():
        subprocess.run(
            ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
             "sine=frequency=440:sample_rate=44100:duration=30", "-ac", "2", "-c:a", "pcm_s16le",
             str(wav)],
            check=True,
        )
    tar = WORK / "members_64x1MiB.tar"
    if not tar.exists():
        import io as pyio
        import tarfile

        buf = pyio.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for i in range(64):
                content = b"1" * (1 << 20)
                info = tarfile.TarInfo(name=f"file_{i:06d}.txt")
                info.size = len(content)
                t.addfile(info, pyio.BytesIO(content))
        tar.write_bytes(buf.getvalue())
    jpgs = sorted(str(p) for p in photos.glob("*.jp*g"))[:32]
    if len(jpgs) < 32:
        raise SystemExit(f"need 32 JPEGs in {photos}, found {len(jpgs)}")
    return {"video": str(video), "wav": str(wav), "tar": str(tar), "jpgs": jpgs}


def worker(side: str, row: str, inputs: dict, seconds: float) -> dict:
    """Runs `row` in this process for about `seconds` after one warm-up; returns its rate."""
    from concurrent.futures import ThreadPoolExecutor

    if side == "ours":
        from spdl_rs import io
    else:
        import spdl.io as io

    data = pathlib.Path(inputs["video"]).read_bytes()
    name, _, arg = row.partition(" ")
    workers, per_call = 1, 1
    if name in ("load_video", "decode_packets"):
        cfg = io.decode_config(decoder_options={"threads": arg[1:]})
        workers = 2
        if name == "load_video":
            def call():
                return io.to_numpy(io.load_video(data, decode_config=cfg))
        else:
            def call():
                return io.to_numpy(io.convert_frames(io.decode_packets(io.demux_video(data), decode_config=cfg)))
    elif name == "load_image_batch":
        jpgs = inputs["jpgs"]
        per_call = len(jpgs)
        if arg == "filter_desc":
            desc = io.get_video_filter_desc(
                scale_width=256, scale_height=256, crop_width=224, crop_height=224, pix_fmt="rgb24"
            )

            def call():
                return io.to_numpy(io.load_image_batch(
                    jpgs, width=None, height=None, pix_fmt=None, strict=True, filter_desc=desc
                ))
        else:
            def call():
                return io.to_numpy(io.load_image_batch(jpgs, width=224, height=224))
    elif name == "load_audio":
        wav = inputs["wav"]

        def call():
            return io.to_numpy(io.load_audio(wav))
    elif name == "iter_tarfile":
        tar = pathlib.Path(inputs["tar"]).read_bytes()
        workers = 4

        def call():
            n = 0
            for _, content in io.iter_tarfile(tar):
                bytes(content)
                n += 1
            return n
    else:
        raise SystemExit(f"unknown row {row!r}")

    import resource

    shape = getattr(call(), "shape", None)  # warm-up (and what it gives)
    done = 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        while time.perf_counter() - t0 < seconds:
            list(pool.map(lambda _: call(), range(workers)))
            done += workers
    elapsed = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    # CPU of all the process's threads per item: what the rate becomes when the process gets
    # a fixed share of a busy machine, whatever its thread count.
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {
        "rate": done * per_call / elapsed,
        "cpu_ms": 1000 * cpu / (done * per_call),
        "calls": done,
        "shape": list(shape) if shape else None,
    }


def run_one(python: str, side: str, row: str, inputs: dict, seconds: float) -> dict:
    cmd = [python, __file__, "--worker", side, "--row", row, "--inputs", json.dumps(inputs),
           "--seconds", str(seconds)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", default=sys.executable)
    ap.add_argument("--spdl", default="/work/spdl-base/bin/python")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per measurement")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--photos", default="/work/shared/data/photos")
    ap.add_argument("--json")
    ap.add_argument("--worker")
    ap.add_argument("--row")
    ap.add_argument("--inputs")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.row, json.loads(args.inputs), args.seconds)))
        return

    inputs = prepare(pathlib.Path(args.photos))
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    rates: dict = {r: {"ours": [], "spdl": []} for r in rows}
    cpus: dict = {r: {"ours": [], "spdl": []} for r in rows}
    load = [os.getloadavg()[0]]
    for rep in range(args.reps):
        for row in rows:
            sides = [("ours", args.ours), ("spdl", args.spdl)]
            for side, py in sides if rep % 2 == 0 else sides[::-1]:
                r = run_one(py, side, row, inputs, args.seconds)
                rates[row][side].append(r["rate"])
                cpus[row][side].append(r["cpu_ms"])
                print(f"rep {rep} {row:30s} {side:4s} {r['rate']:9.1f}/s cpu {r['cpu_ms']:8.2f} ms "
                      f"shape={r['shape']}", flush=True)
        load.append(os.getloadavg()[0])
    print(f"\n1-min load average during the run: {min(load):.2f} .. {max(load):.2f}")
    print("| row | spdl_rs (/s) | SPDL 0.8.0 (/s) | ratio | CPU ms/item spdl_rs | SPDL | CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    table = {}
    for row in rows:
        o, s = statistics.median(rates[row]["ours"]), statistics.median(rates[row]["spdl"])
        co, cs = statistics.median(cpus[row]["ours"]), statistics.median(cpus[row]["spdl"])
        table[row] = {"ours": o, "spdl": s, "ratio": o / s, "all": rates[row],
                      "cpu_ms": {"ours": co, "spdl": cs, "all": cpus[row]}}
        # CPU ratio: SPDL's CPU per item over ours (> 1: spdl_rs spends less).
        print(f"| `{row}` | {o:.1f} | {s:.1f} | {o / s:.2f}x | {co:.2f} | {cs:.2f} | {cs / co:.2f}x |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"load": load, "rows": table}, indent=1))


if __name__ == "__main__":
    main()
