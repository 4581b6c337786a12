"""TurboLoader (PyPI `turboloader`) reading a tar of the corpus: `turboloader.DataLoader(tar,
image_size=224, train_aug=True, hflip_prob=0.5, transform=ImageNetNormalize(),
output_format="numpy_chw")`, its fused C++ pass (crop-window JPEG decode, random resized crop,
flip, normalize) to f32 NCHW batches. ``train_f32`` only (TurboLoader draws its own crops:
shape and non-blank check only).

The tar (`--tar`, the files of the listing in listing order, named `000000.jpg`, ...) is
written by the harness before timing, as a user would pack the corpus once. `--threads` is
passed as `num_workers`; TurboLoader documents its array path as one process-wide C++ pool
(its own thread count, the machine's cores), so on the 2-core benchmark machine it runs on
the same 2 cores as the others. Antialiasing is TurboLoader's default (off).
"""

import _common as c  # noqa: I001

import sys

import numpy as np
import turboloader as tl

imports = c.imports_done()
argv = sys.argv[1:]
tar = None
if "--tar" in argv:
    i = argv.index("--tar")
    tar = argv[i + 1]
    del argv[i : i + 2]
args = c.parse_args(argv)
if args.config != "train_f32":
    c.fail(f"TurboLoader row: train_f32 only (not {args.config})")
if not tar:
    c.fail("no --tar (the harness packs the corpus)")


def build():
    loader = tl.DataLoader(
        tar,
        batch_size=args.batch_size,
        num_workers=args.threads,
        shuffle=False,
        image_size=args.size,
        output_format="numpy_chw",
        train_aug=True,
        hflip_prob=0.5,
        seed=args.seed,
        transform=tl.ImageNetNormalize(),
    )

    def it():
        for b in loader:
            yield b[0] if isinstance(b, (tuple, list)) else b

    return it()


meta = dict(imports, system="turboloader", turboloader=tl.__version__)
c.run(args, build, np.asarray, meta, "NCHW", "float32")
