"""Ray Data integration (`spdl_rs.ray`) on a real local Ray cluster, and the batch decoder under it.

The Ray tests are skipped, visibly, where Ray Data is not installed (`pip install 'ray[data]'`);
`decode_image_batch` and the import guard are tested everywhere.
"""

import importlib.util
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from spdl_rs import io, sources

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "ray_data.py"


@pytest.fixture(scope="module")
def ray():
    """One local cluster for the module: 2 CPUs, no dashboard (Ray's start-up dominates)."""
    ray = pytest.importorskip("ray", reason="Ray Data is not installed: pip install 'ray[data]'")
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'ray[data]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("ray_data_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def mixed(samples, tmp_path):
    """Three good photos and two bad files (not an image, a truncated JPEG)."""
    good = sorted(samples.glob("*.jpg"))[:3]
    for p in good:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    (tmp_path / "not_an_image.jpg").write_bytes(b"this is not an image")
    (tmp_path / "truncated.jpg").write_bytes(good[0].read_bytes()[:300])
    return tmp_path


def test_decode_image_batch_matches_load_image_batch(samples):
    paths = sorted(str(p) for p in samples.glob("*.jpg"))
    ref = np.asarray(io.load_image_batch(paths, transform="eval", size=48))
    data = [pathlib.Path(p).read_bytes() for p in paths]
    images, failed = io.decode_image_batch(data, keys=paths, transform="eval", size=48, num_threads=2)
    assert failed == []
    assert images.keys == paths
    np.testing.assert_array_equal(np.asarray(images), ref)
    from_paths, failed = io.decode_image_batch(paths=paths, transform="eval", size=48)
    assert failed == []
    np.testing.assert_array_equal(np.asarray(from_paths), ref)


def test_decode_image_batch_reports_failures(mixed):
    paths = sorted(str(p) for p in mixed.iterdir())
    images, failed = io.decode_image_batch(paths=paths + [str(mixed / "missing.jpg")], width=40, height=30)
    arr = np.asarray(images)
    assert arr.shape == (6, 30, 40, 3)
    bad = {paths.index(str(mixed / "not_an_image.jpg")), paths.index(str(mixed / "truncated.jpg")), 5}
    assert {row for row, _ in failed} == bad
    for row, message in failed:
        assert pathlib.Path((paths + [str(mixed / "missing.jpg")])[row]).name in message
        assert not arr[row].any()
    for row in set(range(5)) - bad:
        np.testing.assert_array_equal(arr[row], np.asarray(io.load_image(paths[row], 40, 30)))
    # All failed: zeros of the requested shape; normalized: float32 NCHW.
    images, failed = io.decode_image_batch([b"x", b"y"], size=8, normalize=True)
    assert (images.shape, images.dtype, len(failed)) == ((2, 3, 8, 8), "float32", 2)
    assert [m for _, m in failed][0].startswith("unknown format: <bytes #0>: ")
    with pytest.raises(ValueError, match="exactly one of data and paths"):
        io.decode_image_batch()
    with pytest.raises(ValueError, match="one image size"):
        io.decode_image_batch([b"x"])
    with pytest.raises(ValueError, match=r"data\[0\] is not bytes"):
        io.decode_image_batch(["a string"], size=8)


def test_import_without_ray_says_how_to_install():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import spdl_rs, spdl_rs.io, spdl_rs.sources\n"
        "try:\n    import spdl_rs.ray\nexcept ImportError as e:\n    print('IMPORT-ERROR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "IMPORT-ERROR" in out and "pip install 'ray[data]'" in out


@pytest.mark.parametrize("source", ["listing", "binary"])
def test_example_each_sample_exactly_once(ray, example, samples, source):
    listing = sources.list_files(samples)
    assert len(listing) == 14
    ds = example.build_dataset(listing, source=source, size=64, batch_size=4)
    result = example.train(ds, batch_size=4)
    example.check_exactly_once(listing, result)
    assert sorted(result["seen"].elements()) == sorted(listing.paths)
    assert result["failed"] == {}
    assert result["shape"] in [(64, 64, 3)]
    assert result["batches"] == 4  # 14 samples in batches of 4


def test_decoder_marks_failed_samples(ray, mixed):
    from spdl_rs.ray import ImageDecoder, count_failed, from_listing

    listing = sources.list_files(mixed)
    rows = (
        from_listing(listing)
        .map_batches(ImageDecoder(size=32, transform="eval"), batch_size=8, batch_format="numpy")
        .take_all()
    )
    assert sorted(r["path"] for r in rows) == sorted(listing.paths)
    assert sorted(r["index"] for r in rows) == list(range(5))
    bad = {r["path"] for r in rows if r["error"]}
    assert bad == {str(mixed / "not_an_image.jpg"), str(mixed / "truncated.jpg")}
    for r in rows:
        if r["error"]:
            assert pathlib.Path(r["path"]).name in r["error"] and not r["image"].any()
        else:
            ref = np.asarray(io.load_image(r["path"], transform="eval", size=32))
            np.testing.assert_array_equal(r["image"], ref)
    batch = {"path": np.array(listing.paths, dtype=object)}
    assert count_failed(ImageDecoder(size=32)(batch)) == 2
    with pytest.raises(ValueError, match="2 of 5 samples failed"):
        ImageDecoder(size=32, on_error="raise")(batch)


def test_image_folder_labels_and_train_indices(ray, samples, tmp_path):
    from spdl_rs.ray import ImageDecoder, from_listing

    photos = sorted(samples.glob("*.jpg"))[:4]
    for i, p in enumerate(photos):
        (tmp_path / f"class{i % 2}").mkdir(exist_ok=True)
        (tmp_path / f"class{i % 2}" / p.name).write_bytes(p.read_bytes())
    listing = sources.image_folder(tmp_path)
    decoder = ImageDecoder(size=24, transform="train", seed=5, epoch=1)
    rows = from_listing(listing).map_batches(decoder, batch_size=3, batch_format="numpy").take_all()
    assert sorted((r["index"], r["label"]) for r in rows) == list(enumerate(listing.labels))
    for r in rows:
        # The crop is drawn from (seed, epoch, index): the same as load_image's.
        ref = io.load_image(r["path"], transform="train", size=24, seed=5, epoch=1, index=r["index"])
        np.testing.assert_array_equal(r["image"], np.asarray(ref))


def test_decoder_rejects_bad_options():
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'ray[data]'")
    from spdl_rs.ray import ImageDecoder

    with pytest.raises(ValueError, match="on_error"):
        ImageDecoder(size=8, on_error="drop")
    with pytest.raises(ValueError, match="one image size"):
        ImageDecoder()
    with pytest.raises(ValueError, match="fixed channel count"):
        ImageDecoder(size=8, color="unchanged")


def test_decoder_as_actor_class(ray, samples):
    from spdl_rs.ray import ImageDecoder, from_listing

    listing = sources.list_files(samples)
    rows = (
        from_listing(listing)
        .map_batches(
            ImageDecoder,
            fn_constructor_kwargs={"size": 32, "transform": "eval"},
            compute=ray.data.ActorPoolStrategy(size=1),
            batch_size=5,
            batch_format="numpy",
        )
        .take_all()
    )
    assert sorted(r["path"] for r in rows) == sorted(listing.paths)
    assert all(r["image"].shape == (32, 32, 3) and r["error"] == "" for r in rows)
