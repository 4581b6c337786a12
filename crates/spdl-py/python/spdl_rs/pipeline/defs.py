"""Aggregators for ``PipelineBuilder.aggregate`` (the ``Aggregator`` and ``Collate`` of SPDL
0.8's ``spdl.pipeline.defs``)."""

from __future__ import annotations

import abc
from typing import Any, Generic, TypeVar

__all__ = ["Aggregator", "Collate"]

T = TypeVar("T")


class Aggregator(abc.ABC):
    """Custom grouping of items (SPDL's ``spdl.pipeline.defs.Aggregator``).

    The stage calls :meth:`accumulate` with each item in order, and passes on what it returns
    unless that is ``None``. At the end of each epoch, with ``aggregate(..., drop_last=False)``,
    it calls :meth:`flush` and passes on its result unless ``None``; with ``drop_last=True``
    it does not call ``flush`` (a continuous source: it calls it and discards the result, so
    the next epoch starts empty). An exception fails that item (counted against
    ``build(max_failures=)``). It runs with the GIL, one item at a time.
    """

    @abc.abstractmethod
    def accumulate(self, item: Any) -> Any | None:
        """Takes one item; returns a finished group, or ``None``."""

    @abc.abstractmethod
    def flush(self) -> Any | None:
        """Returns what is left at the end of an epoch (``None``: nothing) and resets."""


class Collate(Aggregator, Generic[T]):
    """Lists of ``n`` items (the last one of an epoch may be shorter); what
    ``aggregate(n)`` does. ``aggregate(Collate(n))`` runs natively, like ``aggregate(n)``,
    unless the stage has Python task hooks. Raises ``ValueError`` if ``n < 1``."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.n = n
        self._vals: list[T] = []

    def accumulate(self, item: T) -> list[T] | None:
        self._vals.append(item)
        if len(self._vals) >= self.n:
            out, self._vals = self._vals, []
            return out
        return None

    def flush(self) -> list[T] | None:
        out, self._vals = self._vals, []
        return out or None
