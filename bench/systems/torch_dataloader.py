"""PyTorch `DataLoader` (num_workers = --threads; 0 = in the main process) over a map-style
dataset: `torchvision.io.read_file` + `decode_jpeg(mode=RGB)` + transforms v2, batch 32,
default collate (NCHW u8 batches; f32 for eval_f32 and train_f32), no shuffle, `torch.manual_seed(seed)` and
a seeded generator for the workers.

eval: Resize(256, bilinear, antialias=True), CenterCrop(224). train: RandomResizedCrop(224,
scale=(0.08, 1), antialias=True), RandomHorizontalFlip(). eval_f32 / train_f32: eval / train, then ToDtype(float32,
scale=True), Normalize(ImageNet mean, std). Torch's own intra-op threads are left at their
defaults (DataLoader sets 1 per worker process).
"""

import _common as c  # noqa: I001

import torch
import torchvision
from torch.utils.data import DataLoader, Dataset
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2

imports = c.imports_done()
args = c.parse_args()
size = args.size
torch.manual_seed(args.seed)

if args.config.startswith("train"):
    steps = [v2.RandomResizedCrop(size, scale=(0.08, 1.0), antialias=True), v2.RandomHorizontalFlip()]
else:
    steps = [v2.Resize(c.shorter_side(size), antialias=True), v2.CenterCrop(size)]
f32 = args.config.endswith("_f32")
if f32:
    steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(c.MEAN, c.STD)]
tf = v2.Compose(steps)


class Files(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        img = decode_jpeg(read_file(self.paths[i]), mode=ImageReadMode.RGB)
        return tf(img)


files = c.list_files(args.corpus, args.limit)


def build():
    return DataLoader(
        Files(files),
        batch_size=args.batch_size,
        shuffle=False,
        num_workers=args.threads,
        generator=torch.Generator().manual_seed(args.seed),
    )


meta = dict(imports, system="torch_dataloader", torch=torch.__version__, torchvision=torchvision.__version__)
c.run(args, build, lambda b: b.numpy(), meta, "NCHW", "float32" if f32 else "uint8")
