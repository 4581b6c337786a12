"""SPDL's ``spdl.dataloader.CacheDataLoader``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from ..pipeline import cache_iterator

__all__ = ["CacheDataLoader"]

T = TypeVar("T")


class CacheDataLoader(Iterable[T]):
    """Wraps a data loader: each ``iter()`` is :func:`cache_iterator` over it (SPDL's
    ``CacheDataLoader``). ``len()`` and other attributes are the wrapped loader's."""

    def __init__(self, dl: Iterable[T], num_caches: int, return_caches_after: int, stop_after: int | None = None) -> None:
        self.dl = dl
        self.num_caches = num_caches
        self.return_caches_after = return_caches_after
        self.stop_after = stop_after

    def __iter__(self) -> Iterator[T]:
        return cache_iterator(
            self.dl,
            num_caches=self.num_caches,
            return_caches_after=self.return_caches_after,
            stop_after=self.stop_after,
        )

    def __len__(self) -> int:
        return len(self.dl)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        if name == "dl":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.dl, name)
