"""FFmpeg filter graphs from Python (`filter_desc=` on `spdl_rs.io.load_video` / `load_audio`,
`get_video_filter_desc`, `get_audio_filter_desc`, `get_buffer_desc`, `get_abuffer_desc`) against
the `ffmpeg` command line given the same `-vf` / `-af` string, SPDL's description strings, and
the FFmpeg utilities (`get_ffmpeg_versions`, `get_ffmpeg_filters`, log level, `built_with_*`).

Needs a wheel built with `decode-ffmpeg` and the `ffmpeg` command (`cargo xtask setup`).
"""

import math
import pathlib
import subprocess
import types

import numpy as np
import pytest

from spdl_rs import io

MEDIA = pathlib.Path(__file__).resolve().parents[3] / "crates" / "spdl-io" / "tests" / "fixtures" / "media"
BBB = MEDIA / "clips" / "bbb_320x180_bframes.mp4"  # 75 frames 320x180 H.264, 25 fps
FLAC = MEDIA / "16-audio-odd-rates-channels" / "sine_44100Hz_stereo_LR.flac"

HAS_FFMPEG = io.ffmpeg_versions() is not None
pytestmark = pytest.mark.skipif(not HAS_FFMPEG, reason="spdl_rs built without decode-ffmpeg")


def ffmpeg(path: pathlib.Path, *args: str) -> bytes:
    """stdout of `ffmpeg -i path ARGS -`."""
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-threads", "1", "-i", str(path), *args, "-"]
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def test_video_filter_desc_gives_the_ffmpeg_command_line_bytes():
    desc = io.get_video_filter_desc(scale_width=64, scale_height=48, scale_mode="pad")
    v = io.load_video(BBB, filter_desc=desc)
    frames = np.asarray(v.frames)
    assert frames.shape == (75, 48, 64, 3)
    raw = ffmpeg(BBB, "-vf", desc, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24")
    want = np.frombuffer(raw, np.uint8).reshape(frames.shape)
    np.testing.assert_array_equal(frames, want)
    # Letterboxed: the pad rows are black.
    assert frames[:, 0].max() == 0
    assert v.indices is None

    # A frame rate change gives fewer frames with the filter's timestamps.
    v = io.load_video(BBB, filter_desc=io.get_video_filter_desc(frame_rate=(5, 1)))
    assert np.asarray(v.frames).shape == (15, 180, 320, 3)
    assert v.pts[:3] == pytest.approx([0.0, 0.2, 0.4])

    # SPDL's form keeps the filter's pixel format: None gives the decoder's yuv420p, Y, U and V
    # planes one after another as the command line writes them.
    native = io.load_video(BBB, filter_desc=None)
    assert np.asarray(native).shape == (75, 1, 270, 320) and native.indices is None
    raw = ffmpeg(BBB, "-f", "rawvideo", "-pix_fmt", "yuv420p")
    np.testing.assert_array_equal(np.asarray(native).ravel(), np.frombuffer(raw, np.uint8))

    # With a time window: the window's frames, filtered.
    full = io.load_video(BBB, filter_desc="hflip")
    window = (full.pts[25], full.pts[35])
    part = np.asarray(io.load_video(BBB, window, filter_desc="hflip").frames)
    np.testing.assert_array_equal(part, np.asarray(full.frames)[25:35])


def test_audio_filter_desc_gives_the_ffmpeg_command_line_samples():
    desc = io.get_audio_filter_desc(sample_rate=16000, num_channels=1)
    a = io.load_audio(FLAC, filter_desc=desc)
    wave = np.asarray(a.waveform)
    raw = ffmpeg(FLAC, "-af", desc, "-f", "f32le")
    want = np.frombuffer(raw, np.float32)
    assert wave.shape == (1, want.size)
    assert a.sample_rate == 16000
    np.testing.assert_allclose(wave[0], want, atol=1e-4)


def test_bad_filter_strings_raise_value_error_naming_them():
    for desc in ["notafilter", "scale=w=abc", "[in]null["]:
        with pytest.raises(ValueError, match="filter description"):
            io.load_video(BBB, filter_desc=desc)
    with pytest.raises(ValueError, match="filter description"):
        io.load_audio(FLAC, filter_desc="hflip")
    with pytest.raises(ValueError, match="filter_desc"):
        io.load_video(BBB, indices=[1], filter_desc="null")


def test_filter_descriptions_are_spdls_strings():
    assert io.get_video_filter_desc() == "format=pix_fmts=rgb24"
    assert io.get_video_filter_desc(pix_fmt=None) is None
    assert io.get_video_filter_desc(scale_width=224, scale_height=224) == (
        "scale=w=224:h=224:flags=bicubic:force_original_aspect_ratio=decrease,"
        "pad=w=224:h=224:x=-1:y=-1:color=black,format=pix_fmts=rgb24"
    )
    assert io.get_video_filter_desc(
        frame_rate=(30000, 1001),
        timestamp=(1.5, math.inf),
        scale_width=256,
        scale_mode="crop",
        crop_width=224,
        crop_height=224,
        num_frames=16,
        pad_mode="white",
        filter_desc="hflip",
        pix_fmt="gray8",
    ) == (
        "fps=30000/1001,trim=start=1.5,"
        "scale=w=256:h=0:flags=bicubic:force_original_aspect_ratio=increase,crop=w=256:h=0,"
        "crop=w=224:h=224,tpad=stop=-1:stop_mode=add:color=white,trim=end_frame=16,"
        "hflip,format=pix_fmts=gray8"
    )
    assert io.get_video_filter_desc(scale_width=64, scale_mode=None, pix_fmt=None) == (
        "scale=w=64:h=0:flags=bicubic"
    )
    with pytest.raises(ValueError, match="scale_mode"):
        io.get_video_filter_desc(scale_width=64, scale_mode="stretch")

    assert io.get_audio_filter_desc() == "aformat=sample_fmts=fltp"
    assert io.get_audio_filter_desc(
        sample_rate=16000, num_channels=1, timestamp=(0.0, 2.5), num_frames=100, sample_fmt="s16"
    ) == (
        "aformat=channel_layouts=1c,aresample=16000,atrim=start=0.0:end=2.5,"
        "apad,atrim=end_sample=100,aformat=sample_fmts=s16"
    )

    codec = types.SimpleNamespace(
        width=320, height=180, pix_fmt="yuv420p", time_base=(1, 12800), sample_aspect_ratio=(1, 1)
    )
    assert io.get_buffer_desc(codec) == (
        "buffer=video_size=320x180:pix_fmt=yuv420p:time_base=1/12800:pixel_aspect=1/1"
    )
    assert io.get_buffer_desc(codec, label="in0", pix_fmt="rgb24").startswith(
        "buffer@in0=video_size=320x180:pix_fmt=rgb24:"
    )
    acodec = types.SimpleNamespace(
        time_base=(1, 44100), sample_rate=44100, sample_fmt="fltp", channel_layout="stereo"
    )
    assert io.get_abuffer_desc(acodec, label="a") == (
        "abuffer@a=time_base=1/44100:sample_rate=44100:sample_fmt=fltp:channel_layout=stereo"
    )


def test_ffmpeg_utilities():
    versions = io.get_ffmpeg_versions()
    assert set(versions) >= {"libavcodec", "libavfilter", "libavformat", "libavutil"}
    assert all(isinstance(v, tuple) and len(v) == 3 for v in versions.values())
    major, minor, micro = versions["libavcodec"]
    assert f"libavcodec {major}.{minor}.{micro}" in io.ffmpeg_versions()

    filters = io.get_ffmpeg_filters()
    assert {"scale", "fps", "tpad", "aresample", "aformat"} <= set(filters)

    before = io.get_ffmpeg_log_level()
    io.set_ffmpeg_log_level(24)
    assert io.get_ffmpeg_log_level() == 24
    io.set_ffmpeg_log_level(before)

    assert io.built_with_cuda() == io.cuda_built()
    # This test runs only on decode-ffmpeg builds; the wheels add decode-nvdec (NVDEC is
    # loaded at run time), and NVDEC decoding needs both.
    assert io.built_with_nvcodec() is True
    assert io.built_with_nvjpeg() is True  # the wheels are built with decode-nvjpeg (loaded at run time)


def test_demux_then_decode_equals_load_video_and_runs_on_threads():
    import concurrent.futures

    rgb = "format=pix_fmts=rgb24"
    full = io.load_video(BBB, filter_desc=rgb)
    packets = io.demux_video(BBB)
    assert len(packets) == 75 and packets.timestamp is None and packets.codec.name == "h264"
    assert sorted(packets.get_timestamps()) == pytest.approx(full.pts)
    v = io.decode_packets(packets.clone())
    np.testing.assert_array_equal(np.asarray(io.convert_frames(v)), np.asarray(full.frames))
    assert v.get_timestamps() == pytest.approx(full.pts)

    window = (full.pts[30], full.pts[55])
    part = io.demux_video(BBB.read_bytes(), timestamp=window, name="bbb.mp4")
    assert 25 <= len(part) < 75 and part.timestamp == window
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(lambda p: io.decode_packets(p), [part.clone(), part.clone()]))
    for out in outs:
        np.testing.assert_array_equal(
            np.asarray(io.convert_frames(out)), np.asarray(full.frames)[30:55]
        )

    desc = "scale=64:36,hflip,format=rgb24"
    np.testing.assert_array_equal(
        np.asarray(io.convert_frames(io.decode_packets(packets.clone(), desc, num_frames=4))),
        np.asarray(io.load_video(BBB, filter_desc=desc).frames)[:4],
    )
    with pytest.raises(ValueError, match="bbb.mp4"):
        io.decode_packets(part, "notafilter")
    with pytest.raises(TypeError):
        io.decode_packets(packets, None, decode_config="threads=2")


def test_native_stages_take_filter_desc_and_get_filter_desc_follows_the_packets():
    from spdl_rs import ops

    desc = io.get_video_filter_desc(scale_width=32, scale_height=32, scale_mode=None)
    v = ops.decode_video(filter_desc=desc)(BBB.read_bytes())
    np.testing.assert_array_equal(
        np.asarray(v.frames), np.asarray(io.load_video(BBB, filter_desc=desc).frames)
    )
    a = ops.load_audio(filter_desc="aresample=8000")(str(FLAC))
    assert a.sample_rate == 8000
    with pytest.raises(ValueError, match="filter_desc"):
        ops.load_video(indices=[0], filter_desc="null")

    # SPDL's get_filter_desc: video packets get no trim (their window is applied when decoding).
    packets = io.demux_video(BBB, timestamp=(1.0, 2.0))
    assert io.get_filter_desc(packets, scale_width=8, scale_height=8) == io.get_video_filter_desc(
        scale_width=8, scale_height=8
    )
    with pytest.raises(TypeError, match="VideoPackets"):
        io.get_filter_desc(b"bytes")
