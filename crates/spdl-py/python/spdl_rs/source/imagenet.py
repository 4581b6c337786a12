"""The ImageNet (ILSVRC2012) directory layout (SPDL's ``spdl.source.imagenet``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from ._wnids import WNIDS
from .local_directory import LocalDirectory

__all__ = ["ImageNet", "get_mappings", "parse_wnid"]

_WNID = re.compile(r"n\d{8}")


class ImageNet:
    """``(path, class index)`` of every ``<root>/<split>/<wnid>/*.JPEG`` (SPDL's ``ImageNet``):
    the validation set sorted into wnid folders, as torchvision and SPDL expect it. Paths are
    sorted; ``shuffle(seed)`` reorders them (:class:`LocalDirectory`); the class index is
    the wnid's position among the 1000 sorted ILSVRC2012 wnids (:func:`get_mappings`).

    Raises ``ValueError`` if ``split`` is not ``"train"`` or ``"val"``; iterating raises
    ``ValueError`` for a folder that is no ImageNet-1k wnid (naming the path).
    """

    def __init__(self, root: str | os.PathLike[str], split: str = "val") -> None:
        splits = ["train", "val"]
        if split not in splits:
            raise ValueError(f"`split` must be one of {splits}")
        self._mappings = get_mappings()
        self._src = LocalDirectory(root, f"{split}/*/*.JPEG")

    def shuffle(self, seed: int) -> None:
        """Reorders the paths with ``random.Random(seed)``."""
        self._src.shuffle(seed=seed)

    def __len__(self) -> int:
        return len(self._src)

    def __iter__(self) -> Iterator[tuple[Path, int]]:
        for path in self._src:
            wnid = parse_wnid(str(path.parent.name))
            if wnid not in self._mappings:
                raise ValueError(f"{path}: {wnid} is not one of the 1000 ImageNet-1k classes")
            yield path, self._mappings[wnid]


def parse_wnid(s: str) -> str:
    """The first WordNet id (``n`` and 8 digits) in ``s``; ``ValueError`` if there is none."""
    if m := _WNID.search(s):
        return m.group(0)
    raise ValueError(f"The given string does not contain WNID: {s}")


def get_mappings() -> dict[str, int]:
    """WordNet id -> class index (0..999, the sorted ILSVRC2012 ids; e.g. ``n01440764`` -> 0,
    ``n03709823`` -> 636)."""
    return {w: i for i, w in enumerate(WNIDS)}
