"""Two frames near the start and near the end of the 5-minute clip of `bench/media_api.py`
(640x360 H.264, key frame every 10 s), median of 7 runs, in one interpreter:

    python bench/media_index_access.py ours   # spdl_rs (decode_packets window + load_video(indices=))
    python bench/media_index_access.py spdl   # SPDL 0.8 (decode_packets window)

Run `bench/media_api.py` once first (it makes the clip under target/bench-media).
"""

import pathlib
import statistics
import sys
import time

import numpy as np

LONG = pathlib.Path(__file__).resolve().parents[1] / "target" / "bench-media" / "testsrc2_640x360_300s.mp4"
FPS = 25


def median_ms(fn, n: int = 7) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main() -> None:
    ours = sys.argv[1] == "ours"
    if ours:
        from spdl_rs import io
    else:
        import spdl.io as io
    for label, i in (("near start", 100), ("near end", 7400)):
        w = (i / FPS, (i + 2) / FPS)
        t = median_ms(lambda w=w: np.asarray(io.convert_frames(io.decode_packets(io.demux_video(str(LONG), timestamp=w)))))
        print(f"{sys.argv[1]:5s} decode_packets(demux_video(timestamp)) {label}: {t:.1f} ms")
        if ours:
            t = median_ms(lambda i=i: io.load_video(str(LONG), indices=[i, i + 1]))
            print(f"{sys.argv[1]:5s} load_video(indices=[{i}, {i + 1}]) {label}: {t:.1f} ms")


if __name__ == "__main__":
    main()
