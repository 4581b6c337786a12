"""SPDL's ``get_pytorch_dataloader``: a map-style dataset served by a process pool driven by
an spdl_rs pipeline."""

from __future__ import annotations

import logging
import multiprocessing as mp
import pickle
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import nullcontext
from multiprocessing.shared_memory import SharedMemory
from typing import Any, cast

from ..pipeline import PipelineBuilder

__all__ = ["PyTorchDataLoader", "get_pytorch_dataloader"]

_LG = logging.getLogger(__name__)

# The dataset and collate function of this worker process (set by _init_worker).
_DATASET: Any = None
_COLLATE: Any = None


def _init_worker(shm_name: str, collate_fn: Callable, semaphore: Any) -> None:
    global _DATASET, _COLLATE
    shm = SharedMemory(name=shm_name)
    try:
        with semaphore if semaphore is not None else nullcontext():
            _DATASET = pickle.loads(shm.buf)
    finally:
        shm.close()
    _COLLATE = collate_fn


def _get_item(index: Any) -> Any:
    return _COLLATE(_DATASET[index])


def _get_items(indices: list[Any]) -> Any:
    if hasattr(_DATASET, "__getitems__"):
        return _COLLATE(_DATASET.__getitems__(indices))
    return _COLLATE([_DATASET[i] for i in indices])


class PyTorchDataLoader(Iterable[Any]):
    """What :func:`get_pytorch_dataloader` returns (SPDL's ``PyTorchDataLoader``).

    The dataset is pickled once into a shared-memory segment that each worker process reads
    at start; the sampler runs in the main process and its indices (or index lists) go to
    the workers, which fetch and collate; results come back through an spdl_rs pipeline
    (``num_workers`` in flight, ``prefetch_factor * num_workers`` buffered). Each ``iter()``
    starts a fresh pool (SPDL does the same; ``persistent_workers`` is not supported).
    ``len()`` is the sampler's.
    """

    def __init__(
        self,
        *,
        dataset: Any,
        sampler: Iterable[Any],
        fetch_fn: Callable[[Any], Any],
        collate_fn: Callable[[Any], Any],
        transfer_fn: Callable[[Any], Any] | None = None,
        mp_ctx: Any,
        num_workers: int,
        timeout: float | None,
        buffer_size: int,
        output_order: str,
        worker_init_concurrency: int | None,
    ) -> None:
        self.dataset = dataset
        data = pickle.dumps(dataset)
        self._shm = SharedMemory(create=True, size=max(1, len(data)))
        self._shm.buf[: len(data)] = data
        self._sampler = sampler
        self._fetch_fn = fetch_fn
        self._collate_fn = collate_fn
        self._transfer_fn = transfer_fn
        self._mp_ctx = mp_ctx
        self._num_workers = num_workers
        self._timeout = timeout
        self._buffer_size = buffer_size
        self._output_order = output_order
        self._worker_init_concurrency = worker_init_concurrency

    def __del__(self) -> None:
        shm = getattr(self, "_shm", None)
        if shm is not None:
            shm.close()
            try:
                shm.unlink()
            except FileNotFoundError:
                pass

    def __len__(self) -> int:
        return len(cast(Sized, self._sampler))

    def __iter__(self) -> Iterator[Any]:
        from concurrent.futures import ProcessPoolExecutor

        sem = None if self._worker_init_concurrency is None else self._mp_ctx.BoundedSemaphore(self._worker_init_concurrency)
        executor = ProcessPoolExecutor(
            max_workers=self._num_workers,
            mp_context=self._mp_ctx,
            initializer=_init_worker,
            initargs=(self._shm.name, self._collate_fn, sem),
        )
        builder = (
            PipelineBuilder()
            .add_source(self._sampler)
            .pipe(self._fetch_fn, executor=executor, concurrency=self._num_workers, output_order=self._output_order)
        )
        if self._transfer_fn is not None:  # pin_memory: in this process, after the workers
            builder.pipe(self._transfer_fn, output_order=self._output_order)
        pipeline = builder.add_sink(self._buffer_size).build(num_threads=1)
        with executor, pipeline.auto_stop():
            yield from pipeline.get_iterator(timeout=self._timeout)


def _resolve_sampler(
    dataset: Any,
    batch_size: int | None,
    shuffle: bool,
    sampler: Any,
    batch_sampler: Any,
    collate_fn: Any,
    drop_last: bool,
    generator: Any,
) -> tuple[Any, Callable, Callable]:
    """(sampler run in the main process, fetch function, collate function), as torch's
    ``DataLoader`` resolves them; torch is imported only for its defaults."""
    if sampler is not None and batch_sampler is not None:
        raise ValueError("`sampler` and `batch_sampler` are mutually exclusive.")
    if batch_size is not None and batch_sampler is not None:
        raise ValueError("`batch_size` and `batch_sampler` are mutually exclusive.")
    if (sampler is not None or batch_sampler is not None) and shuffle:
        raise ValueError("`shuffle` must be False when `batch_sampler` or `sampler` is provided.")
    if batch_sampler is not None and drop_last:
        raise ValueError("`drop_last` must be False when `batch_sampler` is provided.")
    if batch_size is None and drop_last:
        raise ValueError("`drop_last` must be False when `batch_size` is None.")

    def default_sampler() -> Any:
        from torch.utils.data.sampler import RandomSampler, SequentialSampler

        return RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)

    def collate(name: str) -> Callable:
        if collate_fn is not None:
            return collate_fn
        import torch.utils.data.dataloader as tdl

        return getattr(tdl, name)

    if batch_sampler is not None:
        return batch_sampler, _get_items, collate("default_collate")
    if batch_size is not None:
        from torch.utils.data.sampler import BatchSampler

        return BatchSampler(sampler if sampler is not None else default_sampler(), batch_size, drop_last), _get_items, collate(
            "default_collate"
        )
    return (sampler if sampler is not None else default_sampler()), _get_item, collate("default_convert")


def _pin_memory_fn() -> Callable[[Any], Any] | None:
    """torch's ``pin_memory`` if an accelerator is available, else ``None`` (a warning)."""
    import torch
    from torch.utils.data._utils.pin_memory import pin_memory

    if not torch.cuda.is_available():
        _LG.warning(
            "'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be used."
        )
        return None
    return pin_memory


def get_pytorch_dataloader(
    dataset: Any,
    batch_size: int | None = 1,
    shuffle: bool = False,
    sampler: Any = None,
    batch_sampler: Any = None,
    num_workers: int = 1,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    pin_memory: bool = False,
    drop_last: bool = False,
    timeout: float | None = None,
    worker_init_fn: None = None,
    multiprocessing_context: str | Any | None = None,
    generator: Any = None,
    *,
    prefetch_factor: int = 2,
    persistent_workers: bool = False,
    pin_memory_device: str | None = None,
    in_order: bool = False,
    worker_init_concurrency: int | None = None,
) -> PyTorchDataLoader:
    """A data loader over a map-style ``dataset`` (``dataset[i]``, optionally
    ``__getitems__``) with ``torch.utils.data.DataLoader``'s arguments (SPDL's
    ``get_pytorch_dataloader``); see :class:`PyTorchDataLoader` for how it runs.

    Sampling and batching follow torch: ``batch_size`` (``None``: single items through
    ``default_convert``), ``shuffle``/``generator`` (torch's ``RandomSampler``), ``sampler``,
    ``batch_sampler``, ``drop_last``, ``collate_fn`` (default torch's ``default_collate``).
    torch is needed only for these defaults: with an explicit sampler (or batch sampler) and
    ``collate_fn``, any indexable dataset works without torch. ``num_workers`` worker
    processes (``multiprocessing_context``: a start method name or context);
    ``prefetch_factor * num_workers`` results are buffered; ``in_order=True`` keeps the
    sampler's order, ``False`` (SPDL's default) gives results as they complete; ``timeout``
    seconds per result (``TimeoutError``); ``worker_init_concurrency``: how many workers
    unpickle the dataset at once (``None``: all).

    ``num_workers=0`` warns and uses one worker (as SPDL). ``pin_memory=True`` pins each
    result in this process with torch's ``pin_memory`` when an accelerator is available
    (otherwise it logs a warning and does nothing, as SPDL).

    Raises ``ValueError`` for contradictory sampling arguments (as torch), for a torch
    ``IterableDataset``, and for ``worker_init_fn``, ``pin_memory_device`` and
    ``persistent_workers=True`` (not supported, as SPDL), a negative ``num_workers`` or
    ``timeout``, or ``prefetch_factor < 1``.
    """
    if worker_init_fn is not None:
        raise ValueError("`worker_init_fn` is not supported.")
    if pin_memory_device is not None:
        raise ValueError("`pin_memory_device` is not supported.")
    if persistent_workers:
        raise ValueError("`persistent_workers` is not supported.")
    if timeout is not None and timeout < 0:
        raise ValueError(f"`timeout` must be positive. Found: {timeout}.")
    if num_workers < 0:
        raise ValueError(f"`num_workers` must be greater than 0. Found: {num_workers}")
    if num_workers == 0:
        warnings.warn("`num_workers` is 0. Setting `num_workers` to 1 for single process dataloading.", stacklevel=2)
        num_workers = 1
    if prefetch_factor < 1:
        raise ValueError(f"`prefetch_factor` must be at least 1. Found: {prefetch_factor}")
    if worker_init_concurrency is not None and worker_init_concurrency < 1:
        raise ValueError(f"`worker_init_concurrency` must be greater than 0. Found: {worker_init_concurrency}.")
    tdata = sys.modules.get("torch.utils.data")
    if tdata is not None and isinstance(dataset, tdata.IterableDataset):
        raise ValueError("IterableDataset is not supported.")
    transfer_fn = _pin_memory_fn() if pin_memory else None
    smp, fetch, collate = _resolve_sampler(dataset, batch_size, shuffle, sampler, batch_sampler, collate_fn, drop_last, generator)
    if isinstance(multiprocessing_context, str) or multiprocessing_context is None:
        ctx = mp.get_context(multiprocessing_context)
    else:
        ctx = multiprocessing_context
    return PyTorchDataLoader(
        dataset=dataset,
        sampler=smp,
        fetch_fn=fetch,
        collate_fn=collate,
        transfer_fn=transfer_fn,
        mp_ctx=ctx,
        num_workers=num_workers,
        timeout=timeout,
        buffer_size=prefetch_factor * num_workers,
        output_order="input" if in_order else "completion",
        worker_init_concurrency=worker_init_concurrency,
    )
