"""A ``spdl_rs`` built without the ``cuda`` feature (spdl-cuda not linked), at run time.

The installed wheel has ``cuda``, so its own tests never reach the no-CUDA build. ``cargo xtask
test`` builds the extension without features (``cargo build -p spdl-py``, a debug build) and
names it in ``SPDL_NO_CUDA_EXT``; this test puts it beside a copy of the Python package and, in a
fresh interpreter, loads a CPU batch (the same pixels as the installed build's) and calls each
CUDA entry point, which must raise ``RuntimeError`` naming the missing ``cuda`` feature.
Skipped when ``SPDL_NO_CUDA_EXT`` names no file (run it by hand: ``cargo build -p spdl-py``, then
``SPDL_NO_CUDA_EXT=target/debug/libspdl_rs.so pytest crates/spdl-py/tests/test_no_cuda_build.py``).
"""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from spdl_rs import io

from conftest import REPO, SAMPLES

PACKAGE = REPO / "crates" / "spdl-py" / "python" / "spdl_rs"


def no_cuda_extension() -> pathlib.Path | None:
    """The no-feature build of the extension that ``SPDL_NO_CUDA_EXT`` names (only a fresh one:
    a stale build under ``target/`` may lack names the Python files import)."""
    named = os.environ.get("SPDL_NO_CUDA_EXT")
    return pathlib.Path(named) if named and pathlib.Path(named).is_file() else None


# Run in the fresh interpreter: prints the batch's bytes (hex) after the checks.
CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import spdl_rs
    from spdl_rs import io, ops

    assert spdl_rs._native.__file__.startswith(sys.argv[1]), spdl_rs._native.__file__
    if io.cuda_built():
        print("BUILT WITH CUDA")
        sys.exit(0)
    assert not io.cuda_available()
    assert "built without CUDA support" in io.cuda_unavailable_reason()
    buf = io.load_image_batch(sys.argv[2:], 5, 4, num_threads=1)
    for name, call in [
        ("ops.to_device()", ops.to_device),
        ("ops.to_device('cuda:0')", lambda: ops.to_device("cuda:0")),
        ("io.transfer_buffer(batch)", lambda: io.transfer_buffer(buf)),
    ]:
        try:
            call()
        except RuntimeError as e:
            assert "built without CUDA support (the `cuda` feature" in str(e), (name, str(e))
            assert "--features cuda" in str(e), (name, str(e))
        else:
            raise AssertionError(f"{name} did not raise")
    print(io.to_numpy(buf).dtype, io.to_numpy(buf).shape)
    print(np.ascontiguousarray(io.to_numpy(buf)).tobytes().hex())
    """
)


def test_a_build_without_cuda_loads_cpu_batches_and_names_the_missing_feature(tmp_path):
    ext = no_cuda_extension()
    if ext is None:
        pytest.skip("SPDL_NO_CUDA_EXT names no extension built without `cuda`")
    photos = sorted(str(p) for p in SAMPLES.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))[:3]
    if len(photos) < 3:
        pytest.skip(f"bundled photos not found at {SAMPLES}")
    package = tmp_path / "spdl_rs"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("_native*.so", "__pycache__"))
    shutil.copy(ext, package / "_native.abi3.so")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), *photos],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    if lines[:3] == ["BUILT", "WITH", "CUDA"]:
        pytest.skip(f"{ext} was built with the `cuda` feature")
    dtype, shape, pixels = lines[0], " ".join(lines[1:-1]), lines[-1]
    assert (dtype, shape) == ("uint8", "(3, 4, 5, 3)")
    # The same pixels as the installed (CUDA) build's.
    want = np.ascontiguousarray(io.to_numpy(io.load_image_batch(photos, 5, 4, num_threads=1)))
    assert bytes.fromhex(pixels) == want.tobytes()
