"""spdl_rs vs SPDL 0.8 on the packet/frame media API, side by side in one run.

    python bench/media_api.py --ours target/spdl-venv/bin/python \
        --spdl target/spdl08-venv/bin/python [--reps 3]

`--ours` is an interpreter with spdl_rs (FFmpeg build); `--spdl` one with `pip install
spdl==0.8.0` (it runs on the system FFmpeg 5.1). Each side runs in its own process on the same
clips (spdl-rs first, then SPDL 0.8), and reports the median of `--reps` (the 5-minute
streaming pass: `--reps - 1`, at least 1):

1. `load_video(clip, filter_desc=get_video_filter_desc(scale_width=224, scale_height=224))`
   on real clips (frames/s over the whole clip);
2. `Demuxer.streaming_demux` + `Decoder.streaming_decode_packets` + `convert_frames` over a
   5-minute 640x360 H.264 clip (made here with ffmpeg's testsrc2 and libx264, keyframe every
   10 s), with the same filter: frames/s and the process's peak RSS;
3. two frames near the start and near the end of that clip: spdl_rs `load_video(indices=)`
   (seeks to the key frame before the first wanted frame), spdl_rs and SPDL
   `decode_packets(demux_video(clip, timestamp=window))` (a 2-frame window), in ms.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
VIDEOS = pathlib.Path("/work/shared/data/videos")
CLIPS = [VIDEOS / "bikes.mp4", VIDEOS / "bigbuckbunny.mp4"]
LONG = ROOT / "target" / "bench-media" / "testsrc2_640x360_300s.mp4"
FPS = 25
N_LONG = 300 * FPS
NEAR_START = 100
NEAR_END = N_LONG - 100


def make_long_clip() -> None:
    if LONG.exists():
        return
    LONG.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i",
        f"testsrc2=size=640x360:rate={FPS}:duration=300",
        "-c:v", "libx264", "-preset", "veryfast", "-g", str(10 * FPS), "-pix_fmt", "yuv420p",
        str(LONG) + ".tmp.mp4",
    ]
    subprocess.run(cmd, check=True)
    pathlib.Path(str(LONG) + ".tmp.mp4").rename(LONG)


def timed(fn, reps: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def worker(side: str, reps: int) -> dict:
    import resource

    import numpy as np

    if side == "ours":
        from spdl_rs import io
    else:
        import spdl.io as io
    desc = io.get_video_filter_desc(scale_width=224, scale_height=224)
    res: dict = {}

    for clip in CLIPS:
        def load(clip=clip):
            out = io.load_video(str(clip), filter_desc=desc)
            return np.asarray(out.frames if side == "ours" else out)

        t, arr = timed(load, reps)
        res[f"load_video {clip.name}"] = {"frames": arr.shape[0], "s": t, "fps": arr.shape[0] / t}

    def stream() -> int:
        n = 0
        d = io.Demuxer(str(LONG))
        dec = io.Decoder(d.video_codec, filter_desc=desc)
        for packets in d.streaming_demux(d.video_stream_index, num_packets=250):
            for frames in dec.streaming_decode_packets(packets):
                n += np.asarray(io.convert_frames(frames)).shape[0]
        for frames in dec.flush():
            n += np.asarray(io.convert_frames(frames)).shape[0]
        return n

    t, n = timed(stream, max(1, reps - 1))
    res["streaming_decode_packets 5 min"] = {
        "frames": n,
        "s": t,
        "fps": n / t,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }

    for label, i in (("near start", NEAR_START), ("near end", NEAR_END)):
        window = (i / FPS, (i + 2) / FPS)

        def by_window(window=window):
            packets = io.demux_video(str(LONG), timestamp=window)
            return np.asarray(io.convert_frames(io.decode_packets(packets)))

        t, arr = timed(by_window, reps)
        res[f"decode_packets(demux_video(timestamp)) {label}"] = {"frames": arr.shape[0], "ms": t * 1e3}
        if side == "ours":
            t, out = timed(lambda i=i: io.load_video(str(LONG), indices=[i, i + 1]), reps)
            res[f"load_video(indices=[{i}, {i + 1}]) {label}"] = {"frames": len(out.pts), "ms": t * 1e3}
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ours", default=str(ROOT / "target" / "spdl-venv" / "bin" / "python"))
    p.add_argument("--spdl", default=str(ROOT / "target" / "spdl08-venv" / "bin" / "python"))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--worker", choices=["ours", "spdl"])
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.reps)))
        return
    make_long_clip()
    results = {}
    for side, py in (("spdl-rs", a.ours), ("SPDL 0.8", a.spdl)):
        out = subprocess.run(
            [py, __file__, "--worker", "ours" if side == "spdl-rs" else "spdl", "--reps", str(a.reps)],
            check=True, capture_output=True, text=True, cwd="/tmp",
        ).stdout
        results[side] = json.loads(out.strip().splitlines()[-1])
    keys = list(dict.fromkeys(k for r in results.values() for k in r))
    print(f"{'measure':58s} {'spdl-rs':>22s} {'SPDL 0.8':>22s}")
    for k in keys:
        cells = []
        for side in ("spdl-rs", "SPDL 0.8"):
            r = results[side].get(k)
            if r is None:
                cells.append("-")
            elif "fps" in r:
                extra = f", {r['peak_rss_mb']:.0f} MB" if "peak_rss_mb" in r else ""
                cells.append(f"{r['fps']:.0f} f/s ({r['frames']}){extra}")
            else:
                cells.append(f"{r['ms']:.1f} ms ({r['frames']} fr)")
        print(f"{k:58s} {cells[0]:>22s} {cells[1]:>22s}")


if __name__ == "__main__":
    sys.exit(main())
