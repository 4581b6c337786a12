"""One version everywhere: `spdl_rs.__version__`, the installed wheel's metadata, the workspace
version in Cargo.toml (which `spdl --version` prints) and a CHANGELOG entry."""

import importlib.metadata
import re
import tomllib

import spdl_rs

from conftest import REPO


def workspace_version() -> str:
    with open(REPO / "Cargo.toml", "rb") as f:
        return tomllib.load(f)["workspace"]["package"]["version"]


def test_version_is_the_workspace_version():
    assert spdl_rs.__version__ == workspace_version()


def test_version_is_the_installed_distributions():
    # The wheel is `spdl-rs`, or `spdl-rs-ffmpeg` (the FFmpeg build the tests use).
    versions = {}
    for dist in ("spdl-rs", "spdl-rs-ffmpeg"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    assert versions, "neither spdl-rs nor spdl-rs-ffmpeg is installed"
    assert set(versions.values()) == {spdl_rs.__version__}, versions


def test_changelog_has_the_version():
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(spdl_rs.__version__)}\]", changelog, re.M)
