"""Transformations of iterables (SPDL's ``spdl.source.utils``): ``MergeIterator``,
``repeat_source``, ``embed_shuffle``."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, TypeVar

from ._type import IterableWithShuffle

__all__ = ["MergeIterator", "embed_shuffle", "repeat_source"]

T = TypeVar("T")

_LG = logging.getLogger(__name__)

#: Resolution of the weighted mixing: weights are rounded to multiples of 1/_RESOLUTION.
_RESOLUTION = 1024


def _window_counts(weights: Sequence[float]) -> list[int]:
    """Per-source draws in one window: the weights scaled to ``_RESOLUTION`` in total by the
    largest-remainder method (each positive weight gets at least one), reduced by their gcd."""
    total = sum(weights)
    scaled = [w / total * _RESOLUTION for w in weights]
    counts = [max(1, math.floor(s)) for s in scaled]
    spare = _RESOLUTION - sum(counts)
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(scaled[i] - math.floor(scaled[i])), i))
    for i in by_remainder[: max(0, spare)]:
        counts[i] += 1
    g = math.gcd(*counts)
    return [c // g for c in counts]


class MergeIterator(Iterable[T]):
    """Items of several iterables in one stream (SPDL's ``spdl.source.utils.MergeIterator``).

    Without ``weights``: round robin, one item of each iterable in turn
    (``[[0, 1, 2], [10, 11]]`` gives ``0, 10, 1, 11, 2``).

    With ``weights`` (finite, non-negative, positive sum; zero-weight iterables are skipped):
    the stream is cut into windows; in each window source ``i`` is drawn exactly ``k_i``
    times, in an order shuffled by ``random.Random(seed)``, where the ``k_i`` are the weights
    rounded to multiples of 1/1024 of their sum (each positive weight at least one draw) and
    divided by their gcd. So the proportions are exact over every window (``weights=[1, 3]``:
    1 of source 0 in every 4 items), not only on average as with SPDL's independent draws,
    and the order is the same for the same ``seed``. When an iterable is exhausted it leaves
    the mix and a new window starts over the others.

    ``stop_after``: ``0`` (default) until every iterable is exhausted; ``n > 0`` after ``n``
    items (or earlier if all are exhausted); ``-1`` as soon as one iterable is exhausted.

    Being deterministic for a seed, it resumes through ``Pipeline.state_dict()`` /
    ``load_state_dict()`` like any source that gives the same items in the same order. On its
    own, :meth:`state_dict`/:meth:`load_state_dict` resume the stream: the next iteration after
    ``load_state_dict(s)`` continues after the ``s["num_yielded"]`` items the saved one had
    given (the skipped items are drawn again from the sources and discarded, so the sources
    must give the same items in the same order).

    Raises ``ValueError`` for empty ``iterables``, ``stop_after < -1``, a weights length
    other than the iterables', negative/non-finite weights or a non-positive sum.
    """

    def __init__(
        self,
        iterables: Sequence[Iterable[T]],
        *,
        weights: Sequence[float] | None = None,
        stop_after: int = 0,
        seed: int = 0,
    ) -> None:
        if not iterables:
            raise ValueError("iterables cannot be empty.")
        if isinstance(stop_after, bool) or not isinstance(stop_after, int) or stop_after < -1:
            raise ValueError(f"`stop_after` must be greater than or equal to -1. Found: {stop_after}")
        self.iterables = list(iterables)
        self.weights: list[float] | None = None
        if weights is not None:
            if len(weights) != len(iterables):
                raise ValueError(
                    f"The number of probabilities ({len(weights)}) and iterables ({len(iterables)}) must match."
                )
            try:
                ws = [float(w) for w in weights]
            except (OverflowError, TypeError, ValueError) as e:
                raise ValueError("Weights must be finite and non-negative.") from e
            if any(not math.isfinite(w) or w < 0 for w in ws):
                raise ValueError("Weights must be finite and non-negative; NaN, infinity, and negative values are not supported.")
            if not math.isfinite(sum(ws)) or sum(ws) <= 0:
                raise ValueError("The sum of weights must be positive and finite.")
            keep = [i for i, w in enumerate(ws) if w > 0]
            self.iterables = [self.iterables[i] for i in keep]
            self.weights = [ws[i] for i in keep]
        self.stop_after = stop_after
        self.seed = seed
        self._num_yielded = 0
        self._skip = 0

    def state_dict(self) -> dict[str, Any]:
        """``{"num_yielded": n, "seed": seed}`` of the current (or last) iteration."""
        return {"num_yielded": self._num_yielded, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Makes the next iteration continue after ``state["num_yielded"]`` items. Raises
        ``ValueError`` if the state was saved with another seed."""
        if state.get("seed") != self.seed:
            raise ValueError(f"the state was saved with seed {state.get('seed')!r}, this iterator has {self.seed!r}")
        self._skip = int(state["num_yielded"])

    def __iter__(self) -> Iterator[T]:
        skip, self._skip = self._skip, 0
        self._num_yielded = 0
        stream = self._ordered() if self.weights is None else self._windowed()
        for item in stream:
            self._num_yielded += 1
            if self._num_yielded <= skip:
                continue
            yield item
            if self.stop_after > 0 and self._num_yielded >= self.stop_after:
                return

    def _ordered(self) -> Iterator[T]:
        iterators = [iter(it) for it in self.iterables]
        while iterators:
            alive = []
            for it in iterators:
                try:
                    item = next(it)
                except StopIteration:
                    if self.stop_after == -1:
                        return
                    continue
                alive.append(it)
                yield item
            iterators = alive

    def _windowed(self) -> Iterator[T]:
        assert self.weights is not None
        rng = random.Random(self.seed)
        active = list(range(len(self.iterables)))
        iterators = [iter(it) for it in self.iterables]
        while active:
            counts = _window_counts([self.weights[i] for i in active])
            window = [src for src, k in zip(active, counts) for _ in range(k)]
            rng.shuffle(window)
            for src in window:
                try:
                    item = next(iterators[src])
                except StopIteration:
                    if self.stop_after == -1:
                        return
                    active.remove(src)
                    break  # a new window over the remaining sources
                yield item


class _ShuffleAndIterate(Iterable[T]):
    def __init__(self, src: Any, *, epoch: int, shuffle_last: bool) -> None:
        self.src = src
        self._epoch = epoch
        self._shuffle_last = shuffle_last

    def _shuffle(self) -> None:
        t0 = time.monotonic()
        self.src.shuffle(seed=self._epoch)
        if (elapsed := time.monotonic() - t0) > 3:
            _LG.warning("Shuffling took %.2f sec.", elapsed)
        self._epoch += 1

    def __iter__(self) -> Iterator[T]:
        if not self._shuffle_last:
            self._shuffle()
            yield from self.src
            return
        try:
            yield from self.src
        finally:  # also when the iteration is left early
            self._shuffle()

    def __len__(self) -> int:
        if isinstance(self.src, Sized):
            return len(self.src)
        raise TypeError(f"Source iterator of type {type(self.src)} does not support length")


def embed_shuffle(src: Any, /, *, shuffle_last: bool = False, epoch: int = 0) -> Iterable[Any]:
    """An iterable calling ``src.shuffle(seed=epoch)`` at each iteration, ``epoch`` counting
    up from the given value (SPDL's ``embed_shuffle``): before it (default) or, with
    ``shuffle_last=True``, after it (also when the iteration is left early). ``len()`` is
    ``src``'s (``TypeError`` if it has none). Raises ``TypeError`` if ``src`` has no
    ``shuffle``."""
    if not isinstance(src, IterableWithShuffle):
        raise TypeError(f"embed_shuffle takes an iterable with a shuffle(seed) method, got {type(src).__name__}")
    return _ShuffleAndIterate(src, epoch=epoch, shuffle_last=shuffle_last)


class _RepeatIterator(Iterator[T]):
    def __init__(self, src: Iterable[T], epoch: int) -> None:
        self.src = src
        self.epoch = epoch
        self._iter: Iterator[T] | None = None

    def __iter__(self) -> Iterator[T]:
        return self

    def __getstate__(self) -> dict[str, Any]:
        if self._iter is not None:
            raise ValueError("Cannot pickle after iteration is started.")
        return {"src": self.src, "epoch": self.epoch, "_iter": None}

    def __next__(self) -> T:
        if self._iter is None:
            self._iter = self._repeat()
        return next(self._iter)

    def _repeat(self) -> Iterator[T]:
        epoch = self.epoch
        while True:
            _LG.info("Starting source epoch %d.", epoch)
            if isinstance(self.src, IterableWithShuffle):
                self.src.shuffle(seed=epoch)
            t0, n = time.monotonic(), 0
            for item in self.src:
                n += 1
                yield item
            elapsed = time.monotonic() - t0
            _LG.info("Finished source epoch %d. (Yielded %d rows in %.2f sec.)", epoch, n, elapsed)
            if n == 0:
                raise ValueError(f"The source gave no item in epoch {epoch}; repeating it would never end.")
            epoch += 1


def repeat_source(src: Iterable[T], /, epoch: int = 0) -> Iterator[T]:
    """An endless iterator over ``src``, epoch after epoch (SPDL's ``repeat_source``); an
    ``src`` with ``shuffle(seed)`` is shuffled with the epoch number (from ``epoch``) before
    each pass. Picklable until iterated (``ValueError`` after). Raises ``ValueError`` if a
    pass gives no item (instead of looping for ever)."""
    return _RepeatIterator(src, epoch)
