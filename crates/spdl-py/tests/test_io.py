"""Pixel values of decoded images, against reference arrays and Pillow."""

import importlib.util

import numpy as np
import pytest

from conftest import spin_while
from spdl_rs import io

HAS_PIL = importlib.util.find_spec("PIL") is not None


@pytest.mark.parametrize("name", ["baseline", "progressive", "progressive_restart"])
def test_jpeg_matches_reference(fixtures, name):
    d = fixtures / "12-progressive-jpeg"
    img = np.asarray(io.load_image(d / f"{name}.jpg"))
    ref = np.load(d / "ref" / f"{name}.npy")
    assert img.shape == ref.shape == (23, 37, 3)
    assert np.abs(img.astype(int) - ref).max() <= 1


@pytest.mark.parametrize("n", range(1, 9))
def test_exif_orientation_applied(fixtures, n):
    d = fixtures / "03-exif-orientation"
    img = np.asarray(io.load_image(d / f"orient_{n}.jpg"))
    ref = np.load(d / "ref" / f"orient_{n}_applied.npy")
    assert img.shape == ref.shape
    assert np.abs(img.astype(int) - ref).mean() < 1.0


def test_png_16bit_unchanged_and_rgb(fixtures):
    d = fixtures / "05-png-16bit"
    rgb16 = io.load_image(d / "rgb16.png", color="unchanged")
    assert rgb16.dtype == "uint16"
    np.testing.assert_array_equal(np.asarray(rgb16), np.load(d / "ref" / "rgb16.npy"))
    gray16 = np.asarray(io.load_image(d / "gray16.png", color="unchanged"))
    np.testing.assert_array_equal(gray16[..., 0], np.load(d / "ref" / "gray16.npy"))
    rgb8 = np.asarray(io.load_image(d / "rgb16.png"))
    assert rgb8.dtype == np.uint8 and tuple(rgb8[10, 16]) == (255, 0, 255)


def test_decode_image_bytes_equals_load_image(samples):
    path = sorted(samples.glob("*.jpg"))[0]
    a = np.asarray(io.decode_image(path.read_bytes(), 40, 30))
    b = np.asarray(io.load_image(path, 40, 30))
    assert a.shape == (30, 40, 3)
    np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(not HAS_PIL, reason="Pillow is not installed: pixel comparison with Pillow skipped")
def test_bundled_photos_match_pillow(samples):
    from PIL import Image, ImageOps

    for path in sorted(samples.glob("*.jpg")):
        ours = np.asarray(io.load_image(path))
        with Image.open(path) as im:
            ref = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
        assert ours.shape == ref.shape, path
        diff = np.abs(ours.astype(int) - ref)
        assert diff.mean() < 0.5 and diff.max() <= 8, (path, diff.mean(), diff.max())


def test_load_image_batch_keys_and_order(samples):
    paths = sorted(samples.glob("*.jpg"))[:5]
    batch = io.load_image_batch(paths, 20, 10, num_threads=2)
    assert batch.shape == (5, 10, 20, 3)
    assert batch.keys == [str(p) for p in paths]
    for i, p in enumerate(paths):
        np.testing.assert_array_equal(np.asarray(batch)[i], np.asarray(io.load_image(p, 20, 10)))


def test_errors_name_the_sample(tmp_path):
    with pytest.raises(ValueError, match="unknown format: page.html"):
        io.decode_image(b"<html>503</html>", key="page.html")
    bad = tmp_path / "cut.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 10)
    with pytest.raises(ValueError, match="cut.jpg"):
        io.load_image(bad)
    with pytest.raises(FileNotFoundError, match="nope.jpg"):
        io.load_image(tmp_path / "nope.jpg")
    with pytest.raises(FileNotFoundError, match="nope.jpg"):
        io.load_image_batch([tmp_path / "nope.jpg"], 8, 8)
    with pytest.raises(ValueError):
        io.load_image_batch([], 8, 8)
    with pytest.raises(ValueError, match="width and height"):
        io.decode_image(b"", 8, None)


def test_io_functions_release_the_gil(samples):
    paths = sorted(samples.glob("*.jpg")) * 2
    # With the GIL released the spinning thread runs for the whole call.
    during = spin_while(lambda: io.load_image_batch(paths, 64, 64, num_threads=1))
    assert during > 1000, during
