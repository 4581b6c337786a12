"""spdl-rs from Python with native stages only (`spdl_rs.ops`): read_file -> decode_image
(+ the eval/train transform, seeded with `seed`) -> aggregate(32) -> collate, all on Rust
threads without the GIL.
"""

import _common as c  # noqa: I001

import numpy as np
from spdl_rs import ops, sources

imports = c.imports_done()
args = c.parse_args()
size = args.size
meta = dict(imports, system="spdl_rs_native")


mode = "train" if args.config.startswith("train") else "eval"
kw = {"width": size, "height": size, "transform": mode, "seed": args.seed}
# A spdl_rs listing carries each sample's position, which seeds the train draw (`index`), as
# in `spdl load`; a plain list of paths would number the samples in call order.
files = sources.list_files(args.corpus, [".jpg", ".jpeg"])
if args.limit:
    files = files.select(list(range(min(args.limit, len(files)))))
f32 = args.config.endswith("_f32")


def build():
    decode = ops.decode_image(**kw)
    return c.spdl_rs_batches(args, files, ops.read_file(), decode, ops.collate(normalize=f32))


c.run(args, build, np.asarray, meta, "NCHW" if f32 else "NHWC", "float32" if f32 else "uint8")
