"""A third-party decoder plugin (examples/decoder-plugin-pnm) loaded at run time from Python."""

import pathlib

import numpy as np
import pytest

import spdl_rs
from spdl_rs import io

REPO = pathlib.Path(__file__).resolve().parents[3]
DATA = REPO / "examples" / "decoder-plugin-pnm" / "tests" / "data"
# `cargo test --workspace` (run by `cargo xtask test` before pytest) builds the cdylib.
LIB = REPO / "target" / "debug" / "libspdl_decoder_pnm.so"


@pytest.fixture(scope="module")
def plugin() -> str:
    if not LIB.is_file():
        pytest.skip(f"{LIB} not built: cargo build -p spdl-decoder-pnm")
    return io.load_decoder_plugin(LIB)


def test_plugin_decodes_by_content(plugin: str) -> None:
    assert plugin == "pnm"
    ref = np.load(DATA / "orange_rgb.npy")
    got = np.asarray(io.decode_image((DATA / "orange.ppm").read_bytes()))
    np.testing.assert_array_equal(got, ref)
    # The gray file, replicated to RGB like every other gray image; by path this time.
    np.testing.assert_array_equal(
        np.asarray(io.load_image(DATA / "orange.pgm")), np.load(DATA / "orange_pgm_rgb.npy")
    )
    deep = np.asarray(io.load_image(DATA / "deep.pgm", color="gray"))
    np.testing.assert_array_equal(deep[..., 0], np.load(DATA / "deep_gray.npy"))


def test_plugin_errors_name_the_sample(plugin: str) -> None:
    cut = (DATA / "orange.ppm").read_bytes()[:100]
    with pytest.raises(ValueError, match=r"truncated: cut\.ppm: raster has"):
        io.decode_image(cut, key="cut.ppm")


def test_plugin_in_a_native_pipeline(plugin: str, tmp_path: pathlib.Path) -> None:
    from spdl_rs import ops, sources
    from spdl_rs.pipeline import PipelineBuilder

    for name in ["orange.ppm", "orange.pgm", "deep.pgm"]:
        (tmp_path / name).write_bytes((DATA / name).read_bytes())
    pipeline = (
        PipelineBuilder()
        .add_source(sources.list_files(tmp_path, extensions=["ppm", "pgm"]))
        .pipe(ops.read_file())
        .pipe(ops.decode_image(transform="resize", size=32))
        .aggregate(3)
        .pipe(ops.collate())
        .add_sink(1)
        .build(num_threads=1)
    )
    with pipeline.auto_stop():
        batches = [np.asarray(b) for b in pipeline]
    assert [b.shape for b in batches] == [(3, 32, 32, 3)]


def test_not_a_plugin_is_refused_by_name(tmp_path: pathlib.Path) -> None:
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not a library")
    with pytest.raises(ValueError, match="bogus.so"):
        io.load_decoder_plugin(bogus)
    assert "load_decoder_plugin" in spdl_rs.io.__all__


def test_listings_include_a_loaded_plugins_extensions(plugin: str, tmp_path: pathlib.Path) -> None:
    from spdl_rs import sources

    for name in ["orange.ppm", "orange.pgm", "notes.txt"]:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "cls").mkdir()
    (tmp_path / "cls" / "deep.pgm").write_bytes(b"x")
    # No `extensions=`: the built-in image extensions and the plugin's (ppm pgm pnm).
    listed = sorted(pathlib.Path(p).name for p in sources.list_files(tmp_path).paths)
    assert listed == ["deep.pgm", "orange.pgm", "orange.ppm"]
    folder = sources.image_folder(tmp_path)
    assert sorted(pathlib.Path(p).name for p in folder.paths) == ["deep.pgm"]
