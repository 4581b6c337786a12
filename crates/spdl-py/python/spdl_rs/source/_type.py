"""Protocols of sources (SPDL's ``spdl.source`` protocols)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["IterableWithShuffle", "SizedIterable", "SizedIterableWithShuffle"]

T = TypeVar("T", covariant=True)


@runtime_checkable
class IterableWithShuffle(Protocol[T]):
    """An iterable whose order is set by ``shuffle(seed)`` (the next iterations follow it)."""

    def shuffle(self, seed: int) -> None:
        """Reorders the items for the following iterations, from ``seed`` alone."""
        ...

    def __iter__(self) -> Iterator[T]: ...


@runtime_checkable
class SizedIterable(Protocol[T]):
    """An iterable with ``len()``."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[T]: ...


@runtime_checkable
class SizedIterableWithShuffle(Protocol[T]):
    """An :class:`IterableWithShuffle` with ``len()``."""

    def shuffle(self, seed: int) -> None:
        """Reorders the items for the following iterations, from ``seed`` alone."""
        ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[T]: ...
