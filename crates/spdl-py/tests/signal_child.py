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
# Seconds per item of the slow stage: longer than the consumer's 50 ms wake-ups, so that the
# signal lands while the consumer waits inside get_item().
SLOW = float(os.environ.get("SIGNAL_CHILD_SLOW", "0.15"))


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def sleepy(x):
    time.sleep(0.005)
    return x


def slow(x):
    time.sleep(SLOW)
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
    elif scenario == "slow_stage":
        b = b.add_source(range(10**9)).pipe(slow, concurrency=1)
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


def one(scenario: str, sample: str, rng: random.Random, latencies: list) -> str:
    p = build(scenario, sample)
    sent = []

    def send() -> None:
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(rng.uniform(0.0, 0.03), send)
    outcome = "lost"
    try:
        try:
            p.start()
            for _ in range(0 if scenario == "slow_stage" else rng.randint(0, 3)):
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
            latencies.append(time.monotonic() - sent[0])
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
    # A process started in the background by a non-interactive shell (as CI may run us) begins
    # with SIGINT ignored, and Python then keeps it ignored: install the usual handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    base_os, base_py = os_threads(), threading.active_count()
    counts: dict[str, int] = {}
    leaked = 0
    latencies: list[float] = []
    for _ in range(repeats):
        outcome = one(scenario, sample, rng, latencies)
        counts[outcome] = counts.get(outcome, 0) + 1
        end = time.monotonic() + 5.0
        while (os_threads() > base_os or threading.active_count() > base_py) and time.monotonic() < end:
            time.sleep(0.005)
        if os_threads() > base_os or threading.active_count() > base_py:
            leaked += 1
            base_os, base_py = os_threads(), threading.active_count()
    latencies.sort()
    ms = [round(1000 * latencies[int(q * (len(latencies) - 1))], 1) for q in (0.5, 0.99, 1.0)] if latencies else []
    # Latency (signal sent -> KeyboardInterrupt caught) is informational: shown, never asserted.
    print(json.dumps({"outcomes": counts, "leaked": leaked, "latency_ms_p50_p99_max": ms}))


if __name__ == "__main__":
    main()
