"""The README example runs as written (from the repository root)."""

import os
import re
import subprocess
import sys

from conftest import REPO


def test_readme_example_runs(samples):
    text = (REPO / "crates" / "spdl-py" / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONWARNINGS": "error::ResourceWarning"})
    assert r.returncode == 0, r.stderr
    assert "(8, 224, 224, 3) uint8" in r.stdout
