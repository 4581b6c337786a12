"""Native eval/train transforms (`transform=`, `size=`, `seed=`) in `spdl_rs.io` and `spdl_rs.ops`."""

import numpy as np
import pytest
from spdl_rs import io, ops, sources
from spdl_rs.pipeline import PipelineBuilder


def _paths(samples):
    return sorted(sources.list_files(samples).paths)


def _pipeline(samples, op, *, concurrency=4, order="completion"):
    return (
        PipelineBuilder()
        .add_source(sources.list_files(samples), continuous=True)  # one epoch per iteration
        .pipe(ops.read_file(), concurrency=concurrency, output_order=order)
        .pipe(op, concurrency=concurrency, output_order=order)
        .add_sink(4)
        .build(num_threads=4)
    )


def _assert_close_to_io(native, ref, what=""):
    """A native stage's image against `spdl_rs.io`'s: the same box, but the stage may decode a
    large photo at a finer DCT scale (M/8), so close rather than equal: at most 3 levels on
    average for one image (the baboon's fur at 96 px: 2.0; over photos the mean stays under
    1.5), where another box differs by 15 to 60."""
    assert native.shape == ref.shape, what
    diff = np.abs(native.astype(np.int16) - ref.astype(np.int16))
    assert diff.mean() <= 3.0, (what, diff.mean())


def _collect(pipeline):
    with pipeline.auto_stop():
        return {b.keys[0]: np.asarray(b).copy() for b in pipeline}


def test_eval_shape_and_agreement_with_io(samples):
    paths = _paths(samples)
    got = _collect(_pipeline(samples, ops.decode_image(transform="eval", size=224)))
    assert sorted(got) == paths
    for p in paths:
        ref = np.asarray(io.load_image(p, transform="eval", size=224))
        assert got[p].shape == (224, 224, 3) and got[p].dtype == np.uint8
        # The native stage may decode a large photo at a finer DCT scale (M/8) than io's
        # calls: within a mean of 1.5 levels of them, equal for the photos at the same scale.
        _assert_close_to_io(got[p], ref, p)
        # io.decode_image on the bytes agrees exactly.
        with open(p, "rb") as f:
            np.testing.assert_array_equal(np.asarray(io.decode_image(f.read(), transform="eval", size=224)), ref)


def test_eval_width_height_as_size_bench_signature(samples):
    # bench/systems/spdl_rs_native.py passes width=height=size with transform.
    p = _paths(samples)[0]
    a = np.asarray(io.load_image(p, 160, 160, transform="eval"))
    b = np.asarray(io.load_image(p, transform="eval", size=160))
    assert a.shape == (160, 160, 3)
    np.testing.assert_array_equal(a, b)
    op = ops.load_image(width=224, height=224, transform="train", seed=3)
    assert np.asarray(op(p)).shape == (224, 224, 3)


def test_default_transform_unchanged(samples):
    p = _paths(samples)[0]
    a = np.asarray(io.load_image(p, 100, 80))
    b = np.asarray(io.load_image(p, 100, 80, transform="resize"))
    assert a.shape == (80, 100, 3)
    np.testing.assert_array_equal(a, b)


def test_bad_transform_arguments(samples):
    p = _paths(samples)[0]
    with pytest.raises(ValueError, match="transform must be"):
        ops.decode_image(transform="center")
    with pytest.raises(ValueError, match="square"):
        io.load_image(p, 100, 80, transform="eval")
    with pytest.raises(ValueError, match="square"):
        ops.load_image(transform="train")


def test_train_deterministic_for_seed(samples):
    paths = _paths(samples)
    p = paths[0]
    a = np.asarray(io.load_image(p, transform="train", size=224, seed=7, index=3, epoch=1))
    b = np.asarray(io.load_image(p, transform="train", size=224, seed=7, index=3, epoch=1))
    assert a.shape == (224, 224, 3)
    np.testing.assert_array_equal(a, b)
    # Other draws for other (seed, index, epoch).
    others = [
        np.asarray(io.load_image(p, transform="train", size=224, seed=8, index=3, epoch=1)),
        np.asarray(io.load_image(p, transform="train", size=224, seed=7, index=4, epoch=1)),
        np.asarray(io.load_image(p, transform="train", size=224, seed=7, index=3, epoch=2)),
    ]
    assert any(not np.array_equal(a, o) for o in others)

    # In a pipeline over a listing: draws by (seed, epoch, position), whatever the order.
    run1 = _collect(_pipeline(samples, ops.decode_image(transform="train", size=224, seed=7)))
    run2 = _collect(_pipeline(samples, ops.decode_image(transform="train", size=224, seed=7), concurrency=1, order="input"))
    assert sorted(run1) == paths
    for i, q in enumerate(paths):
        np.testing.assert_array_equal(run1[q], run2[q])
        ref = np.asarray(io.load_image(q, transform="train", size=224, seed=7, index=i, epoch=0))
        _assert_close_to_io(run1[q], ref, q)
    run3 = _collect(_pipeline(samples, ops.decode_image(transform="train", size=224, seed=8)))
    assert any(not np.array_equal(run1[q], run3[q]) for q in paths)


def test_train_epochs_differ(samples):
    pipeline = _pipeline(samples, ops.decode_image(transform="train", size=96, seed=1), concurrency=1, order="input")
    with pipeline.auto_stop():
        e0 = [np.asarray(b).copy() for b in pipeline]
        e1 = [np.asarray(b).copy() for b in pipeline]
    assert len(e0) == len(e1)
    assert any(not np.array_equal(x, y) for x, y in zip(e0, e1))
    p = _paths(samples)[2]
    _assert_close_to_io(e1[2], np.asarray(io.load_image(p, transform="train", size=96, seed=1, index=2, epoch=1)), p)


def test_load_image_batch_transforms(samples):
    paths = _paths(samples)[:4]
    batch = np.asarray(io.load_image_batch(paths, transform="eval", size=224))
    assert batch.shape == (4, 224, 224, 3)
    for i, p in enumerate(paths):
        np.testing.assert_array_equal(batch[i], np.asarray(io.load_image(p, transform="eval", size=224)))
    t = np.asarray(io.load_image_batch(paths, transform="train", size=64, seed=5, epoch=2))
    for i, p in enumerate(paths):
        ref = np.asarray(io.load_image(p, transform="train", size=64, seed=5, index=i, epoch=2))
        np.testing.assert_array_equal(t[i], ref)
    f = np.asarray(io.load_image_batch(paths, transform="eval", size=224, normalize=True))
    assert f.shape == (4, 3, 224, 224) and f.dtype == np.float32


def _crop_resize_nearest(full, box, size):
    """The box of `full` sampled at `size x size` pixel centers (a crude reference resize)."""
    left, top, w, h, flip = box
    ys = top + ((np.arange(size) + 0.5) * h / size).astype(int)
    xs = left + ((np.arange(size) + 0.5) * w / size).astype(int)
    out = full[ys][:, xs]
    return out[:, ::-1] if flip else out


def _blocks(x):
    """Means of 8x8 blocks of a 224x224 image: a resampler's high frequencies average out,
    the geometry stays."""
    return x.astype(np.float64).reshape(28, 8, 28, 8, -1).mean(axis=(1, 3))


def test_random_resized_crop_is_the_box_train_takes(samples):
    for i, p in enumerate(_paths(samples)[:6]):
        full = np.asarray(io.load_image(p)).astype(np.int16)
        h, w = full.shape[:2]
        box = io.random_resized_crop(w, h, size=224, seed=5, index=i)
        left, top, cw, ch, flip = box
        assert isinstance(flip, bool)
        assert 0 <= left and 0 <= top and 0 < cw and 0 < ch
        assert left + cw <= w and top + ch <= h
        # Same arguments, same draw; another index, another draw.
        assert io.random_resized_crop(w, h, size=224, seed=5, index=i) == box
        got = _blocks(np.asarray(io.load_image(p, transform="train", size=224, seed=5, index=i)))
        mad = np.abs(got - _blocks(_crop_resize_nearest(full, box, 224))).mean()
        other = io.random_resized_crop(w, h, size=224, seed=5, index=i + 100)
        mad_other = np.abs(got - _blocks(_crop_resize_nearest(full, other, 224))).mean()
        # Nearest vs antialiased bilinear on the same box, compared as 8x8 block means: a few
        # levels; another box: far more.
        assert mad < 4.0, (p, box, mad)
        assert mad_other > mad, (p, box, other, mad, mad_other)


def test_random_resized_crop_rejects_zero_sizes():
    with pytest.raises(ValueError, match="at least 1"):
        io.random_resized_crop(0, 10)
    with pytest.raises(ValueError, match="at least 1"):
        io.random_resized_crop(10, 10, size=0)
