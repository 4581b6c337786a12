"""The keyword options of every entry point: each keyword of its options type is accepted and
honoured (giving every default explicitly changes nothing; a non-default changes the result),
and an unknown keyword raises TypeError naming it."""

import pathlib

import numpy as np
import pytest

from spdl_rs import io, ops, sources

REPO = pathlib.Path(__file__).resolve().parents[3]
PHOTO = REPO / "data" / "samples" / "opencv_baboon.jpg"
CLIP = REPO / "crates" / "spdl-io" / "tests" / "fixtures" / "media" / "clips" / "bbb_320x180_bframes.mp4"
HAS_FFMPEG = io.ffmpeg_versions() is not None

#: The documented default of every keyword (spdl_rs/_options.py), per domain.
IMAGE = dict(
    color="rgb", filter="bilinear", lenient=False, transform="resize", size=None, seed=0,
    index=0, epoch=0, key="<bytes>", normalize=False, num_threads=None,
)  # fmt: skip
MEDIA = dict(
    width=None, height=None, pixel_format="rgb", filter="bicubic", num_threads=1, apply_rotation=False,
    indices=None, step=None, played_at=None, filter_desc=None, stride=1, num_clips=None,
    frames_per_clip=None, sample_rate=None, num_channels=None, demux_config=None, decode_config=None,
)  # fmt: skip
SAMPLING = dict(rank=None, world_size=None, shuffle=True, seed=0, drop_last=False)


def defaults(options: type, table: dict) -> dict:
    """Every keyword of `options` (its own and inherited) with its default."""
    return {k: table[k] for k in options.__optional_keys__}


def pixels(x) -> np.ndarray:
    return np.asarray(getattr(x, "frames", getattr(x, "waveform", x)))


def image_calls():
    data = PHOTO.read_bytes()
    return [
        (io.ImageOptions, lambda **kw: ops.decode_image(32, 24, **kw)(data)),
        (io.ImageOptions, lambda **kw: ops.load_image(32, 24, **kw)(str(PHOTO))),
        (io.SampleOptions, lambda **kw: io.load_image(PHOTO, 32, 24, **kw)),
        (io.BytesSampleOptions, lambda **kw: io.decode_image(data, 32, 24, **kw)),
        (io.BatchOptions, lambda **kw: io.load_image_batch([PHOTO], 32, 24, **kw)),
        (io.BatchOptions, lambda **kw: io.decode_image_batch([data], 32, 24, **kw)[0]),
    ]


def media_calls():
    return [
        (io.VideoOptions, lambda **kw: io.load_video(CLIP, **kw)),
        (io.ClipOptions, lambda **kw: io.load_video_clips(CLIP, 2, 3, **kw)),
        (io.VideoOutputOptions, lambda **kw: io.load_video(CLIP, timestamp=(0.0, 0.5), **kw)),
        (io.VideoStageOptions, lambda **kw: ops.load_video(**kw)(str(CLIP))),
        (io.VideoStageOptions, lambda **kw: ops.decode_video(**kw)(CLIP.read_bytes())),
        (io.AudioOptions, lambda **kw: io.load_audio(CLIP, **kw)),
        (io.AudioOptions, lambda **kw: ops.load_audio(**kw)(str(CLIP))),
        (io.AudioOptions, lambda **kw: ops.decode_audio(**kw)(CLIP.read_bytes())),
    ]


def check(options, table, call):
    plain = pixels(call())
    np.testing.assert_array_equal(pixels(call(**defaults(options, table))), plain)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'colour'"):
        call(colour="gray")
    with pytest.raises(TypeError, match=r"unexpected keyword arguments 'bogus', 'other'"):
        call(bogus=1, other=2)
    return plain


@pytest.mark.parametrize("i", range(6))
def test_image_keywords_are_honoured_and_unknown_ones_rejected(i):
    options, call = image_calls()[i]
    plain = check(options, IMAGE, call)
    assert pixels(call(color="gray")).shape[-1] == 1 != plain.shape[-1]
    assert not np.array_equal(pixels(call(filter="nearest")), plain)
    with pytest.raises(ValueError, match="filter must be one of 'nearest'"):
        call(filter="cubic")
    with pytest.raises(TypeError, match=r"argument 'seed'"):
        call(seed="x")


@pytest.mark.skipif(not HAS_FFMPEG, reason="built without FFmpeg")
@pytest.mark.parametrize("i", range(8))
def test_media_keywords_are_honoured_and_unknown_ones_rejected(i):
    options, call = media_calls()[i]
    plain = check(options, MEDIA, call)
    if "num_channels" in options.__optional_keys__:
        assert pixels(call(num_channels=1)).shape[0] == 1 != plain.shape[0]
    else:
        assert pixels(call(pixel_format="gray")).shape[-1] == 1 != plain.shape[-1]
        with pytest.raises(ValueError, match="pixel_format must be one of 'rgb', 'bgr', 'gray'"):
            call(pixel_format="yuv")


def test_sampling_keywords_are_honoured_and_unknown_ones_rejected():
    kw = defaults(sources.SamplingOptions, SAMPLING)
    assert list(sources.Sampler(10, **kw)) == list(sources.Sampler(10, rank=0, world_size=1))
    assert list(sources.Sampler(10, **{**kw, "shuffle": False})) == list(range(10))
    assert list(sources.Sampler(10, rank=1, world_size=4, shuffle=False, drop_last=True)) == [1, 5]
    for make in (lambda **k: sources.Sampler(10, **k), lambda **k: sources.TarShards(str(REPO), **k)):
        with pytest.raises(TypeError, match="unexpected keyword argument 'world'"):
            make(world=2)
