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


def test_completion_order_keeps_cheap_calls_in_call_order():
    """Output order "completion" with several threads: calls that take no time come out in the
    order the stage handed them out, the short last batch after the full ones, as SPDL's FIFO
    thread pool gives them (the GIL is not fair, and a thread that wakes another is often
    preempted before it has handed its result on: without the stage's turnstile about 1 run in
    7 came out reordered)."""

    def summary(batch):
        return len(batch), min(batch), max(batch), sum(batch)

    want = [(3, 0, 2, 3), (3, 3, 5, 12), (3, 6, 8, 21), (1, 9, 9, 9)]
    runs = [list(DataLoader(range(10), batch_size=3, aggregator=summary, num_threads=2)) for _ in range(200)]
    assert [r for r in runs if r != want] == []


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


class Rows:
    """A map-style torch dataset: row ``i`` is ``[i, i * i]`` (int64) with its label ``i % 3``."""

    def __len__(self):
        return 11

    def __getitem__(self, i):
        import torch

        return torch.tensor([i, i * i]), i % 3


def _same_batches(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert type(a) is type(b)
        if isinstance(a, (list, tuple)):
            _same_batches(a, b)
        elif isinstance(a, int):
            assert a == b
        else:
            import torch

            assert torch.equal(a, b), (a, b)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize(
    "kwargs",
    [
        {},  # batch_size=1, SequentialSampler, default_collate
        {"batch_size": 4},
        {"batch_size": 4, "drop_last": True},
        {"batch_size": None},  # default_convert of single items
        {"batch_size": 3, "shuffle": True},
        {"batch_size": None, "shuffle": True},
    ],
)
def test_pytorch_dataloader_matches_torch_defaults(kwargs):
    import torch
    from torch.utils.data import DataLoader as TorchDataLoader

    from torch.utils.data import RandomSampler

    kwargs = dict(kwargs)
    ours_gen = None
    theirs = dict(kwargs)
    if kwargs.get("shuffle"):
        # The draws of torch's RandomSampler for the seed, as SPDL: torch's DataLoader(generator=)
        # also takes a worker base seed from the generator first, SPDL's loader does not.
        ours_gen = torch.Generator().manual_seed(7)
        del theirs["shuffle"]
        theirs["sampler"] = RandomSampler(Rows(), generator=torch.Generator().manual_seed(7))
    ours = list(get_pytorch_dataloader(Rows(), num_workers=2, in_order=True, generator=ours_gen, **kwargs))
    want = list(TorchDataLoader(Rows(), num_workers=0, **theirs))
    assert len(want) == {1: 11, 4: 3, 3: 4, None: 11}[kwargs.get("batch_size", 1)] - (1 if kwargs.get("drop_last") else 0)
    _same_batches(ours, want)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_pytorch_dataloader_torch_specific_arguments(caplog):
    import torch
    from torch.utils.data import IterableDataset

    class Stream(IterableDataset):
        def __iter__(self):
            yield from range(3)

    with pytest.raises(ValueError, match="IterableDataset is not supported"):
        get_pytorch_dataloader(Stream())
    with pytest.warns(UserWarning, match="num_workers` is 0"):
        dl = get_pytorch_dataloader(Rows(), batch_size=11, num_workers=0)
    (batch,) = list(dl)
    assert batch[0][:, 1].tolist() == [i * i for i in range(11)]
    if not torch.cuda.is_available():
        with caplog.at_level("WARNING"):
            dl = get_pytorch_dataloader(Rows(), batch_size=11, pin_memory=True)
        assert "no accelerator is found" in caplog.text
        (batch,) = list(dl)
        assert not batch[0].is_pinned() and batch[1].tolist() == [i % 3 for i in range(11)]


def test_pytorch_dataloader_num_workers_zero_without_torch():
    with pytest.warns(UserWarning, match="num_workers` is 0"):
        dl = get_pytorch_dataloader(Squares(3), batch_size=None, sampler=range(3), collate_fn=first, num_workers=0)
    assert sorted(dl) == [0, 1, 4]
    with pytest.raises(ValueError, match="num_workers` must be greater than 0"):
        get_pytorch_dataloader(Squares(3), batch_size=None, sampler=range(3), collate_fn=first, num_workers=-1)
