"""spdl_rs.io.DecodedCache: images decoded once into a memory-mapped cache, served with crop,
flip and normalize at read time, checked against load_image; corrupt files are named errors."""

import pathlib

import numpy as np
import pytest

from spdl_rs.io import DecodedCache, build_decoded_cache, load_image

SAMPLES = sorted((pathlib.Path(__file__).parents[3] / "data" / "samples").glob("*.jpg"))[:4]


@pytest.fixture(scope="module")
def cache_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("cache") / "train.spdlcache"
    paths = [str(p) for p in SAMPLES] + ["/nonexistent/missing.jpg"]
    failures = build_decoded_cache(paths, str(out), size=64, labels=[7, 8, 9, 10, 11], num_threads=2)
    assert len(failures) == 1 and "missing.jpg" in failures[0]
    return out


def test_records_are_the_decoded_images_and_batches_crop_flip_normalize(cache_path):
    cache = DecodedCache(cache_path)
    assert len(cache) == 5 and cache.shape == (64, 64, 3)
    assert [cache.label(i) for i in range(5)] == [7, 8, 9, 10, None]  # 4 was not stored
    whole = np.asarray(cache.load_batch([0, 1]))
    for i in range(2):
        want = np.asarray(load_image(str(SAMPLES[i]), size=64, transform="resize"))
        np.testing.assert_array_equal(whole[i], want)
    # Center crop 32: the middle of the record.
    center = np.asarray(cache.load_batch([1], crop=32))
    np.testing.assert_array_equal(center[0], whole[1][16:48, 16:48])
    # Random crop + flip + normalize: a flipped or plain window of the record, seeded.
    mean, std = [0.5, 0.25, 0.0], [0.5, 0.5, 1.0]
    seen_flip = set()
    for epoch in range(16):
        buf = cache.load_batch(
            [0], epoch=epoch, crop=48, random_crop=True, flip=True, normalize=True, mean=mean, std=std, seed=4
        )
        assert buf.labels == [7]
        got = np.asarray(buf)[0]  # [C, H, W]
        assert got.shape == (3, 48, 48) and got.dtype == np.float32
        pixels = np.rint((got.transpose(1, 2, 0) * np.array(std) + np.array(mean)) * 255).astype(np.uint8)
        windows = {
            (y, x, f): (whole[0][y : y + 48, x : x + 48][:, ::-1] if f else whole[0][y : y + 48, x : x + 48])
            for y in range(17)
            for x in range(17)
            for f in (0, 1)
        }
        match = [k for k, w in windows.items() if np.array_equal(w, pixels)]
        assert match, f"epoch {epoch}: not a window of the record"
        seen_flip.add(match[0][2])
        again = cache.load_batch(
            [0], epoch=epoch, crop=48, random_crop=True, flip=True, normalize=True, mean=mean, std=std, seed=4
        )
        np.testing.assert_array_equal(np.asarray(again), np.asarray(buf))
    assert seen_flip == {0, 1}
    with pytest.raises(OSError, match="#4"):
        cache.load_batch([4])  # its decode failed at build time
    with pytest.raises(ValueError, match="crop 65"):
        cache.load_batch([0], crop=65)
    with pytest.raises(ValueError, match="normalize=True"):
        cache.load_batch([0], mean=[0.0, 0.0, 0.0])


def test_corrupt_and_short_caches_are_named_errors(cache_path, tmp_path):
    good = cache_path.read_bytes()
    bad = tmp_path / "bad.spdlcache"
    for data, match in [
        (good[:-3], "bytes, its header says"),
        (good[:50], "shorter than its header"),
        (b"x" * 200, "not a decoded cache"),
        (good[:20] + bytes([good[20] ^ 1]) + good[21:], "header checksum"),
    ]:
        bad.write_bytes(data)
        with pytest.raises(ValueError, match=match) as e:
            DecodedCache(bad)
        assert "bad.spdlcache" in str(e.value)
    # One flipped pixel byte: that record fails by name; unverified it is served.
    pixel = bytearray(good)
    pixel[4096 + 64 * 64 * 3 + 10] ^= 0xFF
    bad.write_bytes(bytes(pixel))
    cache = DecodedCache(bad)
    with pytest.raises(ValueError, match="bad.spdlcache#1.*checksum"):
        cache.load_batch([1])
    assert np.asarray(DecodedCache(bad, verify=False).load_batch([1])).shape == (1, 64, 64, 3)


def test_a_sampler_drives_the_cache_in_a_pipeline_with_ranks_and_resume(cache_path):
    from spdl_rs.pipeline import PipelineBuilder
    from spdl_rs.sources import Sampler

    cache = DecodedCache(cache_path)
    stored = [0, 1, 2, 3]  # record 4 failed at build time
    # Two ranks: every stored record once, each as the crop of its own record.
    seen = []
    for rank in range(2):
        sampler = Sampler(len(stored), rank=rank, world_size=2, seed=5)
        p = (
            PipelineBuilder()
            .add_source([stored[i] for i in sampler])
            .pipe(lambda i: (i, np.asarray(cache.load_batch([i], crop=16))[0]))
            .add_sink(4)
            .build(num_threads=2)
        )
        with p.auto_stop():
            for i, img in p:
                np.testing.assert_array_equal(img, np.asarray(cache.load_batch([i]))[0][24:40, 24:40])
                seen.append(i)
    assert sorted(seen) == stored
    # A sampler's state resumes where the indices left off.
    sampler = Sampler(len(stored), rank=0, world_size=1, seed=5)
    order = list(sampler.iter_with_info())
    sampler.mark_delivered(order[0][1])
    rest = [i for i in Sampler.from_state(sampler.state())]
    assert rest == [i for i, _, _ in order[1:]]
