"""spdl_rs.sources.TarShards: WebDataset tar shards written by Python's tarfile, read back
byte-exact, dealt to ranks exactly once, usable as a pipeline source."""

import functools
import http.server
import io as pyio
import tarfile
import threading
import warnings

import pytest

from spdl_rs.pipeline import PipelineBuilder
from spdl_rs.sources import TarShards


def write_shards(root, n_shards, per_shard):
    """Sample i is `s/{i:05}` with `jpg` (bytes of i) and `cls` (i % 10)."""
    for s in range(n_shards):
        with tarfile.open(root / f"train-{s:04}.tar", "w", format=tarfile.PAX_FORMAT) as t:
            for j in range(per_shard):
                i = s * per_shard + j
                for field, data in [("jpg", bytes([i % 256]) * (i + 1)), ("cls", str(i % 10).encode())]:
                    info = tarfile.TarInfo(f"s/{i:05}.{field}")
                    info.size = len(data)
                    t.addfile(info, pyio.BytesIO(data))
    return f"{root}/train-{{0000..{n_shards - 1:04}}}.tar"


def write_members(path, names):
    """A tar at ``path`` whose members are ``names``, in that order, each holding ``b"1"``."""
    with tarfile.open(path, "w") as t:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 1
            t.addfile(info, pyio.BytesIO(b"1"))


def test_samples_match_tarfile_and_each_rank_reads_its_share(tmp_path):
    pattern = write_shards(tmp_path, 6, 4)
    seen = []
    for rank in range(3):
        src = TarShards(pattern, rank=rank, world_size=3, seed=5)
        assert len(src.shards) == 6
        for sample in src:
            i = int(sample["__key__"][2:])
            assert sample["jpg"] == bytes([i % 256]) * (i + 1)
            assert sample["cls"] == str(i % 10).encode()
            assert sample["__shard__"].endswith(f"train-{i // 4:04}.tar")
            assert set(sample) == {"__key__", "__shard__", "__state__", "jpg", "cls"}
            seen.append(i)
    assert sorted(seen) == list(range(24))


def test_each_iter_is_a_new_epoch_with_a_new_shard_order(tmp_path):
    pattern = write_shards(tmp_path, 8, 1)
    src = TarShards(pattern, rank=0, world_size=1, seed=1)
    e0 = [s["__key__"] for s in src]
    e1 = [s["__key__"] for s in src]
    assert sorted(e0) == sorted(e1) and e0 != e1
    assert [f"s/{i:05}" for i in src.epoch_shards(0)] == e0
    src.set_epoch(0)
    assert [s["__key__"] for s in src] == e0
    # Read-ahead changes when shards are opened, never the order.
    assert [s["__key__"] for s in TarShards(pattern, rank=0, world_size=1, seed=1, shard_readahead=0)] == e0
    assert [s["__key__"] for s in TarShards(pattern, rank=0, world_size=1, shuffle=False)] == [
        f"s/{i:05}" for i in range(8)
    ]


def test_truncated_shard_is_named_and_the_epoch_goes_on(tmp_path):
    write_shards(tmp_path, 2, 3)
    first = tmp_path / "train-0000.tar"
    data = first.read_bytes()
    first.write_bytes(data[: data.index(bytes([1]) * 2) + 1])  # cut inside sample 1's jpg
    src = TarShards(str(tmp_path), rank=0, world_size=1, shuffle=False)
    with pytest.warns(RuntimeWarning, match=r"1 failed.*truncated shard: .*train-0000.tar: sample s/00001: truncated: s/00001.jpg"):
        keys = [s["__key__"] for s in src]
    assert keys == ["s/00000", "s/00003", "s/00004", "s/00005"]
    assert len(src.failures) == 1


def test_usable_in_add_source(tmp_path):
    pattern = write_shards(tmp_path, 3, 5)
    src = TarShards(pattern, rank=0, world_size=1, seed=0)
    p = (
        PipelineBuilder()
        .add_source(src)
        .pipe(lambda s: int(s["cls"]))
        .add_sink(4)
        .build(num_threads=2)
    )
    with p.auto_stop():
        got = sorted(p)
    assert got == sorted(i % 10 for i in range(15))


def test_errors():
    with pytest.raises(FileNotFoundError, match="train-0000.tar"):
        TarShards("/nonexistent/train-{0000..0003}.tar", rank=0, world_size=1)
    with pytest.raises(ValueError):
        TarShards("/tmp/x-{3..1}.tar", rank=0, world_size=1)


def test_resume_after_a_sample_yields_the_rest_of_the_epoch(tmp_path):
    pattern = write_shards(tmp_path, 3, 4)
    src = TarShards(pattern, rank=0, world_size=1, seed=2)
    next(iter(src))  # epoch 0
    epoch1 = list(src)
    assert epoch1[0]["__state__"][0] == 1
    for cut in (0, 5, 10):
        fresh = TarShards(pattern, rank=0, world_size=1, seed=2)
        fresh.resume(epoch1[cut]["__state__"])
        rest = list(fresh)
        assert [s["__key__"] for s in rest] == [s["__key__"] for s in epoch1[cut + 1 :]]
        assert next(iter(fresh))["__state__"][0] == 2  # then epoch 2
    bad = TarShards(pattern, rank=0, world_size=1)
    bad.resume((0, 99, 0))
    with pytest.raises(ValueError, match="not read by this rank"):
        iter(bad)


def test_shuffle_buffer_is_seeded_exactly_once_and_resumes_exactly(tmp_path):
    pattern = write_shards(tmp_path, 4, 6)
    plain = [s["__key__"] for s in TarShards(pattern, rank=0, world_size=1, seed=3)]

    def epoch(**kw):
        return list(TarShards(pattern, rank=0, world_size=1, seed=3, shuffle_buffer=5, **kw))

    full = epoch()
    keys = [s["__key__"] for s in full]
    assert sorted(keys) == sorted(plain) and len(set(keys)) == 24
    assert keys != plain  # the buffer reorders within the shard order
    assert keys == [s["__key__"] for s in epoch()]  # seeded
    epoch_, shard, offset, draws, buffered = full[7]["__state__"]
    assert (epoch_, draws) == (0, 8) and len(buffered) == 4 * 24  # filled to 5, one drawn
    for cut in (0, 7, 20):
        fresh = TarShards(pattern, rank=0, world_size=1, seed=3, shuffle_buffer=5)
        fresh.resume(full[cut]["__state__"])
        rest = list(fresh)
        assert [s["__key__"] for s in rest] == keys[cut + 1 :]
        assert [s["jpg"] for s in rest] == [s["jpg"] for s in full[cut + 1 :]]
    bad = TarShards(pattern, rank=0, world_size=1, shuffle_buffer=5)
    with pytest.raises(ValueError, match="__state__"):
        bad.resume((0, 0, 0, 1, b"short"))


def built_with(scheme):
    """Whether this build reads `scheme://` shards (spdl-py's source-http / source-s3)."""
    try:
        TarShards(f"{scheme}://127.0.0.1:9/train-{{0000..0001}}.tar", rank=0, world_size=1)
    except ValueError as e:
        if "source-" in str(e):
            return False
        raise
    return True


def test_remote_patterns_need_their_feature():
    if built_with("s3"):
        pytest.skip("built with source-s3 (the spdl-rs-ffmpeg wheel)")
    with pytest.raises(ValueError, match="source-s3"):
        TarShards("s3://bucket/train-{0000..0003}.tar", rank=0, world_size=1)


@pytest.fixture
def http_root(tmp_path):
    """`tmp_path` served by Python's HTTP server on loopback; yields its base URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_shards_read_like_local_ones_in_a_pipeline(tmp_path, http_root):
    if not built_with("http"):
        pytest.skip("built without source-http")
    local = write_shards(tmp_path, 4, 3)
    remote = f"{http_root}/train-{{0000..0003}}.tar"
    want = [(s["__key__"], s["jpg"]) for s in TarShards(local, rank=0, world_size=1, seed=7)]
    src = TarShards(remote, rank=0, world_size=1, seed=7)
    assert src.shards[0].startswith("http://127.0.0.1:")
    pipeline = PipelineBuilder().add_source(src).pipe(lambda s: (s["__key__"], s["jpg"])).add_sink(4).build(
        num_threads=1
    )
    with pipeline.auto_stop():
        got = list(pipeline)
    assert got == want and len(got) == 12
    # A shard the server does not have is one named failure; the epoch goes on.
    (tmp_path / "train-0002.tar").unlink()
    src = TarShards(remote, rank=0, world_size=1, seed=7)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        keys = [s["__key__"] for s in src]
    assert sorted(keys) == sorted(k for k, _ in want if not 6 <= int(k[2:]) <= 8)
    assert len(src.failures) == 1 and "train-0002.tar" in src.failures[0]


CASE_38 = (
    __import__("pathlib").Path(__file__).resolve().parents[2]
    / "spdl-sources/tests/fixtures/38-tar-links-dirs-empty/links.tar"
)


def test_links_directories_and_empty_members_read_as_tarfile_extracts_them():
    """Case 38 (crates/spdl-sources/tests/fixtures/38-tar-links-dirs-empty/README.md): the hard
    link and the symlink give their target's bytes, as tarfile.extractfile does; 0-byte members
    are b""; the directory and the FIFO are not samples; 6 samples, no failure."""
    want = {}
    with tarfile.open(CASE_38) as t:
        for m in t.getmembers():
            stem, dot, field = m.name.rpartition("/")[2].partition(".")
            f = t.extractfile(m) if (m.isfile() or m.islnk() or m.issym()) else None
            if dot and f is not None:
                want.setdefault(f"data/{stem}", {})[field] = f.read()
    assert want["data/0002"]["png"] == want["data/0001"]["png"] == want["data/0003"]["png"]
    assert len(want["data/0001"]["png"]) == 75
    src = TarShards(str(CASE_38))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = {s["__key__"]: {k: v for k, v in s.items() if not k.startswith("__")} for s in src}
    assert got == want
    assert got["data/0004"]["txt"] == b"" and got["data/0005"]["png"] == b""
    assert src.failures == []


def test_keys_out_of_order_fail_once_each_and_a_shard_without_end_marker_is_read(tmp_path):
    buf = pyio.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name in ["a.jpg", "b.jpg", "a.cls", "b.cls", "c.jpg", "c.cls", "d.jpg"]:
            info = tarfile.TarInfo(name)
            info.size = len(name)
            t.addfile(info, pyio.BytesIO(name.encode()))
    data = buf.getvalue()
    end = len(data)
    while data[end - 512 : end] == bytes(512):
        end -= 512  # no end-of-archive marker, as a killed writer leaves it
    path = tmp_path / "mixed.tar"
    path.write_bytes(data[:end])
    src = TarShards(str(path), shuffle=False)
    with pytest.warns(RuntimeWarning, match=r"2 failed.*key not grouped: .*mixed.tar: sample a: "):
        got = list(src)
    assert [(s["__key__"], sorted(k for k in s if not k.startswith("__"))) for s in got] == [
        ("c", ["cls", "jpg"]),
        ("d", ["jpg"]),
    ]
    assert [f.split(": sample ")[1].split(":")[0] for f in src.failures] == ["a", "b"]
    # Resumed after either sample: exactly the rest.
    for i, s in enumerate(got):
        fresh = TarShards(str(path), shuffle=False)
        fresh.resume(s["__state__"])
        assert [r["__key__"] for r in fresh] == [g["__key__"] for g in got[i + 1 :]]


def test_required_fields_make_a_sample_without_them_one_named_failure(tmp_path):
    path = tmp_path / "labels.tar"
    write_members(path, ["a.jpg", "a.cls", "b.cls", "b.json", "c.png"])
    src = TarShards(str(path), shuffle=False, required=["jpg;png"])
    with pytest.warns(RuntimeWarning, match="1 failed"):
        assert [s["__key__"] for s in src] == ["a", "c"]
    assert src.failures == [f"missing field: {path}: sample b: no field jpg or png; its fields: cls, json"]
    assert [s["__key__"] for s in TarShards(str(path), shuffle=False)] == ["a", "b", "c"]
    with pytest.raises(TypeError):
        TarShards(str(path), required="jpg")
    with pytest.raises(ValueError, match="names no field"):
        TarShards(str(path), required=["jpg", " ; "])


def test_a_state_inside_a_broken_keys_span_resumes_exactly(tmp_path):
    path = tmp_path / "span.tar"
    write_members(path, ["a.jpg", "b.jpg", "c.jpg", "a.cls", "d.jpg"])
    for buffer in (0, 2):
        src = TarShards(str(path), shuffle=False, shuffle_buffer=buffer, seed=1)
        with pytest.warns(RuntimeWarning, match="key not grouped: .*sample a: "):
            got = list(src)
        assert sorted(s["__key__"] for s in got) == ["b", "c", "d"]
        if buffer == 0:
            # b lies inside a's span while c is still to come: its state goes back before b
            # and passes over what was handed on (one item more: the skip); after c, all
            # of a's span was handed on.
            assert [len(s["__state__"]) for s in got] == [4, 3, 3]
        for i, s in enumerate(got):
            fresh = TarShards(str(path), shuffle=False, shuffle_buffer=buffer, seed=1)
            fresh.resume(s["__state__"])
            assert [r["__key__"] for r in fresh] == [g["__key__"] for g in got[i + 1 :]]
