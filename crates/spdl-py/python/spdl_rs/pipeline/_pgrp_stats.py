"""``ProcessGroupStatsMonitor``: CPU, memory, disk and network use of this process group, read
from ``/proc`` by a monitor subprocess (SPDL 0.8's ``spdl.pipeline.ProcessGroupStatsMonitor``;
Linux only).

Ranks of a training job that share a cgroup usually each lead their own process group, so
summing over the group gives per-rank figures that cgroup-level monitors cannot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ._misc import BackgroundTask

__all__ = ["ProcessGroupResourceUsage", "ProcessGroupStatsMonitor"]

_LG = logging.getLogger("spdl_rs.pipeline")

#: SPDL's default collection interval (seconds).
DEFAULT_INTERVAL = 60.0


@dataclasses.dataclass
class ProcessGroupResourceUsage:
    """One snapshot of the process group's resource use (SPDL's
    ``ProcessGroupResourceUsage``); a field is ``None`` when it could not be read.

    Memory has three views: ``rss_bytes`` sums each process's resident pages (pages shared
    between processes count once per process: an upper bound); ``pss_bytes`` divides each
    shared page among its sharers (the group's real footprint); ``private_bytes`` counts only
    pages no other process maps (``Private_Clean + Private_Dirty``).
    """

    pid: int
    """PID of the process that owns the monitor."""
    pgid: int
    """The process group summed over."""
    cpu_percent: float | None = None
    """CPU time over wall time since the previous snapshot, in percent of one core (200.0:
    two cores busy); ``None`` in the first snapshot."""
    rss_bytes: int | None = None
    """Summed resident set size, bytes."""
    pss_bytes: int | None = None
    """Summed proportional set size, bytes (``None`` without ``smaps_rollup``)."""
    private_bytes: int | None = None
    """Summed private memory, bytes (``None`` without ``smaps_rollup``)."""
    disk_read_bytes: int | None = None
    """Bytes the group read from storage (``/proc/PID/io`` ``read_bytes``), cumulative."""
    disk_write_bytes: int | None = None
    """Bytes the group wrote to storage, cumulative."""
    num_procs: int | None = None
    """Processes in the group."""
    net_rx_bytes: int | None = None
    """Bytes received by the host's interfaces but ``lo`` since the previous snapshot (the
    network namespace, not the group); ``None`` in the first snapshot."""
    net_tx_bytes: int | None = None
    """Bytes sent since the previous snapshot, as ``net_rx_bytes``."""


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _fields(text: str, keys: dict[str, int]) -> dict[str, int]:
    """``{name: value * scale}`` for the ``name: value ...`` lines of ``text`` named in
    ``keys`` (``{line name: scale}``)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in keys:
            out[parts[0]] = int(parts[1]) * keys[parts[0]]
    return out


def _stat(text: str) -> tuple[int, int, int]:
    """``(pgrp, utime + stime in ticks, rss in pages)`` from ``/proc/PID/stat``. The command
    name may hold spaces and parentheses: the fields start after the last ``)``."""
    rest = text[text.rindex(")") + 2 :].split()
    return int(rest[2]), int(rest[11]) + int(rest[12]), int(rest[21])


class _Sampler:
    """Takes snapshots, keeping what the next one's differences need."""

    def __init__(self) -> None:
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.prev_cpu: tuple[float, float] | None = None  # (cpu seconds, monotonic time)
        self.prev_net: tuple[int, int] | None = None

    def sample(self) -> ProcessGroupResourceUsage:
        pgid = os.getpgrp()
        now = time.monotonic()
        usage = ProcessGroupResourceUsage(pid=os.getpid(), pgid=pgid)
        cpu_ticks = rss_pages = procs = 0
        pss = private = read = write = 0
        smaps = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            text = _read(f"/proc/{entry.name}/stat")
            if text is None:
                continue  # the process is gone
            try:
                group, ticks, pages = _stat(text)
            except (ValueError, IndexError):
                continue
            if group != pgid:
                continue
            procs += 1
            cpu_ticks += ticks
            rss_pages += pages
            if (rollup := _read(f"/proc/{entry.name}/smaps_rollup")) is not None:
                kb = _fields(rollup, {"Pss:": 1024, "Private_Clean:": 1024, "Private_Dirty:": 1024})
                smaps = True
                pss += kb.get("Pss:", 0)
                private += kb.get("Private_Clean:", 0) + kb.get("Private_Dirty:", 0)
            if (io := _read(f"/proc/{entry.name}/io")) is not None:
                b = _fields(io, {"read_bytes:": 1, "write_bytes:": 1})
                read += b.get("read_bytes:", 0)
                write += b.get("write_bytes:", 0)
        cpu = cpu_ticks / self.ticks
        if self.prev_cpu is not None and now > self.prev_cpu[1]:
            usage.cpu_percent = (cpu - self.prev_cpu[0]) / (now - self.prev_cpu[1]) * 100.0
        self.prev_cpu = (cpu, now)
        usage.rss_bytes = rss_pages * self.page
        usage.pss_bytes = pss if smaps else None
        usage.private_bytes = private if smaps else None
        usage.disk_read_bytes, usage.disk_write_bytes, usage.num_procs = read, write, procs
        net = self._net()
        if net is not None:
            if self.prev_net is not None:
                usage.net_rx_bytes = net[0] - self.prev_net[0]
                usage.net_tx_bytes = net[1] - self.prev_net[1]
            self.prev_net = net
        return usage

    @staticmethod
    def _net() -> tuple[int, int] | None:
        text = _read("/proc/net/dev")
        if text is None:
            return None
        rx = tx = 0
        for line in text.splitlines()[2:]:
            name, _, counters = line.partition(":")
            cols = counters.split()
            if name.strip() == "lo" or len(cols) < 9:
                continue
            rx += int(cols[0])
            tx += int(cols[8])
        return rx, tx


def _monitor_main(interval: float, callback: Callable[[ProcessGroupResourceUsage], Awaitable[None]]) -> None:
    """The monitor subprocess: a snapshot, ``await callback(snapshot)``, sleep ``interval``;
    until SIGINT or SIGTERM. A failing snapshot or callback is logged and skipped."""
    running = True

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    async def loop() -> None:
        sampler = _Sampler()
        while running:
            try:
                usage = await asyncio.get_running_loop().run_in_executor(None, sampler.sample)
                await callback(usage)
            except Exception:
                _LG.exception("process-group stats: a snapshot or its callback failed")
            # Sleep in short steps so that a signal ends the loop promptly.
            deadline = time.monotonic() + interval
            while running and (left := deadline - time.monotonic()) > 0:
                await asyncio.sleep(min(left, 0.1))

    asyncio.run(loop())


class ProcessGroupStatsMonitor(BackgroundTask):
    """A background task (``build_pipeline(..., background_tasks=[...])`` or
    ``config.set_default_background_tasks``) that starts a subprocess sending a
    :class:`ProcessGroupResourceUsage` of this process group to ``callback`` every
    ``interval`` seconds (SPDL 0.8's ``ProcessGroupStatsMonitor``; Linux only).

    ``callback``: an async function taking the snapshot; it runs in the monitor subprocess
    (so it must be picklable with the ``spawn`` and ``forkserver`` methods, and it sees that
    process's state: send results on, e.g. to a file, a queue or a metrics service).
    ``mp_context``: the :mod:`multiprocessing` context that starts the subprocess (default:
    ``multiprocessing.get_context()``). The monitor runs in its own process so that reading
    ``/proc`` costs the pipeline's process nothing.
    """

    def __init__(
        self,
        callback: Callable[[ProcessGroupResourceUsage], Awaitable[None]],
        interval: float = DEFAULT_INTERVAL,
        mp_context: Any = None,
    ) -> None:
        super().__init__()
        if not callable(callback):
            raise TypeError(f"callback must be an async callable, got {type(callback).__name__}")
        self._callback = callback
        self._interval = float(interval)
        self._mp_context = mp_context

    async def run(self) -> None:
        """Starts the monitor subprocess and waits for it, checking every second that it is
        alive (a warning if it exits on its own). Cancelled (the pipeline stops), it ends the
        subprocess (SIGTERM, then SIGKILL after 5 s) and re-raises ``CancelledError``. In a
        daemon process (which cannot have children) it logs a warning and returns."""
        if multiprocessing.current_process().daemon:
            _LG.warning(
                "Process-group stats monitor skipped: a daemon process (pid=%d) cannot start the monitor subprocess.",
                os.getpid(),
            )
            return
        ctx = self._mp_context or multiprocessing.get_context()
        proc = ctx.Process(target=_monitor_main, args=(self._interval, self._callback), daemon=True)
        proc.start()
        _LG.info("Process-group stats monitor started (pid=%d, monitor pid=%d, pgid=%d)", os.getpid(), proc.pid, os.getpgrp())
        try:
            while proc.is_alive():
                await asyncio.sleep(1)
            _LG.warning("Process-group stats monitor exited on its own (exit code %s)", proc.exitcode)
        except asyncio.CancelledError:
            loop = asyncio.get_running_loop()
            proc.terminate()
            await loop.run_in_executor(None, proc.join, 5)
            if proc.is_alive():
                proc.kill()
                await loop.run_in_executor(None, proc.join, 1)
            _LG.info("Process-group stats monitor stopped (monitor pid=%d)", proc.pid)
            raise
