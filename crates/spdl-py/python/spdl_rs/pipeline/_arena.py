"""Shared-memory arenas for :func:`~spdl_rs.pipeline.iterate_in_subprocess` (SPDL 0.8's
``SharedMemoryRingBuffer`` and ``SharedMemorySegmentPool``, ``spdl.pipeline._arena``).

An arena is made in the parent and given to ``iterate_in_subprocess(..., arena=)``, which owns
it from then on. The worker pickles each item with its large binary leaves (``bytes`` and
``bytearray`` of at least 4 KiB, NumPy arrays of at least 4 KiB, any
:class:`spdl_rs.io.CPUBuffer`) diverted into the arena, so only a small envelope (the rest of
the item and where each binary lies) goes through the pipe; the parent rebuilds the item from
the envelope. Binaries start at 64-byte aligned offsets. One item is one *unit*: its binaries
are reserved together and given back together, once the parent is done with it.

- :class:`SharedMemoryRingBuffer`: one segment used as a ring; the parent copies each binary
  out and gives the unit's bytes back at once (arrays it returns own their memory).
- :class:`SharedMemorySegmentPool`: ``count`` segments, one per unit; NumPy arrays (and
  ``CPUBuffer`` items, which arrive as NumPy arrays) are views on the shared memory itself,
  and the segment is reused only after every such array (and every view of it) is gone.

When the arena is full the worker waits up to ``acquire_timeout`` seconds for the parent to
give space back, then raises ``BufferError`` (SPDL's error), which the parent's iterator
re-raises. The parent closes and unlinks every segment when the worker is shut down, so
nothing stays under ``/dev/shm``.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import struct
import sys
import threading
import weakref
from multiprocessing import shared_memory
from collections.abc import Iterator
from typing import Any

__all__ = ["SharedMemoryRingBuffer", "SharedMemorySegmentPool"]

_DEFAULT_ACQUIRE_TIMEOUT = 60.0  # SPDL's default
_THRESHOLD = 4096  # smaller binaries are pickled inline (SPDL's default threshold)
_ALIGN = 64
_HEADER = 64  # ring: the tail cursor and the shutdown flag, padded to the alignment
_RING_CTRL = struct.Struct("<QB")


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _leaf(obj: Any) -> tuple[str, Any, memoryview] | None:
    """``(kind, meta, flat byte view)`` for a binary to offload, ``None`` for the rest."""
    t = type(obj)
    if t is bytes or t is bytearray:
        if len(obj) >= _THRESHOLD:
            return (t.__name__, None, memoryview(obj))
        return None
    from .. import _native

    if t is _native.CPUBuffer:
        # A CPUBuffer is read through NumPy even in a worker that never imported it.
        import numpy as np

        obj = np.asarray(obj)
    else:
        # Any other array can only exist once NumPy is imported.
        np = sys.modules.get("numpy")
        if np is None or t is not np.ndarray:
            return None
        if obj.dtype.hasobject or obj.nbytes < _THRESHOLD:
            return None
    arr = np.ascontiguousarray(obj)
    return ("ndarray", (arr.dtype, arr.shape), memoryview(arr.reshape(-1).view(np.uint8)))


class _OffloadPickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, put: Any) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._put = put

    def persistent_id(self, obj: Any) -> Any:
        leaf = _leaf(obj)
        if leaf is None:
            return None
        kind, meta, view = leaf
        return (kind, self._put(view), view.nbytes, meta)


class _RestoreUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, get: Any) -> None:
        super().__init__(file)
        self._get = get

    def persistent_load(self, pid: Any) -> Any:
        return self._get(*pid)


def _pickle_with(obj: Any, put: Any) -> bytes:
    buf = io.BytesIO()
    _OffloadPickler(buf, put).dump(obj)
    return buf.getvalue()


def _check_timeout(acquire_timeout: Any) -> float:
    if isinstance(acquire_timeout, bool) or not isinstance(acquire_timeout, (int, float)) or acquire_timeout < 0:
        raise ValueError(f"acquire_timeout must be a non-negative number of seconds, got {acquire_timeout!r}")
    return float(acquire_timeout)


def _check_size(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _attach(name: str) -> shared_memory.SharedMemory:
    # Every process of a run shares the parent's resource tracker; attaching registers the
    # name again (a no-op there), and only the parent unregisters it, when it unlinks.
    return shared_memory.SharedMemory(name=name)


class _ArenaBase:
    """What both arenas share: the lock and condition that the worker waits on for space
    (made by :meth:`_bind` with the worker's multiprocessing context), ownership, teardown."""

    _cv: Any
    _acquire_timeout: float

    def _bind(self, ctx: Any) -> None:
        """Called by ``iterate_in_subprocess`` before the worker starts: one arena serves
        one worker, and its condition must come from that worker's context."""
        if getattr(self, "_cv", None) is not None or self._closed:
            raise ValueError(f"This {type(self).__name__} is already used by another iterate_in_subprocess; make a new one.")
        self._cv = ctx.Condition()

    def _wait_for_space(self, fits: Any, what: str) -> None:
        """Worker side: waits until ``fits()`` (checked under the lock) or raises ``BufferError``."""
        with self._cv:
            ok = self._cv.wait_for(lambda: self._shutdown_flag() or fits(), timeout=self._acquire_timeout)
            if self._shutdown_flag():
                raise BufferError(f"{type(self).__name__} was shut down while the worker waited for {what}.")
            if not ok:
                raise BufferError(
                    f"shared-memory arena full: no room for {what} after waiting {self._acquire_timeout:g}s "
                    f"(acquire_timeout); the consumer is releasing units too slowly or has stalled. "
                    f"Increase the {type(self).__name__}'s size or acquire_timeout."
                )

    def _set_shutdown_quietly(self) -> None:
        """Parent side, before joining the worker: wakes it if it waits for space."""
        if self._closed or getattr(self, "_cv", None) is None:
            return
        self._set_shutdown()
        self._notify()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[bool]:
        """The condition's lock for a short update, given up after 1 s: a worker killed
        while holding it (it holds it only for a few reads, never while waiting) must not
        hang the parent. Yields whether the lock was taken (then waiters may be notified)."""
        got = self._cv.acquire(True, 1.0)
        try:
            yield got
        finally:
            if got:
                self._cv.release()

    def _notify(self) -> None:
        with self._locked() as got:
            if got:
                self._cv.notify_all()

    def __getstate__(self) -> dict[str, Any]:
        # The mappings are made again in the worker (by name); the condition pickles only
        # while the worker is being spawned.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_shm")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._attach_all()

    @staticmethod
    def _close_segment(shm: shared_memory.SharedMemory) -> None:
        try:
            shm.close()
        except BufferError:
            # A restored array still maps it: leave the mapping to that array (it is
            # unmapped when the array goes) and close only the descriptor.
            shm._buf = None  # type: ignore[attr-defined]
            shm._mmap = None  # type: ignore[attr-defined]
            shm.close()

    def close(self) -> None:
        """Wakes a worker blocked on space (it raises ``BufferError``) and releases this
        process's mappings. Segments still mapped by live arrays of the pool stay mapped
        until those arrays go. Idempotent; done by ``iterate_in_subprocess`` at shutdown."""
        if self._closed:
            return
        try:
            self._set_shutdown()
            if getattr(self, "_cv", None) is not None:
                self._notify()
        finally:
            self._closed = True
            self._release_mappings()

    def unlink(self) -> None:
        """Removes the segments' names from the system (``/dev/shm``); memory still mapped
        stays valid until unmapped. Idempotent; done by ``iterate_in_subprocess`` at shutdown
        (by the parent only: the worker never unlinks)."""
        for name in self._names():
            try:
                shm = shared_memory.SharedMemory(name=name)
            except FileNotFoundError:
                continue
            try:
                shm.unlink()
            except FileNotFoundError:
                pass
            finally:
                shm.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.close()
        finally:
            self.unlink()


class SharedMemoryRingBuffer(_ArenaBase):
    """A ring of ``capacity`` bytes in one shared-memory segment that carries the large
    binaries of :func:`~spdl_rs.pipeline.iterate_in_subprocess`'s items from the worker to
    the parent (SPDL 0.8's ``spdl.pipeline.SharedMemoryRingBuffer``; see the module notes).

    The parent copies each binary out of the ring as it restores the item and gives the
    item's bytes back at once, so arrays it yields own their memory (no view on the ring).

    Args:
        capacity: bytes of the ring (plus a 64-byte header). At least the largest item's
            binaries (each padded to 64 bytes), better ``(buffer_size + 2)`` items.
        acquire_timeout: seconds the worker waits for free space before it raises
            ``BufferError``; ``0``: raise at once when the item does not fit (as SPDL).

    Raises:
        ValueError: ``capacity`` not a positive int or ``acquire_timeout`` negative.
        BufferError: (in the worker, re-raised by the parent's iterator) a binary or an item
            larger than the ring, or no space within ``acquire_timeout``.
    """

    def __init__(self, capacity: int, *, acquire_timeout: float = _DEFAULT_ACQUIRE_TIMEOUT) -> None:
        self._capacity = _check_size("capacity", capacity)
        self._acquire_timeout = _check_timeout(acquire_timeout)
        self._closed = False
        self._cv = None
        self._shm = shared_memory.SharedMemory(create=True, size=_HEADER + capacity)
        self._name = self._shm.name
        self._head = 0  # worker side: absolute write cursor (only the worker reads it)

    @property
    def capacity(self) -> int:
        """The ring's size in bytes."""
        return self._capacity

    def _attach_all(self) -> None:
        self._shm = _attach(self._name)

    def _names(self) -> list[str]:
        return [self._name]

    def _tail(self) -> int:
        return _RING_CTRL.unpack_from(self._shm.buf, 0)[0]

    def _shutdown_flag(self) -> bool:
        return bool(self._shm.buf[8])

    def _set_shutdown(self) -> None:
        self._shm.buf[8] = 1

    def _release_mappings(self) -> None:
        self._close_segment(self._shm)

    # worker side
    def _offload(self, obj: Any) -> bytes:
        start = self._head
        cap = self._capacity
        data = self._shm.buf

        def put(view: memoryview) -> int:
            n = _aligned(view.nbytes)
            if n > cap:
                raise BufferError(f"binary of {view.nbytes} bytes exceeds ring capacity {cap}; increase SharedMemoryRingBuffer capacity")
            pos = self._head % cap
            skip = cap - pos if pos + n > cap else 0  # a binary never wraps: start over at 0
            end = self._head + skip + n
            if end - start > cap:
                raise BufferError(f"item's binaries ({end - start} bytes) exceed ring capacity {cap}; increase SharedMemoryRingBuffer capacity")
            self._wait_for_space(lambda: end - self._tail() <= cap, f"{view.nbytes} bytes")
            off = 0 if skip else pos
            data[_HEADER + off : _HEADER + off + view.nbytes] = view
            self._head = end
            return off

        try:
            body = _pickle_with(obj, put)
        except BaseException:
            self._head = start
            raise
        return pickle.dumps((self._head - start, body), protocol=pickle.HIGHEST_PROTOCOL)

    def _drop(self, envelope: bytes) -> None:
        """Worker side: the last unit was never sent; take its space back."""
        span, _ = pickle.loads(envelope)
        self._head -= span

    # parent side
    def _give_back(self, span: int) -> None:
        if span == 0 or self._closed:
            return
        with self._locked() as got:
            tail = self._tail() + span
            _RING_CTRL.pack_into(self._shm.buf, 0, tail, self._shm.buf[8])
            if got:
                self._cv.notify_all()

    def _restore(self, envelope: bytes) -> Any:
        span, body = pickle.loads(envelope)
        data = self._shm.buf

        def get(kind: str, off: int, nbytes: int, meta: Any) -> Any:
            view = data[_HEADER + off : _HEADER + off + nbytes]
            try:
                if kind == "bytes":
                    return bytes(view)
                if kind == "bytearray":
                    return bytearray(view)
                import numpy as np

                dtype, shape = meta
                return np.frombuffer(bytearray(view), dtype=dtype).reshape(shape)
            finally:
                view.release()

        try:
            return _RestoreUnpickler(io.BytesIO(body), get).load()
        finally:
            self._give_back(span)

    def _discard(self, envelope: bytes) -> None:
        self._give_back(pickle.loads(envelope)[0])


class SharedMemorySegmentPool(_ArenaBase):
    """``count`` shared-memory segments of ``segment_size`` bytes, one per item in flight,
    that carry the large binaries of :func:`~spdl_rs.pipeline.iterate_in_subprocess`'s
    items from the worker to the parent (SPDL 0.8's ``spdl.pipeline.SharedMemorySegmentPool``;
    see the module notes).

    NumPy arrays (and ``CPUBuffer`` items, which arrive as NumPy arrays) are yielded as views
    on the segment, without a copy; the segment is reused once every array of its item, and
    every view of those arrays, is garbage-collected. ``bytes`` are copied out (they own
    their memory in Python).

    Args:
        segment_size: bytes of each segment: at least the largest item's binaries, each
            padded to 64 bytes.
        count: segments; items in flight (``buffer_size`` plus those the consumer holds)
            beyond it make the worker wait.
        acquire_timeout: seconds the worker waits for a free segment before it raises
            ``BufferError``; ``0``: raise at once when none is free (as SPDL).

    Raises:
        ValueError: ``segment_size`` or ``count`` not a positive int, ``acquire_timeout``
            negative.
        BufferError: (in the worker, re-raised by the parent's iterator) an item larger than
            a segment, or no free segment within ``acquire_timeout``.
    """

    def __init__(self, segment_size: int, count: int, *, acquire_timeout: float = _DEFAULT_ACQUIRE_TIMEOUT) -> None:
        self._segment_size = _check_size("segment_size", segment_size)
        self._count = _check_size("count", count)
        self._acquire_timeout = _check_timeout(acquire_timeout)
        self._closed = False
        self._cv = None
        # control: one in-use flag per segment, then the shutdown flag
        self._shm_ctrl = shared_memory.SharedMemory(create=True, size=count + 1)
        self._shm_segs: list[shared_memory.SharedMemory] = []
        try:
            for _ in range(count):
                self._shm_segs.append(shared_memory.SharedMemory(create=True, size=segment_size))
        except BaseException:
            self._ctrl_name, self._seg_names = self._shm_ctrl.name, [s.name for s in self._shm_segs]
            self._closed = True
            self._release_mappings()
            self.unlink()
            raise
        self._ctrl_name = self._shm_ctrl.name
        self._seg_names = [s.name for s in self._shm_segs]

    @property
    def segment_size(self) -> int:
        """Bytes of each segment."""
        return self._segment_size

    @property
    def count(self) -> int:
        """Number of segments."""
        return self._count

    def _attach_all(self) -> None:
        self._shm_ctrl = _attach(self._ctrl_name)
        self._shm_segs = [_attach(n) for n in self._seg_names]

    def _names(self) -> list[str]:
        return [self._ctrl_name, *self._seg_names]

    def _shutdown_flag(self) -> bool:
        return bool(self._shm_ctrl.buf[self._count])

    def _set_shutdown(self) -> None:
        self._shm_ctrl.buf[self._count] = 1

    def _release_mappings(self) -> None:
        for shm in [self._shm_ctrl, *self._shm_segs]:
            self._close_segment(shm)

    # worker side
    def _acquire(self) -> int:
        flags = self._shm_ctrl.buf
        found: list[int] = []

        def free() -> bool:
            for i in range(self._count):
                if flags[i] == 0:
                    found.append(i)
                    return True
            return False

        self._wait_for_space(free, "a free segment")
        seg = found[-1]
        flags[seg] = 1  # under no lock: only the worker sets flags, only the parent clears them
        return seg

    def _free(self, seg: int) -> None:
        if self._closed:
            return
        with self._locked() as got:
            self._shm_ctrl.buf[seg] = 0
            if got:
                self._cv.notify_all()

    def _offload(self, obj: Any) -> bytes:
        seg = self._acquire()
        data = self._shm_segs[seg].buf
        pos = 0

        def put(view: memoryview) -> int:
            nonlocal pos
            off = pos
            if off + view.nbytes > self._segment_size:
                raise BufferError(
                    f"item's binaries need more than segment_size={self._segment_size} bytes "
                    f"(a binary of {view.nbytes} bytes at offset {off}); increase SharedMemorySegmentPool segment_size"
                )
            data[off : off + view.nbytes] = view
            pos = _aligned(off + view.nbytes)
            return off

        try:
            body = _pickle_with(obj, put)
        except BaseException:
            self._free(seg)
            raise
        return pickle.dumps((seg, body), protocol=pickle.HIGHEST_PROTOCOL)

    def _drop(self, envelope: bytes) -> None:
        """Worker side: the unit was never sent; free its segment."""
        self._free(pickle.loads(envelope)[0])

    # parent side
    def _restore(self, envelope: bytes) -> Any:
        seg, body = pickle.loads(envelope)
        data = self._shm_segs[seg].buf
        anchors: list[Any] = []

        def get(kind: str, off: int, nbytes: int, meta: Any) -> Any:
            if kind == "bytes":
                return bytes(data[off : off + nbytes])
            if kind == "bytearray":
                return bytearray(data[off : off + nbytes])
            import numpy as np

            dtype, shape = meta
            # Every view of the returned array chains to ``base``: the segment is free
            # once ``base`` is collected.
            base = np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=off)
            anchors.append(base)
            return base.view(dtype).reshape(shape)

        try:
            return _RestoreUnpickler(io.BytesIO(body), get).load()
        finally:
            if anchors:
                lease = _Lease(self, seg, len(anchors))
                for a in anchors:
                    weakref.finalize(a, lease.release_one).atexit = False
            else:
                self._free(seg)

    def _discard(self, envelope: bytes) -> None:
        self._free(pickle.loads(envelope)[0])


class _Lease:
    """Frees a pool segment once all arrays restored from it are collected."""

    def __init__(self, pool: SharedMemorySegmentPool, seg: int, n: int) -> None:
        self._pool = pool
        self._seg = seg
        self._left = n
        self._lock = threading.Lock()  # finalizers may run on any thread

    def release_one(self) -> None:
        with self._lock:
            self._left -= 1
            done = self._left == 0
        if done:
            self._pool._free(self._seg)
