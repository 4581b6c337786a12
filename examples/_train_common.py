"""What the two training examples share (``train_imagenet.py``, PyTorch, and
``train_imagenet_jax.py``, JAX): their common command-line arguments, the spdl_rs loader of
one epoch, and the epoch loop that times the waits for data, stops after ``--max-steps`` with a
checkpoint and prints one line per epoch. Each example brings its model, its training step
and its checkpoint format.

Not an example itself: the examples import it from their own folder (``python
examples/train_imagenet.py`` puts that folder first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from spdl_rs import ops, sources
from spdl_rs.pipeline import Pipeline, PipelineBuilder


def arg_parser(description: str, *, lr: float, per_rank: bool = False) -> argparse.ArgumentParser:
    """The arguments of both examples (``per_rank``: the help says which are per rank, under
    ``torchrun``); an example adds its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("root", help="ImageFolder-style dataset: ROOT/CLASS/IMAGE")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32, help="per rank" if per_rank else None)
    p.add_argument("--size", type=int, default=224, help="side of the training crops, pixels")
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="decode threads per rank" if per_rank else "decode threads")
    p.add_argument("--checkpoint", help="checkpoint file: resumed from when it exists, written at each epoch end")
    p.add_argument("--max-steps", type=int, default=0, help="stop (after a checkpoint) once this many steps ran in this process")
    return p


def build_loader(samples: sources.SampleList, sampler: sources.Sampler, args: argparse.Namespace,
                 device_index: int | None = None) -> Pipeline:
    """One epoch (of this rank's share): what the sampler has not delivered yet, in its order,
    as ``[N, 3, S, S]`` float32 batches normalized with the ImageNet mean and std, labels in
    batch order; with ``device_index``, copied to that GPU by ``ops.to_device`` (pinned
    memory, its own copy stream)."""
    builder = (
        PipelineBuilder()
        .add_source(samples.select(list(sampler)))
        .pipe(ops.read_file(), concurrency=16)
        # The crops depend on (seed, epoch, position): a new draw each epoch.
        .pipe(ops.decode_image(transform="train", size=args.size, seed=args.seed * 1_000_003 + sampler.epoch),
              concurrency=args.threads)
        .aggregate(args.batch_size)
        .pipe(ops.collate(normalize=True))
    )
    if device_index is not None:
        builder = builder.pipe(ops.to_device(device_index))
    return builder.add_sink(3).build(num_threads=args.threads)


def print_resumed(sampler: sources.Sampler, step: int) -> None:
    print(f"resumed at epoch {sampler.epoch}, step {step}: {len(list(sampler))} samples left in the epoch")


def run_epochs(args: argparse.Namespace, samples: sources.SampleList, sampler: sources.Sampler, step: int,
               train: Callable[[Any], tuple[float, int]],
               save: Callable[[int, int, str | None], None],
               device_index: int | None = None) -> None:
    """Trains from where ``sampler`` is to ``args.epochs``. ``train(batch)`` trains on one batch
    and returns its loss and its number of samples; ``save(epoch, step, loader_state)`` writes a
    checkpoint (``loader_state``: ``Sampler.state(pipeline.state_dict())`` mid-epoch, ``None``
    between epochs) when ``--checkpoint`` is given. ``device_index``: as :func:`build_loader`.

    Prints ``epoch E: N samples in B batches, loss L, S samples/s, W% of the time waiting for
    data`` per epoch, and ``stopped at epoch E, step S after N samples of the epoch`` when
    ``--max-steps`` stops the run."""
    steps_here = 0
    for epoch in range(sampler.epoch, args.epochs):
        if epoch != sampler.epoch:
            sampler.set_epoch(epoch)
        pipeline = build_loader(samples, sampler, args, device_index)
        seen = batches = 0
        waited = loss_sum = 0.0
        start = time.perf_counter()
        with pipeline.auto_stop():
            it = iter(pipeline)
            while True:
                t0 = time.perf_counter()
                batch = next(it, None)
                waited += time.perf_counter() - t0
                if batch is None:
                    break
                loss, n = train(batch)
                loss_sum += loss
                seen += n
                batches += 1
                step += 1
                steps_here += 1
                if args.max_steps and steps_here >= args.max_steps:
                    if args.checkpoint:
                        save(epoch, step, sampler.state(pipeline.state_dict()))
                    print(f"stopped at epoch {epoch}, step {step} after {seen} samples of the epoch")
                    return
        wall = time.perf_counter() - start
        print(f"epoch {epoch}: {seen} samples in {batches} batches, loss {loss_sum / max(batches, 1):.3f}, "
              f"{seen / wall:.1f} samples/s, {100 * waited / wall:.1f}% of the time waiting for data")
        if args.checkpoint:
            save(epoch + 1, step, None)
