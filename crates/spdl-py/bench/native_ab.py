"""A/B of native-stage cost: read_file -> decode_image(eval 224) -> aggregate(8) -> collate over
a folder for EPOCHS epochs after a warm-up one; prints images/s and CPU ms per image (user +
system of the whole process). Run it with two venvs' pythons, alternating, to compare builds:

    python crates/spdl-py/bench/native_ab.py data/samples 80 2   # ROOT EPOCHS THREADS [READ_CONCURRENCY]

READ_CONCURRENCY (default 4) is read_file's; equal to THREADS, read_file and decode_image fuse
onto one lane (same concurrency, at least the worker count).
"""
import inspect, resource, sys, time
from spdl_rs import ops, sources
from spdl_rs.pipeline import PipelineBuilder

root, epochs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
read_c = int(sys.argv[4]) if len(sys.argv) > 4 else 4
files = sources.list_files(root)
b = PipelineBuilder()
kw = {"continuous": True} if "continuous" in inspect.signature(b.add_source).parameters else {}
p = (b.add_source(files, **kw).pipe(ops.read_file(), concurrency=read_c)
     .pipe(ops.decode_image(transform="eval", size=224), concurrency=threads)
     .aggregate(8).pipe(ops.collate()).add_sink(4).build(num_threads=threads))
n = 0
with p.auto_stop():
    for b_ in p:  # warm-up epoch
        pass
    t0 = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(epochs):
        for b_ in p:
            n += len(b_)
    dt = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(f"{n / dt:.1f} {1e3 * (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n:.3f}")
