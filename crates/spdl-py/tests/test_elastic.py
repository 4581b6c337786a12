"""Elastic resume from Python: `merge_states` + `Sampler.resume` after the world size changes."""

import json

import pytest

from spdl_rs import sources

LEN, SEED, EPOCH = 103, 11, 3


def old_world(world, deliver, *, drop_last=False):
    """`world` ranks in epoch EPOCH; rank r delivers its first `deliver(r)` items, and one item
    further ahead out of order (the one in between stays in flight). Returns the samplers and the
    real (non-padded) dataset indices delivered."""
    ranks = [sources.Sampler(LEN, rank=r, world_size=world, seed=SEED, drop_last=drop_last) for r in range(world)]
    delivered = []
    for r, s in enumerate(ranks):
        s.set_epoch(EPOCH)
        info = list(s.iter_with_info())
        n = deliver(r)
        picked = info[:n] + (info[n + 1 : n + 2] if r % 3 == 0 else [])
        for index, position, padded in picked:
            s.mark_delivered(position)
            if not padded:
                delivered.append(index)
    return ranks, delivered


def new_world(progress, world, *, drop_last=False):
    """Every new rank's items: (real indices, padded count, items per rank)."""
    real, padded, counts = [], 0, set()
    for r in range(world):
        s = sources.Sampler.resume(progress, rank=r, world_size=world, drop_last=drop_last)
        assert (s.rank, s.world_size, s.epoch) == (r, world, EPOCH)
        info = list(s.iter_with_info())
        assert [i for i, _, _ in info] == list(s)
        counts.add(len(info))
        real += [i for i, _, pad in info if not pad]
        padded += sum(pad for _, _, pad in info)
    return real, padded, counts


def test_resume_8_to_6_each_sample_exactly_once():
    ranks, delivered = old_world(8, lambda r: 2 + r)  # uneven progress across ranks
    assert len(delivered) == len(set(delivered))
    # The checkpoint holds one JSON state per old rank; any order merges the same.
    states = [s.state() for s in ranks]
    progress = sources.merge_states(states[::-1])
    assert progress == sources.merge_states(states)
    assert len(progress) < 400  # O(world sizes + out-of-order), not O(dataset)
    reshard = json.loads(progress)["reshards"][-1]
    assert reshard["world_size"] == 8 and len(reshard["delivered"]) == 8

    real, padded, counts = new_world(progress, 6)
    assert len(counts) == 1  # every new rank gets the same number of items: DDP never hangs
    assert not set(real) & set(delivered)
    assert sorted(real + delivered) == list(range(LEN))  # exactly once across old and new ranks
    assert padded == -len(real) % 6


def test_resume_twice_and_drop_last():
    # 8 -> 6 -> 4 in one epoch: the reshards chain.
    ranks, first = old_world(8, lambda r: 3)
    progress = sources.merge_states([s.state() for s in ranks])
    six = [sources.Sampler.resume(progress, rank=r, world_size=6) for r in range(6)]
    second = []
    for s in six:
        for index, position, padded in list(s.iter_with_info())[:2]:
            s.mark_delivered(position)
            if not padded:
                second.append(index)
    progress2 = sources.merge_states([s.state() for s in six])
    assert len(json.loads(progress2)["reshards"]) == 2
    real, _, counts = new_world(progress2, 4)
    assert len(counts) == 1
    assert sorted(first + second + real) == list(range(LEN))

    # drop_last: no padding, up to world_size - 1 samples left out, none repeated.
    ranks, delivered = old_world(8, lambda r: r, drop_last=True)
    progress = sources.merge_states([s.state() for s in ranks])
    real, padded, counts = new_world(progress, 6, drop_last=True)
    assert padded == 0 and len(counts) == 1
    everything = delivered + real
    assert len(everything) == len(set(everything))
    assert LEN - 6 < len(everything) <= LEN


def test_merge_states_rejects_incomplete_or_mixed():
    ranks, _ = old_world(8, lambda r: 1)
    states = [s.state() for s in ranks]
    with pytest.raises(ValueError, match="every rank"):
        sources.merge_states(states[:7])
    with pytest.raises(ValueError, match="two states for rank"):
        sources.merge_states(states[:7] + [states[0]])
    other = sources.Sampler(LEN, rank=7, world_size=8, seed=SEED + 1)
    other.set_epoch(EPOCH)
    with pytest.raises(ValueError, match="same job"):
        sources.merge_states(states[:7] + [other.state()])
    with pytest.raises(ValueError, match="malformed"):
        sources.merge_states(["{}"])
    with pytest.raises(ValueError):
        sources.merge_states([])
    with pytest.raises(ValueError, match="bad progress"):
        sources.Sampler.resume("{}", rank=0, world_size=6)
    progress = sources.merge_states(states)
    with pytest.raises(ValueError):
        sources.Sampler.resume(progress, rank=6, world_size=6)


def test_checkpoint_sampler_with_pipeline_state_then_change_world_size(samples):
    """The loop a sharded job runs: each rank's pipeline is fed with its sampler's share; a
    checkpoint saves `sampler.state(pipeline.state_dict())` (items in flight are not counted);
    after 2 -> 3 ranks, the new pipelines deliver exactly the rest."""
    from spdl_rs import ops
    from spdl_rs.pipeline import PipelineBuilder

    files = sources.list_files(samples)
    everything = sorted(files.paths)

    def pipeline(sampler):
        return (
            PipelineBuilder()
            .add_source(files.select(list(sampler)))
            .pipe(ops.read_file(), concurrency=4, output_order="completion")
            .pipe(ops.decode_image(transform="eval", size=32), concurrency=4, output_order="completion")
            .add_sink(2)
            .build(num_threads=4)
        )

    before, states = [], []
    for rank, take in ((0, 3), (1, 5)):
        sampler = sources.Sampler(len(files), rank=rank, world_size=2, seed=SEED)
        sampler.set_epoch(EPOCH)
        p = pipeline(sampler)
        with p.auto_stop():
            it = iter(p)
            before += [next(it).keys[0] for _ in range(take)]
            states.append(sampler.state(p.state_dict()))
        # The sampler is unchanged: asking again without the pipeline gives no progress.
        assert json.loads(sampler.state())["delivered"] == 0
    progress = sources.merge_states(states)

    after, counts = [], set()
    for rank in range(3):
        sampler = sources.Sampler.resume(progress, rank=rank, world_size=3)
        p = pipeline(sampler)
        with p.auto_stop():
            got = [b.keys[0] for b in p]
            # A finished pipeline epoch: the state covers the whole share.
            done = json.loads(sampler.state(p.state_dict()))
        assert done["delivered"] == len(got)
        counts.add(len(got))
        after += got
    assert len(counts) == 1  # equal shares (6 left over 3 ranks)
    assert sorted(before + after) == everything


def test_sampler_state_rejects_bad_pipeline_states():
    s = sources.Sampler(10, rank=0, world_size=2)
    with pytest.raises(ValueError, match="past the 5 items"):
        s.state({"epoch": 0, "done_below": 6, "done_above": []})
    with pytest.raises(ValueError, match='no "done_below"'):
        s.state({"epoch": 0})
    with pytest.raises(ValueError, match="pipeline epoch 2"):
        s.state({"epoch": 2, "done_below": 0, "done_above": []})
    assert json.loads(s.state({"epoch": 0, "done_below": 2, "done_above": [4]}))["delivered"] == 2
