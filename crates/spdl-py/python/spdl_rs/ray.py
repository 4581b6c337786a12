"""Ray Data integration: native decoding in ``Dataset.map_batches`` and datasets from our listings.

Use Ray Data when decoding needs more CPUs than the training hosts have: Ray spreads the
``map_batches`` tasks over the cluster's CPU nodes and streams the decoded batches to the
trainers (``iter_torch_batches``). On one host, one ``spdl_rs`` pipeline per rank (the
torchrun recipe) is simpler and faster: no object store, no serialization.

- :func:`from_listing`: a dataset of ``{"path", "index"[, "label"]}`` rows from a
  :class:`~spdl_rs.sources.SampleList` (``list_files`` / ``image_folder``) or a folder;
- :func:`read_binary`: the same listing read by Ray (``read_binary_files``), rows
  ``{"bytes", "path"}``;
- :class:`ImageDecoder`: the ``map_batches`` function: one GIL-free native call per batch
  (``spdl_rs.io.decode_image_batch``) gives ``{"image": [N, H, W, C] uint8, "error": str, ...}``.

**Failed samples are kept and marked, never dropped silently.** With ``on_error="mark"`` (the
default) every input row gives one output row: a sample that cannot be read or decoded has a
zero image and its reason in the ``error`` column (``""`` for a good sample), so the consumer
counts and excludes them (``batch["error"] != ""``), and ``rows in == rows out`` holds for
exactly-once checks. ``on_error="raise"`` fails the batch instead (Ray retries the task, then
fails the dataset).

Only local listings are exposed to Python: ``spdl-sources`` lists HTTP and S3 objects in Rust,
but ``spdl_rs.sources`` has no binding for them yet; for remote objects use Ray's own readers
(``ray.data.read_binary_files("s3://...", include_paths=True)``) with :class:`ImageDecoder`.

Ray is an optional dependency: ``import spdl_rs`` never imports it; importing this module
without it raises ``ImportError`` saying how to install it.
"""

from __future__ import annotations

import os
from typing import Any

try:
    import numpy as np
    import ray.data
except ImportError as e:  # pragma: no cover - exercised where ray is absent
    raise ImportError(
        "spdl_rs.ray needs Ray Data (and NumPy): install them with `pip install 'ray[data]'`"
    ) from e

from ._native import decode_image_batch
from .sources import SampleList, list_files

__all__ = ["ImageDecoder", "from_listing", "read_binary", "count_failed"]

_ON_ERROR = ("mark", "raise")


def _listing(samples: SampleList | str | os.PathLike[str], extensions: list[str] | None) -> SampleList:
    if isinstance(samples, SampleList):
        if extensions is not None:
            raise ValueError("extensions applies to a folder, not to a SampleList")
        return samples
    return list_files(samples, extensions)


def from_listing(
    samples: SampleList | str | os.PathLike[str],
    *,
    extensions: list[str] | None = None,
    override_num_blocks: int | None = None,
) -> ray.data.Dataset:
    """A Ray dataset of the samples of a listing, one row per sample, in listing order.

    ``samples`` is a :class:`~spdl_rs.sources.SampleList` (``list_files``, ``image_folder``,
    ``select``) or a folder, listed with ``list_files(samples, extensions)``. Rows are
    ``{"path": str, "index": int}`` plus ``"label": int`` for a labelled listing (``index`` is
    the position in the listing). Nothing is read here: :class:`ImageDecoder` reads and decodes
    the files in its native call (the paths must be readable where the tasks run, e.g. a shared
    file system). ``override_num_blocks`` as in ``ray.data.from_items``.
    """
    listing = _listing(samples, extensions)
    paths, labels = listing.paths, listing.labels
    labelled = any(label is not None for label in labels)
    rows: list[dict[str, Any]] = []
    for i, path in enumerate(paths):
        row: dict[str, Any] = {"path": path, "index": i}
        if labelled:
            row["label"] = labels[i]
        rows.append(row)
    return ray.data.from_items(rows, override_num_blocks=override_num_blocks)


def read_binary(
    samples: SampleList | str | os.PathLike[str],
    *,
    extensions: list[str] | None = None,
    **read_args: Any,
) -> ray.data.Dataset:
    """The files of a listing read by Ray: ``ray.data.read_binary_files(paths, include_paths=True)``,
    rows ``{"bytes": bytes, "path": str}``; ``read_args`` go to ``read_binary_files``.

    Ray reads in its own tasks (and may reorder rows); labels are not carried (use
    :func:`from_listing` for an ``image_folder``).
    """
    listing = _listing(samples, extensions)
    return ray.data.read_binary_files(listing.paths, include_paths=True, **read_args)


class ImageDecoder:
    """Decodes a batch of images in one native call without the GIL: the function of
    ``Dataset.map_batches(ImageDecoder(...), batch_format="numpy")``.

    Input batches have a ``"bytes"`` column (from :func:`read_binary` or
    ``read_binary_files``; ``"path"`` then names the samples in errors) or only a ``"path"``
    column (from :func:`from_listing`: the files are read natively). Output: the input columns
    but ``"bytes"``, plus ``"image"`` (``[N, H, W, C]`` ``uint8``, or ``[N, C, H, W]``
    ``float32`` with ``normalize=True``) and ``"error"`` (``""``, or why the sample failed; its
    image is zeros). See the module docs for ``on_error``.

    The keyword arguments are those of ``spdl_rs.io.load_image_batch``; the size must be fixed
    (``width`` and ``height``, or ``size``). ``transform="train"`` draws sample ``i``'s crop from
    ``(seed, epoch, index)`` with the ``"index"`` column when there is one. ``num_threads``: the
    native threads per call (default: the CPUs, at most 8); match it to ``map_batches``'s
    ``num_cpus``.

    Also usable as an actor class: ``map_batches(ImageDecoder, fn_constructor_kwargs={...})``.
    """

    def __init__(
        self,
        width: int | None = None,
        height: int | None = None,
        *,
        size: int | None = None,
        transform: str = "resize",
        color: str = "rgb",
        filter: str = "bilinear",
        lenient: bool = False,
        normalize: bool = False,
        num_threads: int | None = None,
        seed: int = 0,
        epoch: int = 0,
        on_error: str = "mark",
    ) -> None:
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error must be one of {_ON_ERROR}, got {on_error!r}")
        if color == "unchanged":
            raise ValueError("ImageDecoder needs a fixed channel count: color='rgb', 'gray' or 'rgba'")
        self.options: dict[str, Any] = dict(
            width=width,
            height=height,
            size=size,
            transform=transform,
            color=color,
            filter=filter,
            lenient=lenient,
            normalize=normalize,
            num_threads=num_threads,
            seed=seed,
            epoch=epoch,
        )
        self.on_error = on_error
        # Checks the options now rather than in the first Ray task.
        decode_image_batch([], **self.options)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        paths = batch.get("path")
        keys = None if paths is None else [str(p) for p in paths]
        indices = batch.get("index")
        indices = None if indices is None else [int(i) for i in indices]
        if "bytes" in batch:
            data = [bytes(b) if not isinstance(b, bytes) else b for b in batch["bytes"]]
            images, failed = decode_image_batch(data, keys=keys, indices=indices, **self.options)
        elif keys is not None:
            images, failed = decode_image_batch(paths=keys, indices=indices, **self.options)
        else:
            raise ValueError(f"ImageDecoder needs a 'bytes' or a 'path' column, got {sorted(batch)}")
        if failed and self.on_error == "raise":
            raise ValueError(f"{len(failed)} of {len(images)} samples failed: {failed[0][1]}")
        out = {k: v for k, v in batch.items() if k != "bytes"}
        out["image"] = np.asarray(images)
        error = np.full(len(images), "", dtype=object)
        for row, message in failed:
            error[row] = message
        out["error"] = error
        return out

    def __repr__(self) -> str:
        set_ = ", ".join(f"{k}={v!r}" for k, v in self.options.items() if v is not None)
        return f"ImageDecoder({set_}, on_error={self.on_error!r})"


def count_failed(batch: dict[str, Any]) -> int:
    """The number of samples of a decoded batch whose ``error`` is not empty."""
    return int(sum(1 for e in batch["error"] if e))
