"""``profile_pipeline``: each stage run alone at several concurrencies (SPDL 0.8's
``spdl.pipeline.profile_pipeline``), plus a recommended concurrency per stage; and SPDL's
diagnostic mode (``SPDL_PIPELINE_DIAGNOSTIC_MODE=1``)."""

from __future__ import annotations

import copy
import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import config

if TYPE_CHECKING:
    from ._pipeline import PipelineBuilder

__all__ = ["profile_pipeline", "ProfileHook", "ProfileResult"]

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


def _run_one(builder: "PipelineBuilder", num_threads: int, limit: int | None = None) -> tuple[list, float, float]:
    """Runs ``builder``'s pipeline once: outputs (at most ``limit``), items per second, and the
    sink queue's occupancy rate."""
    from ._pipeline import _Build

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


def profile_pipeline(
    cfg: Any,
    num_inputs: int = 1000,
    *,
    callback: Callable[[ProfileResult], None] | None = None,
    hook: ProfileHook | None = None,
) -> Sequence[ProfileResult]:
    """Runs each stage of ``cfg`` alone on the outputs of the stages before it, at concurrency
    32, 16, 8, 4 and 1 (aggregation stages: 1), with as many worker threads, and measures the
    items per second and the output queue's occupancy; returns one :class:`ProfileResult` per
    stage, each with a ``recommended_concurrency``. [Experimental in SPDL too.]

    ``cfg``: a :class:`PipelineBuilder` or its ``get_config()``. ``num_inputs``: source items
    taken (the first ones). ``callback``: called with each stage's result as it is ready
    (default ``config.get_default_profile_callback()``). ``hook``: a :class:`ProfileHook`
    (default ``config.get_default_profile_hook()``). On a ``LOCAL_RANK`` other than 0 nothing
    is profiled (``[]``), as SPDL. The ops run for real: profile side-effect-free stages.

    Raises ``RuntimeError`` if the source gives no item or a stage gives none,
    ``TypeError`` if ``cfg`` is not a builder or its config.
    """
    from ._build import config_to_builder
    from ._pipeline import PipelineBuilder
    from .defs import PipelineConfig

    spec = config_to_builder(cfg) if isinstance(cfg, PipelineConfig) else cfg
    if not isinstance(spec, PipelineBuilder):
        raise TypeError(f"profile_pipeline takes a PipelineBuilder or its get_config(), got {type(cfg).__name__}")
    hook_ = hook or config.get_default_profile_hook() or _NoHook()
    callback_ = callback or config.get_default_profile_callback() or (lambda _: None)
    with hook_.pipeline_profile_hook():
        if int(os.environ.get("LOCAL_RANK", "0")) != 0:
            _LG.info("Profiling runs on local rank 0 only. Exiting without profiling.")
            return []
        src = PipelineBuilder().add_source(spec._source).add_sink(1)
        inputs, _, _ = _run_one(src, 1, limit=num_inputs)
        _LG.info("Fetched %d input samples.", len(inputs))
        if not inputs:
            raise RuntimeError("No input samples are fetched.")
        results = []
        from ._build import lower_stages

        # Placement markers are left out: profiling runs each stage on threads.
        stages, _ = lower_stages([st for st in spec._stages if st["kind"] != "placement"])
        for stage in stages:
            if not inputs:
                raise RuntimeError(f"An empty input was provided to stage {stage['name']}")
            sweep = (1,) if stage["kind"] in ("aggregate", "disaggregate") else _SWEEP
            stats = []
            outputs: list = []
            for conc in sweep:
                b = PipelineBuilder().add_source(inputs)
                st = copy.copy(stage)
                if "concurrency" in st:
                    st["concurrency"] = conc
                b._stages.append(st)
                with hook_.stage_profile_hook(stage["name"], conc):
                    outputs, qps, occupancy = _run_one(b.add_sink(2), conc)
                _LG.info("[%s] concurrency %d: QPS %.2f, occupancy %.2f", stage["name"], conc, qps, occupancy)
                stats.append(_ProfileStats(conc, qps, occupancy))
            result = ProfileResult(stage["name"], stats, _recommend(stats))
            callback_(result)
            results.append(result)
            inputs = outputs
        return results


class _DiagnosticPipeline:
    """What ``build()`` returns in diagnostic mode: the first read profiles the pipeline and
    exits the process (``SystemExit(0)``), as SPDL's."""

    def __init__(self, builder: "PipelineBuilder", num_items: int) -> None:
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
        profile_pipeline(self._builder, self._num_items)
        _LG.info("Profiling completed. Exiting.")
        raise SystemExit(0)

    def get_iterator(self, *, timeout: float | None = None) -> Iterator[Any]:
        while True:
            yield self.get_item(timeout=timeout)

    def __iter__(self) -> Iterator[Any]:
        return self.get_iterator()
