"""``cache_iterator``: replays cached items for headspace analysis (SPDL's
``spdl.pipeline.cache_iterator``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["cache_iterator"]

T = TypeVar("T")


def cache_iterator(
    src: Iterable[T],
    num_caches: int,
    *,
    return_caches_after: int | None = None,
    stop_after: int | None = None,
    delete_src: bool = True,
) -> Iterator[T]:
    """Yields ``src``'s items, keeping the first ``num_caches``; after
    ``return_caches_after`` items (default ``num_caches``) it stops reading ``src`` and
    replays the cache, round after round, until ``stop_after`` items in all (``None``: for
    ever) (SPDL's ``spdl.pipeline.cache_iterator``). Replaying measures the training loop
    with data loading taken out: the upper bound of what a faster loader could give.
    ``delete_src``: drop the reference to ``src`` once it is no longer read (so a data
    loader's resources can be released). An empty ``src`` ends the iterator.

    Raises ``ValueError`` if ``num_caches <= 0``, ``return_caches_after < num_caches``,
    ``stop_after < num_caches`` or ``stop_after < return_caches_after``.
    """
    if num_caches <= 0:
        raise ValueError(f"`num_caches` must be greater than zero. Found: {num_caches}")
    if return_caches_after is not None and return_caches_after < num_caches:
        raise ValueError(
            "When provided, `return_caches_after` must be greater than or equal to `num_caches`. "
            f"{num_caches=}, {return_caches_after=}"
        )
    if stop_after is not None:
        if stop_after < num_caches:
            raise ValueError(
                f"When provided, `stop_after` must be greater than or equal to `num_caches`. {num_caches=}, {stop_after=}"
            )
        if return_caches_after is not None and stop_after < return_caches_after:
            raise ValueError(
                "When provided, `stop_after` must be greater than or equal to `return_caches_after`. "
                f"{return_caches_after=}, {stop_after=}"
            )
    return _cache_iter(src, num_caches, return_caches_after or num_caches, stop_after, delete_src)


def _cache_iter(src: Iterable[T], num_caches: int, run_for: int, stop_after: int | None, delete_src: bool) -> Iterator[T]:
    limit = stop_after if stop_after is not None else float("inf")
    cache: list[T] = []
    n = 0
    for item in src:
        yield item
        n += 1
        if len(cache) < num_caches:
            cache.append(item)
        if n >= limit:
            return
        if n >= run_for:
            break
    if delete_src:
        del src
    if not cache:
        return
    while True:
        for item in cache:
            yield item
            n += 1
            if n >= limit:
                return
