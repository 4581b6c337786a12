"""``iter_tarfile``: the regular files of a tar archive, zero-copy over bytes.

Mirrors SPDL 0.8's ``spdl.io.iter_tarfile``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from . import _native
from ._array import _byte_view

__all__ = ["iter_tarfile"]


class SupportsRead(Protocol):
    """A binary file-like object: only ``read(n) -> bytes`` is used."""

    def read(self, n: int = -1) -> bytes: ...


def _members(view: memoryview) -> Iterator[tuple[str, memoryview]]:
    for name, offset, size in _native._TarMembers(view):
        yield name, view[offset : offset + size]


def iter_tarfile(src: bytes | bytearray | memoryview | SupportsRead) -> Iterator[tuple[str, Any]]:
    """Iterates over the regular files of a tar archive, in archive order, as ``(name, data)``.

    ``src`` is the whole archive as bytes-like (``bytes``, ``bytearray``, ``memoryview``):
    ``data`` is then a ``memoryview`` slice of ``src`` (no copy); or a binary file-like
    object (only ``read(n)`` is called, sequentially): ``data`` is then ``bytes``.

    Reads ustar, GNU (long names) and PAX (long names, large sizes) archives, as GNU tar and
    :mod:`tarfile` write them. Zero-size files are included (as ``b""``); directories and
    devices are skipped. Hard and symbolic links are skipped too, as SPDL 0.8.0 does: a link
    is never yielded, neither as a 0-byte file nor as its target's bytes (read the target's
    own member; ``spdl_rs.sources.TarShards`` resolves links in shards). Headers are parsed
    in Rust (over bytes, with the GIL released).

    Raises ``ValueError`` naming the member or header offset for truncated data
    (``"truncated: ..."``: a member whose data is cut short, a header cut short), a header
    that fails its checksum (``"corrupt: ..."``; the first one: ``"unknown format: ..."``)
    and sparse files (``"unsupported: ..."``); ``TypeError`` for a ``src`` that is neither
    bytes-like nor has ``read``. Errors are raised when iteration reaches them: the members
    before are yielded first. Bytes after the end-of-archive marker are ignored, and data
    that ends after a whole member without the marker ends the archive there, like
    :mod:`tarfile` (SPDL 0.8.0 raises ``RuntimeError`` there for a file-like ``src``).

    Mirrors SPDL's ``spdl.io.iter_tarfile``.
    """
    if isinstance(src, (bytes, bytearray, memoryview)):
        return _members(_byte_view(src))
    if hasattr(src, "read"):
        return iter(_native._TarStream(src))
    raise TypeError(
        f"src must be bytes-like or a file-like object with read(), got {type(src).__name__}"
    )
