"""The profiler's sweep (each stage of a builder run alone at several concurrencies, see
:func:`._profile.profile_pipeline`) and SPDL's diagnostic mode
(``SPDL_PIPELINE_DIAGNOSTIC_MODE=1``), whose pipeline runs the sweep. Below the builder: it
runs a builder's stages through ``_pipeline._Build`` and copies of the builder, never
``PipelineBuilder`` itself."""

from __future__ import annotations

import copy
import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from . import config
from ._pipeline import _Build
from ._regions import lower_stages

__all__ = ["ProfileHook", "ProfileResult", "sweep"]

_LG = logging.getLogger("spdl_rs.pipeline")

#: Concurrencies tried for a per-item stage, as SPDL's sweep.
_SWEEP = (32, 16, 8, 4, 1)
#: A concurrency is recommended when it reaches this share of the best throughput.
_GOOD_ENOUGH = 0.95


class ProfileHook(ABC):
    """Code run around the profiling (SPDL's ``spdl.pipeline.ProfileHook``):
    ``pipeline_profile_hook()`` around the whole :func:`profile_pipeline` call,
    ``stage_profile_hook(stage, concurrency)`` around each run of one stage."""

    @abstractmethod
    @contextmanager
    def stage_profile_hook(self, stage: str, concurrency: int) -> Iterator[None]:
        """Around one run of ``stage`` at ``concurrency``."""
        yield

    @abstractmethod
    @contextmanager
    def pipeline_profile_hook(self) -> Iterator[None]:
        """Around the whole profiling."""
        yield


class _NoHook(ProfileHook):
    @contextmanager
    def stage_profile_hook(self, stage: str, concurrency: int) -> Iterator[None]:
        yield

    @contextmanager
    def pipeline_profile_hook(self) -> Iterator[None]:
        yield


@dataclass
class _ProfileStats:
    concurrency: int
    """The stage's concurrency (and the worker threads) in this run."""
    qps: float
    """Items out of the stage per second."""
    occupancy_rate: float
    """Share of the run the stage's output queue held an item (0.0 to 1.0)."""


@dataclass
class ProfileResult:
    """One stage's sweep (SPDL's ``spdl.pipeline.ProfileResult``): ``name`` and ``stats`` (one
    ``(concurrency, qps, occupancy_rate)`` per concurrency tried, in the order tried).

    spdl_rs adds ``recommended_concurrency``: the smallest concurrency tried whose throughput
    is within 5% of the best one (more would only cost threads and memory)."""

    name: str
    stats: Sequence[_ProfileStats]
    recommended_concurrency: int = field(default=1)


def _recommend(stats: Sequence[_ProfileStats]) -> int:
    best = max((s.qps for s in stats), default=0.0)
    ok = [s.concurrency for s in stats if s.qps >= _GOOD_ENOUGH * best]
    return min(ok) if ok else 1


def _run_one(builder: Any, num_threads: int, limit: int | None = None) -> tuple[list, float, float]:
    """Runs ``builder``'s pipeline once: outputs (at most ``limit``), items per second, and the
    sink queue's occupancy rate."""
    # Not `build()`: in diagnostic mode that would profile again.
    p = _Build(builder, num_threads, None, -1, None, lambda _: [], 0).run()
    out: list = []
    t0 = time.monotonic()
    with p.auto_stop():
        for item in p:
            out.append(item)
            if limit is not None and len(out) >= limit:
                break
        elapsed = time.monotonic() - t0
        occupancy = p.get_stats().queues[-1].occupancy_rate
    return out, (len(out) / elapsed if elapsed > 0 else float("nan")), occupancy


def _plan(spec: Any, source: Any, stages: list[Any], sink_size: int) -> Any:
    """A copy of the builder ``spec`` (its class, whatever it is) with ``source``,
    ``stages`` and a sink of ``sink_size``: what :func:`_run_one` runs."""
    b = copy.copy(spec)
    b._source, b._continuous, b._stages, b._sink_size = source, False, list(stages), sink_size
    b._stats_ids = None
    return b


def sweep(spec: Any, num_inputs: int, callback: Any = None, hook: Any = None) -> Sequence[ProfileResult]:
    """:func:`._profile.profile_pipeline` of a builder ``spec`` (see there)."""
    hook_ = hook or config.get_default_profile_hook() or _NoHook()
    callback_ = callback or config.get_default_profile_callback() or (lambda _: None)
    with hook_.pipeline_profile_hook():
        if int(os.environ.get("LOCAL_RANK", "0")) != 0:
            _LG.info("Profiling runs on local rank 0 only. Exiting without profiling.")
            return []
        src = _plan(spec, spec._source, [], 1)
        inputs, _, _ = _run_one(src, 1, limit=num_inputs)
        _LG.info("Fetched %d input samples.", len(inputs))
        if not inputs:
            raise RuntimeError("No input samples are fetched.")
        results = []
        # Placement markers are left out: profiling runs each stage on threads.
        stages, _ = lower_stages([st for st in spec._stages if st.kind != "placement"])
        for stage in stages:
            if not inputs:
                raise RuntimeError(f"An empty input was provided to stage {stage.name}")
            per_item = stage.kind not in ("aggregate", "disaggregate")
            stats = []
            outputs: list = []
            for conc in _SWEEP if per_item else (1,):
                st = stage.with_(concurrency=conc) if per_item else stage
                with hook_.stage_profile_hook(stage.name, conc):
                    outputs, qps, occupancy = _run_one(_plan(spec, inputs, [st], 2), conc)
                _LG.info("[%s] concurrency %d: QPS %.2f, occupancy %.2f", stage.name, conc, qps, occupancy)
                stats.append(_ProfileStats(conc, qps, occupancy))
            result = ProfileResult(stage.name, stats, _recommend(stats))
            callback_(result)
            results.append(result)
            inputs = outputs
        return results


class _DiagnosticPipeline:
    """What ``build()`` returns in diagnostic mode: the first read profiles the pipeline and
    exits the process (``SystemExit(0)``), as SPDL's."""

    def __init__(self, builder: Any, num_items: int) -> None:
        self._builder = builder
        self._num_items = num_items

    def start(self, *, timeout: float | None = None, daemon: bool = False) -> None:
        """Nothing to start."""

    def stop(self, *, timeout: float | None = None) -> None:
        """Nothing to stop."""

    @contextmanager
    def auto_stop(self, *, timeout: float | None = None) -> Iterator[None]:
        yield

    def get_item(self, *, timeout: float | None = None) -> Any:
        sweep(self._builder, self._num_items)
        _LG.info("Profiling completed. Exiting.")
        raise SystemExit(0)

    def get_iterator(self, *, timeout: float | None = None) -> Iterator[Any]:
        while True:
            yield self.get_item(timeout=timeout)

    def __iter__(self) -> Iterator[Any]:
        return self.get_iterator()
