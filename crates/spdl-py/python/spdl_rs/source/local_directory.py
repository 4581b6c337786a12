"""Files of a local directory (SPDL's ``spdl.source.local_directory``)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LocalDirectory"]


class LocalDirectory:
    """The paths under ``root`` matching the glob ``pattern`` (:meth:`pathlib.Path.glob`,
    e.g. ``"*/*.JPEG"``, ``"**/*.wav"``), sorted, listed once at construction (SPDL's
    ``LocalDirectory``). ``shuffle(seed)`` reorders them in place with
    ``random.Random(seed)`` (so repeated shuffles compound, as SPDL); ``len()`` is the count.
    """

    def __init__(self, root: str | os.PathLike[str], pattern: str) -> None:
        self.root = Path(root)
        self.pattern = pattern
        self._flist: list[Path] = sorted(self.root.glob(pattern))

    def shuffle(self, seed: int) -> None:
        """Reorders the paths with ``random.Random(seed)``."""
        random.Random(seed).shuffle(self._flist)

    def __iter__(self) -> Iterator[Path]:
        return iter(list(self._flist))

    def __len__(self) -> int:
        return len(self._flist)
