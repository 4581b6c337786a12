"""spdl_rs.source (SPDL's spdl.source): MergeIterator, samplers, repeat_source, embed_shuffle,
LocalDirectory, ImageNet."""

from __future__ import annotations

import itertools
import pickle
import random
import warnings

import numpy as np
import pytest

from spdl_rs.source import (
    DistributedDeterministicSampler,
    DistributedRandomSampler,
    IterableWithShuffle,
)
from spdl_rs.source.imagenet import ImageNet, get_mappings, parse_wnid
from spdl_rs.source.local_directory import LocalDirectory
from spdl_rs.source.utils import MergeIterator, embed_shuffle, repeat_source


def test_merge_round_robin():
    its = [[0, 1, 2], [10, 11, 12], [20, 21, 22]]
    assert list(MergeIterator(its)) == [0, 10, 20, 1, 11, 21, 2, 12, 22]
    assert list(MergeIterator(its, stop_after=5)) == [0, 10, 20, 1, 11]
    uneven = [[0, 1, 2], [10, 11], [20, 21, 22]]
    assert list(MergeIterator(uneven)) == [0, 10, 20, 1, 11, 21, 2, 22]
    assert list(MergeIterator(uneven, stop_after=-1)) == [0, 10, 20, 1, 11, 21, 2]
    assert list(MergeIterator(uneven, stop_after=100)) == [0, 10, 20, 1, 11, 21, 2, 22]
    with pytest.raises(ValueError, match="empty"):
        MergeIterator([])
    with pytest.raises(ValueError, match="stop_after"):
        MergeIterator(its, stop_after=-2)
    with pytest.raises(ValueError, match="must match"):
        MergeIterator(its, weights=[1, 2])
    with pytest.raises(ValueError, match="non-negative"):
        MergeIterator(its, weights=[1, -1, 1])
    with pytest.raises(ValueError, match="positive"):
        MergeIterator(its, weights=[0, 0, 0])


def test_merge_weighted_exact_per_window():
    a, b, c = range(0, 1000), range(1000, 2000), range(2000, 3000)
    out = list(MergeIterator([a, b, c], weights=[1, 3, 0], stop_after=400, seed=7))
    assert len(out) == 400 and all(x < 2000 for x in out)  # zero weight: never drawn
    for w in range(0, 400, 4):  # every window of 4 holds exactly 1 of a and 3 of b
        window = out[w : w + 4]
        assert sum(x < 1000 for x in window) == 1
    # each source's items keep their order; same seed, same stream; another seed, another
    assert [x for x in out if x < 1000] == list(range(100))
    assert out == list(MergeIterator([a, b, c], weights=[1, 3, 0], stop_after=400, seed=7))
    assert out != list(MergeIterator([a, b, c], weights=[1, 3, 0], stop_after=400, seed=8))
    # fractional weights: 0.25 vs 0.75 is the same mix
    assert out == list(MergeIterator([a, b], weights=[0.25, 0.75], stop_after=400, seed=7))


def test_merge_weighted_exhaustion():
    out = list(MergeIterator([range(3), range(100, 200)], weights=[1, 1], seed=0))
    assert sorted(out) == [0, 1, 2] + list(range(100, 200))  # the short one leaves the mix
    stop = list(MergeIterator([range(3), range(100, 200)], weights=[1, 1], stop_after=-1, seed=0))
    assert sorted(x for x in stop if x < 3) == [0, 1, 2] and len(stop) < 20


def test_merge_resume():
    def make():
        return MergeIterator([range(100), range(100, 200)], weights=[2, 1], stop_after=60, seed=3)

    full = list(make())
    m = make()
    first = list(itertools.islice(iter(m), 25))
    state = m.state_dict()
    assert state == {"num_yielded": 25, "seed": 3}
    resumed = make()
    resumed.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert first + list(resumed) == full
    with pytest.raises(ValueError, match="seed"):
        MergeIterator([range(3)], weights=[1], seed=1).load_state_dict(state)


def test_random_sampler_same_draws_as_documented():
    n = 9
    ranks = [list(DistributedRandomSampler(n, rank=r, world_size=3)) for r in range(3)]
    draws = np.random.default_rng(0).choice(n, size=n, replace=False)
    for r in range(3):
        assert ranks[r] == [int(i) for i in draws[r::3]]
    assert sorted(sum(ranks, [])) == list(range(n))  # together: every index once
    s = DistributedRandomSampler(5, rank=0, world_size=1)
    assert list(s) == list(s)  # the same until shuffle
    s.shuffle(seed=1)
    assert list(s) == [int(i) for i in np.random.default_rng(1).choice(5, size=5, replace=False)]
    assert len(s) == 5


def test_random_sampler_weights_and_rounds():
    s = DistributedRandomSampler(5, rank=0, world_size=1, weights=[0, 0, 1, 1, 1], num_draws=50, seed=4)
    got = list(s)
    assert len(got) == 50 and set(got) <= {2, 3, 4}
    want = np.random.default_rng(4).choice(5, size=50, replace=True, p=np.array([0, 0, 1, 1, 1]) / 3)
    assert got == [int(i) for i in want]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lens = [len(DistributedRandomSampler(11, rank=r, world_size=4)) for r in range(4)]
    assert lens == [2, 2, 2, 2]
    lens = [len(DistributedRandomSampler(11, rank=r, world_size=4, ddp_drop_last_distributed_round=False)) for r in range(4)]
    assert lens == [3, 3, 3, 2]
    with pytest.raises(ValueError, match="cannot exceed"):
        DistributedRandomSampler(5, rank=0, world_size=1, num_draws=6)
    with pytest.raises(ValueError, match="same as the size"):
        DistributedRandomSampler(5, rank=0, world_size=1, weights=[1, 1])
    with pytest.raises(ValueError, match="rank"):
        DistributedRandomSampler(5, rank=2, world_size=2)


def test_deterministic_sampler():
    with pytest.warns(UserWarning, match="never visited"):
        ranks = [list(DistributedDeterministicSampler(11, rank=r, world_size=4)) for r in range(4)]
    assert ranks == [[0, 4], [1, 5], [2, 6], [3, 7]]
    ranks = [
        list(DistributedDeterministicSampler(11, rank=r, world_size=4, ddp_drop_last_distributed_round=False))
        for r in range(4)
    ]
    assert ranks == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7]]
    with pytest.raises(ValueError, match="larger than 0"):
        DistributedDeterministicSampler(0, rank=0, world_size=1)


class Shuffled:
    def __init__(self, n):
        self.items = list(range(n))
        self.seeds = []

    def shuffle(self, seed):
        self.seeds.append(seed)
        self.items = list(range(len(self.items)))
        random.Random(seed).shuffle(self.items)

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


def test_embed_shuffle_and_repeat():
    src = Shuffled(6)
    assert isinstance(src, IterableWithShuffle)
    emb = embed_shuffle(src, epoch=5)
    e1, e2 = list(emb), list(emb)
    assert src.seeds == [5, 6] and len(emb) == 6
    ref = list(range(6))
    random.Random(5).shuffle(ref)
    assert e1 == ref and sorted(e2) == list(range(6))
    last = Shuffled(4)
    emb = embed_shuffle(last, shuffle_last=True)
    assert list(emb) == [0, 1, 2, 3] and last.seeds == [0]
    with pytest.raises(TypeError, match="shuffle"):
        embed_shuffle([1, 2])
    rep_src = Shuffled(3)
    rep = repeat_source(rep_src, epoch=2)
    pickle.dumps(rep)  # picklable before iteration
    got = list(itertools.islice(rep, 9))
    assert rep_src.seeds == [2, 3, 4]
    assert [sorted(got[i : i + 3]) for i in (0, 3, 6)] == [[0, 1, 2]] * 3
    with pytest.raises(ValueError, match="pickle"):
        pickle.dumps(rep)
    with pytest.raises(ValueError, match="no item"):
        next(repeat_source([]))


def test_local_directory(tmp_path):
    for rel in ["b/2.txt", "a/1.txt", "a/3.txt", "a/skip.bin", "top.txt"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    d = LocalDirectory(tmp_path, "*/*.txt")
    want = [tmp_path / "a/1.txt", tmp_path / "a/3.txt", tmp_path / "b/2.txt"]
    assert list(d) == want and len(d) == 3
    d.shuffle(seed=3)
    random.Random(3).shuffle(want)
    assert list(d) == want


def test_imagenet_fake_tree(tmp_path):
    for rel in ["val/n01440764/a.JPEG", "val/n03709823/b.JPEG", "val/n03709823/c.JPEG", "train/n01443537/x.JPEG"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    val = list(ImageNet(tmp_path))
    assert val == [
        (tmp_path / "val/n01440764/a.JPEG", 0),
        (tmp_path / "val/n03709823/b.JPEG", 636),
        (tmp_path / "val/n03709823/c.JPEG", 636),
    ]
    assert list(ImageNet(tmp_path, split="train")) == [(tmp_path / "train/n01443537/x.JPEG", 1)]
    with pytest.raises(ValueError, match="split"):
        ImageNet(tmp_path, split="test")
    assert parse_wnid("/data/n01440764_10026.JPEG") == "n01440764"
    with pytest.raises(ValueError, match="WNID"):
        parse_wnid("cat.jpg")
    m = get_mappings()
    assert len(m) == 1000 and sorted(m.values()) == list(range(1000)) and m["n15075141"] == 999
    (tmp_path / "val/n99999999").mkdir()
    (tmp_path / "val/n99999999/z.JPEG").write_bytes(b"")
    with pytest.raises(ValueError, match="n99999999"):
        list(ImageNet(tmp_path))


def test_merge_resumes_through_pipeline_state_dict():
    from spdl_rs.pipeline import PipelineBuilder

    def build():
        src = MergeIterator([range(0, 50), range(100, 150)], weights=[3, 1], stop_after=80, seed=11)
        return PipelineBuilder().add_source(src).pipe(lambda x: x, concurrency=2).add_sink(2).build(num_threads=2)

    full = list(MergeIterator([range(0, 50), range(100, 150)], weights=[3, 1], stop_after=80, seed=11))
    p = build()
    with p.auto_stop():
        it = iter(p)
        first = [next(it) for _ in range(30)]
        state = p.state_dict()
    q = build()
    q.load_state_dict(state)
    with q.auto_stop():
        rest = list(q)
    assert sorted(first + rest) == sorted(full)  # no repeat, no skip
