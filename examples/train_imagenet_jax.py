"""Trains a small image classifier with JAX on an ImageFolder-style dataset, loaded by spdl_rs.

The JAX twin of ``examples/train_imagenet.py``: the same loader (this epoch's share from
``sources.Sampler``, the ImageNet train transform on Rust threads without the GIL, batches of
``[N, 3, S, S]`` float32 normalized with the ImageNet mean and std), consumed through DLPack:
``jax.dlpack.from_dlpack(batch)`` takes the batch buffer without going through NumPy (JAX
copies it only if the buffer does not meet its alignment). The model is a two-layer CNN
written with ``jax.lax``, trained by plain SGD under ``jax.jit``; JAX picks its default device
(the CPU with ``pip install jax``).

Checkpoints (``--checkpoint PATH``, a pickle): the parameters, the epoch, the step and the
loader's position (``Sampler.state(pipeline.state_dict())``), written at every epoch end and when
``--max-steps`` stops the run; rerunning with the same path resumes without loading the samples
already trained on again.

Run::

    python examples/train_imagenet_jax.py DIR --epochs 2 --batch-size 4 --size 64 --checkpoint ck.pkl

Prints one line per epoch, as the PyTorch example does.
"""

from __future__ import annotations

import argparse
import os
import pickle
import time

import jax
import jax.numpy as jnp
import numpy as np

from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="ImageFolder-style dataset: ROOT/CLASS/IMAGE")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=224, help="side of the training crops, pixels")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="decode threads")
    p.add_argument("--checkpoint", help="checkpoint file: resumed from when it exists, written at each epoch end")
    p.add_argument("--max-steps", type=int, default=0, help="stop (after a checkpoint) once this many steps ran in this process")
    return p.parse_args(argv)


def init_params(key: jax.Array, num_classes: int) -> dict[str, jax.Array]:
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "conv1": jax.random.normal(k1, (16, 3, 3, 3)) * (2 / 27) ** 0.5,
        "conv2": jax.random.normal(k2, (32, 16, 3, 3)) * (2 / 144) ** 0.5,
        "fc": jax.random.normal(k3, (32, num_classes)) * (1 / 32) ** 0.5,
        "bias": jnp.zeros((num_classes,)),
    }


def forward(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """Logits ``[N, classes]`` of images ``[N, 3, S, S]``."""
    for name in ("conv1", "conv2"):
        x = jax.lax.conv_general_dilated(x, params[name], window_strides=(2, 2), padding="SAME",
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        x = jax.nn.relu(x)
    return x.mean(axis=(2, 3)) @ params["fc"] + params["bias"]


def loss_fn(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    logits = forward(params, x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def train_step(params: dict[str, jax.Array], x: jax.Array, y: jax.Array, lr: float):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def build_loader(samples: sources.SampleList, sampler: sources.Sampler, args: argparse.Namespace):
    """One epoch: what the sampler has not delivered yet, in its order."""
    return (
        PipelineBuilder()
        .add_source(samples.select(list(sampler)))
        .pipe(ops.read_file(), concurrency=16)
        .pipe(ops.decode_image(transform="train", size=args.size, seed=args.seed * 1_000_003 + sampler.epoch),
              concurrency=args.threads)
        .aggregate(args.batch_size)
        .pipe(ops.collate(normalize=True))  # [N, 3, S, S] float32
        .add_sink(3)
        .build(num_threads=args.threads)
    )


def save(path: str, params, epoch: int, step: int, loader_state: str | None) -> None:
    host = jax.tree_util.tree_map(np.asarray, params)
    with open(f"{path}.tmp", "wb") as f:
        pickle.dump({"params": host, "epoch": epoch, "step": step, "loader": loader_state}, f)
    os.replace(f"{path}.tmp", path)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    samples = sources.image_folder(args.root)
    params = init_params(jax.random.PRNGKey(args.seed), len(samples.classes))
    sampler, step = sources.Sampler(len(samples), shuffle=True, seed=args.seed), 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        with open(args.checkpoint, "rb") as f:
            ckpt = pickle.load(f)
        params = jax.tree_util.tree_map(jnp.asarray, ckpt["params"])
        step = ckpt["step"]
        if ckpt["loader"] is None:
            sampler.set_epoch(ckpt["epoch"])
        else:
            sampler = sources.Sampler.from_state(ckpt["loader"])
        print(f"resumed at epoch {sampler.epoch}, step {step}: {len(list(sampler))} samples left in the epoch")

    steps_here = 0
    for epoch in range(sampler.epoch, args.epochs):
        if epoch != sampler.epoch:
            sampler.set_epoch(epoch)
        pipeline = build_loader(samples, sampler, args)
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
                x = jax.dlpack.from_dlpack(batch)
                y = jnp.asarray(batch.labels, dtype=jnp.int32)
                params, loss = train_step(params, x, y, args.lr)
                loss_sum += float(loss)
                seen += len(batch.labels)
                batches += 1
                step += 1
                steps_here += 1
                if args.max_steps and steps_here >= args.max_steps:
                    if args.checkpoint:
                        save(args.checkpoint, params, epoch, step, sampler.state(pipeline.state_dict()))
                    print(f"stopped at epoch {epoch}, step {step} after {seen} samples of the epoch")
                    return
        wall = time.perf_counter() - start
        print(f"epoch {epoch}: {seen} samples in {batches} batches, loss {loss_sum / max(batches, 1):.3f}, "
              f"{seen / wall:.1f} samples/s, {100 * waited / wall:.1f}% of the time waiting for data")
        if args.checkpoint:
            save(args.checkpoint, params, epoch + 1, step, None)


if __name__ == "__main__":
    main()
