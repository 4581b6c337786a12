import os
import pathlib
import threading
import time

# A spawned worker that unpickles `Images` imports this module, not the test's: numpy must be
# loaded there too, as the test modules load it (the arena finds it in sys.modules).
import numpy  # noqa: F401
import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
SAMPLES = REPO / "data" / "samples"
FIXTURES = REPO / "crates" / "spdl-io" / "tests" / "fixtures" / "hard"


def os_threads() -> int:
    """Threads of this process, as the kernel sees them (Rust threads included)."""
    return len(os.listdir("/proc/self/task"))


def wait_threads(target: int, timeout: float = 5.0) -> int:
    """Waits until the process has at most `target` threads; returns the count."""
    deadline = time.monotonic() + timeout
    n = os_threads()
    while n > target and time.monotonic() < deadline:
        time.sleep(0.02)
        n = os_threads()
    return n


def spin_while(call) -> int:
    """How many times another Python thread loops while `call` runs (it only runs if the GIL is
    released)."""
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        before = counter[0]
        call()
        during = counter[0] - before
    finally:
        stop.set()
        t.join()
    return during


@pytest.fixture
def samples() -> pathlib.Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"bundled photos not found at {SAMPLES}")
    return SAMPLES


@pytest.fixture
def fixtures() -> pathlib.Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"spdl-io fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture
def thread_baseline():
    """Checks that a test leaves no thread behind (Python or native)."""
    base_os, base_py = os_threads(), threading.active_count()
    yield
    assert wait_threads(base_os) <= base_os, f"leaked native threads: {os_threads()} > {base_os}"
    assert threading.active_count() <= base_py, threading.enumerate()


class Images:
    """A source of one batch, ``io.load_image_batch(paths, 32, 24)`` (a ``CPUBuffer``), for
    ``iterate_in_subprocess``: defined here so that a spawned worker can import it."""

    def __init__(self, paths):
        self.paths = paths

    def __iter__(self):
        from spdl_rs import io

        yield io.load_image_batch(self.paths, 32, 24)


def images(paths):
    return Images(paths)
