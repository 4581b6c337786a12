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
    count and the limit, e.g. ``too many failures: stage=decode: 3 failures exceed
    max_failures=2; ...``.

    Mirrors SPDL's ``spdl.pipeline.PipelineFailure``; SPDL's constructor form
    ``PipelineFailure([(stage_name, exception), ...])`` works too (message ``"pipeline stages
    failed"``, each exception noted ``Pipeline stage: NAME``).
    """

    stage: str | None

    def __new__(cls, message: object, exceptions: Sequence[Exception] | None = None, stage: str | None = None):
        if exceptions is None:
            # SPDL's form, ``PipelineFailure([(stage_name, exception), ...])``: each exception
            # gets the note ``Pipeline stage: NAME``, the message is SPDL's.
            errs = [(str(name), _groupable(exc)) for name, exc in message]  # type: ignore[attr-defined]
            for name, exc in errs:
                exc.add_note(f"Pipeline stage: {name}")
            self = super().__new__(cls, "pipeline stages failed", [e for _, e in errs])
            names = {name for name, _ in errs}
            self.stage = names.pop() if len(names) == 1 else None
            return self
        self = super().__new__(cls, str(message), [_groupable(e) for e in exceptions])
        self.stage = stage
        return self

    def __init__(self, message: object, exceptions: Sequence[Exception] | None = None, stage: str | None = None):
        pass  # ExceptionGroup is made in __new__

    def derive(self, excs: Sequence[Exception]) -> "PipelineFailure":
        return PipelineFailure(self.message, excs, self.stage)


def _groupable(e: BaseException) -> Exception:
    """``e``, or a ``RuntimeError`` caused by it when it is a ``BaseException`` only (a
    ``KeyboardInterrupt`` a source raised, say): an ``ExceptionGroup`` holds ``Exception``s."""
    if isinstance(e, Exception):
        return e
    wrapped = RuntimeError(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
    wrapped.__cause__ = e
    return wrapped
