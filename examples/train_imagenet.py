"""Trains an image classifier with PyTorch on an ImageFolder-style dataset, loaded by spdl_rs.

The dataset is torchvision's ImageFolder layout: ``ROOT/CLASS/IMAGE``, class ``i`` being the
``i``-th sub-folder by name. The loader is one spdl_rs pipeline per epoch: this rank's share of
the epoch (``sources.Sampler``), read and decoded with the ImageNet train transform (random
resized crop and flip) on Rust threads without the GIL, batched into ``[N, 3, S, S]`` float32
normalized with the ImageNet mean and std, and (on a GPU) copied to the device on its own
stream. The training loop receives each batch without a copy (``torch.from_dlpack``).

- Device: ``cuda:LOCAL_RANK`` when CUDA is available, the CPU otherwise.
- DDP: started by ``torchrun``, each rank trains on its share (``RANK`` / ``WORLD_SIZE`` from
  the environment; NCCL on GPUs, Gloo on CPUs) and the gradients are averaged by
  ``DistributedDataParallel``.
- Checkpoints (``--checkpoint PATH``): the model, the optimizer, and the loader's position (each
  rank's ``Sampler.state(pipeline.state_dict())``) in one file, written at the end of every
  epoch and when ``--max-steps`` stops the run mid-epoch. Rerunning with the same
  ``--checkpoint`` resumes where it stopped: the samples already trained on in that epoch are
  not loaded again, the others come exactly once, also under another world size.

Run::

    python examples/train_imagenet.py /data/imagenet/train --model resnet50 --batch-size 256
    torchrun --nproc-per-node 8 examples/train_imagenet.py /data/imagenet/train --model resnet50
    # CPU, seconds (CI): a tiny CNN on the bundled photos sorted into class folders
    python examples/train_imagenet.py DIR --epochs 2 --batch-size 4 --size 64 --checkpoint ck.pt

``--model tiny`` needs only torch; the ResNets need torchvision. Prints one line per epoch:
``epoch E: N samples in B batches, loss L, S samples/s, W% of the time waiting for data``.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from spdl_rs import sources

from _train_common import arg_parser, print_resumed, run_epochs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = arg_parser(__doc__.split("\n\n")[0], lr=0.1, per_rank=True)
    p.add_argument("--model", default="tiny", help="tiny, or a torchvision model name (resnet18, resnet50, ...)")
    return p.parse_args(argv)


def setup_device() -> tuple[torch.device, bool]:
    """The device of this rank, and whether this is a multi-process (torchrun) job."""
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if distributed:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device, distributed


def build_model(name: str, num_classes: int) -> nn.Module:
    if name == "tiny":
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, num_classes),
        )
    import torchvision

    return torchvision.models.get_model(name, num_classes=num_classes)


def load_checkpoint(path: str, model: nn.Module, optimizer: torch.optim.Optimizer,
                    num_samples: int, seed: int) -> tuple[sources.Sampler, int]:
    """Restores the model and optimizer; returns this rank's sampler where the run stopped, and
    the global step."""
    ckpt = torch.load(path, map_location="cpu")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    states = ckpt["loader"]
    if states is None:  # saved between epochs
        sampler = sources.Sampler(num_samples, shuffle=True, seed=seed)
        sampler.set_epoch(ckpt["epoch"])
    elif len(states) == int(os.environ.get("WORLD_SIZE", "1")):
        sampler = sources.Sampler.from_state(states[int(os.environ.get("RANK", "0"))])
    else:  # another world size: deal what is left of the epoch to the new ranks
        sampler = sources.Sampler.resume(sources.merge_states(states))
    return sampler, ckpt["step"]


def save_checkpoint(path: str, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int,
                    step: int, loader_state: str | None, distributed: bool) -> None:
    """Every rank's loader state, and the model, into one file written by rank 0."""
    states = None
    if loader_state is not None:
        states = [loader_state]
        if distributed:
            states = [None] * dist.get_world_size()
            dist.all_gather_object(states, loader_state)
    if not distributed or dist.get_rank() == 0:
        module = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
        tmp = f"{path}.tmp"
        torch.save({"model": module.state_dict(), "optimizer": optimizer.state_dict(),
                    "epoch": epoch, "step": step, "loader": states}, tmp)
        os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device, distributed = setup_device()
    torch.manual_seed(args.seed)
    samples = sources.image_folder(args.root)
    model = build_model(args.model, len(samples.classes)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)

    if args.checkpoint and os.path.exists(args.checkpoint):
        sampler, step = load_checkpoint(args.checkpoint, model, optimizer, len(samples), args.seed)
        print_resumed(sampler, step)
    else:
        sampler, step = sources.Sampler(len(samples), shuffle=True, seed=args.seed), 0
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def train(batch) -> tuple[float, int]:
        images = torch.from_dlpack(batch)  # no copy; on the GPU after to_device()
        labels = torch.tensor(batch.labels, device=device)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item(), len(labels)

    def save(epoch: int, step: int, loader_state: str | None) -> None:
        save_checkpoint(args.checkpoint, model, optimizer, epoch, step, loader_state, distributed)

    run_epochs(args, samples, sampler, step, train, save, device.index if device.type == "cuda" else None)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
