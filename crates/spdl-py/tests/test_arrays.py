"""spdl_rs.io.load_npy / load_npz / iter_tarfile / load_wav / parse_wav against NumPy,
tarfile and wave (the reference implementations), on data they write in the test."""

import hashlib
import io as pyio
import tarfile
import wave

import numpy as np
import pytest

from conftest import spin_while
from spdl_rs import io


def npy_bytes(a: np.ndarray, **kw) -> bytes:
    buf = pyio.BytesIO()
    if kw:
        np.lib.format.write_array(buf, a, **kw)
    else:
        np.save(buf, a)
    return buf.getvalue()


def npz_bytes(save, **arrays) -> bytes:
    buf = pyio.BytesIO()
    save(buf, **arrays)
    return buf.getvalue()


BASE = np.arange(24).reshape(2, 3, 4)
DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "g", "c8", "c16", "G"]


def variants():
    for dt in DTYPES:
        a = (BASE % 3 == 0) if dt == "?" else BASE.astype(dt)
        yield f"{dt}", a
        yield f"{dt}-fortran", np.asfortranarray(a)
        if np.dtype(dt).itemsize > 1:
            yield f"{dt}-big-endian", a.astype(np.dtype(dt).newbyteorder(">"))
    yield "S5", np.array([b"a", b"bc", b"hello"], dtype="S5")
    yield "U3", np.array(["ab", "\u00e9t\u00e9", "z"], dtype="U3")
    yield "U3-big-endian", np.array(["ab", "x"], dtype=">U3")
    yield "V4", np.frombuffer(b"abcdefgh", dtype="V4")
    yield "M8[ns]", np.array(["2026-12-01T14:40", "1970-01-01"], dtype="M8[ns]")
    yield "m8[s]", np.array([1, -2, 3], dtype="m8[s]")
    yield "0-d", np.array(3.5)
    yield "empty", np.zeros((0, 3), dtype="f4")
    yield "sliced-noncontiguous", BASE[:, ::2].astype("f8")


@pytest.mark.parametrize("name,array", list(variants()), ids=[n for n, _ in variants()])
def test_load_npy_matches_numpy_load(name, array):
    data = npy_bytes(array)
    ref = np.load(pyio.BytesIO(data))
    for copy in (False, True):
        got = io.load_npy(data, copy=copy)
        assert got.dtype == ref.dtype, name
        assert got.shape == ref.shape, name
        assert got.flags.f_contiguous == ref.flags.f_contiguous, name
        assert got.tobytes(order="A") == ref.tobytes(order="A"), name
        np.testing.assert_array_equal(got, ref)
        assert got.flags.writeable == copy  # bytes are read-only; a copy is writable


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_load_npy_format_versions(version):
    a = np.arange(7, dtype="<i4")
    np.testing.assert_array_equal(io.load_npy(npy_bytes(a, version=version)), a)


def test_load_npy_is_a_zero_copy_view_that_keeps_the_buffer():
    data = bytearray(npy_bytes(np.arange(1000, dtype="f8")))
    a = io.load_npy(data)
    assert a.flags.writeable  # a bytearray is writable, and so is the view
    addr = np.frombuffer(data, dtype="u1").ctypes.data
    assert a.ctypes.data == addr + len(data) - 8000
    a[0] = 42.0
    assert np.frombuffer(bytes(data[-8000:]), dtype="f8")[0] == 42.0
    with pytest.raises(BufferError):
        data.extend(b"x")  # the view holds the export: no resize under it
    del a
    data.extend(b"x")
    # memoryview input, and the copy owns its memory.
    b = io.load_npy(memoryview(bytes(data[:-1])), copy=True)
    assert b.flags.owndata or b.base is not None and b.base.flags.owndata


def test_load_npy_misaligned_view_is_copied():
    data = npy_bytes(np.arange(10, dtype="f8"))
    shifted = memoryview(b"\0" + data)[1:]  # the payload now starts at an odd address
    a = io.load_npy(shifted)
    assert a.flags.aligned
    np.testing.assert_array_equal(a, np.arange(10, dtype="f8"))


def object_npy() -> bytes:
    buf = pyio.BytesIO()
    np.save(buf, np.array([1, "a"], dtype=object), allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize(
    "data,message",
    [
        (b"", "empty"),
        (b"PK\x03\x04 not npy", "unknown format"),
        (npy_bytes(np.arange(10, dtype="f8"))[:-1], "truncated: the payload of shape \\[10\\] <f8 needs 80 bytes, only 79"),
        (npy_bytes(np.arange(10, dtype="f8"))[:20], "truncated"),
        (npy_bytes(np.zeros(2, dtype=[("a", "<i4")])), "unsupported: structured"),
        (object_npy(), "unsupported: NPY object arrays"),
    ],
)
def test_load_npy_errors_are_named(data, message):
    with pytest.raises(ValueError, match=message):
        io.load_npy(data)


def test_load_npy_type_errors():
    with pytest.raises(TypeError):
        io.load_npy("not bytes")
    with pytest.raises(BufferError, match="C-contiguous"):
        io.load_npy(memoryview(npy_bytes(np.arange(4)))[::2])


ARRAYS = {
    "x": np.arange(10, dtype="i8"),
    "y": np.sin(np.arange(100)),
    "img": np.asfortranarray(np.arange(60, dtype="u1").reshape(3, 4, 5)),
    "be": np.arange(5, dtype=">i2"),
    "s": np.array(["a", "bcd"]),
}


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "deflated"])
def test_load_npz_matches_numpy_load(save):
    data = npz_bytes(save, **ARRAYS)
    ref = np.load(pyio.BytesIO(data))
    got = io.load_npz(data)
    assert isinstance(got, io.NpzFile)
    assert got.files == ref.files == list(ARRAYS)
    assert len(got) == 5 and list(got) == got.files
    assert "x" in got and "x.npy" in got and "z" not in got
    for key in ARRAYS:
        for k in (key, f"{key}.npy"):
            a = got[k]
            assert a.dtype == ref[key].dtype and a.shape == ref[key].shape
            assert a.tobytes(order="A") == ref[key].tobytes(order="A")
            assert a.flags.f_contiguous == ref[key].flags.f_contiguous
    # Stored members are views of the (read-only) archive, unless misaligned (copied);
    # deflated ones own writable memory. uint8 is always aligned.
    assert got["img"].flags.writeable == (save is np.savez_compressed)
    if save is np.savez:
        view = np.frombuffer(data, dtype="u1")
        assert view.ctypes.data <= got["img"].ctypes.data < view.ctypes.data + len(data)
    with pytest.raises(KeyError, match="z is not a file in the archive"):
        got["z"]
    assert repr(got) == "NpzFile object with 5 entries."


def test_load_npz_limit_is_checked_before_inflating():
    data = npz_bytes(np.savez_compressed, big=np.zeros(1 << 20, dtype="u1"), small=np.zeros(10))
    with pytest.raises(ValueError, match="limit exceeded: NPZ deflated entries exceed max_uncompressed_bytes"):
        io.load_npz(data, max_uncompressed_bytes=1 << 20)
    assert io.load_npz(data, max_uncompressed_bytes=2 << 20)["big"].sum() == 0
    # Stored members never inflate: no limit applies.
    stored = npz_bytes(np.savez, big=np.zeros(1 << 20, dtype="u1"))
    assert io.load_npz(stored, max_uncompressed_bytes=0)["big"].shape == (1 << 20,)
    with pytest.raises(ValueError, match="non-negative"):
        io.load_npz(stored, max_uncompressed_bytes=-1)


def test_load_npz_corrupt_member_is_named():
    data = bytearray(npz_bytes(np.savez, x=np.arange(100, dtype="i8"), y=np.arange(3)))
    npz = io.load_npz(bytes(data))
    np.testing.assert_array_equal(npz["y"], np.arange(3))
    # Flip a byte of x's payload: the CRC check catches it.
    at = bytes(data).index(np.arange(100, dtype="i8").tobytes()[8:16])
    data[at] ^= 0xFF
    bad = io.load_npz(bytes(data))
    with pytest.raises(ValueError, match="corrupt: x.npy: CRC-32 mismatch"):
        bad["x"]
    np.testing.assert_array_equal(bad["y"], np.arange(3))  # the other member is fine
    with pytest.raises(ValueError, match="unknown format"):
        io.load_npz(b"not a zip archive at all, no")
    with pytest.raises(ValueError, match="truncated|corrupt"):
        io.load_npz(bytes(data[: len(data) // 2]))


def make_tar(fmt, members, *, extra=True) -> bytes:
    buf = pyio.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        if extra:
            d = tarfile.TarInfo("dir")
            d.type = tarfile.DIRTYPE
            t.addfile(d)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, pyio.BytesIO(data))
        if extra:
            s = tarfile.TarInfo("link")
            s.type = tarfile.SYMTYPE
            s.linkname = members[0][0]
            t.addfile(s)
    return buf.getvalue()


MEMBERS = [
    ("0001.jpg", b"\xff\xd8\xff" + bytes(range(256)) * 5),
    ("0001.cls", b"3"),
    ("empty", b""),
    ("long/" + "n" * 150 + "/0002.json", b'{"a": 1}'),
    ("x" * 300 + ".bin", b"y" * 513),
]


def sha(b) -> str:
    return hashlib.sha256(bytes(b)).hexdigest()


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT], ids=["gnu", "pax"])
def test_iter_tarfile_matches_tarfile(fmt):
    data = make_tar(fmt, MEMBERS)
    with tarfile.open(fileobj=pyio.BytesIO(data)) as t:
        ref = [(m.name, sha(t.extractfile(m).read())) for m in t.getmembers() if m.isreg()]
    assert ref == [(n, sha(d)) for n, d in MEMBERS]
    for src in (data, memoryview(data), bytearray(data)):
        got = list(io.iter_tarfile(src))
        assert all(isinstance(d, memoryview) for _, d in got)
        assert [(n, sha(d)) for n, d in got] == ref
    # Zero copy: the member views point into the archive.
    mv = memoryview(data)
    first = next(io.iter_tarfile(mv))[1]
    assert first.obj is data
    streamed = list(io.iter_tarfile(pyio.BytesIO(data)))
    assert all(isinstance(d, bytes) for _, d in streamed)
    assert [(n, sha(d)) for n, d in streamed] == ref


class Trickle:
    """A file-like object that returns at most 100 bytes per read (like a pipe)."""

    def __init__(self, data: bytes):
        self.f = pyio.BytesIO(data)

    def read(self, n=-1):
        return self.f.read(min(n, 100) if n >= 0 else 100)


def test_iter_tarfile_short_reads():
    data = make_tar(tarfile.PAX_FORMAT, MEMBERS)
    got = [(n, sha(d)) for n, d in io.iter_tarfile(Trickle(data))]
    assert got == [(n, sha(d)) for n, d in MEMBERS]


def test_iter_tarfile_truncated_is_named_after_the_members_before():
    data = make_tar(tarfile.GNU_FORMAT, MEMBERS, extra=False)
    # Cut inside the last member's data.
    cut = data[: data.index(b"y" * 513) + 100]
    for src in (cut, pyio.BytesIO(cut)):
        it = io.iter_tarfile(src)
        names = []
        with pytest.raises(ValueError, match=r"truncated: x{300}\.bin"):
            for name, _ in it:
                names.append(name)
        assert names == [n for n, _ in MEMBERS[:-1]]
    # Cut between two members: no end-of-archive marker, read to there as tarfile does.
    boundary = data[: data.index(b'{"a": 1}') + 512]
    with tarfile.open(fileobj=pyio.BytesIO(boundary)) as t:
        ref = [m.name for m in t.getmembers()]
    assert ref == [n for n, _ in MEMBERS[:4]]
    for src in (boundary, pyio.BytesIO(boundary)):
        assert [n for n, _ in io.iter_tarfile(src)] == ref
    # Garbage instead of a header.
    with pytest.raises(ValueError, match="unknown format"):
        list(io.iter_tarfile(b"<html>" * 200))
    with pytest.raises(TypeError, match="bytes-like or a file-like"):
        io.iter_tarfile(42)


def test_iter_tarfile_skips_links_as_spdl_does():
    """Hard and symbolic links are skipped (SPDL 0.8.0's behaviour), never yielded as 0-byte
    files; 0-byte regular files are yielded as b""."""
    buf = pyio.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, data in [("d/0001.png", b"red"), ("d/0001.cls", b"1"), ("d/0004.txt", b"")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, pyio.BytesIO(data))
        for name, kind, target in [
            ("d/0002.png", tarfile.LNKTYPE, "d/0001.png"),
            ("d/0003.png", tarfile.SYMTYPE, "0001.png"),
            ("d/" + "l" * 120 + ".png", tarfile.SYMTYPE, "0001.png" + "/." * 60),
        ]:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target
            t.addfile(info)
    data = buf.getvalue()
    want = [("d/0001.png", b"red"), ("d/0001.cls", b"1"), ("d/0004.txt", b"")]
    for src in (data, pyio.BytesIO(data)):
        assert [(n, bytes(d)) for n, d in io.iter_tarfile(src)] == want


def random_archive(rng) -> bytes:
    """A tar archive as tarfile writes it: regular (some empty) members, hard and symbolic
    links, directories, PAX or GNU headers, in a random order."""
    buf = pyio.BytesIO()
    fmt = rng.choice([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
    names = []
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for i in range(rng.randint(1, 8)):
            kind = rng.choice(["file", "file", "empty", "dir", "hard", "sym"])
            name = f"d/{i:02}" + ("x" * rng.choice([0, 0, 120])) + ".bin"
            info = tarfile.TarInfo(name)
            if kind in ("file", "empty"):
                data = rng.randbytes(rng.randint(1, 700)) if kind == "file" else b""
                info.size = len(data)
                t.addfile(info, pyio.BytesIO(data))
                names.append(name)
                continue
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif names:
                info.type = tarfile.LNKTYPE if kind == "hard" else tarfile.SYMTYPE
                info.linkname = rng.choice(names)
            else:
                continue
            t.addfile(info)
    return buf.getvalue()


def test_iter_tarfile_on_random_archives_cut_anywhere_in_their_last_members():
    """Never more than tarfile's regular members whose data is whole, byte-exact and in order;
    then the end or one ValueError ("truncated"; "empty" for no byte); links never yielded."""
    import random

    rng = random.Random(32)
    for _ in range(12):
        data = random_archive(rng)
        with tarfile.open(fileobj=pyio.BytesIO(data)) as t:
            members = t.getmembers()
            regular = [(m.name, m.offset_data, m.size) for m in members if m.isreg()]
        assert [(n, bytes(d)) for n, d in io.iter_tarfile(data)] == [
            (n, data[o : o + s]) for n, o, s in regular
        ]
        start = members[-3].offset if len(members) >= 3 else 0
        for cut in range(start, len(data) + 1):
            part = data[:cut]
            want = [(n, part[o : o + s]) for n, o, s in regular if o + s <= cut]
            for src in (part, pyio.BytesIO(part)):
                got = []
                try:
                    for n, d in io.iter_tarfile(src):
                        got.append((n, bytes(d)))
                except ValueError as e:
                    assert ("empty" if cut == 0 else "truncated") in str(e), (cut, str(e))
                assert got == want, cut


def write_wav(bits: int, channels: int, frames: np.ndarray) -> bytes:
    buf = pyio.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(bits // 8)
        w.setframerate(16000)
        w.writeframes(frames)
    return buf.getvalue()


@pytest.mark.parametrize("bits,dtype", [(8, "u1"), (16, "<i2"), (32, "<i4")])
def test_load_wav_matches_wave(bits, dtype):
    rng = np.random.default_rng(bits)
    samples = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, size=(1000, 3), dtype=dtype)
    data = write_wav(bits, 3, samples.tobytes())
    with wave.open(pyio.BytesIO(data)) as w:
        ref = np.frombuffer(w.readframes(w.getnframes()), dtype=dtype).reshape(-1, 3)
    got = io.load_wav(data)
    assert got.dtype == np.dtype(dtype) and got.shape == (1000, 3)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(np.asarray(got), samples)
    # A view over the bytes (read-only), consumable through __array_interface__.
    assert not got.flags.writeable and got.flags.aligned
    assert "data" in got.__array_interface__
    h = io.parse_wav(data)
    assert isinstance(h, io.WAVHeader)
    assert (h.audio_format, h.num_channels, h.sample_rate, h.bits_per_sample) == (1, 3, 16000, bits)
    assert (h.block_align, h.byte_rate, h.data_size) == (3 * bits // 8, 16000 * 3 * bits // 8, samples.nbytes)
    # Windows: 0.01 s from 0.02 s at 16 kHz = frames 320..480.
    np.testing.assert_array_equal(io.load_wav(data, 0.02, 0.01), samples[320:480])
    np.testing.assert_array_equal(io.load_wav(data, time_offset_seconds=0.05), samples[800:])
    np.testing.assert_array_equal(io.load_wav(data, duration_seconds=1.0), samples)


def test_load_wav_24_bit_is_left_justified_int32():
    values = np.array([[0, 1], [-1, 2**23 - 1], [-(2**23), 5]], dtype="<i4")
    raw = b"".join(int(v).to_bytes(4, "little", signed=True)[:3] for v in values.ravel())
    got = io.load_wav(write_wav(24, 2, raw))
    assert got.dtype == np.dtype("<i4")
    np.testing.assert_array_equal(got, values << 8)


def test_load_wav_errors():
    data = write_wav(16, 1, np.arange(100, dtype="<i2").tobytes())
    for kw, msg in [
        ({"time_offset_seconds": -1.0}, "non-negative"),
        ({"time_offset_seconds": 1.0}, "past the end"),
        ({"duration_seconds": float("inf")}, "finite"),
    ]:
        with pytest.raises(ValueError, match=msg):
            io.load_wav(data, **kw)
    with pytest.raises(ValueError, match="unknown format"):
        io.parse_wav(b"OggS" + b"\0" * 60)
    with pytest.raises(ValueError, match="truncated"):
        io.load_wav(data[:30])
    # Cut inside the data chunk: the whole frames present.
    np.testing.assert_array_equal(io.load_wav(data[:-3]), np.arange(98, dtype="<i2").reshape(-1, 1))


def test_fast_paths_release_the_gil():
    # Inflating and checking the CRC of 64 MiB takes long enough (several calls: a loaded
    # machine may be slow to wake the other thread) to see the other thread run meanwhile.
    data = npz_bytes(np.savez_compressed, big=np.zeros(64 << 20, dtype="u1"))
    npz = io.load_npz(data)
    assert spin_while(lambda: [npz["big"] for _ in range(5)]) > 1000
    stored = npz_bytes(np.savez, big=np.ones(64 << 20, dtype="u1"))
    npz = io.load_npz(stored)
    assert spin_while(lambda: [npz["big"] for _ in range(10)]) > 1000  # the CRC over 64 MiB


def test_ops_load_npy_in_a_pipeline_takes_no_gil(tmp_path):
    from spdl_rs import _native, ops
    from spdl_rs.pipeline import PipelineBuilder

    arrays = {f"a{i}.npy": np.arange(i * 7, dtype="<f4").reshape(i, 7) for i in range(1, 9)}
    arrays["fortran.npy"] = np.asfortranarray(np.arange(12, dtype=">i2").reshape(3, 4))
    for name, a in arrays.items():
        np.save(tmp_path / name, a)
    (tmp_path / "bad.npy").write_bytes(npy_bytes(np.arange(4))[:-3])
    paths = [str(tmp_path / n) for n in [*arrays, "bad.npy"]]
    p = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file())
        .pipe(ops.load_npy(), concurrency=2)
        .add_sink(4)
        .build(num_threads=2, max_failures=1)
    )
    before = _native._gil_acquisitions()
    with pytest.warns(RuntimeWarning, match=r"truncated: .*bad\.npy"):
        with p.auto_stop():
            got = list(p)
    # The source is a Python list (its items take the GIL); the native stages take none.
    assert _native._gil_acquisitions() - before <= len(paths) + 2
    assert len(got) == len(arrays)
    for a in got:
        ref = next(r for r in arrays.values() if r.shape == a.shape and r.dtype == a.dtype)
        np.testing.assert_array_equal(a, ref)
        assert a.flags.writeable
    # Called directly on bytes.
    np.testing.assert_array_equal(ops.load_npy()(npy_bytes(np.arange(5))), np.arange(5))


def test_ops_load_wav():
    from spdl_rs import ops

    samples = np.arange(-600, 600, dtype="<i2").reshape(-1, 2)
    data = write_wav(16, 2, samples.tobytes())
    np.testing.assert_array_equal(ops.load_wav()(data), samples)
    # 0.01 s at 16 kHz from 0.005 s: frames 80..240.
    np.testing.assert_array_equal(ops.load_wav(0.005, 0.01)(data), samples[80:240])
    raw = b"".join(int(v).to_bytes(4, "little", signed=True)[:3] for v in [1, -1, 5, 7])
    np.testing.assert_array_equal(ops.load_wav()(write_wav(24, 2, raw)), np.array([[1, -1], [5, 7]]) << 8)
    with pytest.raises(ValueError, match="unknown format"):
        ops.load_wav()(b"not a wav file at all")
