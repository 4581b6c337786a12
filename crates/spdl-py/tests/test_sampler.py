"""`spdl_rs.sources.Sampler`: torchrun-style sharding (RANK / WORLD_SIZE) from Python."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from spdl_rs import sources

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from spdl_rs import ops, sources
    from spdl_rs.pipeline import PipelineBuilder

    files = sources.list_files(sys.argv[1])
    sampler = sources.Sampler(len(files), shuffle=True, seed=7)  # RANK / WORLD_SIZE from env
    sampler.set_epoch(1)
    info = list(sampler.iter_with_info())
    shard = files.select([i for i, _, _ in info])
    pipeline = (
        PipelineBuilder()
        .add_source(shard)
        .pipe(ops.read_file(), concurrency=2, output_order="input")
        .pipe(ops.decode_image(transform="eval", size=32), concurrency=2, output_order="input")
        .add_sink(2)
        .build(num_threads=2)
    )
    with pipeline.auto_stop():
        keys = [b.keys[0] for b in pipeline]
    print(json.dumps({
        "rank": sampler.rank, "world_size": sampler.world_size, "len": len(sampler),
        "keys": keys, "padded": [p for _, _, p in info],
    }))
    """
)


def test_torchrun_style_four_ranks(samples, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(SCRIPT)
    world = 4
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world))
        env.pop("LOCAL_RANK", None)
        procs.append(subprocess.Popen([sys.executable, str(script), str(samples)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    everything = sorted(sources.list_files(samples).paths)
    assert sorted(o["rank"] for o in outs) == list(range(world))
    assert {o["world_size"] for o in outs} == {world}
    counts = {len(o["keys"]) for o in outs}
    assert len(counts) == 1 and counts == {o["len"] for o in outs}
    real = [k for o in outs for k, pad in zip(o["keys"], o["padded"]) if not pad]
    assert sorted(real) == everything  # each sample exactly once
    padded = sum(sum(o["padded"]) for o in outs)
    assert padded == -len(everything) % world


def test_sampler_api():
    s = sources.Sampler(10, rank=1, world_size=3, shuffle=False)
    assert (s.rank, s.world_size, len(s)) == (1, 3, 4)
    info = list(s.iter_with_info())
    assert [i for i, _, _ in info] == list(s)
    assert [p for _, _, p in info] == [False, False, False, True]
    assert list(s)[:3] == [1, 4, 7]
    d = sources.Sampler(10, rank=1, world_size=3, shuffle=False, drop_last=True)
    assert len(d) == 3 and not any(p for _, _, p in d.iter_with_info())
    a, b = sources.Sampler(10, rank=0, world_size=2, seed=3), sources.Sampler(10, rank=0, world_size=2, seed=3)
    a.set_epoch(2)
    b.set_epoch(2)
    assert list(a) == list(b) and a.epoch == 2
    # state / from_state: resume where it left off.
    first = list(a.iter_with_info())
    for _, pos, _ in first[:2]:
        a.mark_delivered(pos)
    st = a.state()
    assert json.loads(st)["epoch"] == 2
    r = sources.Sampler.from_state(st)
    assert list(r) == [i for i, _, _ in first[2:]]
    assert r.state() == st
    with pytest.raises(ValueError):
        sources.Sampler.from_state("{}")
    with pytest.raises(ValueError):
        sources.Sampler(10, rank=3, world_size=2)


def test_sampler_from_env(monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    s = sources.Sampler(8)
    assert (s.rank, s.world_size, len(s)) == (2, 4, 2)
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(ValueError):
        sources.Sampler(8)
