"""Iterating in a worker process: ``iterate_in_subprocess`` and
``run_pipeline_in_subprocess`` (SPDL 0.8's "multi-threading in a subprocess").

One worker process per returned iterable, started at once and reused for every ``iter()``
(one epoch each). Messages carry the epoch they belong to, so an epoch the consumer left early
is told to stop and its late items are dropped. The parent waits for items in slices of
0.1 s and checks that the worker is alive in between: a worker that dies is reported as
:class:`WorkerDied` (a ``RuntimeError``) within about a second, never a hang.

Items cross the boundary by pickle, except arrays: a :class:`spdl_rs.io.CPUBuffer` or a NumPy
array of at least 64 KiB (also inside tuples, lists and dicts) is copied once by the worker
into a new shared-memory file under ``/dev/shm`` and arrives as a NumPy array mapped onto that
memory, with no copy in the parent (the file is unlinked on arrival; the memory is freed with
the array). A ``CPUBuffer``'s ``keys``/``labels`` are not carried. Without ``/dev/shm`` the
array is pickled. Each array maps a new file; ``arena=`` (a :class:`SharedMemoryRingBuffer` or
:class:`SharedMemorySegmentPool`, SPDL's arenas, see :mod:`._arena`) reuses preallocated
segments instead and also carries large ``bytes``. The decoder does not write into shared
memory directly (the worker's one copy remains).
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import mmap
import multiprocessing as mp
import multiprocessing.util
import os
import pickle
import queue
import random
import secrets
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from ._arena import SharedMemoryRingBuffer, SharedMemorySegmentPool
from ._stage import MaxFailuresArg

__all__ = ["WorkerDied", "iterate_in_subprocess", "run_pipeline_in_subprocess"]

T = TypeVar("T")

_POLL = 0.1  # seconds between liveness checks while waiting for the worker


class WorkerDied(RuntimeError):
    """The worker process of :func:`iterate_in_subprocess` exited while the parent was
    waiting for it; the message gives its exit code (negative: killed by that signal)."""


################################################################################
# what crosses the process boundary
################################################################################
_SHM_DIR = "/dev/shm"
_SHM_MIN_BYTES = 1 << 16
_SHM_COUNTER = itertools.count()


class _ShmArray:
    """An array written to a shared-memory file: what crosses the pipe instead of the data."""

    __slots__ = ("dtype", "path", "shape")

    def __init__(self, path: str, shape: tuple[int, ...], dtype: str) -> None:
        self.path = path
        self.shape = shape
        self.dtype = dtype

    def __getstate__(self) -> tuple:
        return (self.path, self.shape, self.dtype)

    def __setstate__(self, state: tuple) -> None:
        self.path, self.shape, self.dtype = state


def _to_shm(arr: Any) -> Any:
    """Worker side: ``arr`` copied into a new shared-memory file (or ``arr`` itself where
    there is no ``/dev/shm``)."""
    import numpy as np

    if arr.nbytes == 0 or not os.path.isdir(_SHM_DIR):
        return arr
    arr = np.ascontiguousarray(arr)
    name = f"spdl_rs_{os.getpid()}_{next(_SHM_COUNTER)}_{secrets.token_hex(4)}"
    path = os.path.join(_SHM_DIR, name)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, arr.nbytes)
        with mmap.mmap(fd, arr.nbytes) as mm:
            dst = np.frombuffer(mm, dtype=arr.dtype, count=arr.size).reshape(arr.shape)
            dst[...] = arr
            del dst  # no view may outlive the mapping
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    return _ShmArray(path, arr.shape, arr.dtype.str)


def _from_shm(ref: _ShmArray) -> Any:
    """Parent side: a NumPy array on the shared memory itself; the file is unlinked at once
    (the mapping lives as long as the array)."""
    import numpy as np

    fd = os.open(ref.path, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, 0)
    finally:
        os.close(fd)
        os.unlink(ref.path)
    dtype = np.dtype(ref.dtype)
    count = 1
    for d in ref.shape:
        count *= d
    return np.frombuffer(mm, dtype=dtype, count=count).reshape(ref.shape)


def _map_leaves(obj: Any, leaf: Callable[[Any], Any]) -> Any:
    """``obj`` with ``leaf`` applied to what is not a tuple, list or dict, inside those too
    (the containers are rebuilt; subclasses of them are leaves)."""
    if type(obj) is tuple:
        return tuple(_map_leaves(v, leaf) for v in obj)
    if type(obj) is list:
        return [_map_leaves(v, leaf) for v in obj]
    if type(obj) is dict:
        return {k: _map_leaves(v, leaf) for k, v in obj.items()}
    return leaf(obj)


def _encode_leaf(obj: Any) -> Any:
    from .. import _native

    if isinstance(obj, _native.CPUBuffer):
        import numpy as np

        return _to_shm(np.asarray(obj))
    if type(obj).__name__ == "ndarray" and type(obj).__module__ == "numpy" and obj.nbytes >= _SHM_MIN_BYTES:
        return _to_shm(obj)
    return obj


def _decode_leaf(obj: Any) -> Any:
    return _from_shm(obj) if isinstance(obj, _ShmArray) else obj


def _encode(obj: Any) -> Any:
    """Worker side: arrays (a ``CPUBuffer``, a NumPy array of 64 KiB or more) to shared
    memory, inside tuples, lists and dicts too."""
    return _map_leaves(obj, _encode_leaf)


def _decode(obj: Any) -> Any:
    """Parent side: the inverse of :func:`_encode`."""
    return _map_leaves(obj, _decode_leaf)


def _release(obj: Any) -> None:
    """Parent side: unlinks the shared memory of a message that is dropped."""
    try:
        _decode(obj)
    except OSError:
        pass


def _portable_error(e: BaseException) -> BaseException:
    """``e`` if it pickles, else a ``RuntimeError`` with its text (and the traceback)."""
    text = "".join(traceback.format_exception(e))
    try:
        pickle.loads(pickle.dumps(e))
        e.add_note(f"(raised in the worker process)\n{text}")
        return e
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}\n(raised in the worker process)\n{text}")


################################################################################
# the worker
################################################################################
def _worker(
    fn: Callable[[], Iterable[Any]],
    initializers: Sequence[Callable[[], None]],
    cmd_q: Any,
    data_q: Any,
    arena: Any = None,
) -> None:
    encode, drop = (arena._offload, arena._drop) if arena is not None else (_encode, _release)
    try:
        for init in initializers:
            init()
        iterable = fn()
    except BaseException as e:
        data_q.put(("init_error", -1, _portable_error(e)))
        return
    data_q.put(("ready", -1, None))
    while True:
        cmd, epoch = _PENDING.pop(0) if _PENDING else cmd_q.get()
        if cmd == "stop":
            return
        if cmd != "iterate":  # an abort for an epoch that already ended
            continue
        try:
            if _run_epoch(iterable, epoch, cmd_q, data_q, encode, drop):
                data_q.put(("end", epoch, None))
        except BaseException as e:
            data_q.put(("error", epoch, _portable_error(e)))
        # Aborts of this epoch are done with; a stop or the next iterate stays pending.
        _PENDING[:] = [(c, e) for c, e in _PENDING if c != "abort"]


def _run_epoch(
    iterable: Iterable[Any],
    epoch: int,
    cmd_q: Any,
    data_q: Any,
    encode: Callable[[Any], Any],
    drop: Callable[[Any], None],
) -> bool:
    """Sends one epoch's items; ``False`` if the parent aborted it or asked to stop."""
    for item in iterable:
        payload = encode(item)
        while True:
            try:
                data_q.put(("item", epoch, payload), timeout=_POLL)
                break
            except queue.Full:
                if _interrupted(cmd_q, epoch):
                    drop(payload)  # never sent: free its shared memory here
                    return False
        if _interrupted(cmd_q, epoch):
            return False
    return True


_PENDING: list[tuple[str, int]] = []  # commands read while an epoch ran (worker side)


def _interrupted(cmd_q: Any, epoch: int) -> bool:
    """Whether the parent aborted ``epoch`` or asked to stop (worker side)."""
    while True:
        try:
            _PENDING.append(cmd_q.get_nowait())
        except queue.Empty:
            break
    return any(c == "stop" or (c == "abort" and e == epoch) for c, e in _PENDING)


################################################################################
# the parent
################################################################################
def _shutdown(process: Any, cmd_q: Any, data_q: Any, arena: Any = None) -> None:
    try:
        _stop_worker(process, cmd_q, data_q, arena)
    finally:
        if arena is not None:
            try:
                arena.close()
            finally:
                arena.unlink()


def _stop_worker(process: Any, cmd_q: Any, data_q: Any, arena: Any) -> None:
    if arena is not None:
        arena._set_shutdown_quietly()  # a worker waiting for arena space gives up now
    try:
        cmd_q.put(("stop", -1))
    except Exception:
        pass
    process.join(3)
    if process.is_alive():
        process.terminate()
        process.join(3)
    if process.is_alive():
        process.kill()
        process.join()
    while True:  # what was sent and never read: free its shared memory
        try:
            kind, _, payload = data_q.get(timeout=0.05)
        except Exception:  # empty, closed, or a message cut short by a killed worker
            break
        if kind == "item":
            _release(payload) if arena is None else arena._discard(payload)
    for q in (cmd_q, data_q):
        q.cancel_join_thread()
        q.close()


class _SubprocessIterable(Iterable[T]):
    """What :func:`iterate_in_subprocess` returns; each ``iter()`` runs one epoch in the
    same worker process."""

    def __init__(self, process: Any, cmd_q: Any, data_q: Any, timeout: float | None, arena: Any = None) -> None:
        self._process = process
        self._cmd_q = cmd_q
        self._data_q = data_q
        self._timeout = timeout
        self._epoch = 0
        self._ready = False
        self._active = False
        self._closed = False
        self._arena = arena
        self._finalizer = weakref.finalize(self, _shutdown, process, cmd_q, data_q, arena)
        # In a multiprocessing child, atexit (and so weakref.finalize's exit call) never runs,
        # and the child's exit joins its non-daemon processes, this worker among them: stop it
        # from multiprocessing's own exit finalizers, which run before that join.
        multiprocessing.util.Finalize(self, self._finalizer, exitpriority=10)

    @property
    def pid(self) -> int | None:
        """The worker's process id."""
        return self._process.pid

    def _get(self) -> tuple[str, int, Any]:
        waited = 0.0
        while True:
            try:
                return self._data_q.get(timeout=_POLL)
            except queue.Empty:
                pass
            waited += _POLL
            if not self._process.is_alive():
                try:  # what it sent just before it ended
                    return self._data_q.get(timeout=_POLL)
                except queue.Empty:
                    pass
                code = self._process.exitcode
                self.shutdown()
                raise WorkerDied(f"The worker process (pid {self._process.pid}) exited unexpectedly, exit code {code}.")
            if self._timeout is not None and waited >= self._timeout:
                self.shutdown()
                raise TimeoutError(f"The worker process gave nothing for {self._timeout} sec; it was terminated.")

    def __iter__(self) -> Iterator[T]:
        if self._closed:
            raise RuntimeError("The worker process was shut down.")
        if self._active:
            raise RuntimeError("Another iterator of this subprocess iterable is still running.")
        if not self._ready:
            kind, _, payload = self._get()
            if kind == "init_error":
                self.shutdown()
                raise RuntimeError("The worker process failed to initialize.") from payload
            self._ready = True
        return self._run_epoch()

    def _run_epoch(self) -> Iterator[T]:
        self._epoch += 1
        epoch = self._epoch
        self._active = True
        self._cmd_q.put(("iterate", epoch))
        finished = False
        try:
            while True:
                kind, e, payload = self._get()
                if e != epoch:  # late items of an epoch left early
                    if kind == "item":
                        self._discard(payload)
                    continue
                if kind == "item":
                    yield self._arena._restore(payload) if self._arena is not None else _decode(payload)
                elif kind == "end":
                    finished = True
                    return
                else:  # "error"
                    finished = True
                    if self._arena is not None and not isinstance(payload, RuntimeError):
                        # As SPDL's arena transport: the worker's failure is a RuntimeError
                        # (its own exception is the cause).
                        raise RuntimeError(f"The worker subprocess quit. {type(payload).__name__}: {payload}") from payload
                    raise payload
        finally:
            self._active = False
            if not finished and not self._closed and self._process.is_alive():
                self._cmd_q.put(("abort", epoch))

    def _discard(self, payload: Any) -> None:
        if self._arena is not None:
            self._arena._discard(payload)
        else:
            _release(payload)

    def shutdown(self) -> None:
        """Stops the worker (``terminate`` after 3 s) and joins it. Idempotent; also done
        when the iterable is garbage-collected and at interpreter exit."""
        self._closed = True
        self._finalizer()


def iterate_in_subprocess(
    fn: Callable[[], Iterable[T]],
    *,
    buffer_size: int = 3,
    initializer: Callable[[], None] | Sequence[Callable[[], None]] | None = None,
    mp_context: str | None = None,
    timeout: float | None = None,
    daemon: bool = False,
    arena: SharedMemoryRingBuffer | SharedMemorySegmentPool | None = None,
) -> Iterable[T]:
    """Runs ``fn()`` in a new process and iterates what it returns there (SPDL's
    ``spdl.pipeline.iterate_in_subprocess``).

    The process starts now and is reused: each ``iter()`` of the returned iterable runs
    ``iter(iterable)`` in the worker again (a generator returned by ``fn`` is therefore
    exhausted after the first epoch, as SPDL). ``fn``, ``initializer`` and the items must
    pickle (``spawn``/``forkserver``); :class:`spdl_rs.io.CPUBuffer` items arrive as NumPy
    arrays (see the module notes).

    - ``buffer_size``: items the worker may have sent ahead (at least 1).
    - ``initializer``: a function or functions run in the worker before ``fn``.
    - ``mp_context``: ``"spawn"``, ``"fork"``, ``"forkserver"`` (``None``: Python's default).
    - ``timeout``: seconds without an item after which the worker is terminated and
      ``TimeoutError`` raised (``None``: no limit).
    - ``daemon``: the worker's ``daemon`` flag.
    - ``arena``: a :class:`~spdl_rs.pipeline.SharedMemoryRingBuffer` or
      :class:`~spdl_rs.pipeline.SharedMemorySegmentPool` that carries the items' large binaries
      (``bytes``, NumPy arrays, ``CPUBuffer``) instead of the per-array files above (SPDL's
      ``arena``); the returned iterable owns it and closes and unlinks it at shutdown. One
      arena serves one call. ``None``: the per-array files.

    Raises: the worker's exception (same type when it pickles, with the worker's traceback
    as a note) when ``fn`` or the iteration fails (with ``arena``: a ``RuntimeError`` whose
    cause is that exception, as SPDL); ``RuntimeError`` from ``iter()`` if the
    initializer or ``fn()`` failed; :class:`WorkerDied` if the worker exits unexpectedly;
    ``ValueError``/``TypeError`` for bad arguments (``TypeError`` for an ``arena`` of another
    type, ``ValueError`` for one already used); when the arena has no room for an item within
    its ``acquire_timeout``, the worker's ``BufferError`` (as the cause of a ``RuntimeError``).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
        raise ValueError(f"buffer_size must be a positive int, got {buffer_size!r}")
    if initializer is None:
        inits: list[Callable[[], None]] = []
    elif callable(initializer):
        inits = [initializer]
    else:
        inits = list(initializer)
        for i in inits:
            if not callable(i):
                raise TypeError(f"initializer must be callable, got {type(i).__name__}")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError(f"timeout must be None or a positive number, got {timeout!r}")
    if not isinstance(daemon, bool):
        raise TypeError(f"daemon must be a bool, got {type(daemon).__name__}")
    if arena is not None and not isinstance(arena, (SharedMemoryRingBuffer, SharedMemorySegmentPool)):
        raise TypeError(f"arena must be a SharedMemoryRingBuffer or SharedMemorySegmentPool, got {type(arena).__name__}")
    ctx = mp.get_context(mp_context)
    if arena is not None:
        arena._bind(ctx)
    cmd_q = ctx.Queue()
    data_q = ctx.Queue(maxsize=buffer_size)
    process = ctx.Process(target=_worker, args=(fn, inits, cmd_q, data_q, arena), daemon=daemon, name="spdl_rs_worker")
    try:
        process.start()
    except BaseException:
        if arena is not None:
            arena.close()
            arena.unlink()
        raise
    return _SubprocessIterable(process, cmd_q, data_q, timeout, arena)


################################################################################
# pipelines in a subprocess
################################################################################
class _PipelineIterable(Iterable[Any]):
    """Lives in the worker: builds the pipeline for each epoch (a continuous source: once,
    then one epoch per ``iter()``)."""

    def __init__(self, cfg: Any, build_args: dict[str, Any]) -> None:
        self._cfg = cfg
        self._args = build_args
        self._pipeline: Any = None
        if _is_continuous(cfg):
            self._pipeline = self._build()

    def _build(self) -> Any:
        from ._build import build_pipeline

        return build_pipeline(self._cfg, **self._args)

    def __iter__(self) -> Iterator[Any]:
        if self._pipeline is not None:
            yield from self._pipeline
            return
        pipeline = self._build()
        with pipeline.auto_stop():
            yield from pipeline


def _is_continuous(cfg: Any) -> bool:
    from .defs import SourceConfig

    return isinstance(cfg.src, SourceConfig) and cfg.src.continuous


def _set_rng_state(py_state: Any, np_state: Any) -> None:
    random.setstate(py_state)
    if np_state is not None:
        import numpy as np

        np.random.set_state(np_state)


def run_pipeline_in_subprocess(
    cfg: Any,
    /,
    *,
    num_threads: int,
    max_failures: MaxFailuresArg = -1,
    report_stats_interval: float = -1,
    queue_class: Any = None,
    task_hook_factory: Any = None,
    stage_id: int = 0,
    background_tasks: Any = None,
    use_thread_output_queue: bool = False,
    **kwargs: Any,
) -> Iterable[Any]:
    """Builds the :class:`~spdl_rs.pipeline.defs.PipelineConfig` ``cfg`` in a worker process
    and iterates it there (SPDL's ``run_pipeline_in_subprocess``): one pipeline per epoch
    (``for`` pass) in the same process; a continuous source builds it once.

    The keywords before ``**kwargs`` are ``build_pipeline``'s; ``kwargs`` are
    :func:`iterate_in_subprocess`'s (``buffer_size``, ``initializer``, ``mp_context``,
    ``timeout``, ``daemon``, ``arena``). As SPDL, the worker starts from the parent's global RNG states
    (:mod:`random`, and NumPy's legacy one if NumPy is imported). A ``PipelineBuilder`` is
    taken too (its ``get_config()``), with a ``DeprecationWarning`` as SPDL.

    ``cfg`` and everything in it must pickle: module-level ops and sources (a
    :class:`spdl_rs.sources.SampleList` does), native ops of :mod:`spdl_rs.ops`, SPDL's
    priority pools. A stage's :class:`concurrent.futures.ThreadPoolExecutor` or
    :class:`~concurrent.futures.ProcessPoolExecutor` that has not run anything yet is
    replaced by an equal pool made in the worker (same ``max_workers``, ``initializer``,
    ``initargs``, thread name prefix; a process pool also its ``mp_context`` and
    ``max_tasks_per_child``), as SPDL supports them; its processes are children of the
    worker, unlike SPDL, which starts them in the main process.

    Raises ``TypeError`` if ``cfg`` is neither a ``PipelineConfig`` nor a builder, or a
    keyword is unknown; ``ValueError`` for a stage's executor that has already started
    workers (as SPDL), or a process pool with ``daemon=True`` (a daemon process cannot have
    children); ``pickle.PicklingError``/``TypeError`` if ``cfg`` does not pickle; and what
    :func:`iterate_in_subprocess` raises.
    """
    # `build_pipeline`'s keywords: the parameters (the only locals yet) but two.
    build_args = dict(locals())
    del build_args["cfg"], build_args["kwargs"]
    import warnings

    from ._builder import PipelineBuilder
    from .defs import PipelineConfig

    if isinstance(cfg, PipelineBuilder):
        warnings.warn(
            "Passing a `PipelineBuilder` object directly to `run_pipeline_in_subprocess` is deprecated. "
            "Please call `get_config()` method and pass the config object.",
            DeprecationWarning,
            stacklevel=2,
        )
        cfg = cfg.get_config()
    if not isinstance(cfg, PipelineConfig):
        raise TypeError(f"run_pipeline_in_subprocess takes a PipelineConfig, got {type(cfg).__name__}")
    unknown = set(kwargs) - {"buffer_size", "initializer", "mp_context", "timeout", "daemon", "arena"}
    if unknown:
        raise TypeError(f"run_pipeline_in_subprocess got unexpected keyword arguments: {sorted(unknown)}")
    cfg = _portable_executors(cfg, daemon=bool(kwargs.get("daemon", False)))
    np_mod = sys.modules.get("numpy")
    np_state = np_mod.random.get_state() if np_mod is not None else None
    init = kwargs.pop("initializer", None)
    inits: list[Callable[[], None]] = [functools.partial(_set_rng_state, random.getstate(), np_state)]
    if init is not None:
        inits.extend([init] if callable(init) else list(init))
    return iterate_in_subprocess(functools.partial(_PipelineIterable, cfg, build_args), initializer=inits, **kwargs)


################################################################################
# standard executors in a config
################################################################################
class _RebuiltExecutor(concurrent.futures.Executor):
    """Stands for a standard thread or process pool of a stage: pickles as the pool's
    arguments and makes the pool on the first ``submit`` in the process it is used in."""

    def __init__(self, cls: type, kwargs: dict[str, Any]) -> None:
        self._cls = cls
        self._kwargs = kwargs
        self._pool: concurrent.futures.Executor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        with self._lock:
            if self._pool is None:
                self._pool = self._cls(**self._kwargs)
                if isinstance(self._pool, concurrent.futures.ProcessPoolExecutor):
                    # The worker's exit joins its children (this pool's processes) before the
                    # pool's own exit hook would stop them: reap them from multiprocessing's
                    # exit finalizers, after the pipeline's stop (priority 100).
                    multiprocessing.util.Finalize(self, _reap_pool, args=(self._pool,), exitpriority=5)
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def __reduce__(self) -> tuple:
        return (_RebuiltExecutor, (self._cls, self._kwargs))

    def __repr__(self) -> str:
        return f"{self._cls.__name__}(max_workers={self._kwargs['max_workers']})"


def _reap_pool(pool: concurrent.futures.Executor) -> None:
    from ._pipeline import _reap_process_pool

    # Within the 3 s the parent gives this worker to exit before it terminates it.
    _reap_process_pool(pool, grace=1.0)


def _rebuilt(ex: Any, daemon: bool) -> Any:
    cls = type(ex)
    if cls is concurrent.futures.ThreadPoolExecutor:
        if ex._threads:
            raise ValueError("A ThreadPoolExecutor of the config has already started threads; pass a fresh one.")
        names = ("max_workers", "thread_name_prefix", "initializer", "initargs")
    elif cls is concurrent.futures.ProcessPoolExecutor:
        if ex._processes:
            raise ValueError("A ProcessPoolExecutor of the config has already started processes; pass a fresh one.")
        if daemon:
            raise ValueError("A ProcessPoolExecutor stage cannot run in a daemon worker (daemon=True): it has no children.")
        names = ("max_workers", "mp_context", "initializer", "initargs", "max_tasks_per_child")
    else:
        return ex
    # The pools keep each argument as ``_<name>``; one left at None is left to the default.
    kwargs = {n: v for n in names if (v := getattr(ex, f"_{n}", None)) is not None}
    return _RebuiltExecutor(cls, kwargs)


def _portable_executors(cfg: Any, *, daemon: bool) -> Any:
    """``cfg`` with each stage's standard thread or process pool replaced by a
    :class:`_RebuiltExecutor` (in merged sub-pipelines and path variants too)."""
    import dataclasses

    from .defs import MergeConfig, PathVariantsConfig, PipeConfig, PipelineConfig

    def stage(p: Any) -> Any:
        if isinstance(p, PipeConfig) and p._args.executor is not None:
            ex = _rebuilt(p._args.executor, daemon)
            if ex is not p._args.executor:
                return dataclasses.replace(p, _args=dataclasses.replace(p._args, executor=ex))
        if isinstance(p, PathVariantsConfig):
            return dataclasses.replace(p, paths=tuple(tuple(stage(q) for q in path) for path in p.paths))
        return p

    def pipeline(c: PipelineConfig) -> PipelineConfig:
        src = c.src
        if isinstance(src, MergeConfig):
            src = dataclasses.replace(src, pipeline_configs=tuple(pipeline(s) for s in src.pipeline_configs))
        return dataclasses.replace(c, src=src, pipes=tuple(stage(p) for p in c.pipes))

    return pipeline(cfg)
