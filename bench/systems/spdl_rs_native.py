"""spdl-rs from Python with native stages only (`spdl_rs.ops`): read_file -> decode_image
(+ transform) -> aggregate(32) -> collate, all on Rust threads without the GIL.

The eval/train transforms are used when `spdl_rs.ops.decode_image` takes a `transform`
argument (`"eval"` / `"train"`, with `seed` if accepted). Without it (the bindings as of
this writing only resize to a fixed `width x height`), this worker runs a PROXY: resize to
224x224 ignoring the aspect ratio (one resampling pass like eval, but other pixels); the
report says so (`proxy`), the table marks the row and the pixel check does not apply.
"""

import _common as c  # noqa: I001

import inspect

import numpy as np
from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder

imports = c.imports_done()
args = c.parse_args()
size = args.size
meta = dict(imports, system="spdl_rs_native")


def decode_kwargs() -> dict:
    try:
        params = inspect.signature(ops.decode_image).parameters
    except (TypeError, ValueError):
        params = {}
    mode = "train" if args.config == "train" else "eval"
    if "transform" in params:
        kw = {"width": size, "height": size, "transform": mode}
        if "seed" in params:
            kw["seed"] = args.seed
        return kw
    meta["proxy"] = "resize to 224x224 (spdl_rs.ops.decode_image has no eval/train transform)"
    return {"width": size, "height": size}


kw = decode_kwargs()
# A spdl_rs listing carries each sample's position, which seeds the train draw (`index`), as
# in `spdl load`; a plain list of paths would number the samples in call order.
files = sources.list_files(args.corpus, [".jpg", ".jpeg"])
if args.limit:
    files = files.select(list(range(min(args.limit, len(files)))))
order = "input" if args.dump else "completion"


def build():
    pipeline = (
        PipelineBuilder()
        .add_source(files)
        .pipe(ops.read_file(), concurrency=max(4, args.threads), output_order=order)
        .pipe(ops.decode_image(**kw), concurrency=args.threads, output_order=order)
        .aggregate(args.batch_size)
        .pipe(ops.collate(normalize=args.config == "eval_f32"))
        .add_sink(4)
        .build(num_threads=args.threads)
    )

    def it():
        with pipeline.auto_stop():
            yield from pipeline

    return it()


f32 = args.config == "eval_f32"
c.run(args, build, np.asarray, meta, "NCHW" if f32 else "NHWC", "float32" if f32 else "uint8")
