"""The training examples (examples/train_imagenet.py, examples/train_imagenet_jax.py) run on the
CPU on the bundled photos sorted into two class folders, stop mid-epoch with a checkpoint,
and resume without loading a sample of that epoch twice.

Each needs its framework (torch, jax); without it the test is skipped, saying which.
"""

import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.fixture
def image_folder(samples, tmp_path):
    """ImageFolder layout of the 14 bundled photos: opencv/ (11) and skimage/ (3)."""
    root = tmp_path / "train"
    for photo in sorted(samples.glob("*.jpg")):
        cls = root / photo.name.split("_")[0]
        cls.mkdir(parents=True, exist_ok=True)
        shutil.copy(photo, cls / photo.name)
    return root


def run(script, *args):
    r = subprocess.run([sys.executable, str(REPO / "examples" / script), *map(str, args)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def epochs(out):
    """{epoch: (samples, batches)} from the examples' per-epoch lines."""
    found = re.findall(r"^epoch (\d+): (\d+) samples in (\d+) batches, loss (\S+),", out, re.M)
    for *_, loss in found:
        assert loss != "nan"
    return {int(e): (int(n), int(b)) for e, n, b, _ in found}


@pytest.mark.parametrize("script,framework,ext", [
    ("train_imagenet.py", "torch", "pt"),
    ("train_imagenet_jax.py", "jax", "pkl"),
])
def test_train_stops_and_resumes(image_folder, tmp_path, script, framework, ext):
    pytest.importorskip(framework, reason=f"{framework} is not installed: {script} not run")
    ckpt = tmp_path / f"ckpt.{ext}"
    common = [image_folder, "--epochs", 2, "--batch-size", 4, "--size", 64, "--threads", 2, "--checkpoint", ckpt]

    # Stop after 2 steps of epoch 0: 8 of the 14 samples trained on, the rest in the checkpoint.
    out = run(script, *common, "--max-steps", 2)
    assert "stopped at epoch 0, step 2 after 8 samples of the epoch" in out, out
    assert ckpt.exists()

    # Resume: the 6 samples left of epoch 0 (in 2 batches), then the whole of epoch 1.
    out = run(script, *common)
    assert "resumed at epoch 0, step 2: 6 samples left in the epoch" in out, out
    assert epochs(out) == {0: (6, 2), 1: (14, 4)}, out

    # Done: a third run finds nothing left to train.
    out = run(script, *common)
    assert epochs(out) == {}, out
