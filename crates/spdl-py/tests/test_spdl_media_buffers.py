"""What a program written for SPDL's `spdl.io` gets from `spdl_rs.io`'s loaders: the results
of `load_video` / `load_audio` are CPU buffers (NumPy, DLPack), `load_audio(filter_desc=...)`
keeps the filter's sample format, and `load_image` / `load_image_batch` in SPDL's call form
decode through FFmpeg with SPDL's layouts, letterboxing and `strict` handling.

Pictures and sounds are made with the `ffmpeg` command line and the results compared with
what the command line gives for the same filter (byte for byte). Needs the FFmpeg build.
"""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from spdl_rs import io

MEDIA = pathlib.Path(__file__).resolve().parents[3] / "crates" / "spdl-io" / "tests" / "fixtures" / "media"
BBB = MEDIA / "clips" / "bbb_320x180_bframes.mp4"  # 75 frames 320x180 H.264 25 fps + AAC

pytestmark = pytest.mark.skipif(io.ffmpeg_versions() is None, reason="spdl_rs built without decode-ffmpeg")


def run(*args: str) -> bytes:
    cmd = ["ffmpeg", "-nostdin", "-hide_banner", "-v", "error", "-y", *args]
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def make(path: pathlib.Path, source: str, *args: str) -> pathlib.Path:
    """One picture (or sound) from a lavfi `source`, written to `path`."""
    run("-f", "lavfi", "-i", source, *args, str(path))
    return path


def raw(path: pathlib.Path, *args: str) -> bytes:
    """What the command line decodes from `path` (then `args`) as raw frames."""
    return run("-i", str(path), *args, "-f", "rawvideo", "-")


def test_load_video_and_load_audio_results_are_cpu_buffers():
    v = io.load_video(BBB)
    arr = io.to_numpy(v)
    assert arr.shape == (75, 180, 320, 3) and arr.dtype == np.uint8
    frames = np.asarray(v.frames)
    assert arr.ctypes.data == frames.ctypes.data  # the frames' memory, not a copy
    assert np.asarray(v).base is v  # the array keeps the result alive
    assert v.__array_interface__ == v.frames.__array_interface__
    del v, frames
    assert int(arr.sum()) > 0

    a = io.load_audio(BBB)
    wave = io.to_numpy(a)
    assert wave.dtype == np.float32 and wave.shape == a.shape == np.asarray(a.waveform).shape
    assert wave.shape[0] == a.num_channels

    torch = pytest.importorskip("torch")
    t = io.to_torch(io.load_video(BBB, indices=[0, 1]))
    assert tuple(t.shape) == (2, 180, 320, 3) and t.dtype == torch.uint8
    assert torch.from_dlpack(a).shape == wave.shape


@pytest.mark.parametrize(
    "sample_fmt, dtype, planar",
    [("s16", np.int16, False), ("s16p", np.int16, True), ("flt", np.float32, False), ("fltp", np.float32, True)],
)
def test_load_audio_with_filter_desc_keeps_the_filters_sample_format(tmp_path, sample_fmt, dtype, planar):
    wav = make(tmp_path / "a.wav", "sine=sample_rate=8000:frequency=300:duration=1", "-ac", "2", "-c:a", "pcm_s16le")
    desc = io.get_audio_filter_desc(sample_fmt=sample_fmt)
    a = io.load_audio(wav, filter_desc=desc)
    got = io.to_numpy(a)
    fmt = {np.int16: "s16le", np.float32: "f32le"}[dtype]
    want = np.frombuffer(run("-i", str(wav), "-af", desc, "-f", fmt, "-"), dtype).reshape(8000, 2)
    np.testing.assert_array_equal(got, want.T if planar else want)
    assert a.sample_rate == 8000 and a.num_channels == 2 and a.num_samples == 8000

    # None: the decoder's own format (16-bit WAV -> int16 [S, C]).
    native = io.to_numpy(io.load_audio(wav, filter_desc=None))
    assert native.dtype == np.int16 and native.shape == (8000, 2)


def test_load_image_in_spdls_form_gives_ffmpegs_native_layouts(tmp_path):
    # yuvj420p JPEG: the Y plane, then U, then V, as the command line writes them.
    jpg = make(tmp_path / "a.jpeg", "testsrc=size=320x240", "-frames:v", "1", "-pix_fmt", "yuvj420p")
    got = io.to_numpy(io.load_image(jpg, filter_desc=None))
    assert got.shape == (1, 360, 320) and got.dtype == np.uint8
    np.testing.assert_array_equal(got.ravel(), np.frombuffer(raw(jpg), np.uint8))

    # yuvj422p: [1, 2H, W], the same way.
    jpg422 = make(tmp_path / "c.jpeg", "testsrc=size=64x48,format=yuvj422p", "-frames:v", "1")
    got = io.to_numpy(io.load_image(jpg422, filter_desc=None))
    assert got.shape == (1, 96, 64)
    np.testing.assert_array_equal(got.ravel(), np.frombuffer(raw(jpg422), np.uint8))

    # yuvj444p: planar [3, H, W]; the default filter gives ffmpeg's rgb24.
    jpg444 = make(tmp_path / "b.jpeg", "testsrc=size=64x48,format=yuvj444p", "-frames:v", "1")
    planes = io.to_numpy(io.load_image(jpg444, filter_desc=None))
    np.testing.assert_array_equal(planes, np.frombuffer(raw(jpg444), np.uint8).reshape(3, 48, 64))
    rgb = io.to_numpy(io.load_image(str(jpg444), filter_desc="format=pix_fmts=rgb24"))
    np.testing.assert_array_equal(rgb, np.frombuffer(raw(jpg444, "-pix_fmt", "rgb24"), np.uint8).reshape(48, 64, 3))
    # Bytes take the same path.
    np.testing.assert_array_equal(io.to_numpy(io.load_image(jpg444.read_bytes())), rgb)

    # 16-bit gray PNG: uint16 [1, H, W], white is 65535 or 65022 (FFmpeg before 8).
    png16 = make(tmp_path / "g.png", "color=white:size=8x4,format=gray16be", "-frames:v", "1", "-pix_fmt", "gray16")
    g = io.to_numpy(io.load_image(png16, filter_desc=None))
    assert g.shape == (1, 4, 8) and g.dtype == np.uint16
    assert set(np.unique(g)) <= {65535, 65022}

    # Headless raw nv12 read through demux_config.
    nv12 = tmp_path / "p.nv12"
    run("-f", "lavfi", "-i", "testsrc=size=32x16", "-frames:v", "1", "-pix_fmt", "nv12", "-f", "rawvideo", str(nv12))
    cfg = io.demux_config(format="rawvideo", format_options={"pixel_format": "nv12", "video_size": "32x16"})
    pic = io.to_numpy(io.load_image(nv12, filter_desc=io.get_video_filter_desc(pix_fmt=None), demux_config=cfg))
    np.testing.assert_array_equal(pic.ravel(), np.frombuffer(nv12.read_bytes(), np.uint8))
    assert pic.shape == (1, 24, 32)

    with pytest.raises(TypeError, match="width"):
        io.load_image(jpg, 16, 16, demux_config=cfg)
    with pytest.raises(FileNotFoundError):
        io.load_image(tmp_path / "missing.jpg", filter_desc=None)


def test_load_image_batch_in_spdls_form_letterboxes_and_keeps_native_sizes(tmp_path):
    pngs = [make(tmp_path / f"{i}.png", f"testsrc=size=64x48:rate=1:duration={i + 1}", "-update", "1") for i in range(3)]

    # Native size, native format (rgb24 PNGs): [N, H, W, 3].
    batch = io.to_numpy(io.load_image_batch(pngs, width=None, height=None, pix_fmt=None))
    assert batch.shape == (3, 48, 64, 3)
    for i, p in enumerate(pngs):
        np.testing.assert_array_equal(batch[i], np.frombuffer(raw(p), np.uint8).reshape(48, 64, 3))

    # A size keeps the aspect ratio and pads with black, as SPDL and `ffmpeg -vf` do.
    boxed = io.to_numpy(io.load_image_batch([str(p) for p in pngs], width=32, height=32))
    desc = io.get_video_filter_desc(scale_width=32, scale_height=32)
    assert boxed.shape == (3, 32, 32, 3)
    np.testing.assert_array_equal(boxed[0], np.frombuffer(raw(pngs[0], "-vf", desc), np.uint8).reshape(32, 32, 3))
    assert boxed[:, :4].max() == 0 and boxed[:, -4:].max() == 0  # 4:3 into a square: bars
    assert boxed[:, 8:24].max() > 0

    # yuvj444p JPEGs stay planar with pix_fmt=None: [N, 3, H, W].
    jpgs = [make(tmp_path / f"{i}.jpg", "testsrc=size=64x48", "-frames:v", "1") for i in range(2)]
    planar = io.load_image_batch(jpgs, width=None, height=None, pix_fmt=None)
    assert planar.__array_interface__["shape"] == (2, 3, 48, 64)

    # strict: a failure raises; strict=False leaves it out (and logs it).
    srcs = [tmp_path / "missing.jpg", *jpgs]
    with pytest.raises(RuntimeError, match="missing.jpg"):
        io.load_image_batch(srcs, width=None, height=None)
    kept = io.load_image_batch(srcs, width=None, height=None, strict=False)
    assert kept.__array_interface__["shape"] == (2, 48, 64, 3)
    with pytest.raises(RuntimeError, match="all"):
        io.load_image_batch(srcs[:1], width=None, height=None, strict=False)
    with pytest.raises(ValueError, match="empty"):
        io.load_image_batch([], width=None, height=None)

    # An explicit filter replaces SPDL's; a size beside it would be ignored, so it is refused.
    flipped = io.to_numpy(io.load_image_batch(pngs, width=None, height=None, pix_fmt=None, filter_desc="hflip,format=pix_fmts=rgb24"))
    np.testing.assert_array_equal(flipped[:, :, ::-1], batch)
    with pytest.raises(TypeError, match="width"):
        io.load_image_batch(pngs, width=8, height=8, filter_desc="hflip")


def test_load_image_batch_native_form_is_unchanged_and_refuses_spdl_keywords(tmp_path):
    pngs = [make(tmp_path / f"{i}.png", "testsrc=size=64x48", "-frames:v", "1") for i in range(2)]
    stretched = np.asarray(io.load_image_batch(pngs, 32, 32))
    assert stretched.shape == (2, 32, 32, 3)
    assert stretched[:, :4].max() > 0  # stretched to fill: no bars
    with pytest.raises(TypeError, match="pix_fmt"):
        io.load_image_batch(pngs, 32, 32, pix_fmt="rgb24")
    with pytest.raises(TypeError, match="strict"):
        io.load_image_batch(pngs, width=32, height=32, num_threads=1, strict=True)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
