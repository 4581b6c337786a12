"""SPDL's GPU names in ``spdl_rs.io`` (``_gpu.py``, ``src/config.rs``, ``src/gpu_decode.rs``).

- run everywhere: ``cuda_config``, unpinned ``cpu_storage``, the container traversal of
  ``transfer_tensor_h2d``, ``to_jax`` / ``to_numba`` on host buffers, the nvJPEG CPU-fallback
  decision on real files, the NVDEC checks made before any device allocation, NV12 to RGB on
  the host against FFmpeg's own conversion; and, without a driver, the named error of every
  GPU entry point;
- GPU tests (nvJPEG against the CPU decoder, ``transfer_tensor_h2d`` / ``d2h`` round trips,
  pinned ``cpu_storage``): skipped with the reason unless a CUDA device is usable
  (``cargo xtask gpu-check`` runs them on a GPU machine).
"""

import collections
import dataclasses
import shutil
import subprocess
import typing

import numpy as np
import pytest

from spdl_rs import io
from spdl_rs._gpu import _map_leaves
from spdl_rs import _native
from spdl_rs._native import _export_probe

from conftest import FIXTURES, SAMPLES

REASON = io.cuda_unavailable_reason()
HAS_GPU = REASON is None
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no usable CUDA device: {REASON}")
requires_no_gpu = pytest.mark.skipif(HAS_GPU, reason="a CUDA device is usable here")

try:
    import torch
except ImportError:  # torch is not in the test venv (5 GB); gpu-check installs none either
    torch = None

PHOTOS = sorted(SAMPLES.glob("*.jpg")) if SAMPLES.is_dir() else []
CFG = io.cuda_config(0)


def photo(i: int = 0):
    if len(PHOTOS) <= i:
        pytest.skip(f"bundled photos not found at {SAMPLES}")
    return PHOTOS[i]


# ---------------------------------------------------------------------------------------------
# cuda_config, cpu_storage, build flags
# ---------------------------------------------------------------------------------------------


def test_cuda_config_fields_and_refusals():
    cfg = io.cuda_config(1, stream=0x1234)
    assert (cfg.device_index, cfg.stream) == (1, 0x1234)
    assert io.cuda_config(0).stream == 2  # SPDL's default: the per-thread default stream
    assert isinstance(cfg, io.CUDAConfig)
    assert cfg == io.cuda_config(1, stream=0x1234) and cfg != io.cuda_config(0)
    assert "device_index=1" in repr(cfg)
    assert cfg.allocator is None
    with pytest.raises(ValueError, match="negative"):
        io.cuda_config(-1)


def test_cuda_config_takes_spdls_allocator_pair():
    pair = (lambda size, device, stream: 0, lambda ptr: None)
    cfg = io.cuda_config(0, allocator=pair)
    assert cfg.allocator is pair and "allocator" in repr(cfg)
    assert cfg == io.cuda_config(0, allocator=pair) and cfg != io.cuda_config(0)
    for bad in [(print,), (print, 3), "ab", print]:
        with pytest.raises(TypeError, match="allocator"):
            io.cuda_config(0, allocator=bad)


def test_build_flags():
    assert isinstance(io.built_with_nvjpeg(), bool)
    assert isinstance(io.built_with_nvcodec(), bool)
    if io.built_with_nvcodec():  # NVDEC decoding needs the demuxer of a decode-ffmpeg build
        assert io.ffmpeg_versions()


def test_cpu_storage_unpinned_is_writable_host_memory():
    st = io.cpu_storage(1000, pin_memory=False)
    assert (st.nbytes, len(st), st.pinned) == (1000, 1000, False)
    a = np.frombuffer(st, dtype=np.uint8)
    assert a.shape == (1000,) and not a.any()  # zeroed
    a[:4] = [1, 2, 3, 4]
    assert bytes(memoryview(st)[:4]) == b"\x01\x02\x03\x04"
    assert a.ctypes.data == st.data_ptr
    f = np.frombuffer(st, dtype=np.float32, count=250)
    assert f.shape == (250,)
    with pytest.raises(ValueError, match="negative"):
        io.cpu_storage(-1, pin_memory=False)


def test_storage_keyword_decodes_into_the_storage():
    paths = [photo(0), photo(1)]
    st = io.cpu_storage(2 * 16 * 24 * 3 + 100, pin_memory=False)
    plain = np.asarray(io.load_image_batch(paths, 24, 16))
    buf = io.load_image_batch(paths, 24, 16, storage=st)
    assert buf.shape == (2, 16, 24, 3) and buf.data_ptr == st.data_ptr
    assert buf.keys == [str(p) for p in paths]
    assert np.array_equal(np.asarray(buf), plain)
    assert np.array_equal(np.frombuffer(st, np.uint8, count=plain.size), plain.ravel())
    one = io.load_image(photo(2) if len(PHOTOS) > 2 else photo(0), 24, 16, storage=st)
    assert one.data_ptr == st.data_ptr  # the same storage again: overwritten, as in SPDL
    del st
    assert np.asarray(one).shape == (16, 24, 3)  # the buffer keeps the storage alive
    with pytest.raises(ValueError, match="storage has 10 bytes"):
        io.load_image(photo(), 24, 16, storage=io.cpu_storage(10, pin_memory=False))
    with pytest.raises(TypeError, match="CPUStorage"):
        io.load_image(photo(), 24, 16, storage=bytearray(4096))


@requires_no_gpu
def test_cpu_storage_pinned_without_a_driver_names_the_reason():
    with pytest.raises(RuntimeError, match=r"cpu_storage\(pin_memory=True\)") as e:
        io.cpu_storage(4096)
    assert "no CUDA driver" in str(e.value) or "built without CUDA" in str(e.value)


@requires_gpu
def test_cpu_storage_pinned_on_a_gpu():
    st = io.cpu_storage(1 << 20)
    assert st.pinned and st.nbytes == 1 << 20
    np.frombuffer(st, dtype=np.uint8)[:] = 7
    buf = io.load_image_batch([photo(0), photo(1)], 64, 48, storage=st)
    dev = io.transfer_buffer(buf, device_config=CFG)
    assert np.array_equal(np.asarray(dev.to_host()), np.asarray(buf))


@requires_gpu
def test_device_config_round_trips_on_a_gpu():
    cpu = np.asarray(io.load_image(photo(), 40, 30))
    dev = io.load_image(photo(), 40, 30, device_config=CFG)
    assert isinstance(dev, io.CUDABuffer) and dev.device_index == 0
    assert np.array_equal(np.asarray(io.transfer_buffer_cpu(dev)), cpu)
    nv12 = np.random.default_rng(0).integers(16, 236, size=(2, 12, 8), dtype=np.uint8)
    rgb = io.nv12_to_rgb(nv12, device_config=CFG)
    assert isinstance(rgb, io.CUDABuffer) and rgb.shape == (2, 3, 8, 8)
    assert np.array_equal(np.asarray(rgb.to_host()), np.asarray(io.nv12_to_rgb(nv12)))


# ---------------------------------------------------------------------------------------------
# device_config= and transfers without a driver
# ---------------------------------------------------------------------------------------------


@requires_no_gpu
def test_device_config_without_a_driver_raises_the_driver_error():
    buf = io.load_image(photo())
    assert isinstance(buf, io.CPUBuffer)  # without device_config: unchanged
    for call in (
        lambda: io.transfer_buffer(buf, device_config=CFG),
        lambda: io.load_image(photo(), device_config=CFG),
        lambda: io.load_image_batch([photo()], 8, 8, device_config=CFG),
    ):
        with pytest.raises(RuntimeError, match="no CUDA driver|built without CUDA"):
            call()


@requires_no_gpu
def test_device_config_with_an_allocator_without_a_driver_raises_before_allocating():
    calls = []
    cfg = io.cuda_config(0, allocator=(lambda *a: calls.append(a) or 1, calls.append))
    buf = io.load_image(photo())
    for call in (
        lambda: io.transfer_buffer(buf, device_config=cfg),
        lambda: io.load_image_batch([photo()], 8, 8, device_config=cfg),
        lambda: io.decode_image_nvjpeg(photo().read_bytes(), device_config=cfg),
    ):
        with pytest.raises(RuntimeError, match="no CUDA driver|built without CUDA|nvJPEG unavailable"):
            call()
    assert calls == []


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with CUDA")
def test_transfers_allocate_through_the_allocator_on_a_gpu():
    calls = []

    def alloc(size, device, stream):
        calls.append(("alloc", size, device, stream))
        return torch.cuda.caching_allocator_alloc(size, device, stream)

    def free(ptr):
        calls.append(("free", ptr))
        torch.cuda.caching_allocator_delete(ptr)

    stream = torch.cuda.current_stream().cuda_stream
    cfg = io.cuda_config(0, stream=stream, allocator=(alloc, free))
    host = io.load_image(photo(), 40, 30)
    dev = io.transfer_buffer(host, device_config=cfg)
    assert calls == [("alloc", 40 * 30 * 3, 0, stream)]
    t = io.to_torch(dev)
    ptr = t.data_ptr()
    assert torch.equal(t.cpu(), torch.from_numpy(np.asarray(host)))
    del t, dev
    import gc

    gc.collect()
    assert calls[-1] == ("free", ptr)
    with pytest.raises(TypeError, match="allocator"):
        io.decode_image_nvjpeg(photo().read_bytes(), device_config=cfg)


def test_device_config_is_checked():
    import inspect

    for f in (io.load_image, io.load_image_batch, io.load_video, io.load_audio, io.transfer_buffer):
        assert "device_config" in inspect.signature(f).parameters, f
    for f in (io.load_image, io.load_image_batch):
        assert "storage" in inspect.signature(f).parameters, f
    buf = io.load_image(photo())
    with pytest.raises(TypeError, match="not both"):
        io.transfer_buffer(buf, 0, device_config=CFG)
    with pytest.raises(TypeError, match="CUDAConfig"):
        io.transfer_buffer(buf, device_config="cuda:0")
    with pytest.raises(TypeError, match="CUDABuffer"):
        io.transfer_buffer_cpu(buf)


# ---------------------------------------------------------------------------------------------
# transfer_tensor_h2d / d2h
# ---------------------------------------------------------------------------------------------


class Pair(typing.NamedTuple):
    a: int
    b: list


@dataclasses.dataclass
class Sample:
    x: int
    meta: dict
    n: int = dataclasses.field(init=False, default=0)


def test_container_traversal_keeps_types_and_structure():
    dd = collections.defaultdict(list, {"k": [1, 2]})
    s = Sample(3, {"y": (4, 5)})
    s.n = 6
    batch = {"list": [1, (2, 3)], "pair": Pair(4, [5]), "dd": dd, "sample": s, "s": "str"}
    out = _map_leaves(lambda v: v * 10 if isinstance(v, int) else v, batch)
    assert out["list"] == [10, (20, 30)]
    assert isinstance(out["pair"], Pair) and out["pair"] == Pair(40, [50])
    assert isinstance(out["dd"], collections.defaultdict) and out["dd"].default_factory is list
    assert out["dd"]["k"] == [10, 20]
    assert isinstance(out["sample"], Sample)
    assert (out["sample"].x, out["sample"].meta, out["sample"].n) == (30, {"y": (40, 50)}, 60)
    assert out["s"] == "str"
    assert batch["list"] == [1, (2, 3)]  # the input is not modified


def test_transfer_tensor_arguments():
    with pytest.raises(ValueError, match="num_caches"):
        io.transfer_tensor_h2d([], num_caches=0)
    with pytest.raises(ValueError, match="device must be given"):
        io.transfer_tensor_d2h([], stream=object())


@pytest.mark.skipif(torch is not None, reason="torch is installed")
def test_transfer_tensor_without_torch_names_it():
    with pytest.raises(ImportError, match="PyTorch"):
        io.transfer_tensor_h2d([1])
    with pytest.raises(ImportError, match="PyTorch"):
        io.transfer_tensor_d2h([1])
    with pytest.warns(FutureWarning, match="transfer_tensor_h2d"), pytest.raises(ImportError):
        io.transfer_tensor([1])


@pytest.mark.skipif(torch is None or torch.cuda.is_available(), reason="needs torch without CUDA")
def test_transfer_tensor_without_cuda_as_spdl():
    with pytest.raises(RuntimeError, match="local rank"):
        io.transfer_tensor_h2d({"x": torch.zeros(3)})
    batch = {"x": torch.zeros(3)}
    assert io.transfer_tensor_d2h(batch) is batch


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with CUDA")
def test_transfer_tensor_round_trip_on_a_gpu():
    x = torch.arange(1 << 20, dtype=torch.float32)
    batch = {"x": x, "pair": Pair(1, [x[:10]]), "s": Sample(2, {"t": x[:5]})}
    dev = io.transfer_tensor_h2d(batch)
    assert dev["x"].is_cuda and dev["pair"].b[0].is_cuda and dev["s"].meta["t"].is_cuda
    back = io.transfer_tensor_d2h(dev, device="cuda:0")
    assert torch.equal(back["x"], x) and back["x"].is_pinned()
    assert isinstance(back["pair"], Pair) and torch.equal(back["pair"].b[0], x[:10])


# ---------------------------------------------------------------------------------------------
# to_jax / to_numba
# ---------------------------------------------------------------------------------------------


def test_to_jax_of_a_host_buffer():
    jnp = pytest.importorskip("jax.numpy")
    buf = io.load_image(photo())
    arr = io.to_jax(buf)
    assert arr.shape == buf.shape and str(arr.dtype) == "uint8"
    assert np.array_equal(np.asarray(arr), np.asarray(buf))
    assert int(jnp.sum(arr)) == int(np.asarray(buf, dtype=np.int64).sum())


def test_to_numba_of_a_host_buffer_shares_memory():
    buf = io.load_image(photo())
    arr = io.to_numba(buf)
    assert isinstance(arr, np.ndarray) and arr.ctypes.data == buf.data_ptr


def test_to_numba_of_a_device_buffer_needs_numba():
    try:
        import numba  # noqa: F401

        pytest.skip("numba is installed")
    except ImportError:
        pass
    probe = _export_probe(io.load_image(photo()), device_type=2, device_id=0)
    with pytest.raises(ImportError, match="Numba"):
        io.to_numba(probe)


# ---------------------------------------------------------------------------------------------
# nvJPEG: the CPU-fallback decision, the no-driver errors, the GPU against the CPU decoder
# ---------------------------------------------------------------------------------------------


FALLBACKS = [
    ("01-cmyk-jpeg/cmyk_imagemagick.jpg", "4 components (CMYK/YCCK)"),
    ("01-cmyk-jpeg/cmyk_pillow.jpg", "4 components (CMYK/YCCK)"),
    ("10-arithmetic-jpeg/arith.jpg", "arithmetic-coded JPEG"),
    ("12-progressive-jpeg/progressive.jpg", "progressive JPEG (SOF2)"),
    ("02-truncated-jpeg-png/truncated_60pct.jpg", "corrupt JPEG: truncated (no end-of-image marker)"),
    ("09-empty-and-non-image/html_error_page.jpg", "corrupt JPEG: no start-of-image marker"),
]


def test_nvjpeg_fallback_decision_on_real_files(fixtures):
    got = {rel: io.nvjpeg_fallback_reason((fixtures / rel).read_bytes()) for rel, _ in FALLBACKS}
    assert got == dict(FALLBACKS)
    bomb = io.nvjpeg_fallback_reason((fixtures / "04-decompression-bomb/jpeg_sof_65500x65500.jpg").read_bytes())
    assert "65500x65500" in bomb and "exceeds" in bomb
    for p in [fixtures / "02-truncated-jpeg-png/good.jpg", *PHOTOS]:
        assert io.nvjpeg_fallback_reason(p.read_bytes()) is None, p


def test_nvjpeg_stats_start_at_zero():
    s = io.nvjpeg_stats()
    assert set(s) == {"batches", "gpu_images", "cpu_fallbacks", "seconds"}
    if not HAS_GPU:
        assert s["gpu_images"] == 0 and s["cpu_fallbacks"] == 0


def test_nvjpeg_argument_checks():
    with pytest.raises(ValueError, match="device_config"):
        io.decode_image_nvjpeg(str(photo()))
    for bad in ("yuv420p", "rgba", "", None):
        with pytest.raises(ValueError, match="pix_fmt must be 'rgb' or 'bgr'"):
            io.decode_image_nvjpeg(str(photo()), device_config=CFG, pix_fmt=bad)
        with pytest.raises(ValueError, match="pix_fmt"):
            io.load_image_batch_nvjpeg([photo()], device_config=CFG, width=8, height=8, pix_fmt=bad)
    with pytest.raises(ValueError, match="scale_width"):
        io.decode_image_nvjpeg(str(photo()), device_config=CFG, scale_width=8)
    with pytest.raises(TypeError, match="sequence"):
        io.load_image_batch_nvjpeg(str(photo()), device_config=CFG, width=8, height=8)


@requires_no_gpu
def test_nvjpeg_without_a_driver_raises_a_named_error():
    for call in (
        lambda: io.decode_image_nvjpeg(str(photo()), device_config=CFG),
        lambda: io.decode_image_nvjpeg([photo().read_bytes()] * 2, device_config=CFG),
        lambda: io.load_image_batch_nvjpeg([photo()], device_config=CFG, width=16, height=16),
        # "bgr" and SPDL's documented upper case are accepted: the call reaches the GPU check
        lambda: io.decode_image_nvjpeg(str(photo()), device_config=CFG, pix_fmt="bgr"),
        lambda: io.load_image_batch_nvjpeg([photo()], device_config=CFG, width=8, height=8, pix_fmt="BGR"),
    ):
        with pytest.raises(RuntimeError, match="nvJPEG unavailable|no CUDA driver"):
            call()


@requires_gpu
@pytest.mark.skipif(not io.built_with_nvjpeg(), reason="built without decode-nvjpeg")
def test_nvjpeg_matches_the_cpu_decoder(fixtures):
    srcs = [*PHOTOS[:4], fixtures / "12-progressive-jpeg/progressive.jpg"]
    before = io.nvjpeg_stats()
    gpu = io.load_image_batch_nvjpeg(srcs, device_config=CFG, width=224, height=224)
    assert gpu.shape == (len(srcs), 3, 224, 224)  # SPDL's planar layout
    cpu = np.asarray(io.load_image_batch(srcs, 224, 224, num_threads=1)).transpose(0, 3, 1, 2)
    mad = np.abs(np.asarray(gpu.to_host()).astype(np.int16) - cpu.astype(np.int16)).mean()
    assert mad < 3.0, mad  # different IDCT and resize kernels; same images
    after = io.nvjpeg_stats()
    assert after["cpu_fallbacks"] - before["cpu_fallbacks"] == 1  # the progressive file
    bgr = io.load_image_batch_nvjpeg(srcs, device_config=CFG, width=224, height=224, pix_fmt="bgr")
    np.testing.assert_array_equal(np.asarray(bgr.to_host()), np.asarray(gpu.to_host())[:, ::-1])
    one = io.decode_image_nvjpeg(str(srcs[0]), device_config=CFG)
    assert one.shape[0] == 3 and len(one.shape) == 3


# ---------------------------------------------------------------------------------------------
# NVDEC: the checks before any device allocation, then the library
# ---------------------------------------------------------------------------------------------


class Codec(typing.NamedTuple):
    name: str
    width: int
    height: int


def test_nvdec_checks_limits_before_the_library():
    # A crafted header claiming 65535x65535: refused by the limits whatever the machine has.
    with pytest.raises(ValueError, match=r"65535x65535.*exceeds"):
        io.nvdec_decoder(CFG, Codec("h264", 65535, 65535))
    with pytest.raises(ValueError, match="prores"):
        io.nvdec_decoder(CFG, Codec("prores", 64, 64))
    with pytest.raises(ValueError, match="leaves nothing"):
        io.nvdec_decoder(CFG, Codec("h264", 64, 48), crop_left=40, crop_right=30)
    with pytest.raises(ValueError, match="100000x100000"):
        io.nvdec_decoder(CFG, Codec("h264", 64, 48), scale_width=100000, scale_height=100000)
    with pytest.raises(TypeError, match="VideoCodec"):
        io.nvdec_decoder(CFG, "h264")


@requires_no_gpu
def test_nvdec_without_a_driver_raises_a_named_error():
    with pytest.raises(RuntimeError, match="NVDEC unavailable: libnvcuvid.so.1 not found|decode-nvdec"):
        io.nvdec_decoder(CFG, Codec("h264", 1920, 1080))


CLIP = FIXTURES.parent / "media" / "clips" / "bbb_320x180_bframes.mp4"


@pytest.fixture
def packets():
    """CLIP's video packets; skips in a build without FFmpeg, or without the clip."""
    if not io.ffmpeg_versions():
        pytest.skip("built without decode-ffmpeg")
    if not CLIP.is_file():
        pytest.skip(f"clip not found at {CLIP}")
    return io.demux_video(str(CLIP))


@requires_no_gpu
def test_nvdec_on_real_packets_without_a_driver(packets):
    clip = CLIP
    assert packets.codec.name == "h264"
    with pytest.raises(ValueError, match="pix_fmt"):
        io.decode_packets_nvdec(packets, device_config=CFG, pix_fmt="yuv")
    with pytest.raises(RuntimeError, match="NVDEC unavailable|decode-nvdec"):
        io.decode_packets_nvdec(packets, device_config=CFG)
    stream = io.streaming_load_video_nvdec(str(clip), CFG, num_frames=8)
    with pytest.raises(RuntimeError, match="NVDEC unavailable|decode-nvdec"):
        next(stream)
    # The argument checks still come first on real packets.
    with pytest.raises(ValueError, match="leaves nothing"):
        io.decode_packets_nvdec(packets, device_config=CFG, crop_left=200, crop_right=200)
    with pytest.raises(ValueError, match="num_frames"):
        next(io.streaming_load_video_nvdec(str(clip), CFG, num_frames=0))
    # The streaming loader reads the codec from the opened container (main's Demuxer): its
    # size reaches the crop check, from a path or from bytes; a non-video is the demuxer's error.
    big_crop = {"crop_left": 200, "crop_right": 200}
    for src in (clip, clip.read_bytes()):
        with pytest.raises(ValueError, match="leaves nothing"):
            next(io.streaming_load_video_nvdec(src, CFG, num_frames=8, post_processing_params=big_crop))
    with pytest.raises(ValueError):
        next(io.streaming_load_video_nvdec(b"not a video", CFG, num_frames=8))


@requires_no_gpu
def test_nvdec_streaming_methods_without_a_driver(packets):
    # The streaming methods' own checks, then the named error where the NVDEC session is
    # opened (the first streaming_decode_packets), on a decoder object made without the
    # driver check that nvdec_decoder() does first.
    decoder = io.NvDecDecoder._make(_native._NvdecSpec(0, (0, 0, 0, 0), (-1, -1)))
    assert list(decoder.flush()) == []  # no stream in progress
    with pytest.raises(RuntimeError, match="init_buffer"):
        decoder.streaming_decode_packets(packets)
    with pytest.raises(ValueError, match="num_frames must be >= 1, got 0"):
        decoder.init_buffer(0)
    with pytest.raises(TypeError, match="num_frames"):
        decoder.init_buffer(2.5)
    decoder.init_buffer(8)
    with pytest.raises(RuntimeError, match="NVDEC unavailable: libnvcuvid.so.1 not found|decode-nvdec"):
        decoder.streaming_decode_packets(packets)
    assert list(decoder.flush()) == []
    with pytest.raises(RuntimeError, match="NVDEC unavailable: libnvcuvid.so.1 not found|decode-nvdec"):
        _native._NvdecSpec(0, (0, 0, 0, 0), (-1, -1)).session(packets, 8)
    with pytest.raises(ValueError, match="num_frames"):
        _native._NvdecSpec(0, (0, 0, 0, 0), (-1, -1)).session(packets, 0)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="the ffmpeg command is not installed")
def test_annexb_stream_given_to_nvdec_decodes_to_the_same_frames(packets):
    # What NVDEC's parser is fed (the MP4's length-prefixed H.264 turned into an Annex-B
    # byte stream, parameter sets first), decoded by the ffmpeg command as raw H.264: the
    # same frames, bit for bit, as FFmpeg decoding the MP4's packets.
    stream = _native._packets_annexb(packets)
    assert stream[:4] == b"\0\0\0\1" and stream[4] & 0x1F == 7  # an SPS first
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "h264", "-i", "-", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        input=stream, check=True, capture_output=True,
    ).stdout
    cpu = np.asarray(io.convert_frames(io.decode_packets(packets.clone())))
    np.testing.assert_array_equal(np.frombuffer(raw, np.uint8).reshape(cpu.shape), cpu)


@requires_gpu
@pytest.mark.skipif(not io.built_with_nvcodec(), reason="built without decode-nvdec/decode-ffmpeg")
def test_nvdec_matches_the_cpu_decoder(packets):
    # decode_packets takes its packets (as SPDL's): decode a clone.
    cpu = np.asarray(io.convert_frames(io.decode_packets(packets.clone())))  # [T, H, W, 3] RGB
    t, h, w, _ = cpu.shape
    decoder = io.nvdec_decoder(CFG, packets)
    nv12 = decoder.decode_packets(packets)
    assert nv12.shape == (t, h * 3 // 2, w)  # every frame, display order
    # FFmpeg converts this untagged clip with BT.601 (coeff 6); same frames, different
    # decoders and converters: a small mean difference only.
    gpu = np.asarray(io.nv12_to_rgb(nv12, device_config=CFG, coeff=6).to_host())
    mad = np.abs(gpu.astype(np.int16) - cpu.transpose(0, 3, 1, 2).astype(np.int16)).mean()
    assert mad < 4.0, mad
    rgb = io.decode_packets_nvdec(packets, device_config=CFG, crop_left=8, crop_right=8,
                                  scale_width=64, scale_height=36)
    assert rgb.shape == (t, 3, 36, 64)
    batches = list(io.streaming_load_video_nvdec(str(CLIP), CFG, num_frames=8))
    assert [b.shape[0] for b in batches] == [8] * (t // 8) + ([t % 8] if t % 8 else [])


@requires_gpu
@pytest.mark.skipif(not io.built_with_nvcodec(), reason="built without decode-nvdec/decode-ffmpeg")
def test_nvdec_streaming_equals_the_one_shot_decode(packets):
    decoder = io.nvdec_decoder(CFG, packets)
    whole = np.asarray(decoder.decode_packets(packets).to_host())  # [T, H + H/2, W] NV12
    t = whole.shape[0]
    # streaming_load_video_nvdec: chunks of 8 packets through one live session.
    streamed = [np.asarray(b.to_host()) for b in io.streaming_load_video_nvdec(str(CLIP), CFG, num_frames=8)]
    assert [b.shape[0] for b in streamed] == [8] * (t // 8) + ([t % 8] if t % 8 else [])
    np.testing.assert_array_equal(np.concatenate(streamed), whole)
    # The methods themselves: only full batches before flush, the rest after it; then a
    # second stream on the same decoder object.
    for _ in range(2):
        decoder.init_buffer(5)
        before = [np.asarray(b.to_host()) for b in decoder.streaming_decode_packets(packets)]
        assert all(b.shape[0] == 5 for b in before)
        after = [np.asarray(b.to_host()) for b in decoder.flush()]
        assert all(b.shape[0] == 5 for b in after[:-1]) and 1 <= after[-1].shape[0] <= 5
        np.testing.assert_array_equal(np.concatenate(before + after), whole)


# ---------------------------------------------------------------------------------------------
# NV12 to RGB / BGR on the host, against FFmpeg's swscale
# ---------------------------------------------------------------------------------------------


def ffmpeg_nv12_and_rgb(src, w: int, h: int, matrix: str):
    """``src`` scaled to ``w x h`` as NV12 (limited range, ``matrix``), and FFmpeg's own
    conversion of those NV12 bytes back to RGB24."""
    nv12 = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(src), "-vf",
         f"scale={w}:{h}:out_color_matrix={matrix}:out_range=tv,format=nv12",
         "-f", "rawvideo", "-"],
        check=True, capture_output=True,
    ).stdout
    rgb = subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "rawvideo", "-pix_fmt", "nv12", "-s", f"{w}x{h}", "-i", "-",
         "-vf", f"scale=in_color_matrix={matrix}:in_range=tv:flags=accurate_rnd+full_chroma_int+neighbor,format=rgb24",
         "-f", "rawvideo", "-"],
        input=nv12, check=True, capture_output=True,
    ).stdout
    return np.frombuffer(nv12, np.uint8), np.frombuffer(rgb, np.uint8).reshape(h, w, 3)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="the ffmpeg command is not installed")
@pytest.mark.parametrize(("matrix", "coeff"), [("bt709", 1), ("bt601", 6)])
def test_nv12_to_rgb_matches_ffmpeg(matrix, coeff):
    w, h = 320, 240
    frames = []
    refs = []
    for p in (photo(0), photo(1)):
        nv12, ref = ffmpeg_nv12_and_rgb(p, w, h, matrix)
        frames.append(nv12.reshape(h * 3 // 2, w))
        refs.append(ref)
    batch = np.stack(frames)  # [2, H*3/2, W]
    rgb = np.asarray(io.nv12_to_rgb(batch, coeff=coeff))
    assert rgb.shape == (2, 3, h, w) and rgb.dtype == np.uint8
    diff = np.abs(rgb.transpose(0, 2, 3, 1).astype(np.int16) - np.stack(refs).astype(np.int16))
    # Same matrix, range and chroma siting; swscale rounds in fixed point: measured mean 0.004
    # to 0.007 levels, never more than 1 level apart.
    assert diff.mean() < 0.05 and diff.max() <= 1, (diff.mean(), diff.max())
    bgr = np.asarray(io.nv12_to_bgr(batch, coeff=coeff))
    assert np.array_equal(bgr, rgb[:, ::-1])
    one = np.asarray(io.nv12_to_rgb(frames[0], coeff=coeff))
    assert np.array_equal(one, rgb[0])


def test_nv12_to_rgb_refusals():
    with pytest.raises(ValueError, match="multiple of 3"):
        io.nv12_to_rgb(np.zeros((1, 5, 4), np.uint8))
    with pytest.raises(ValueError, match="YCgCo"):
        io.nv12_to_rgb(np.zeros((1, 6, 4), np.uint8), coeff=8)
    with pytest.raises(ValueError, match="uint8"):
        io.nv12_to_rgb(np.zeros((1, 6, 4), np.float32))


@requires_no_gpu
def test_nv12_to_rgb_to_a_device_without_a_driver():
    with pytest.raises(RuntimeError, match="no CUDA driver|built without CUDA"):
        io.nv12_to_rgb(np.zeros((1, 6, 4), np.uint8), device_config=CFG)
