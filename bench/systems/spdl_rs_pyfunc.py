"""spdl-rs from Python with Python function stages that call `spdl_rs.io` (the GIL is taken
for each call, released inside): read (Python) -> decode + transform (`spdl_rs.io.decode_image`
with the eval/train transform) -> aggregate(32) -> NumPy collate (+ normalization for
eval_f32), on the spdl_rs pipeline.
"""

import _common as c  # noqa: I001

import numpy as np
import spdl_rs.io as sio

imports = c.imports_done()
args = c.parse_args()
size = args.size
meta = dict(imports, system="spdl_rs_pyfunc")


def read(item):
    i, path = item
    with open(path, "rb") as f:
        return i, path, f.read()


def decode(item):
    i, path, data = item
    # `index` (the listing position) and `seed` fix the train draw, as in `spdl load`.
    mode = "train" if args.config.startswith("train") else "eval"
    return np.asarray(sio.decode_image(data, transform=mode, size=size, seed=args.seed, index=i, key=path))


def collate(images):
    batch = np.stack(images)
    return c.normalize_nhwc_u8(batch) if args.config.endswith("_f32") else batch


files = list(enumerate(c.list_files(args.corpus, args.limit)))


def build():
    return c.spdl_rs_batches(args, files, read, decode, collate)


f32 = args.config.endswith("_f32")
c.run(args, build, np.asarray, meta, "NCHW" if f32 else "NHWC", "float32" if f32 else "uint8")
