"""spdl-rs from Python with Python function stages that call `spdl_rs.io` (the GIL is taken
for each call, released inside): read (Python) -> decode + transform (`spdl_rs.io.decode_image`)
-> aggregate(32) -> NumPy collate (+ normalization for eval_f32), on the spdl_rs pipeline.

With a `transform` argument in `spdl_rs.io.decode_image`, it is used. Without it (the
bindings as of this writing), the transforms are built from what `spdl_rs.io` offers, doing the
same geometry as torchvision:

- eval: the size from the JPEG header, `decode_image(data, W', H')` with the shorter side 256
  (the same rounding as torchvision's Resize(256)), then a center-crop view in NumPy;
- train: the crop box of `_common.train_box` (spdl-rs's draw with the harness's --boxes); the
  whole image is resized so the crop box becomes 224x224, then cropped (and flipped) in NumPy.
  This resamples more pixels than a crop-first resize (about 2.7x on average): it is more work
  than the others do, never less; the report says `emulated`.
"""

import _common as c  # noqa: I001

import inspect

import numpy as np
import spdl_rs.io as sio
from spdl_rs.pipeline import PipelineBuilder

imports = c.imports_done()
args = c.parse_args()
size = args.size
meta = dict(imports, system="spdl_rs_pyfunc")

try:
    native_transform = "transform" in inspect.signature(sio.decode_image).parameters
except (TypeError, ValueError):
    native_transform = False
if not native_transform:
    meta["emulated"] = "eval/train built from decode_image(W, H) + NumPy crop/flip"


def read(item):
    i, path = item
    with open(path, "rb") as f:
        return i, path, f.read()


def decode(item):
    i, path, data = item
    if native_transform:
        # `index` (the listing position) and `seed` fix the train draw, as in `spdl load`.
        mode = "train" if args.config == "train" else "eval"
        return np.asarray(sio.decode_image(data, transform=mode, size=size, seed=args.seed, index=i, key=path))
    w, h = c.jpeg_size(data)
    if args.config == "train":
        x, y, cw, ch, flip = c.train_box(args, i, w, h)
        # Resize the whole image so that the crop box maps onto size x size.
        sx, sy = size / cw, size / ch
        rw, rh = max(size, round(w * sx)), max(size, round(h * sy))
        x0, y0 = min(round(x * sx), rw - size), min(round(y * sy), rh - size)
        img = np.asarray(sio.decode_image(data, rw, rh, key=path))[y0 : y0 + size, x0 : x0 + size]
        return img[:, ::-1] if flip else img
    rw, rh = c.eval_resize_dims(w, h, size)
    img = np.asarray(sio.decode_image(data, rw, rh, key=path))
    top, left = int(round((rh - size) / 2.0)), int(round((rw - size) / 2.0))
    return img[top : top + size, left : left + size]


def collate(images):
    batch = np.stack(images)
    return c.normalize_nhwc_u8(batch) if args.config == "eval_f32" else batch


files = list(enumerate(c.list_files(args.corpus, args.limit)))
order = "input" if args.dump else "completion"


def build():
    pipeline = (
        PipelineBuilder()
        .add_source(files)
        .pipe(read, concurrency=max(4, args.threads), output_order=order)
        .pipe(decode, concurrency=args.threads, output_order=order)
        .aggregate(args.batch_size)
        .pipe(collate)
        .add_sink(4)
        .build(num_threads=args.threads)
    )

    def it():
        with pipeline.auto_stop():
            yield from pipeline

    return it()


f32 = args.config == "eval_f32"
c.run(args, build, np.asarray, meta, "NCHW" if f32 else "NHWC", "float32" if f32 else "uint8")
