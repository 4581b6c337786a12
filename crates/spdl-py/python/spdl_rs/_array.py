"""NumPy ``.npy`` / ``.npz`` fast paths: ``load_npy``, ``load_npz`` and ``NpzFile``.

The header and the ZIP directory are parsed in Rust with the GIL released; the array is a
NumPy view over the caller's buffer (no copy) whenever its elements are aligned, so NumPy
keeps the buffer alive and the view inherits its writability. Mirrors SPDL 0.8's
``spdl.io.load_npy``, ``load_npz`` and ``NpzFile``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from . import _native

__all__ = ["load_npy", "load_npz", "NpzFile"]

#: SPDL's default for ``max_uncompressed_bytes``: 1 GiB.
DEFAULT_MAX_UNCOMPRESSED_BYTES = 1 << 30

Buffer = bytes | bytearray | memoryview


def _byte_view(data: Any) -> memoryview:
    """A flat ``uint8`` memoryview of ``data`` (it holds the export: a ``bytearray`` cannot be
    resized while a view made from it lives). Raises ``TypeError`` for non-buffers,
    ``BufferError`` for non-contiguous buffers."""
    mv = memoryview(data)
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    return mv


class _Borrowed:
    """Exposes elements through ``__array_interface__`` and keeps their owner alive: NumPy makes
    this object the array's ``base``. (``numpy.ndarray(buffer=memoryview)`` would not do: it
    keeps the exporter but releases the export, so a ``bytearray`` could be resized under the
    array.)"""

    __slots__ = ("__array_interface__", "_owner")

    def __init__(self, owner: Any, interface: dict) -> None:
        self._owner = owner
        self.__array_interface__ = interface


def _make_array(view: memoryview, info: tuple, copy: bool) -> Any:
    """The NumPy array that ``info`` (from the Rust half) describes: a view over ``view``, or
    over the ``CPUBuffer`` that holds inflated/converted elements. Copied when asked, or when
    the elements are not aligned for their type."""
    import numpy as np

    owner, typestr, shape, fortran, address = info
    if owner is None:
        owner, readonly = view, view.readonly
    else:
        address += owner.data_ptr
        readonly = False
    strides = None
    if fortran and len(shape) > 1:
        strides, step = [], np.dtype(typestr).itemsize
        for dim in shape:
            strides.append(step)
            step *= dim
        strides = tuple(strides)
    interface = {
        "version": 3,
        "shape": tuple(shape),
        "typestr": typestr,
        "data": (address, readonly),
        "strides": strides,
    }
    array = np.asarray(_Borrowed(owner, interface))
    if copy or not array.flags.aligned:
        array = array.copy(order="K")
    return array


def load_npy(data: Buffer, *, copy: bool = False) -> Any:
    """Loads a NumPy array from the bytes of an ``.npy`` file (what :func:`numpy.save` writes).

    Equivalent to ``numpy.load(io.BytesIO(data))`` for the dtypes NumPy saves without
    pickling: ``bool``, (unsigned) integers, floats, complex, ``S``/``U``/``V`` strings and
    ``datetime64``/``timedelta64``, either byte order, C or Fortran order, format versions
    1.0, 2.0 and 3.0. The header is parsed with the GIL released.

    With ``copy=False`` (default) the result is a view over ``data`` (no copy) that keeps
    ``data`` alive and is read-only when ``data`` is (``bytes``); a view whose elements would
    be misaligned is copied instead. ``copy=True`` returns an independent, writable array.

    Raises ``ValueError`` naming the reason for malformed input (``"truncated: ..."``,
    ``"corrupt: ..."``), object or structured dtypes (``"unsupported: ..."``) and data that is
    not NPY (``"unknown format: ..."``); ``TypeError`` if ``data`` is not bytes-like,
    ``BufferError`` if it is not contiguous.

    Mirrors SPDL's ``spdl.io.load_npy``.
    """
    view = _byte_view(data)
    return _make_array(view, _native._parse_npy(view), copy)


class NpzFile(Mapping):
    """The arrays of an ``.npz`` archive (what :func:`numpy.savez` and
    :func:`numpy.savez_compressed` write), as a read-only mapping from member name to array.

    ``npz["x"]`` and ``npz["x.npy"]`` both give member ``x.npy`` (as NumPy's ``NpzFile``);
    ``files`` lists the names without ``.npy``. A stored member is a view over the archive
    buffer (copied only if misaligned); a deflated one is inflated, GIL released, into its own
    writable memory. Every access checks the member's CRC-32.

    Made by :func:`load_npz`, which reads the ZIP directory; ``max_uncompressed_bytes`` bounds
    the declared size of the deflated members in all, checked before anything is inflated.

    Mirrors SPDL's ``spdl.io.NpzFile`` (constructed from the archive, not from SPDL's
    internal metadata).
    """

    def __init__(
        self, data: Buffer, *, max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES
    ) -> None:
        if max_uncompressed_bytes < 0:
            raise ValueError("max_uncompressed_bytes must be non-negative.")
        self._view = _byte_view(data)
        self._index = _native._NpzIndex(self._view, max_uncompressed_bytes)
        self._names = self._index.names()
        #: Member names without the ``.npy`` suffix, in archive order.
        self.files: list[str] = [n.removesuffix(".npy") for n in self._names]

    def __getitem__(self, key: str) -> Any:
        """The array of member ``key`` (with or without ``.npy``).

        Raises ``KeyError`` if there is no such member, ``ValueError`` naming the member if
        its data is corrupt or truncated."""
        info = self._index.member(key) if isinstance(key, str) else None
        if info is None:
            raise KeyError(f"{key} is not a file in the archive")
        return _make_array(self._view, info, copy=False)

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __contains__(self, key: object) -> bool:
        return key in self._names or key in self.files

    def __repr__(self) -> str:
        return f"NpzFile object with {len(self)} entries."


def load_npz(
    data: Buffer, *, max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES
) -> NpzFile:
    """Opens the bytes of an ``.npz`` archive as an :class:`NpzFile` (a mapping of arrays).

    Reads the ZIP central directory (ZIP64 included) with the GIL released; members are
    loaded on access. ``max_uncompressed_bytes`` (default 1 GiB) bounds the declared size of
    all deflated members together.

    Raises ``ValueError`` for malformed archives (``"truncated: ..."``, ``"corrupt: ..."``),
    encrypted members or compression other than stored/deflate (``"unsupported: ..."``),
    deflated members over the limit (``"limit exceeded: NPZ deflated entries exceed
    max_uncompressed_bytes ..."``) or a negative limit; ``TypeError`` if ``data`` is not
    bytes-like.

    Mirrors SPDL's ``spdl.io.load_npz``.
    """
    return NpzFile(data, max_uncompressed_bytes=max_uncompressed_bytes)
