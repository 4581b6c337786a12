"""The decoder's own limit: libjpeg-turbo decode alone (no resize, no batching) of the same
files, read into memory first, on all cores (`--threads`, default all), through
`spdl_rs.io.decode_image` (full-size RGB, GIL released) on a thread pool. One "batch" per
32 images, so the report has the same shape as the others.
"""

import _common as c  # noqa: I001

import os
from concurrent.futures import ThreadPoolExecutor

import spdl_rs.io as sio

imports = c.imports_done()
args = c.parse_args()
paths = c.list_files(args.corpus, args.limit)
blobs = []
for p in paths:
    with open(p, "rb") as f:
        blobs.append(f.read())
threads = args.threads or os.cpu_count()


def decode_chunk(chunk):
    for data in chunk:
        sio.decode_image(data)
    return chunk


def build():
    chunks = [blobs[i : i + args.batch_size] for i in range(0, len(blobs), args.batch_size)]
    pool = ThreadPoolExecutor(threads)

    def it():
        with pool:
            yield from pool.map(decode_chunk, chunks)

    return it()


c.run(args, build, None, dict(imports, system="limit_decode"), "HWC", "uint8")
