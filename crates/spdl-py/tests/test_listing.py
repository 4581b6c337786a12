"""Folder listings as users expect them: hard cases 33 (hidden and side files) and 34 (links,
a loop back to the root, a folder named like an image), built at run time from the images in
crates/spdl-sources/tests/fixtures/listing."""

import os
import pathlib
import warnings

import numpy as np
import pytest

from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder

from conftest import REPO

LISTING = REPO / "crates" / "spdl-sources" / "tests" / "fixtures" / "listing"


def case_33(root: pathlib.Path) -> list[str]:
    """Writes the case under `root`; returns the paths written, relative to `root`."""
    apple_double = b"\x00\x05\x16\x07" + bytes(4092)
    ds_store = b"\x00\x00\x00\x01Bud1" + bytes(6140)
    files = {
        "cat/img1.jpg": (LISTING / "red_12x20.jpg").read_bytes(),
        "dog/img2.png": (LISTING / "blue_12x20.png").read_bytes(),
        "cat/._img1.jpg": apple_double,
        "dog/._img2.png": apple_double,
        "__MACOSX/cat/._img1.jpg": apple_double,
        ".DS_Store": ds_store,
        "cat/.DS_Store": ds_store,
        "dog/Thumbs.db": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        "desktop.ini": b"[.ShellClassInfo]\r\n",
        ".ipynb_checkpoints/img1-checkpoint.jpg": (LISTING / "green_12x20.jpg").read_bytes(),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return list(files)


def case_34(root: pathlib.Path) -> None:
    for d in ("real", "folder.jpg", "nest"):
        (root / d).mkdir()
    (root / "real/a.png").write_bytes((LISTING / "red_8x8.png").read_bytes())
    (root / "folder.jpg/inner.png").write_bytes((LISTING / "green_8x8.png").read_bytes())
    os.symlink("real/a.png", root / "link_file.png")
    os.symlink("real", root / "link_dir")
    os.symlink("missing.png", root / "broken_link.png")
    os.symlink("..", root / "nest/back_to_root")


def relative(listing, root) -> list[str]:
    return [str(pathlib.Path(p).relative_to(root)) for p in listing.paths]


def load_all(listing, size):
    """Decodes every sample (input order) at `size` x `size`; returns (images, errors)."""
    p = (
        PipelineBuilder()
        .add_source(listing)
        .pipe(ops.read_file())
        .pipe(ops.decode_image(size, size), output_order="input")
        .add_sink(8)
        .build(num_threads=1)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the per-epoch failure summary
        with p.auto_stop():
            images = [np.asarray(x) for x in p]
            errors = p.last_errors()
    return images, errors


def test_hidden_and_side_files_are_skipped(tmp_path):
    written = case_33(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no listing warning here
        listing = sources.list_files(tmp_path)
    assert relative(listing, tmp_path) == ["cat/img1.jpg", "dog/img2.png"]
    images, errors = load_all(listing, 12)
    assert errors == []
    assert len(images) == 2
    red, blue = images
    assert np.all(np.abs(red.astype(int) - [254, 0, 0]) <= 3)
    assert np.all(blue == [0, 0, 255])

    folder = sources.image_folder(tmp_path)
    assert folder.classes == ["cat", "dog"]
    assert folder.labels == [0, 1]

    # With include_hidden: every image file written, the hidden and side ones too, in path order.
    everything = sources.list_files(tmp_path, include_hidden=True)
    assert relative(everything, tmp_path) == sorted(p for p in written if p.endswith((".jpg", ".png")))
    folder = sources.image_folder(tmp_path, include_hidden=True)
    assert folder.classes == [".ipynb_checkpoints", "__MACOSX", "cat", "dog"]


def test_include_hidden_is_keyword_only(tmp_path):
    case_33(tmp_path)
    with pytest.raises(TypeError):
        sources.list_files(tmp_path, None, True)
    with pytest.raises(TypeError):
        sources.list_files(tmp_path, hidden=True)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_links_loop_and_broken_link(tmp_path):
    case_34(tmp_path)
    with pytest.warns(RuntimeWarning) as caught:
        listing = sources.list_files(tmp_path)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "nest/back_to_root" in messages[0] and "loop" in messages[0]
    assert relative(listing, tmp_path) == [
        "broken_link.png",
        "folder.jpg/inner.png",
        "link_dir/a.png",
        "link_file.png",
        "real/a.png",
    ]
    images, errors = load_all(listing, 8)
    assert len(errors) == 1, errors
    assert "broken_link.png" in errors[0] and "broken symbolic link" in errors[0], errors
    assert [tuple(img[0, 0]) for img in images] == [(0, 255, 0)] + [(255, 0, 0)] * 3
    assert all(np.all(img == img[0, 0]) for img in images)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_image_folder_cuts_a_link_back_to_the_dataset(tmp_path):
    case_34(tmp_path)
    with pytest.warns(RuntimeWarning, match="nest/back_to_root"):
        folder = sources.image_folder(tmp_path, allow_empty=True)
    assert folder.classes == ["folder.jpg", "link_dir", "nest", "real"]
    assert relative(folder, tmp_path) == ["folder.jpg/inner.png", "link_dir/a.png", "real/a.png"]
    assert folder.labels == [0, 1, 3]
