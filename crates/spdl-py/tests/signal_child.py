"""Run by test_signals.py in a child process: Ctrl-C (SIGINT, sent to the whole process as a
terminal does) at a random moment of one scenario, many times; prints one JSON line of outcomes.

Usage: python signal_child.py SCENARIO REPEATS SEED SAMPLE_JPEG
"""

import json
import os
import random
import signal
import sys
import threading
import time

from spdl_rs import ops
from spdl_rs.pipeline import PipelineBuilder

HANG = 5.0  # seconds without a KeyboardInterrupt after the signal: lost


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def sleepy(x):
    time.sleep(0.005)
    return x


def busy(x):
    # Pure Python work holding the GIL (between switch intervals) for a few milliseconds.
    end = time.perf_counter() + 0.004
    n = 0
    while time.perf_counter() < end:
        n += 1
    return x


def build(scenario: str, sample: str):
    b = PipelineBuilder()
    if scenario == "native_stage":
        b = b.add_source([sample] * 100_000).pipe(ops.read_file()).pipe(ops.decode_image(224, 224))
    elif scenario == "python_stage":
        b = b.add_source(range(10**9)).pipe(busy, concurrency=2)
    else:  # consumer_waits, stop
        b = b.add_source(range(10**9)).pipe(sleepy, concurrency=2)
    return b.add_sink(2).build(num_threads=2)


def wait_for_interrupt() -> None:
    """Idles in Python so that a signal already received is raised here."""
    end = time.monotonic() + HANG
    while time.monotonic() < end:
        time.sleep(0.001)


def one(scenario: str, sample: str, rng: random.Random) -> str:
    p = build(scenario, sample)
    timer = threading.Timer(rng.uniform(0.0, 0.03), os.kill, (os.getpid(), signal.SIGINT))
    outcome = "lost"
    try:
        try:
            p.start()
            for _ in range(rng.randint(0, 3)):
                p.get_item(timeout=HANG)
            timer.start()
            if scenario == "stop":
                p.stop()
                wait_for_interrupt()
            else:
                end = time.monotonic() + HANG
                while time.monotonic() < end:
                    p.get_item(timeout=HANG)
        except KeyboardInterrupt:
            outcome = "interrupted"
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        outcome = f"error: {type(e).__name__}: {e}"
    finally:
        timer.join()
        while True:  # stop() again: the signal may have cut the first one short
            try:
                p.stop()
                break
            except KeyboardInterrupt:
                outcome = "interrupted"
    return outcome


def main() -> None:
    scenario, repeats, seed, sample = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(seed)
    base_os, base_py = os_threads(), threading.active_count()
    counts: dict[str, int] = {}
    leaked = 0
    for _ in range(repeats):
        outcome = one(scenario, sample, rng)
        counts[outcome] = counts.get(outcome, 0) + 1
        end = time.monotonic() + 5.0
        while (os_threads() > base_os or threading.active_count() > base_py) and time.monotonic() < end:
            time.sleep(0.005)
        if os_threads() > base_os or threading.active_count() > base_py:
            leaked += 1
            base_os, base_py = os_threads(), threading.active_count()
    print(json.dumps({"outcomes": counts, "leaked": leaked}))


if __name__ == "__main__":
    main()
