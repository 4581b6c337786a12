"""Video and audio from Python (`spdl_rs.io.load_video` / `load_audio`, the `spdl_rs.ops`
stages), on the real clips of `crates/spdl-io/tests/fixtures/media`. Every expected value
comes from ffmpeg/ffprobe 5.1 (the `*.ref.txt`, `EXPECTED.md` and `ref/*.npy` files there).

Needs a wheel built with the Cargo feature `decode-ffmpeg` (`cargo xtask wheel` builds one);
without it only the "built without FFmpeg" error is checked.
"""

import pathlib

import numpy as np
import pytest

from conftest import spin_while
from spdl_rs import io, ops, sources
from spdl_rs.pipeline import PipelineBuilder

MEDIA = pathlib.Path(__file__).resolve().parents[3] / "crates" / "spdl-io" / "tests" / "fixtures" / "media"
CLIPS = MEDIA / "clips"
BBB = CLIPS / "bbb_320x180_bframes.mp4"  # 75 frames H.264 with B-frames, 25 fps; AAC stereo 44.1 kHz
VTEST = CLIPS / "vtest_384x288_msmpeg4.avi"  # 20 frames MS-MPEG4v3, 10 fps
ROT = MEDIA / "13-video-rotation-metadata"
VFR = MEDIA / "14-video-vfr-frame-count" / "vfr_12frames.mp4"
AUDIO = MEDIA / "16-audio-odd-rates-channels"

HAS_FFMPEG = io.ffmpeg_versions() is not None
needs_ffmpeg = pytest.mark.skipif(not HAS_FFMPEG, reason="spdl_rs built without decode-ffmpeg")

# ffprobe pts_time of the 12 frames of vfr_12frames.mp4 (EXPECTED.md of case 14).
VFR_PTS = [0.0, 0.033, 0.067, 0.267, 0.3, 0.8, 0.833, 0.933, 0.967, 1.0, 1.3, 1.333]


def grid_ref(path: pathlib.Path) -> list[tuple[float, np.ndarray]]:
    """ffmpeg's reference: per frame, pts (s) and the 4x4 grid means of R, G, B."""
    out = []
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            v = [float(x) for x in line.split()]
            out.append((v[0], np.array(v[1:])))
    return out


def grid_means(frame: np.ndarray) -> np.ndarray:
    h, w, _ = frame.shape
    cells = []
    for gy in range(4):
        for gx in range(4):
            cell = frame[gy * h // 4 : (gy + 1) * h // 4, gx * w // 4 : (gx + 1) * w // 4]
            cells.extend(cell.reshape(-1, 3).astype(np.float64).mean(axis=0))
    return np.array(cells)


def test_media_names_of_a_build_without_ffmpeg_say_how_to_build_and_name_the_keywords():
    # What spdl_rs.io binds in place of each media-API name when FFmpeg is missing.
    demuxer = io._missing_media_api("Demuxer")
    with pytest.raises(RuntimeError, match=r"Demuxer\(\.\.\., demux_config=\.\.\.\): .*built without FFmpeg"):
        demuxer("clip.mp4", demux_config=None)


@pytest.mark.skipif(HAS_FFMPEG, reason="built with FFmpeg")
def test_without_ffmpeg_every_entry_point_says_how_to_build():
    for call in (
        lambda: io.load_video(BBB),
        lambda: io.load_video_clips(BBB, 2, 4),
        lambda: io.load_audio(BBB),
        lambda: ops.load_video(),
        lambda: ops.decode_audio(),
    ):
        with pytest.raises(RuntimeError, match="built without FFmpeg.*decode-ffmpeg"):
            call()


@needs_ffmpeg
@pytest.mark.parametrize(
    "clip, frames, size, codec",
    [(BBB, 75, (180, 320), "h264"), (VTEST, 20, (288, 384), "msmpeg4")],
)
def test_all_frames_match_the_ffmpeg_command_line(clip, frames, size, codec):
    ref = grid_ref(clip.with_name(clip.name + ".ref.txt"))
    assert len(ref) == frames
    v = io.load_video(clip)
    assert v.shape == [frames, *size, 3]
    assert len(v) == frames
    assert v.codec.startswith(codec)
    assert v.num_decoded == frames
    assert v.indices == list(range(frames))
    a = np.asarray(v.frames)
    assert a.shape == (frames, *size, 3) and a.dtype == np.uint8
    np.testing.assert_allclose(v.pts, [p for p, _ in ref], atol=1e-6)
    for t, (_, grid) in enumerate(ref):
        assert np.abs(grid_means(a[t]) - grid).max() <= 1.0, f"frame {t}"


@needs_ffmpeg
def test_indices_any_order_with_repeats_equal_the_full_decode():
    full = io.load_video(BBB)
    a = np.asarray(full.frames)
    # Out of order, repeated, across key frames (0, 25, 50) and B-frames.
    picks = [74, 2, 26, 3, 49, 50, 2, 0, 61, 25, 24]
    v = io.load_video(BBB, indices=picks)
    assert v.indices == picks
    got = np.asarray(v.frames)
    assert got.shape == (len(picks), 180, 320, 3)
    np.testing.assert_array_equal(got, a[picks])
    assert v.pts == [full.pts[i] for i in picks]
    # Every 4th frame.
    s = io.load_video(BBB, step=4)
    assert s.indices == list(range(0, 75, 4))
    np.testing.assert_array_equal(np.asarray(s.frames), a[::4])


@needs_ffmpeg
def test_time_window_and_bytes_input_give_the_same_frames():
    full = io.load_video(BBB)
    a = np.asarray(full.frames)
    start, end = full.pts[30], full.pts[55]  # seeks past the first GOP
    w = io.load_video(BBB.read_bytes(), (start, end))
    assert w.indices is None
    assert w.pts == full.pts[30:55]
    np.testing.assert_array_equal(np.asarray(w.frames), a[30:55])
    for src in (bytearray(BBB.read_bytes()), memoryview(BBB.read_bytes()), str(BBB)):
        np.testing.assert_array_equal(np.asarray(io.load_video(src, indices=[7]).frames), a[[7]])


@needs_ffmpeg
def test_output_size_pixel_format_and_threads():
    rgb = np.asarray(io.load_video(BBB, indices=[10]).frames)
    bgr = np.asarray(io.load_video(BBB, indices=[10], pixel_format="bgr", num_threads=2).frames)
    np.testing.assert_array_equal(bgr, rgb[..., ::-1])
    gray = io.load_video(BBB, indices=[10], pixel_format="gray")
    assert gray.shape == [1, 180, 320, 1]
    small = io.load_video(BBB, step=25, width=112, height=64, filter="area")
    assert small.shape == [3, 64, 112, 3]
    assert io.load_video(BBB, indices=[0], width=160).shape == [1, 90, 160, 3]  # keeps the aspect
    with pytest.raises(ValueError, match="pixel_format"):
        io.load_video(BBB, pixel_format="yuv")
    with pytest.raises(ValueError, match="at most one"):
        io.load_video(BBB, indices=[0], step=2)
    with pytest.raises(ValueError, match="must be >= 0"):
        io.load_video(BBB, indices=[-1])


@needs_ffmpeg
def test_variable_frame_rate_counts_and_timestamps():
    v = io.load_video(VFR)
    assert v.shape == [12, 24, 32, 3]
    assert v.num_decoded == 12
    np.testing.assert_allclose(v.pts, VFR_PTS, atol=1e-3)
    means = np.asarray(v.frames).reshape(12, -1).mean(axis=1)
    np.testing.assert_allclose(means, [20 + 18 * i for i in range(12)], atol=3)
    np.testing.assert_allclose(
        np.asarray(v.frames), np.load(VFR.parent / "ref" / "frames_rgb.npy"), atol=3
    )
    # The frame on screen at 0.5 s is frame 4 (pts 0.300, next 0.800).
    at = io.load_video(VFR, played_at=[0.5])
    assert round(float(np.asarray(at.frames).mean())) == 91
    with pytest.raises(ValueError, match=r"vfr_12frames\.mp4.*out of range"):
        io.load_video(VFR, indices=[12])


@needs_ffmpeg
@pytest.mark.parametrize("rot, shape", [(0, (32, 64)), (90, (64, 32)), (180, (32, 64)), (270, (64, 32))])
def test_rotation_is_reported_always_and_applied_when_asked(rot, shape):
    path = ROT / f"rot{rot}.mp4"
    v = io.load_video(path, apply_rotation=True)
    assert v.shape == [10, *shape, 3]
    assert v.rotation == rot and v.stream_rotation == rot
    ref = np.load(ROT / "ref" / f"rot{rot}_frame0_autorotated.npy")
    assert np.abs(np.asarray(v.frames)[0].astype(int) - ref.astype(int)).max() <= 12
    raw = io.load_video(path)  # SPDL 0.8's default: the coded frames, the rotation reported
    assert raw.shape == [10, 32, 64, 3]
    assert raw.rotation == 0 and raw.stream_rotation == rot


@needs_ffmpeg
def test_clips_are_the_sampled_frames_of_a_full_decode():
    a = np.asarray(io.load_video(VTEST).frames)
    c = io.load_video_clips(VTEST, 3, 4, stride=2)
    # 20 frames, clip span 7: starts spread over 0..=13: 0, round(6.5) = 7, 13.
    got = np.asarray(c.frames)
    assert got.shape == (3, 4, 288, 384, 3)
    idx = np.array(c.indices).reshape(3, 4)
    assert idx.tolist() == [[0, 2, 4, 6], [7, 9, 11, 13], [13, 15, 17, 19]]
    for n in range(3):
        np.testing.assert_array_equal(got[n], a[idx[n]])


@needs_ffmpeg
def test_frames_are_zero_copy():
    v = io.load_video(VTEST, indices=[0, 1])
    buf = v.frames
    arr = np.asarray(buf)
    assert arr.__array_interface__["data"][0] == buf.data_ptr
    assert np.from_dlpack(buf).__array_interface__["data"][0] == buf.data_ptr
    assert v.frames.data_ptr == buf.data_ptr  # every access shares the same memory
    w = io.load_audio(AUDIO / "sine_8000Hz_mono_f32.wav").waveform
    assert np.asarray(w).__array_interface__["data"][0] == w.data_ptr
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(buf)
    assert t.data_ptr() == buf.data_ptr and tuple(t.shape) == (2, 288, 384, 3)


@needs_ffmpeg
def test_load_video_and_load_audio_release_the_gil():
    def decode():
        for _ in range(3):
            io.load_video(BBB)
            io.load_audio(BBB, sample_rate=16000)

    # With the GIL released the spinning thread runs for the whole call.
    during = spin_while(decode)
    assert during > 1000, during


@needs_ffmpeg
def test_corrupt_and_missing_files_name_the_source(tmp_path):
    bad = tmp_path / "broken clip.mp4"
    bad.write_bytes(BBB.read_bytes()[:3000])
    with pytest.raises(ValueError, match=r"(truncated|corrupt): .*broken clip\.mp4: "):
        io.load_video(bad)
    junk = tmp_path / "not_a_video.mp4"
    junk.write_bytes(b"<html>nope</html>" * 20)
    with pytest.raises(ValueError, match=r"not_a_video\.mp4: "):
        io.load_video(junk)
    with pytest.raises(ValueError, match=r"^[a-z ]+: clip-7: "):
        io.load_video(b"\x00" * 100, name="clip-7")
    with pytest.raises(FileNotFoundError, match=r"missing\.mp4"):
        io.load_video(tmp_path / "missing.mp4")
    with pytest.raises(ValueError, match=r"unsupported: .*vtest_384x288_msmpeg4\.avi: "):
        io.load_audio(VTEST)  # no audio stream
    with pytest.raises(TypeError, match="src must be"):
        io.load_video(12)


# ------------------------------------------------------------------------------------- audio

# file: (sample rate Hz, channels, samples per channel) as ffmpeg decodes them (case 16).
AUDIO_REF = {
    "sine440_11025Hz_mono_s16.wav": (11025, 1, 5513),
    "sine440_22050Hz_mono.mp3": (22050, 1, 11025),
    "sine_44100Hz_stereo_LR.flac": (44100, 2, 11025),
    "sine_48000Hz_5.1_s16.wav": (48000, 6, 9600),
    "sine_8000Hz_mono_f32.wav": (8000, 1, 8000),
    "odd_7350Hz_mono_s16.wav": (7350, 1, 2205),
}


@needs_ffmpeg
@pytest.mark.parametrize("name", sorted(AUDIO_REF))
def test_audio_native_decode_matches_ffmpeg(name):
    rate, channels, samples = AUDIO_REF[name]
    a = io.load_audio(AUDIO / name)
    assert (a.sample_rate, a.num_channels) == (rate, channels)
    assert a.shape == (channels, a.num_samples)
    if name.endswith(".mp3"):
        assert abs(a.num_samples - samples) <= 1152
    else:
        assert a.num_samples == samples
    w = np.asarray(a.waveform)
    assert w.dtype == np.float32 and w.shape == (channels, a.num_samples)
    assert np.abs(w).max() <= 1.0
    ref_path = AUDIO / "ref" / (name.rsplit(".", 1)[0] + ".npy")
    if ref_path.exists():
        ref = np.load(ref_path)
        n = min(ref.shape[1], w.shape[1])
        tol = 0.05 if name.endswith(".mp3") else 1e-4
        assert np.abs(w[:, :n] - ref[:, :n]).max() <= tol


@needs_ffmpeg
def test_audio_resample_remix_window_and_bytes():
    a = io.load_audio(AUDIO / "sine_48000Hz_5.1_s16.wav", sample_rate=16000, num_channels=1)
    assert (a.sample_rate, a.shape) == (16000, (1, 3200))
    peaks = np.abs(np.asarray(io.load_audio(AUDIO / "sine_48000Hz_5.1_s16.wav").waveform)).max(axis=1)
    assert peaks[2] == 0 and peaks[3] == 0 and abs(peaks[1] - 0.0625) < 0.01
    full = np.asarray(io.load_audio(AUDIO / "sine_8000Hz_mono_f32.wav").waveform)
    w = io.load_audio((AUDIO / "sine_8000Hz_mono_f32.wav").read_bytes(), (0.25, 0.5))
    assert abs(w.start - 0.25) < 1e-9 and w.num_samples == 2000
    np.testing.assert_array_equal(np.asarray(w.waveform), full[:, 2000:4000])
    bbb = io.load_audio(BBB)  # the AAC track of a video
    assert (bbb.sample_rate, bbb.num_channels) == (44100, 2) and bbb.codec.startswith("aac")
    assert abs(bbb.duration - 3.0) < 0.05


# ---------------------------------------------------------------------------------- pipelines


@needs_ffmpeg
def test_pipeline_of_native_video_stages_delivers_every_file(tmp_path):
    names = ["a.mp4", "b.avi", "c.mp4", "d.mp4"]
    for name, src in zip(names, [BBB, VTEST, VFR, ROT / "rot90.mp4"]):
        (tmp_path / name).write_bytes(src.read_bytes())
    files = sources.list_files(tmp_path, extensions=["mp4", "avi"])
    pipeline = (
        PipelineBuilder()
        .add_source(files)
        .pipe(ops.read_file(), concurrency=2)
        .pipe(ops.decode_video(indices=[0, 1], width=32, height=32), concurrency=2)
        .add_sink(4)
        .build(num_threads=2)
    )
    before = io._native._gil_acquisitions()
    got = {}
    with pipeline.auto_stop():
        for v in pipeline:
            assert isinstance(v, io.DecodedVideo)
            got[pathlib.Path(v.key).name] = np.asarray(v.frames)
    assert sorted(got) == names
    assert all(a.shape == (2, 32, 32, 3) for a in got.values())
    assert io._native._gil_acquisitions() == before  # native stages never took the GIL
    direct = np.asarray(io.load_video(tmp_path / "b.avi", indices=[0, 1], width=32, height=32).frames)
    np.testing.assert_array_equal(got["b.avi"], direct)


@needs_ffmpeg
def test_pipeline_of_native_audio_stages_and_a_failing_file(tmp_path):
    names = sorted(AUDIO_REF)
    for name in names:
        (tmp_path / name).write_bytes((AUDIO / name).read_bytes())
    (tmp_path / "zz_broken.wav").write_bytes(b"RIFF\x00\x00")
    files = sources.list_files(tmp_path, extensions=["wav", "mp3", "flac"])
    pipeline = (
        PipelineBuilder()
        .add_source(files)
        .pipe(ops.load_audio(sample_rate=16000, num_channels=1), concurrency=2)
        .add_sink(4)
        .build(num_threads=2, max_failures=1)
    )
    lengths = {}
    with pipeline.auto_stop():
        for a in pipeline:
            lengths[pathlib.Path(a.key).name] = (a.sample_rate, a.shape)
        errors = pipeline.last_errors()
    want = {
        "sine440_11025Hz_mono_s16.wav": 8001,
        "sine440_22050Hz_mono.mp3": 8000,
        "sine_44100Hz_stereo_LR.flac": 4000,
        "sine_48000Hz_5.1_s16.wav": 3200,
        "sine_8000Hz_mono_f32.wav": 16000,
        "odd_7350Hz_mono_s16.wav": 4800,
    }
    assert sorted(lengths) == names  # the broken file is skipped, every other delivered
    for name, n in want.items():
        rate, (c, s) = lengths[name]
        assert (rate, c) == (16000, 1) and abs(s - n) <= 2, (name, s)
    assert any("zz_broken.wav" in e for e in errors), errors


@needs_ffmpeg
def test_native_op_called_directly():
    op = ops.load_video(num_clips=2, frames_per_clip=3, stride=5)
    v = op(str(VTEST))
    assert v.shape == [2, 3, 288, 384, 3]
    a = ops.decode_audio(sample_rate=8000)((AUDIO / "sine_44100Hz_stereo_LR.flac").read_bytes())
    assert (a.key, a.sample_rate, a.shape) == ("<bytes>", 8000, (2, 2000))
    with pytest.raises(ValueError, match="decode_video expects bytes"):
        ops.decode_video()(12)
    with pytest.raises(ValueError, match="at most one|choose their own frames"):
        ops.load_video(num_clips=2, frames_per_clip=3, step=2)


@needs_ffmpeg
def test_labelled_listing_keeps_labels_through_the_video_stage(tmp_path):
    for cls, src in [("cats", VTEST), ("dogs", VFR)]:
        (tmp_path / cls).mkdir()
        (tmp_path / cls / src.name).write_bytes(src.read_bytes())
    files = sources.image_folder(tmp_path, extensions=["avi", "mp4"])
    pipeline = (
        PipelineBuilder()
        .add_source(files)
        .pipe(ops.load_video(step=10), concurrency=2)
        .add_sink(2)
        .build(num_threads=2)
    )
    with pipeline.auto_stop():
        got = {pathlib.Path(v.key).name: (v.label, v.indices) for v in pipeline}
    assert got == {VTEST.name: (0, [0, 10]), VFR.name: (1, [0, 10])}
