"""Exceptions of spdl_rs (no dependency on the native module)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["PipelineFailure"]


class PipelineFailure(ExceptionGroup):  # noqa: N818 (SPDL's name)
    """Raised by a pipeline's iterator when a failure budget (``max_failures``) was exceeded or
    the source failed, after the items already produced.

    An :class:`ExceptionGroup`: ``exceptions`` are the most recent failures (up to 16: the
    exceptions Python ops raised; ``RuntimeError`` with the Rust message, which names the
    sample, for native stages), so ``except* ValueError:`` works. ``stage`` names the stage
    whose budget was exceeded (``"source"`` for a failing source), and the message says the
    count and the limit, e.g. ``too many failures [stage=decode]: 3 failures exceed
    max_failures=2; ...``.

    Mirrors SPDL's ``spdl.pipeline.PipelineFailure``.
    """

    stage: str | None

    def __new__(cls, message: str, exceptions: Sequence[Exception], stage: str | None = None):
        self = super().__new__(cls, message, list(exceptions))
        self.stage = stage
        return self

    def __init__(self, message: str, exceptions: Sequence[Exception], stage: str | None = None):
        super().__init__(message, list(exceptions))

    def derive(self, excs: Sequence[Exception]) -> "PipelineFailure":
        return PipelineFailure(self.message, excs, self.stage)
