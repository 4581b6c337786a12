"""``profile_pipeline``: each stage run alone at several concurrencies (SPDL 0.8's
``spdl.pipeline.profile_pipeline``), plus a recommended concurrency per stage (the sweep
itself and diagnostic mode: :mod:`._sweep`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._build import config_to_builder
from ._builder import PipelineBuilder
from ._sweep import ProfileHook, ProfileResult, sweep
from .defs import PipelineConfig

__all__ = ["profile_pipeline", "ProfileHook", "ProfileResult"]


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
    spec = config_to_builder(cfg) if isinstance(cfg, PipelineConfig) else cfg
    if not isinstance(spec, PipelineBuilder):
        raise TypeError(f"profile_pipeline takes a PipelineBuilder or its get_config(), got {type(cfg).__name__}")
    return sweep(spec, num_inputs, callback, hook)
