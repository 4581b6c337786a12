"""SPDL 0.8.0 (PyPI): its pipeline (`spdl.pipeline.PipelineBuilder`) with FFmpeg filters that
match the transforms exactly.

    --variant batch: one stage calls `spdl.io.load_image_batch` on 32 paths (images of a batch
                     decoded one after another in one task; batches in parallel);
    --variant image: `spdl.io.load_image` per image, `aggregate(32)`, then a NumPy collate.

eval: `scale=w=256:h=256:flags=bilinear:force_original_aspect_ratio=increase,crop=w=224:h=224`
(`load_image_batch(width=224, height=224)` alone would letterbox). train: per image,
`crop=CW:CH:X:Y,scale=224:224:flags=bilinear[,hflip]` with torchvision's random-resized-crop
parameters drawn from the sample's own seeded generator (the filter needs the image size,
from `demux_image`). eval_f32: eval, then NumPy normalization to NCHW f32 inside the stage.
"""

import _common as c  # noqa: I001  (first: starts the import clock)

import argparse
import sys

import numpy as np
import spdl.io
from spdl.pipeline import PipelineBuilder

imports = c.imports_done()

p = argparse.ArgumentParser(add_help=False)
p.add_argument("--variant", choices=("batch", "image"), required=True)
variant_args, rest = p.parse_known_args()
args = c.parse_args(rest)
variant = variant_args.variant
size = args.size
s = c.shorter_side(size)
EVAL = (
    f"scale=w={s}:h={s}:flags=bilinear:force_original_aspect_ratio=increase,"
    f"crop=w={size}:h={size},format=pix_fmts=rgb24"
)


def train_filter(w: int, h: int, index: int) -> str:
    x, y, cw, ch, flip = c.train_box(args, index, w, h)
    f = f"crop=w={cw}:h={ch}:x={x}:y={y},scale=w={size}:h={size}:flags=bilinear"
    if flip:
        f += ",hflip"
    return f + ",format=pix_fmts=rgb24"


def decode_train(index: int, path: str):
    pkts = spdl.io.demux_image(path)
    return spdl.io.decode_packets(pkts, filter_desc=train_filter(pkts.width, pkts.height, index))


def finish(batch):
    """NumPy array of a batch; normalized f32 NCHW for eval_f32."""
    a = spdl.io.to_numpy(batch) if not isinstance(batch, np.ndarray) else batch
    return c.normalize_nhwc_u8(a) if args.config.endswith("_f32") else a


def load_batch(chunk):
    if args.config.startswith("train"):
        frames = [decode_train(i, path) for i, path in chunk]
        buf = spdl.io.convert_frames(frames)
    else:
        buf = spdl.io.load_image_batch([p for _, p in chunk], width=None, height=None, filter_desc=EVAL)
    return finish(buf)


def load_one(item):
    i, path = item
    if args.config.startswith("train"):
        return spdl.io.to_numpy(spdl.io.convert_frames(decode_train(i, path)))
    return spdl.io.to_numpy(spdl.io.load_image(path, filter_desc=EVAL))


def collate(images):
    return finish(np.stack(images))


files = list(enumerate(c.list_files(args.corpus, args.limit)))
# The dump (pixel check) keeps the listing order; the timed runs take completion order, as
# SPDL's default.
order = "input" if args.dump else "completion"


def build():
    b = PipelineBuilder()
    if variant == "batch":
        chunks = [files[i : i + args.batch_size] for i in range(0, len(files), args.batch_size)]
        b.add_source(chunks).pipe(load_batch, concurrency=args.threads, output_order=order)
    else:
        b.add_source(files).pipe(load_one, concurrency=args.threads, output_order=order)
        b.aggregate(args.batch_size).pipe(collate)
    pipeline = b.add_sink(4).build(num_threads=args.threads)

    def it():
        with pipeline.auto_stop():
            yield from pipeline

    return it()


layout = "NCHW" if args.config.endswith("_f32") else "NHWC"
dtype = "float32" if args.config.endswith("_f32") else "uint8"
c.run(args, build, lambda b: b, dict(imports, system=f"spdl08_{variant}"), layout, dtype)
sys.stdout.flush()
