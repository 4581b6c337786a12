"""SPDL 0.8.0's packet and frame semantics in `spdl_rs.io`, as a program written for `spdl.io`
relies on them: which packets a time window selects (decode order, with the reference packets
its frames need; `len()` and `get_timestamps()` count the window only; an empty window is
valid), the `repr` naming the source, consumed packets and frames (`TypeError` afterwards),
zero-copy `deserialize_view`, sample decoding by key-frame runs, reference frames of gray
arrays, audio frame counts in samples and `abuffer` channel layouts written as FFmpeg describes
them. Needs a wheel built with `decode-ffmpeg` and the `ffmpeg` command line.
"""

import gc
import shutil
import subprocess
import weakref

import numpy as np
import pytest

from spdl_rs import io

HAS_FFMPEG = io.ffmpeg_versions() is not None and shutil.which("ffmpeg") is not None
pytestmark = pytest.mark.skipif(not HAS_FFMPEG, reason="needs decode-ffmpeg and the ffmpeg CLI")


def make(path, *args: str):
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args, str(path)], check=True)
    return str(path)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """76 frames at 25 fps (pts 0.00, 0.04, ...), a key frame every 25 frames, B-frames."""
    out = tmp_path_factory.mktemp("media") / "keyed.mp4"
    return make(
        out, "-f", "lavfi", "-i", "testsrc=rate=25", "-frames:v", "76",
        "-force_key_frames", "expr:not(mod(n,25))", "-c:v", "libx264", "-pix_fmt", "yuv420p",
    )


def rgb(packets) -> np.ndarray:
    return np.asarray(io.convert_frames(io.decode_packets(packets)))


@pytest.mark.parametrize(
    "window, want",
    [
        ((0.0, 0.0), []),
        ((1.0, 1.0), []),
        ((0.0, 0.04), [0.0]),
        ((0.02, 0.04), []),
        ((0.01, 0.08), [0.04]),
        ((0.04, 0.20), [0.04, 0.08, 0.12, 0.16]),
        ((0.0, 0.041), [0.0, 0.04]),
    ],
)
def test_a_window_counts_and_decodes_only_its_frames(keyed, window, want):
    packets = io.demux_video(keyed, timestamp=window)
    assert packets.get_timestamps() == pytest.approx(want)
    assert len(packets) == len(want) and packets.timestamp == window
    frames = io.decode_packets(packets)
    assert [round(t, 6) for t in frames.get_timestamps()] == pytest.approx(want)


def test_a_window_keeps_the_reference_packets_before_it(keyed):
    # [1.04, 1.2): the key frame at 1.0 is shown before the window but every frame needs it.
    packets = io.demux_video(keyed, timestamp=(1.04, 1.2))
    raw = packets.get_timestamps(raw=True)
    assert min(raw) <= 1.0 and len(raw) > len(packets) == 4
    full = rgb(io.demux_video(keyed))
    np.testing.assert_array_equal(rgb(packets), full[26:30])


def test_a_reversed_window_is_an_error(keyed):
    with pytest.raises(ValueError, match="reversed"):
        io.demux_video(keyed, timestamp=(1.0, 0.5))


def test_repr_names_the_source_and_the_window(keyed):
    packets = io.demux_video(keyed, timestamp=(0.0, 0.12))
    text = repr(packets)
    assert text.startswith(f'VideoPackets<src="{keyed}:0", num_packets=3, pts=[0.000, 0.080]')
    assert "timestamp=(0, 0.12)" in text and 'codec="h264"' in text
    data = open(keyed, "rb").read()
    addr = np.frombuffer(data, np.uint8).ctypes.data
    assert f'src="<Bytes: {addr:#x}>:0"' in repr(io.demux_video(data))
    assert 'src="clip.mp4:0"' in repr(io.demux_video(data, name="clip.mp4"))


def test_streaming_chunks_carry_no_codec(keyed):
    demuxer = io.Demuxer(keyed)
    chunks = list(demuxer.streaming_demux(num_packets=30))
    assert [len(c) for c in chunks] == [30, 30, 16]
    assert all(c.codec is None for c in chunks)
    assert io.BSF(demuxer.video_codec, "null").filter(chunks[0]).codec is None


def test_consumed_packets_and_frames_raise_type_error(keyed):
    packets = io.demux_video(keyed)
    copy = packets.clone()
    frames = io.decode_packets(packets)
    for call in (packets.clone, lambda: io.decode_packets(packets)):
        with pytest.raises(TypeError, match="consumed"):
            call()
    keep = frames.clone()
    io.convert_frames(frames)
    with pytest.raises(TypeError, match="consumed"):
        frames.clone()
    with pytest.raises(TypeError, match="consumed"):
        io.convert_frames(frames)
    # The clones made before are independent.
    assert len(io.decode_packets(copy)) == 76 and len(keep) == 76
    # A bit-stream filter takes its packets too.
    packets = io.demux_video(keyed)
    assert len(io.BSF(packets.codec, "null").filter(packets)) == 76
    with pytest.raises(TypeError, match="consumed"):
        packets.clone()


def test_deserialize_view_points_into_the_buffer_and_keeps_it_alive(keyed):
    packets = io.demux_video(keyed)
    want = rgb(packets.clone())
    state = bytearray(packets.__getstate__())
    view = io.VideoPackets.deserialize_view(memoryview(state))
    ref = weakref.ref(view)
    np.testing.assert_array_equal(rgb(view.clone()), want)
    # The view holds an export of the bytearray: it cannot be resized while the view lives.
    with pytest.raises(BufferError):
        state.extend(b"x")
    clone = view.clone()
    del view
    gc.collect()
    assert ref() is None
    state.extend(b"x")  # released with the view
    np.testing.assert_array_equal(rgb(clone), want)
    with pytest.raises(ValueError, match="not audio"):
        io.AudioPackets.deserialize_view(memoryview(packets.__getstate__()))


def test_sample_decode_video_of_a_window_with_a_filter(tmp_path):
    clip = make(tmp_path / "ten.mp4", "-f", "lavfi", "-i", "testsrc=rate=10", "-frames:v", "30")
    packets = io.demux_video(clip, timestamp=(0.55, 2.05))
    assert len(packets) == 15
    desc = io.get_video_filter_desc(scale_width=32, scale_height=24, pix_fmt="rgb24")
    frames = io.sample_decode_video(packets, [0, 2, 14, 2], filter_desc=desc)
    assert [round(f.pts, 6) for f in frames] == [0.6, 0.8, 2.0, 0.8]
    full = np.asarray(io.convert_frames(io.decode_packets(io.demux_video(clip), desc)))
    got = np.asarray(io.convert_frames(frames))
    np.testing.assert_array_equal(got, full[[6, 8, 20, 8]])
    with pytest.raises(IndexError, match="out of range"):
        io.sample_decode_video(io.demux_video(clip, timestamp=(0.55, 2.05)), [15])


def test_reference_frames_of_gray_arrays():
    rng = np.random.default_rng(1)
    gray = rng.integers(0, 256, size=(3, 4, 6), dtype=np.uint8)
    frames = io.create_reference_video_frame(gray, pix_fmt="gray8", frame_rate=(25, 1), pts=0)
    assert (frames.num_frames, frames.height, frames.width) == (3, 4, 6)
    # As SPDL, gray8 converts as an interleaved format of one channel: [N, H, W, 1]; that
    # shape goes back in as well.
    back = np.asarray(io.convert_frames(frames))
    assert back.shape == (3, 4, 6, 1)
    np.testing.assert_array_equal(back[..., 0], gray)
    again = io.create_reference_video_frame(back, pix_fmt="gray8", frame_rate=(25, 1), pts=0)
    np.testing.assert_array_equal(np.asarray(io.convert_frames(again)), back)
    wide = rng.integers(0, 65536, size=(2, 4, 6), dtype=np.uint16)
    frames = io.create_reference_video_frame(wide, pix_fmt="gray16le", frame_rate=(25, 1), pts=0)
    assert (frames.num_frames, frames.pix_fmt) == (2, "gray16le")
    got = np.asarray(io.convert_frames(frames))
    np.testing.assert_array_equal(got.reshape(2, 4, 6), wide)
    with pytest.raises(TypeError, match="int16 or uint16"):
        io.create_reference_video_frame(gray, pix_fmt="gray16", frame_rate=(25, 1), pts=0)


def test_gray_pictures_convert_to_one_trailing_channel(tmp_path):
    """A gray clip and a gray PNG decoded without a filter: [N, H, W, 1] / [H, W, 1] (batch
    [N, H, W, 1]) holding ffmpeg's own gray bytes; 16-bit gray stays [1, H, W]."""
    clip = make(tmp_path / "g.mkv", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=0.3",
                "-pix_fmt", "gray", "-c:v", "ffv1")
    want = np.frombuffer(subprocess.run(
        ["ffmpeg", "-v", "error", "-i", clip, "-f", "rawvideo", "-pix_fmt", "gray", "-"],
        check=True, capture_output=True).stdout, np.uint8).reshape(3, 48, 64, 1)
    video = np.asarray(io.convert_frames(io.decode_packets(io.demux_video(clip), filter_desc=None)))
    assert video.shape == (3, 48, 64, 1)
    np.testing.assert_array_equal(video, want)
    png = make(tmp_path / "g.png", "-f", "lavfi", "-i", "testsrc=size=64x48", "-frames:v", "1",
               "-pix_fmt", "gray")
    one = np.asarray(io.load_image(png, filter_desc=None))
    assert one.shape == (48, 64, 1)
    np.testing.assert_array_equal(one, want[0])
    batch = np.asarray(io.load_image_batch([png, png], width=None, height=None, pix_fmt=None))
    assert batch.shape == (2, 48, 64, 1)
    wide = make(tmp_path / "g16.png", "-f", "lavfi", "-i", "testsrc=size=64x48", "-frames:v", "1",
                "-pix_fmt", "gray16be")
    assert np.asarray(io.load_image(wide, filter_desc=None)).shape == (1, 48, 64)


def test_audio_frames_count_samples():
    planar = np.zeros((2, 100), dtype=np.uint8)
    frame = io.create_reference_audio_frame(planar, sample_fmt="u8p", sample_rate=8000, pts=0)
    assert (frame.num_frames, len(frame), frame.num_channels) == (100, 100, 2)


def test_abuffer_takes_ffmpegs_description_of_an_unordered_layout(tmp_path):
    wav = make(tmp_path / "mono.wav", "-f", "lavfi", "-i", "sine=duration=0.5", "-c:a", "pcm_s16le")
    codec = io.Demuxer(wav).audio_codec
    desc = io.get_abuffer_desc(codec)
    graph = io.FilterGraph(f"{desc},anull,abuffersink")
    dec = io.Decoder(codec, filter_desc=None)
    for frames in dec.streaming_decode_packets(io.demux_audio(wav)):
        graph.add_frames(frames)
    for frames in dec.flush():
        graph.add_frames(frames)
    graph.flush()
    out = graph.get_frames()
    assert out.num_channels == 1 and out.num_frames == 22050


def test_read_errors_are_also_runtime_errors_as_in_spdl(tmp_path):
    missing = str(tmp_path / "missing.mp4")
    for cls in (RuntimeError, FileNotFoundError):
        with pytest.raises(cls, match="Failed to open the input .*missing.mp4"):
            io.Demuxer(missing)
    junk = tmp_path / "junk.raw"
    junk.write_bytes(b"not media " * 100)
    for cls in (RuntimeError, ValueError):
        with pytest.raises(cls, match="junk.raw"):
            io.demux_audio(str(junk))
    with pytest.raises(RuntimeError, match="The data is not a valid zip file"):
        io.load_npz(b"o" * 5)
    with pytest.raises(RuntimeError, match="Failed to locate the end of the central directory"):
        io.load_npz(b"f" * 30)


def test_window_bounds_compare_as_fractions(keyed):
    # SPDL reads 1.1 as 11/10: the video margin makes the end 11/10 + 3/10 = 7/5 exactly, so
    # the packet shown at 1.4 ends the selection (in floats 1.1 + 0.3 > 1.4 would keep it).
    packets = io.demux_video(keyed, timestamp=(0.3, 1.1))
    assert max(packets.get_timestamps(raw=True)) < 1.4
    # Bounds may be fractions or strings Fraction reads, as in SPDL.
    assert io.demux_video(keyed, timestamp=("1/25", "3/25")).get_timestamps() == pytest.approx([0.04, 0.08])
