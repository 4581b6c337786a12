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

import jax
import jax.numpy as jnp
import numpy as np

from spdl_rs import sources

from _train_common import arg_parser, print_resumed, run_epochs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return arg_parser(__doc__.split("\n\n")[0], lr=0.05).parse_args(argv)


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
        print_resumed(sampler, step)

    def train(batch) -> tuple[float, int]:
        nonlocal params
        x = jax.dlpack.from_dlpack(batch)
        y = jnp.asarray(batch.labels, dtype=jnp.int32)
        params, loss = train_step(params, x, y, args.lr)
        return float(loss), len(batch.labels)

    def checkpoint(epoch: int, step: int, loader_state: str | None) -> None:
        save(args.checkpoint, params, epoch, step, loader_state)

    run_epochs(args, samples, sampler, step, train, checkpoint)


if __name__ == "__main__":
    main()
