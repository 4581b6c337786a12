"""Index samplers for distributed training (SPDL's ``spdl.source`` samplers)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["DistributedDeterministicSampler", "DistributedRandomSampler"]


def _check_common(n: int, rank: int, world_size: int, drop_last: bool, total: int) -> None:
    for name, v in (("n", n), ("rank", rank), ("world_size", world_size)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"`{name}` must be an int, got {type(v).__name__}")
    if n <= 0:
        raise ValueError(f"The size of dataset must be larger than 0. Found: {n}")
    if world_size <= 0:
        raise ValueError(f"`world_size` must be greater than zero. Found: {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"`rank` ({rank}) must be within the range [0, {world_size}).")
    if drop_last and total < world_size:
        raise ValueError(
            f"The number of draws ({total}) must be larger than or equal to the world size ({world_size}) "
            "when ddp_drop_last_distributed_round=True"
        )


def _split(total: int, rank: int, world_size: int, drop_last: bool) -> tuple[int, int]:
    """(positions used, this rank's count): round robin over ``total`` positions."""
    if drop_last:
        per_rank = total // world_size
        return per_rank * world_size, per_rank
    return total, total // world_size + int(rank < total % world_size)


class DistributedDeterministicSampler:
    """The indices ``range(rank, N, world_size)`` of a dataset of ``n`` items, the same every
    iteration (SPDL's ``spdl.source.DistributedDeterministicSampler``).

    ``ddp_drop_last_distributed_round=True`` (default) drops the incomplete last round so
    every rank gets ``n // world_size`` indices (a warning says some are never visited);
    ``False`` covers every index (the first ``n % world_size`` ranks get one more).

    Raises ``ValueError`` if ``n <= 0``, ``world_size <= 0``, ``rank`` is outside
    ``[0, world_size)``, or ``n < world_size`` while dropping the last round.
    """

    def __init__(self, n: int, /, *, rank: int, world_size: int, ddp_drop_last_distributed_round: bool = True) -> None:
        _check_common(n, rank, world_size, ddp_drop_last_distributed_round, n)
        if ddp_drop_last_distributed_round and n % world_size:
            warnings.warn(
                f"The size of dataset ({n}) is not divisible by the world size ({world_size}). "
                "Some samples are never visited.",
                stacklevel=2,
            )
        self._rank = rank
        self._world_size = world_size
        self._total, self._len = _split(n, rank, world_size, ddp_drop_last_distributed_round)

    def __len__(self) -> int:
        """The number of indices of this rank."""
        return self._len

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._rank, self._total, self._world_size))


class DistributedRandomSampler:
    """Random indices of a dataset of ``n`` items for one rank (SPDL's
    ``spdl.source.DistributedRandomSampler``, same draws for the same arguments).

    The draws: ``numpy.random.default_rng(seed).choice(n, size=D, replace=weights is not None,
    p=weights / sum(weights))`` with ``D = num_draws or n`` (rounded down to a multiple of
    ``world_size`` when ``ddp_drop_last_distributed_round``); this rank gets the positions
    ``rank, rank + world_size, ...``. Without ``weights``: a permutation (the ranks together
    cover distinct indices); with ``weights``: draws with replacement following them.
    Every iteration gives the same sequence until :meth:`shuffle` sets another seed (or wrap
    the sampler in :func:`spdl_rs.source.utils.embed_shuffle`). ``len()``: this rank's count.

    Raises ``ValueError`` for ``n <= 0``, a bad ``rank``/``world_size``, ``num_draws <= 0``,
    ``num_draws > n`` without weights, ``len(weights) != n``, negative or non-finite weights or
    a non-positive total, and fewer draws than ranks while dropping the last round.
    """

    def __init__(
        self,
        n: int,
        /,
        *,
        rank: int,
        world_size: int,
        num_draws: int | None = None,
        weights: Sequence[float] | None = None,
        seed: int = 0,
        ddp_drop_last_distributed_round: bool = True,
    ) -> None:
        import numpy as np

        if num_draws is not None and (isinstance(num_draws, bool) or not isinstance(num_draws, int) or num_draws <= 0):
            raise ValueError(f"`num_draws` must be greater than zero. Found: {num_draws}")
        total = n if num_draws is None else num_draws
        _check_common(n, rank, world_size, ddp_drop_last_distributed_round, total)
        self._weights: Any = None
        if weights is None:
            if total > n:
                raise ValueError(
                    "`num_draws` cannot exceed the dataset size when sampling without replacement. "
                    f"Found: num_draws={total}, dataset size={n}"
                )
        else:
            if len(weights) != n:
                raise ValueError(
                    f"When provided, the number of elements in `weights` ({len(weights)}) must be same as the "
                    f"size of dataset ({n})"
                )
            w = np.array(weights, dtype=np.float64)
            if np.any(w < 0) or not np.all(np.isfinite(w)):
                raise ValueError("Failed to normalize the sample weight. Some elements are negative or not finite.")
            with np.errstate(over="ignore", invalid="ignore"):
                s = np.sum(w)
            if not np.isfinite(s) or s <= 0:
                raise ValueError("The sum of `weights` must be positive and finite.")
            self._weights = w / s
        self._n = n
        self._rank = rank
        self._world_size = world_size
        self._num_draws, self._len = _split(total, rank, world_size, ddp_drop_last_distributed_round)
        self._seed = seed

    def __len__(self) -> int:
        """The number of indices of this rank."""
        return self._len

    def __iter__(self) -> Iterator[int]:
        import numpy as np

        rng = np.random.default_rng(self._seed)
        draws = rng.choice(self._n, size=self._num_draws, replace=self._weights is not None, p=self._weights)
        for i in draws[self._rank :: self._world_size]:
            yield int(i)

    def shuffle(self, seed: int) -> None:
        """Sets the seed of the following iterations (the sequence depends on ``seed`` only)."""
        self._seed = seed
