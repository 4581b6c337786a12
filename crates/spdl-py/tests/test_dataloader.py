"""spdl_rs.dataloader (SPDL's spdl.dataloader) and spdl_rs.pipeline.cache_iterator."""

from __future__ import annotations

import importlib.util
import os

import pytest

from spdl_rs.dataloader import CacheDataLoader, DataLoader, get_pytorch_dataloader
from spdl_rs.pipeline import cache_iterator

HAS_TORCH = importlib.util.find_spec("torch") is not None


def double(x):
    return 2 * x


def test_dataloader():
    dl = DataLoader(range(10), preprocessor=double, batch_size=3, aggregator=sum, output_order="input", num_threads=2)
    assert list(dl) == [0 + 2 + 4, 6 + 8 + 10, 12 + 14 + 16, 18]
    assert list(dl) == [6, 24, 42, 18]  # each iteration is a new epoch
    dl = DataLoader(range(10), batch_size=4, drop_last=True, transfer_fn=tuple, num_threads=1)
    assert list(dl) == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_cache_iterator():
    assert list(cache_iterator(range(10), 2, return_caches_after=4, stop_after=9)) == [0, 1, 2, 3, 0, 1, 0, 1, 0]
    assert list(cache_iterator(range(10), 3, stop_after=7)) == [0, 1, 2, 0, 1, 2, 0]
    assert list(cache_iterator([], 3, stop_after=7)) == []
    with pytest.raises(ValueError, match="num_caches"):
        cache_iterator(range(3), 0)
    with pytest.raises(ValueError, match="return_caches_after"):
        cache_iterator(range(3), 3, return_caches_after=2)
    with pytest.raises(ValueError, match="stop_after"):
        cache_iterator(range(3), 3, stop_after=2)


def test_cache_dataloader():
    dl = DataLoader(range(6), batch_size=2, output_order="input", num_threads=1)
    cached = CacheDataLoader(dl, num_caches=2, return_caches_after=3, stop_after=6)
    assert list(cached) == [[0, 1], [2, 3], [4, 5], [0, 1], [2, 3], [0, 1]]
    assert list(cached) == [[0, 1], [2, 3], [4, 5], [0, 1], [2, 3], [0, 1]]
    assert cached.num_caches == 2 and cached._batch_size == 2  # other attributes are the loader's


class Squares:
    """A map-style dataset without torch."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return (i * i, os.getpid())


def first(x):
    return x[0]


def firsts(xs):
    return [x[0] for x in xs]


def with_pid(x):
    return x


def test_pytorch_dataloader_without_torch():
    dl = get_pytorch_dataloader(
        Squares(10), batch_size=None, sampler=[3, 1, 4, 1, 5], collate_fn=first, num_workers=2, in_order=True
    )
    assert list(dl) == [9, 1, 16, 1, 25] and len(dl) == 5
    dl = get_pytorch_dataloader(
        Squares(10), batch_size=None, batch_sampler=[[0, 1], [2, 3], [9]], collate_fn=firsts, num_workers=2, in_order=True
    )
    assert list(dl) == [[0, 1], [4, 9], [81]]
    dl = get_pytorch_dataloader(Squares(4), batch_size=None, sampler=range(4), collate_fn=with_pid, num_workers=2)
    got = list(dl)
    assert sorted(v for v, _ in got) == [0, 1, 4, 9] and os.getpid() not in {p for _, p in got}
    with pytest.raises(ValueError, match="mutually exclusive"):
        get_pytorch_dataloader(Squares(4), sampler=[0], batch_sampler=[[0]])
    with pytest.raises(ValueError, match="persistent_workers"):
        get_pytorch_dataloader(Squares(4), persistent_workers=True)


class Pairs:
    """A map-style dataset of torch tensors ``[i, 2i]``."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        import torch

        return torch.tensor([i, 2 * i])


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_pytorch_dataloader_with_torch_defaults():
    import torch

    dl = get_pytorch_dataloader(Pairs(), batch_size=4, num_workers=2, in_order=True)
    got = list(dl)
    assert [b.shape for b in got] == [(4, 2), (4, 2), (2, 2)]
    assert torch.cat(got)[:, 1].tolist() == [2 * i for i in range(10)]
