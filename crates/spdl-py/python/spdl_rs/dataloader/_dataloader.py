"""SPDL's ``spdl.dataloader.DataLoader`` on spdl_rs's pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable, Iterator
from typing import Any

from ..pipeline import Pipeline, PipelineBuilder

__all__ = ["DataLoader"]


class DataLoader:
    """Source -> ``preprocessor`` (``num_threads`` at once) -> batches of ``batch_size`` ->
    ``aggregator`` (``num_threads`` at once) -> ``transfer_fn`` (one at a time) -> a buffer of
    ``buffer_size`` (SPDL's ``DataLoader``). Each step is optional. Each ``iter()`` builds a
    pipeline over ``src`` (one epoch), waiting at most ``timeout`` seconds per item
    (``TimeoutError``; ``None``: no limit); ``output_order`` as ``PipelineBuilder.pipe``.

    Raises what ``PipelineBuilder`` raises for bad values (at the first ``iter()``).
    """

    def __init__(
        self,
        src: Iterable[Any] | AsyncIterable[Any],
        *,
        preprocessor: Callable[[Any], Any] | None = None,
        batch_size: int | None = None,
        drop_last: bool = False,
        aggregator: Callable[[list[Any]], Any] | None = None,
        transfer_fn: Callable[[Any], Any] | None = None,
        buffer_size: int = 3,
        num_threads: int = 8,
        timeout: float | None = None,
        output_order: str = "completion",
    ) -> None:
        self._src = src
        self._preprocessor = preprocessor
        self._batch_size = batch_size
        self._drop_last = drop_last
        self._aggregator = aggregator
        self._transfer_fn = transfer_fn
        self._buffer_size = buffer_size
        self._num_threads = num_threads
        self._timeout = timeout
        self._output_order = output_order

    def _get_pipeline(self) -> Pipeline:
        b = PipelineBuilder().add_source(self._src)
        if self._preprocessor is not None:
            b.pipe(self._preprocessor, concurrency=self._num_threads, output_order=self._output_order)
        if self._batch_size:
            b.aggregate(self._batch_size, drop_last=self._drop_last)
        if self._aggregator is not None:
            b.pipe(self._aggregator, concurrency=self._num_threads, output_order=self._output_order)
        if self._transfer_fn is not None:
            b.pipe(self._transfer_fn)
        return b.add_sink(self._buffer_size).build(num_threads=self._num_threads)

    def __iter__(self) -> Iterator[Any]:
        pipeline = self._get_pipeline()
        with pipeline.auto_stop():
            yield from pipeline.get_iterator(timeout=self._timeout)
