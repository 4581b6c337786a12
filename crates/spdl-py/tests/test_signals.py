"""Ctrl-C (SIGINT) while the consumer waits (items every few ms, or a slow stage it waits for
inside get_item()), while a busy Python stage runs, while a native stage runs, and during
stop(): every time a KeyboardInterrupt in the main thread and, after stop(), every thread
joined. Each scenario runs many times with random timing in a child process (signal_child.py),
which also prints the signal-to-exception latency (shown with -s, never asserted)."""

import json
import pathlib
import subprocess
import sys

import pytest

from conftest import SAMPLES

REPEATS = 100
CHILD = pathlib.Path(__file__).with_name("signal_child.py")


@pytest.mark.parametrize(
    "scenario", ["consumer_waits", "slow_stage", "python_stage", "native_stage", "stop"]
)
def test_sigint_gives_keyboard_interrupt_and_joins_threads(scenario):
    sample = SAMPLES / "opencv_fruits.jpg"
    if not sample.is_file():
        pytest.skip(f"bundled photo not found at {sample}")
    out = subprocess.run(
        [sys.executable, str(CHILD), scenario, str(REPEATS), "7", str(sample)],
        capture_output=True,
        text=True,
        timeout=120,  # a hang, not a measurement
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(scenario, result)
    assert (result["outcomes"], result["leaked"]) == ({"interrupted": REPEATS}, 0), (result, out.stderr[-2000:])
