"""Inputs found by breaking the Python API on purpose (session 5's adversarial passes): each was
a Rust panic, an abort, a hang or a silently wrong result, and is a named error now."""

import pathlib

import numpy as np
import pytest

from spdl_rs import io
from spdl_rs.dataloader import DataLoader
from spdl_rs.pipeline import PipelineBuilder

SAMPLES = sorted((pathlib.Path(__file__).parents[3] / "data" / "samples").glob("*.jpg"))[:3]


def test_pipeline_sizes_past_their_bounds_name_the_argument():
    b = PipelineBuilder().add_source(range(10))
    with pytest.raises(ValueError, match="concurrency must be at most"):
        b.pipe(lambda x: x, concurrency=2**63)
    with pytest.raises(ValueError, match="num_items must be at most"):
        PipelineBuilder().add_source(range(10)).aggregate(2**31)
    with pytest.raises(ValueError, match="buffer_size must be at most"):
        PipelineBuilder().add_source(range(10)).add_sink(2**63)
    with pytest.raises(ValueError, match="num_threads must be at most"):
        PipelineBuilder().add_source(range(10)).add_sink(2).build(num_threads=2**31)
    with pytest.raises(ValueError, match="must be at most"):
        list(DataLoader(range(10), batch_size=2**63))


def test_batch_sizes_past_the_output_limit_are_refused_before_allocating():
    paths = [str(p) for p in SAMPLES]
    with pytest.raises(ValueError, match="limit exceeded"):
        io.load_image_batch(paths, 60000, 60000)


def test_reading_a_device_that_never_ends_is_bounded(tmp_path):
    with pytest.raises(ValueError, match="not a regular file"):
        io.load_image("/dev/zero")


def test_a_decoded_cache_past_the_output_limit_writes_no_file(tmp_path):
    out = tmp_path / "big.spdlcache"
    with pytest.raises(ValueError, match="limit exceeded"):
        io.build_decoded_cache([str(p) for p in SAMPLES], str(out), size=30000)
    assert not out.exists()


def test_out_of_range_labels_and_non_arrays_raise(tmp_path):
    out = tmp_path / "small.spdlcache"
    assert io.build_decoded_cache([str(SAMPLES[0])], str(out), size=16, labels=[3]) == []
    cache = io.DecodedCache(out)
    assert cache.label(0) == 3
    with pytest.raises(IndexError, match="out of range"):
        cache.label(1)
    with pytest.raises(TypeError, match="to_numpy"):
        io.to_numpy(None)


def test_contradictory_states_and_dlpack_streams_raise():
    p = PipelineBuilder().add_source(range(10)).add_sink(2).build(num_threads=1)
    with pytest.raises(ValueError, match="done_above"):
        p.load_state_dict({"epoch": 0, "done_below": 5, "done_above": [1, 2, 3]})
    p.load_state_dict({"epoch": 0, "done_below": 5, "done_above": [7]})
    with p.auto_stop():
        assert sorted(p) == [5, 6, 8, 9]
    buf = io.load_image(str(SAMPLES[0]), size=8)
    with pytest.raises(TypeError, match="stream"):
        buf.__dlpack__(stream="x")
    assert np.from_dlpack(buf).shape == (8, 8, 3)
