"""`dataloader-rs` 0.2.0 (PyPI): a PyTorch-style DataLoader with a Rust core and worker
threads. It has no decoder of its own, so `__getitem__` uses Pillow (libjpeg-turbo inside;
decode and resize release the GIL). Needs Python >= 3.13: it runs from its own venv
(`--python-dataloader-rs` of the harness).

eval: `resize` of the shorter side to 256 (BILINEAR, antialiased, torchvision's rounding),
center crop 224. train: the seeded random-resized-crop parameters of `_common.py` (the same as
the SPDL 0.8 and spdl_rs pyfunc workers), `resize((224, 224), BILINEAR, box=crop)` and a flip.
eval_f32: NumPy normalization in `collate_fn`. num_workers = --threads (0: calling thread).
"""

import _common as c  # noqa: I001

import numpy as np
from dataloader_rs import PyDataloader, PyDataset
from PIL import Image

imports = c.imports_done()
args = c.parse_args()
size = args.size


class Files(PyDataset):
    def __init__(self, paths):
        super().__init__()
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with Image.open(self.paths[i]) as im:
            im = im.convert("RGB")
            w, h = im.size
            if args.config.startswith("train"):
                x, y, cw, ch, flip = c.train_box(args, i, w, h)
                out = im.resize((size, size), Image.BILINEAR, box=(x, y, x + cw, y + ch))
                if flip:
                    out = out.transpose(Image.FLIP_LEFT_RIGHT)
            else:
                rw, rh = c.eval_resize_dims(w, h, size)
                top, left = int(round((rh - size) / 2.0)), int(round((rw - size) / 2.0))
                out = im.resize((rw, rh), Image.BILINEAR).crop((left, top, left + size, top + size))
            return np.asarray(out)


def collate(images):
    batch = np.stack(images)
    return c.normalize_nhwc_u8(batch) if args.config.endswith("_f32") else batch


files = c.list_files(args.corpus, args.limit)


def build():
    return PyDataloader(
        Files(files), batch_size=args.batch_size, num_workers=args.threads, collate_fn=collate
    )


f32 = args.config.endswith("_f32")
c.run(args, build, np.asarray, dict(imports, system="dataloader_rs"), "NCHW" if f32 else "NHWC",
      "float32" if f32 else "uint8")
