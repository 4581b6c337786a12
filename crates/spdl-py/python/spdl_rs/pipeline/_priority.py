"""Worker pools shared by several stages, serving the stage nearest the sink first (SPDL 0.8's
``PriorityThreadPoolExecutor``, ``PriorityProcessPoolExecutor``,
``PriorityInterpreterPoolExecutor`` and ``PriorityExecutorEntrypoint``).

A pool hands out one :class:`PriorityExecutorEntrypoint` per stage (``get_executor()``); the
tasks of all its entrypoints wait in one priority queue, and a free worker takes the task of
the highest priority (equal priorities: the oldest). Entrypoints made later get a higher
priority, so a pipeline whose stages are added upstream first drains downstream work first,
which keeps the items in flight few and the latency low.

How the queue sits in front of the workers differs from SPDL (which swaps the private queue
inside the standard executors): the thread pool here is its own small pool; the process and
interpreter pools keep at most ``max_workers`` tasks inside a standard executor and hold the
rest in the priority queue, so only public ``concurrent.futures`` APIs are used.
"""

from __future__ import annotations

import heapq
import inspect
import itertools
import os
import sys
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.thread import BrokenThreadPool
from typing import Any

__all__ = [
    "PriorityExecutorEntrypoint",
    "PriorityInterpreterPoolExecutor",
    "PriorityProcessPoolExecutor",
    "PriorityThreadPoolExecutor",
]

# Pools of this process by (this pid, the pool's id), so that unpickled entrypoints of one pool
# share one pool again; the pid keeps a forked child from reusing its parent's pool objects.
_POOLS: weakref.WeakValueDictionary[tuple[int, tuple[int, int]], Any] = weakref.WeakValueDictionary()
_NEXT_ID = itertools.count()
# Thread pools, reset in a forked child (their threads are not there).
_THREAD_POOLS: weakref.WeakSet[Any] = weakref.WeakSet()


class _Queue:
    """Tasks ordered by ``(priority, arrival)``; a lower key is served first."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Any]] = []
        self._seq = itertools.count()

    def push(self, priority: int, task: Any) -> None:
        heapq.heappush(self._heap, (priority, next(self._seq), task))

    def pop(self) -> Any:
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)


class _PriorityPool:
    """What the three pools share: entrypoints, shutdown, the context manager and pickling.

    A pool pickles as its keywords and its id (with the pid of the process that made it);
    unpickling in the same process gives back the live pool, elsewhere a new pool made from
    the same keywords (shared by every entrypoint of the original unpickled there).
    """

    _kwargs: dict[str, Any]
    _id: tuple[int, int]
    _last_auto: int

    def _register(self) -> None:
        self._id = (os.getpid(), next(_NEXT_ID))
        self._last_auto = 0
        _POOLS[(os.getpid(), self._id)] = self

    def get_executor(self, *, priority: int | None = None) -> PriorityExecutorEntrypoint:
        """A per-stage executor of this pool, to pass as ``pipe(executor=...)``.

        ``priority``: higher is served first; ``None`` (default): higher than every
        entrypoint made before without one (the first gets 1, the next 2, ...), so create the
        upstream stage's executor first. Raises ``TypeError`` for a non-int ``priority``.
        """
        if priority is None:
            self._last_auto += 1
            priority = self._last_auto
        elif isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority must be an int or None, got {type(priority).__name__}")
        return PriorityExecutorEntrypoint(self, priority)

    def _submit(self, priority: int, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Future:
        raise NotImplementedError

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stops the pool (``concurrent.futures.Executor.shutdown``): no new task is accepted
        (``RuntimeError``); the queued tasks still run unless ``cancel_futures``; ``wait``
        waits for the workers to finish."""
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True)

    def __reduce__(self) -> tuple:
        return (_restore_pool, (type(self), self._id, self._kwargs, self._last_auto))


def _restore_pool(cls: type, pool_id: tuple[int, int], kwargs: dict[str, Any], last_auto: int) -> Any:
    key = (os.getpid(), pool_id)
    pool = _POOLS.get(key)
    if pool is None:
        pool = cls(**kwargs)
        del _POOLS[(os.getpid(), pool._id)]
        pool._id = pool_id
        pool._last_auto = last_auto
        _POOLS[key] = pool
    return pool


class PriorityThreadPoolExecutor(_PriorityPool):
    """A thread pool whose queue is ordered by the priority of the submitting stage (SPDL's
    ``PriorityThreadPoolExecutor``; arguments as :class:`concurrent.futures.ThreadPoolExecutor`).

    Up to ``max_workers`` threads (``None``: ``min(32, os.cpu_count() + 4)``, as Python's
    pool), started as tasks arrive and named ``{thread_name_prefix}_{n}``; each runs
    ``initializer(*initargs)`` first, and if that raises, the pool is broken: the waiting and
    later tasks fail with :class:`concurrent.futures.thread.BrokenThreadPool`.
    Use :meth:`get_executor` for each stage::

        pool = PriorityThreadPoolExecutor(max_workers=4)
        pipeline = (
            PipelineBuilder()
            .add_source(range(100))
            .pipe(load, executor=pool.get_executor(), concurrency=4)
            .pipe(decode, executor=pool.get_executor(), concurrency=4)  # served first
            .add_sink(3)
            .build(num_threads=1)
        )

    Raises ``ValueError`` if ``max_workers`` is not positive, ``TypeError`` if
    ``initializer`` is not callable.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        thread_name_prefix: str = "",
        initializer: Callable[..., object] | None = None,
        initargs: tuple[Any, ...] = (),
    ) -> None:
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        if max_workers <= 0:
            raise ValueError("max_workers must be greater than 0")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        self._kwargs = {
            "max_workers": max_workers,
            "thread_name_prefix": thread_name_prefix,
            "initializer": initializer,
            "initargs": initargs,
        }
        self._max_workers = max_workers
        self._prefix = thread_name_prefix or f"PriorityThreadPoolExecutor-{id(self):x}"
        self._queue = _Queue()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False
        self._broken: str | None = None
        self._register()
        _THREAD_POOLS.add(self)

    def _after_fork(self) -> None:
        """In a forked child: no thread and no task of the parent is here; start afresh."""
        self._cond = threading.Condition()
        self._threads = []
        self._idle = 0
        self._queue = _Queue()

    def _submit(self, priority: int, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Future:
        fut: Future = Future()
        with self._cond:
            if self._broken is not None:
                raise BrokenThreadPool(self._broken)
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            # Lower key first: negate so that a higher priority is served first.
            self._queue.push(-priority, (fut, fn, args, kwargs))
            if self._idle == 0 and len(self._threads) < self._max_workers:
                t = threading.Thread(
                    target=self._work, name=f"{self._prefix}_{len(self._threads)}", daemon=True
                )
                self._threads.append(t)
                t.start()
            else:
                self._cond.notify()
        return fut

    def _work(self) -> None:
        init = self._kwargs["initializer"]
        if init is not None:
            try:
                init(*self._kwargs["initargs"])
            except BaseException as e:  # as Python's pool: a failed initializer breaks the pool
                self._break(f"A thread initializer failed ({type(e).__name__}: {e}), the pool is not usable")
                return
        while True:
            with self._cond:
                while not self._queue and not self._closed and self._broken is None:
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                if not self._queue or self._broken is not None:
                    return
                fut, fn, args, kwargs = self._queue.pop()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:
                fut.set_exception(e)
            else:
                fut.set_result(result)
            del fut, fn, args, kwargs

    def _break(self, reason: str) -> None:
        with self._cond:
            self._broken = reason
            pending = [self._queue.pop() for _ in range(len(self._queue))]
            self._cond.notify_all()
        for fut, *_ in pending:
            if fut.set_running_or_notify_cancel():
                fut.set_exception(BrokenThreadPool(reason))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._closed = True
            cancelled = [self._queue.pop() for _ in range(len(self._queue))] if cancel_futures else []
            self._cond.notify_all()
            threads = list(self._threads)
        for fut, *_ in cancelled:
            fut.cancel()
        if wait:
            for t in threads:
                if t is not threading.current_thread():
                    t.join()
        _POOLS.pop((os.getpid(), self._id), None)


def _reset_thread_pools() -> None:
    for pool in list(_THREAD_POOLS):
        pool._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_thread_pools)


class _DispatchPool(_PriorityPool):
    """A standard executor fed from the priority queue: at most ``max_workers`` tasks are
    inside it at once, so a free worker always gets the best task waiting here."""

    @staticmethod
    def _inner_class() -> type[Executor]:
        """The standard pool the tasks run in (imported when a pool is made)."""
        raise NotImplementedError

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        inner_class = self._inner_class()
        # The standard pool's own arguments (``TypeError`` as it raises them), all by name, so
        # that the pool pickles as its keywords.
        try:
            bound = inspect.signature(inner_class).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{type(self).__name__}: {e}") from None
        self._kwargs = dict(bound.arguments)
        self._inner = inner_class(**self._kwargs)
        self._slots = self._inner._max_workers  # type: ignore[attr-defined]
        self._queue = _Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._register()

    def _submit(self, priority: int, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Future:
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.push(-priority, (fut, fn, args, kwargs))
        self._dispatch()
        return fut

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if self._slots == 0 or not self._queue:
                    return
                fut, fn, args, kwargs = self._queue.pop()
                if not fut.set_running_or_notify_cancel():
                    continue
                self._slots -= 1
            try:
                inner = self._inner.submit(fn, *args, **kwargs)
            except BaseException as e:  # broken or shut-down inner pool
                with self._lock:
                    self._slots += 1
                fut.set_exception(e)
                continue
            inner.add_done_callback(lambda f, out=fut: self._done(f, out))

    def _done(self, inner: Future, out: Future) -> None:
        with self._lock:
            self._slots += 1
        exc = inner.exception()
        if exc is not None:
            out.set_exception(exc)
        else:
            out.set_result(inner.result())
        self._dispatch()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            cancelled = [self._queue.pop() for _ in range(len(self._queue))] if cancel_futures else []
        for fut, *_ in cancelled:
            fut.cancel()
        if wait:  # the queued tasks still go in as the running ones finish
            while True:
                with self._lock:
                    if not self._queue:
                        break
                    waiting = self._queue._heap[0][2][0]
                try:
                    waiting.exception()  # blocks until it ran (or was cancelled)
                except BaseException:
                    pass
        self._inner.shutdown(wait=wait, cancel_futures=cancel_futures)
        _POOLS.pop((os.getpid(), self._id), None)


class PriorityProcessPoolExecutor(_DispatchPool):
    """A process pool serving the stage of highest priority first (SPDL's
    ``PriorityProcessPoolExecutor``): ``max_workers`` (``None``: ``os.cpu_count()``) and the
    keywords of :class:`concurrent.futures.ProcessPoolExecutor` (``mp_context``,
    ``initializer``, ``initargs``, ``max_tasks_per_child``). At most ``max_workers`` tasks
    are handed to the processes at once; the rest wait here by priority. The functions,
    arguments and results must pickle. A worker that dies fails its task and the later ones
    with :class:`concurrent.futures.process.BrokenProcessPool`.
    Use :meth:`get_executor` for each stage.
    """

    @staticmethod
    def _inner_class() -> type[Executor]:
        return ProcessPoolExecutor


if sys.version_info >= (3, 14):

    class PriorityInterpreterPoolExecutor(_DispatchPool):
        """A pool of subinterpreters serving the stage of highest priority first (SPDL's
        ``PriorityInterpreterPoolExecutor``, Python 3.14+): the arguments of
        :class:`concurrent.futures.InterpreterPoolExecutor`. Use :meth:`get_executor` for
        each stage."""

        @staticmethod
        def _inner_class() -> type[Executor]:
            from concurrent.futures import InterpreterPoolExecutor

            return InterpreterPoolExecutor

else:

    class PriorityInterpreterPoolExecutor(Executor):  # type: ignore[no-redef]
        """SPDL's ``PriorityInterpreterPoolExecutor`` needs Python 3.14 (subinterpreters);
        on this Python making one raises ``RuntimeError`` (as SPDL)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            v = sys.version_info
            raise RuntimeError(
                f"PriorityInterpreterPoolExecutor requires Python 3.14 or later. Current version: {v.major}.{v.minor}"
            )

        def get_executor(self, *, priority: int | None = None) -> PriorityExecutorEntrypoint:
            """Raises ``RuntimeError`` (Python 3.14 or later is needed)."""
            raise RuntimeError("PriorityInterpreterPoolExecutor requires Python 3.14 or later.")


class PriorityExecutorEntrypoint(Executor):
    """One stage's door into a priority pool (SPDL's ``PriorityExecutorEntrypoint``): a
    :class:`concurrent.futures.Executor` whose tasks carry the entrypoint's ``priority``.
    Made by ``get_executor()``. Other attributes (``shutdown``, ...) are the pool's.
    Pickles with its pool (see the pools), so a config holding entrypoints can be built by
    :func:`~spdl_rs.pipeline.run_pipeline_in_subprocess`.
    """

    def __init__(self, pool: _PriorityPool, priority: int) -> None:
        self._pool = pool
        self.priority = priority

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Queues ``fn(*args, **kwargs)`` at this entrypoint's priority. Raises
        ``RuntimeError`` after the pool's shutdown."""
        return self._pool._submit(self.priority, fn, args, kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shuts the whole pool down (as SPDL: the entrypoint forwards to its pool)."""
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_pool":
            raise AttributeError(name)
        return getattr(self._pool, name)

    def __reduce__(self) -> tuple:
        return (PriorityExecutorEntrypoint, (self._pool, self.priority))

    def __repr__(self) -> str:
        return f"PriorityExecutorEntrypoint({type(self._pool).__name__}, priority={self.priority})"
