#!/usr/bin/env python3
"""`cargo xtask bench images`: the whole image pipeline, spdl-rs against its peers.

    python3 bench/images.py --python VENV/bin/python --spdl target/release/spdl \
        [--corpus DIR] [--rounds 3] [--systems a,b] [--configs eval,train,eval_f32] \
        [--threads 1,2,4] [--workers 0,1,2,4] [--limit N] [--smoke] [--out bench/results]

The driver uses the standard library only (the pixel check and the chart run in the venv's
Python, which has NumPy and matplotlib). What it does:

1. warms the page cache (reads every file of the corpus once);
2. probes each system (can its worker import what it needs?): a system that cannot run is
   listed as skipped with the reason, the rest go on;
3. pixel check: each system's first batch (the first 32 files, listing order) of each
   configuration is saved and compared with the reference system's (see TOLERANCE);
4. timing: `rounds` rounds; in each round every (configuration, system, threads) runs once,
   systems alternating (A B C A B C ...) so that drift on a shared machine falls on all; every
   run is a fresh process. Per run: images/s, CPU seconds (user + system of the whole process
   tree, children included, from `os.wait4`) per image less the worker's import CPU, peak
   memory (PSS of the process tree, summed, sampled every 50 ms from
   /proc/PID/smaps_rollup), time to the first batch, import time and start-up + teardown
   (wall time of the process less the loop);
5. writes `images.md` (a table per configuration, each figure with its ratio to the
   DataLoader's best), `images.json` (every run) and `images.png` (images/s against threads,
   one line per system) under --out (`images-smoke.*` with --smoke).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYSTEMS_DIR = HERE / "systems"
CORES = os.cpu_count() or 1

# Pixel check: mean absolute difference per value against the reference system's first batch.
# Resamplers differ (libjpeg-turbo vs FFmpeg's JPEG decoder and YUV->RGB, swscale vs
# torchvision vs fast_image_resize antialiasing, rounding of the crop offset), so the pixels
# are not identical; a wrong geometry (letterbox, no crop, other crop) gives 15-60 levels.
TOLERANCE_U8 = 3.0  # levels of 255
TOLERANCE_F32 = TOLERANCE_U8 / 255 / 0.226  # the same in normalized units (std ~0.226)
# train: the systems that share the seeded crop boxes place them with different sub-pixel
# offsets (crop-then-resize in FFmpeg and Pillow, resize-then-crop with rounding in the spdl_rs
# emulation), which on up-scaled small crops moves edges by up to half an output pixel.
TOLERANCE_TRAIN_U8 = 6.0
TOLERANCE_TRAIN_F32 = TOLERANCE_TRAIN_U8 / 255 / 0.226


class System:
    def __init__(self, name, kind, desc, script=None, extra=(), needs=(), axis="threads", group="",
                 configs=None):
        # dataloader-rs needs Python >= 3.13: its worker runs from --python-dataloader-rs.
        self.name = name
        self.kind = kind  # "cli-load", "cli-limit" or "py"
        self.desc = desc
        self.script = script
        self.extra = list(extra)
        self.needs = needs
        self.axis = axis  # "threads", "workers" or "cores"
        self.group = group
        self.configs = configs  # None: every configuration


SYSTEMS = [
    System("spdl_cli", "cli-load", "spdl-rs: `spdl load` (Rust only)", group="spdl-rs"),
    System("spdl_rs_native", "py", "spdl-rs Python, native stages (`spdl_rs.ops`)",
           "spdl_rs_native.py", needs=("spdl_rs", "numpy"), group="spdl-rs"),
    System("spdl_rs_pyfunc", "py", "spdl-rs Python, Python stages calling `spdl_rs.io`",
           "spdl_rs_pyfunc.py", needs=("spdl_rs", "numpy"), group="spdl-rs"),
    System("spdl08_batch", "py", "SPDL 0.8.0 pipeline, `load_image_batch`", "spdl08.py",
           ["--variant", "batch"], needs=("spdl.io", "spdl.pipeline", "numpy"), group="spdl08"),
    System("spdl08_image", "py", "SPDL 0.8.0 pipeline, `load_image` + aggregate", "spdl08.py",
           ["--variant", "image"], needs=("spdl.io", "spdl.pipeline", "numpy"), group="spdl08"),
    System("torch_dataloader", "py", "PyTorch DataLoader, `decode_jpeg` + transforms v2",
           "torch_dataloader.py", needs=("torch", "torchvision", "numpy"), axis="workers",
           group="torch"),
    System("dataloader_rs", "py", "`dataloader-rs` 0.2 (PyPI), Rust-core DataLoader, Pillow decode",
           "dataloader_rs_pil.py", needs=("dataloader_rs", "PIL", "numpy"), axis="workers",
           group="dataloader-rs"),
    System("turboloader", "py", "TurboLoader (PyPI), tar of the corpus, fused `train_aug` + normalize",
           "turboloader_tar.py", needs=("turboloader", "numpy"), group="turboloader",
           configs=("train_f32",)),
    System("limit_decode", "py", "limit: libjpeg-turbo full decode alone (decode-only ceiling)",
           "limit_decode.py", needs=("spdl_rs",), axis="cores", group="limit"),
    System("limit_transform", "cli-limit", "limit: `spdl limit`, decode + transform, bare loop",
           axis="cores", group="limit"),
]
BY_NAME = {s.name: s for s in SYSTEMS}
SMOKE_SYSTEMS = ["spdl_cli", "spdl_rs_native", "spdl_rs_pyfunc", "limit_decode", "limit_transform"]
REFERENCE = ["torch_dataloader", "spdl08_batch", "spdl_rs_pyfunc"]  # first available wins
# train: the systems that crop `_common.train_box` boxes, reference first. Without shared boxes
# (spdl_rs not importable by the driver's Python), only the first three share a generator.
SAME_BOXES = ("spdl08_batch", "spdl08_image", "dataloader_rs", "spdl_cli", "spdl_rs_native", "spdl_rs_pyfunc")
CONFIG_TITLES = {
    "eval": "evaluation: shorter side 256 (antialiased), center crop 224, u8",
    "train": "training: random resized crop 224 (scale 0.08-1), horizontal flip, seeded, u8",
    "eval_f32": "evaluation normalized: as eval, then ImageNet mean/std, f32 NCHW",
    "train_f32": "training normalized: as train, then ImageNet mean/std, f32 NCHW",
}


# --------------------------------------------------------------------------- processes


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out += [int(x) for x in f.read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def tree_pss_kb(root: int) -> int:
    """Summed PSS of `root` and its descendants (kB); RSS where smaps_rollup is unreadable."""
    total = 0
    stack = [root]
    seen = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack += _children(pid)
        kb = _proc_field_kb(f"/proc/{pid}/smaps_rollup", "Pss:")
        if kb is None:
            kb = _proc_field_kb(f"/proc/{pid}/status", "VmRSS:")
        total += kb or 0
    return total


def _proc_field_kb(path: str, field: str) -> int | None:
    """The kB figure of the first line of `path` that starts with `field` (e.g. `"Pss:"`);
    `None` if the file is unreadable."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        return None
    return 0


def measure(cmd: list[str], env: dict | None = None, timeout: float = 1800) -> dict:
    """Runs `cmd` as a fresh process; returns its stdout, stderr, exit code, wall seconds,
    CPU seconds of the process tree (`os.wait4`) and peak summed PSS (MB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            stdin=subprocess.DEVNULL)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_pss_kb(proc.pid))
            done.wait(0.05)

    out_chunks, err_chunks = [], []
    readers = [
        threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True),
        threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True),
        threading.Thread(target=sample, daemon=True),
    ]
    for t in readers:
        t.start()
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    done.set()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join(timeout=10)
    return {
        "rc": proc.returncode,
        "stdout": b"".join(out_chunks).decode(errors="replace"),
        "stderr": b"".join(err_chunks).decode(errors="replace"),
        "wall": wall,
        "cpu": ru.ru_utime + ru.ru_stime,
        "peak_mb": peak[0] / 1024,
        "maxrss_mb": ru.ru_maxrss / 1024,
    }


# --------------------------------------------------------------------------- commands


def python_of(s: System, a) -> str:
    return a.python_dataloader_rs if s.name == "dataloader_rs" and a.python_dataloader_rs else a.python


def command(s: System, a, config: str, n: int, dump: str | None = None) -> list[str]:
    if s.kind in ("cli-load", "cli-limit"):
        sub = "load" if s.kind == "cli-load" else "limit"
        cmd = [a.spdl, sub, a.corpus, "--threads", str(n), "--size", "224", "--json",
               "--transform", "train" if config.startswith("train") else "eval", "--seed", "0"]
        if s.kind == "cli-load":
            cmd += ["--batch-size", "32"]
            if config.endswith("_f32"):
                cmd += ["--dtype", "f32", "--layout", "nchw"]
        if dump:
            cmd += ["--dump", dump, "--limit", "32"]
        elif a.limit:
            cmd += ["--limit", str(a.limit)]
        return cmd
    cmd = [python_of(s, a), str(SYSTEMS_DIR / s.script), *s.extra, "--corpus", a.corpus,
           "--config", config, "--threads", str(n), "--batch-size", "32", "--size", "224",
           "--seed", "0"]
    if config.startswith("train") and a.boxes:
        cmd += ["--boxes", a.boxes]
    if s.name == "turboloader":
        cmd += ["--tar", a.tar or ""]
    if dump:
        cmd += ["--dump", dump, "--limit", "32"]
    elif a.limit:
        cmd += ["--limit", str(a.limit)]
    return cmd


def write_tar(a, path: Path) -> str:
    """The corpus as one uncompressed tar for TurboLoader (which reads tars of JPEGs): the
    files of the listing (`--limit` applied), in listing order, named `000000.jpg`, ...
    Written once before timing, as a user would pack the corpus; its pages stay cached."""
    import tarfile

    sys.path.insert(0, str(SYSTEMS_DIR))
    import _common

    t0 = time.perf_counter()
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i, p in enumerate(_common.list_files(a.corpus, a.limit)):
            tar.add(p, arcname=f"{i:06d}.jpg", recursive=False)
    print(f"  TurboLoader tar {path} ({path.stat().st_size / 1e6:.1f} MB, "
          f"{time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return str(path)


def write_boxes(a, path: Path) -> str | None:
    """The train crop boxes and flips of every file (by listing position), drawn by
    `spdl_rs.io.random_resized_crop` with seed 0: the boxes `spdl load --transform train` and
    spdl_rs take, given to the other systems' workers so that all crop the same regions. None
    (each system draws its own) when spdl_rs is not importable."""
    script = f"""
import json, sys
sys.path.insert(0, {str(SYSTEMS_DIR)!r})
import _common as c
from spdl_rs.io import random_resized_crop
out = []
for i, p in enumerate(c.list_files(sys.argv[1])):
    with open(p, "rb") as f:
        w, h = c.jpeg_size(f.read())
    out.append(random_resized_crop(w, h, size=224, seed=0, index=i))
json.dump(out, open(sys.argv[2], "w"))
"""
    r = subprocess.run([a.python, "-c", script, a.corpus, str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"  train boxes not shared ({(r.stderr.strip().splitlines() or ['?'])[-1][:200]})", file=sys.stderr)
        return None
    return str(path)


def parse_report(s: System, m: dict) -> dict:
    """The run's figures, or {"error": ...} / {"skipped": ...}."""
    lines = [l for l in m["stdout"].splitlines() if l.strip()]
    try:
        rep = json.loads(m["stdout"]) if s.kind != "py" else json.loads(lines[-1])
    except (ValueError, IndexError):
        tail = (m["stderr"].strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {m['rc']}: {tail[:300]}"}
    if "skipped" in rep:
        return rep
    if m["rc"] != 0:
        tail = (m["stderr"].strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {m['rc']}: {tail[:300]}"}
    if rep.get("failed"):
        return {"error": f"{rep['failed']} images failed"}
    images = rep["images"]
    seconds = rep["seconds"]
    import_cpu = rep.get("import_cpu_seconds", 0.0)
    return {
        "images": images,
        "seconds": seconds,
        "images_per_second": images / seconds if seconds > 0 else 0.0,
        "cpu_per_image": (m["cpu"] - import_cpu) / images if images else None,
        "cpu_seconds": m["cpu"],
        "peak_mb": m["peak_mb"],
        "maxrss_mb": m["maxrss_mb"],
        "first_batch_seconds": rep.get("first_batch_seconds"),
        "import_seconds": rep.get("import_seconds", 0.0),
        "startup_seconds": m["wall"] - seconds,
        "wall": m["wall"],
        "proxy": rep.get("proxy"),
        "emulated": rep.get("emulated"),
    }


def probe(s: System, a) -> str | None:
    """None if the system can run here, else the reason it is skipped."""
    if s.kind.startswith("cli"):
        return None if os.access(a.spdl, os.X_OK) else f"{a.spdl} not built"
    if not (SYSTEMS_DIR / s.script).exists():
        return f"no worker script {s.script}"
    code = "import " + ", ".join(s.needs)
    r = subprocess.run([python_of(s, a), "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"cannot import ({last[:200]})"
    return None


def runs_config(s: System, config: str) -> bool:
    return s.configs is None or config in s.configs


def points(s: System, a) -> list[int]:
    if s.axis == "cores":
        # The limits run at the pipelines' largest thread count, at most the cores.
        return [min(CORES, max(a.threads))]
    if s.axis == "workers":
        return a.workers
    return a.threads


# --------------------------------------------------------------------------- pixel check


def pixel_check(a, systems: list[System], configs: list[str], tmp: Path) -> dict:
    """{config: {system: {"mad": x, "ok": bool, "note": str}}}; runs each worker once on the
    first 32 files with --dump, then compares in the venv's Python (NumPy)."""
    result: dict = {}
    for config in configs:
        dumps = {}
        notes = {}
        for s in systems:
            if s.kind == "cli-limit" or s.group == "limit" or not runs_config(s, config):
                continue
            path = tmp / f"{config}-{s.name}.npy"
            m = measure(command(s, a, config, 2 if s.axis != "workers" else 0, dump=str(path)))
            if s.kind == "cli-load":
                # `spdl load --dump` prints one line, not the JSON report.
                ok = m["rc"] == 0 and path.exists()
                rep = {} if ok else {"error": f"exit {m['rc']}: {m['stderr'].strip()[-200:]}"}
            else:
                rep = parse_report(s, m)
            if "error" in rep or "skipped" in rep:
                notes[s.name] = rep.get("error") or rep.get("skipped")
                continue
            dumps[s.name] = str(path)
            if rep.get("proxy"):
                notes[s.name] = "proxy"
        ref = next((r for r in REFERENCE if r in dumps), None)
        if config.startswith("train"):
            # Crops are random: the systems that crop the shared boxes (spdl-rs's draws, see
            # write_boxes) are compared with each other, SPDL 0.8 (FFmpeg) as the reference;
            # the DataLoader draws its own (torchvision) and is checked for shape and
            # non-blank images only.
            ref = next((r for r in SAME_BOXES if r in dumps), None)
        script = f"""
import json, sys, numpy as np
dumps = json.loads(sys.argv[1]); ref = sys.argv[2]; tol = float(sys.argv[3]); config = sys.argv[4]
n = int(sys.argv[5])
same_rng = set(json.loads(sys.argv[6]))
out = {{}}
r = np.load(dumps[ref]).astype(np.float64) if ref in dumps else None
for name, p in dumps.items():
    x = np.load(p)
    shape_ok = x.shape[0] == n and (x.shape[1:] == (224, 224, 3) if x.dtype == np.uint8 else x.shape[1:] == (3, 224, 224))
    blank = int((x.reshape(x.shape[0], -1).std(axis=1) < 1e-3).sum())
    d = {{"shape": list(x.shape), "dtype": str(x.dtype), "blank": blank, "shape_ok": bool(shape_ok)}}
    if r is not None and (not config.startswith("train") or name in same_rng) and x.shape == r.shape:
        diff = np.abs(x.astype(np.float64) - r)
        d["mad"] = float(diff.mean()); d["p99"] = float(np.percentile(diff, 99))
        d["ok"] = bool(shape_ok and blank == 0 and d["mad"] <= tol)
    else:
        d["ok"] = bool(shape_ok and blank == 0)
    out[name] = d
print(json.dumps(out))
"""
        tol = {"eval_f32": TOLERANCE_F32, "train": TOLERANCE_TRAIN_U8,
               "train_f32": TOLERANCE_TRAIN_F32}.get(config, TOLERANCE_U8)
        res = {}
        if dumps:
            n = min(32, a.n_files, a.limit or a.n_files)
            same = list(SAME_BOXES) if a.boxes else list(SAME_BOXES[:3])
            r = subprocess.run([a.python, "-c", script, json.dumps(dumps), ref or "", str(tol), config, str(n),
                                json.dumps(same)],
                               capture_output=True, text=True)
            if r.returncode == 0:
                res = json.loads(r.stdout)
            else:
                print(f"pixel check failed to run: {r.stderr.strip()[-300:]}", file=sys.stderr)
        for name, note in notes.items():
            res.setdefault(name, {})["note"] = note
        result[config] = {"reference": ref, "tolerance": tol, "systems": res}
        for name, d in res.items():
            print(f"  pixels {config:8} {name:18} {fmt_check(d, ref, name)}", file=sys.stderr)
    return result


def fmt_check(d: dict | None, ref: str | None, name: str) -> str:
    if not d:
        return "–"
    if d.get("note") == "proxy":
        return "n/a (proxy)"
    if "mad" not in d and d.get("note"):
        return f"not run: {d['note'][:60]}"
    shape = "" if d.get("shape_ok", True) else f" bad shape {d.get('shape')}"
    blank = f" {d['blank']} blank" if d.get("blank") else ""
    if name == ref:
        return f"reference{shape}{blank}"
    if "mad" in d:
        mark = "ok" if d["ok"] else "FAIL"
        return f"{mark}: MAD {d['mad']:.3g}, p99 {d['p99']:.3g}{shape}{blank}"
    return ("ok: shape" if d.get("ok") else "FAIL") + shape + blank


# --------------------------------------------------------------------------- report


def summarize(runs: list[dict]) -> dict:
    ok = [r for r in runs if "images_per_second" in r]
    if not ok:
        return {"error": next((r.get("error") or r.get("skipped") for r in runs), "no run")}
    def med(k):
        xs = [r[k] for r in ok if r.get(k) is not None]
        return statistics.median(xs) if xs else None

    ips = [r["images_per_second"] for r in ok]
    return {
        "rounds": len(ok),
        "ips": statistics.median(ips),
        "ips_min": min(ips),
        "ips_max": max(ips),
        "cpu_per_image": med("cpu_per_image"),
        "peak_mb": med("peak_mb"),
        "first_batch": med("first_batch_seconds"),
        "import": med("import_seconds"),
        "startup": med("startup_seconds"),
        "proxy": ok[0].get("proxy"),
        "emulated": ok[0].get("emulated"),
    }


def ratio(x, best, fmt="{:.2f}x"):
    if x is None or not best:
        return ""
    return fmt.format(x / best)


def table(config: str, summaries: dict, checks: dict, skipped: dict, goals: str = "default") -> tuple[str, dict]:
    """Markdown table of one configuration, and the target ratios ({title: {name: (value, goal,
    op)}}): `goals` "default" (the 2,000-JPEG corpus's targets, best `spdl load` row) or
    "large" (the large-photo goals, for `spdl load` and for `spdl_rs` native stages)."""
    dl = [v for (name, _), v in summaries.items() if name == "torch_dataloader" and "ips" in v]
    best = {
        "ips": max((v["ips"] for v in dl), default=None),
        "cpu": min((v["cpu_per_image"] for v in dl), default=None),
        "mem": min((v["peak_mb"] for v in dl), default=None),
        "fb": min((v["first_batch"] for v in dl), default=None),
    }
    rows = [
        "| system | threads | images/s median (min–max) | × DL best | CPU s/image | × DL | "
        "peak PSS MB | × DL | first batch s | × DL | import s / start-up s | pixels |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    check = checks.get(config, {})
    for (name, n), v in summaries.items():
        s = BY_NAME[name]
        label = s.desc + (" **(proxy: resize 224x224)**" if v.get("proxy") else "")
        label += " (emulated transforms)" if v.get("emulated") else ""
        if "ips" not in v:
            rows.append(f"| {label} | {n} | error: {v['error'][:80]} | | | | | | | | | |")
            continue
        pix = fmt_check(check.get("systems", {}).get(name), check.get("reference"), name)
        if s.kind == "cli-limit" or s.group == "limit":
            pix = "n/a (limit, u8)" if config.endswith("_f32") else "n/a (limit)"
        f = lambda x, spec: "–" if x is None else format(x, spec)  # noqa: E731
        rows.append(
            f"| {label} | {n} | {v['ips']:.0f} ({v['ips_min']:.0f}–{v['ips_max']:.0f}) | "
            f"{ratio(v['ips'], best['ips'])} | {f(v['cpu_per_image'] * 1e3, '.2f')} ms | "
            f"{ratio(v['cpu_per_image'], best['cpu'])} | {v['peak_mb']:.0f} | {ratio(v['peak_mb'], best['mem'])} | "
            f"{f(v['first_batch'], '.3f')} | {ratio(v['first_batch'], best['fb'])} | "
            f"{f(v['import'], '.2f')} / {v['startup']:.2f} | {pix} |"
        )
    for name, why in skipped.items():
        if runs_config(BY_NAME[name], config):
            rows.append(f"| {BY_NAME[name].desc} | – | skipped: {why} | | | | | | | | | |")

    # Targets: the best spdl-rs (`spdl load`) row against the peers' best.
    def best_of(group_names, key="ips"):
        vals = [(v[key], v) for (name, _), v in summaries.items() if name in group_names and "ips" in v]
        return max(vals, key=lambda t: t[0], default=(None, None))

    if goals == "large":
        return "\n".join(rows), large_targets(config, summaries, best, best_of)
    ours, ours_v = best_of({"spdl_cli"})
    spdl08, _ = best_of({"spdl08_batch", "spdl08_image"})
    limit, _ = best_of({"limit_transform"})
    targets = {}
    if ours is not None:
        targets = {
            "images/s vs DataLoader best": (ours / best["ips"] if best["ips"] else None,
                                            {"eval": 2.0, "train": 2.5}.get(config), ">="),
            "images/s vs SPDL 0.8 best": (ours / spdl08 if spdl08 else None,
                                          1.3 if config == "eval" else None, ">="),
            # The limits decode and transform to u8: no normalization to compare with in f32.
            "images/s vs bare-loop limit": (ours / limit if limit and not config.endswith("_f32") else None,
                                            0.95 if config == "eval" else None, ">="),
            "CPU s/image vs DataLoader": (ours_v["cpu_per_image"] / best["cpu"] if best["cpu"] else None, 0.6, "<="),
            "peak memory vs DataLoader": (ours_v["peak_mb"] / best["mem"] if best["mem"] else None, 0.25, "<="),
            "first batch vs DataLoader": (ours_v["first_batch"] / best["fb"] if best["fb"] else None, 0.1, "<="),
        }
    return "\n".join(rows), {"Targets (best `spdl load` row)": targets} if targets else {}


def large_targets(config: str, summaries: dict, best: dict, best_of) -> dict:
    """The large-photo goals, for the best `spdl load` row and the best `spdl_rs` native row:
    images/s >= 1.6x the DataLoader's best, peak memory <= 0.25x and CPU per image <= 0.6x the
    DataLoader's (its lowest), >= 1.0x the full-decode-only ceiling (`limit_decode`, same
    threads) and, in train_f32, >= 1.3x TurboLoader's `train_aug`."""
    spdl08, _ = best_of({"spdl08_batch", "spdl08_image"})
    ceiling, _ = best_of({"limit_decode"})
    limit, _ = best_of({"limit_transform"})
    turbo, _ = best_of({"turboloader"})
    out = {}
    for name, title in (("spdl_cli", "`spdl load`"), ("spdl_rs_native", "`spdl_rs` native stages")):
        ours, v = best_of({name})
        if ours is None:
            continue
        t = {
            "images/s vs DataLoader best": (ours / best["ips"] if best["ips"] else None, 1.6, ">="),
            "peak memory vs DataLoader": (v["peak_mb"] / best["mem"] if best["mem"] else None, 0.25, "<="),
            "CPU s/image vs DataLoader": (v["cpu_per_image"] / best["cpu"] if best["cpu"] else None, 0.6, "<="),
            "images/s vs full-decode-only ceiling": (ours / ceiling if ceiling else None, 1.0, ">="),
            "images/s vs SPDL 0.8 best": (ours / spdl08 if spdl08 else None, None, ">="),
            "images/s vs bare-loop limit (decode + transform)": (
                ours / limit if limit and not config.endswith("_f32") else None, None, ">="),
        }
        if config == "train_f32":
            t["images/s vs TurboLoader `train_aug`"] = (ours / turbo if turbo else None, 1.3, ">=")
        out[f"Goals (best {title} row)"] = t
    return out


def fmt_targets(targets: dict) -> str:
    out = []
    for k, (val, goal, op) in targets.items():
        if val is None:
            out.append(f"- {k}: – (not measured in this configuration)")
            continue
        if goal is None:
            out.append(f"- {k}: {val:.2f}x")
            continue
        met = val >= goal if op == ">=" else val <= goal
        out.append(f"- {k}: {val:.2f}x (target {op} {goal}x: {'met' if met else 'NOT met'})")
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def machine_load() -> str:
    """`uptime`'s load averages (1, 5, 15 min), from /proc/loadavg."""
    try:
        with open("/proc/loadavg") as f:
            return "load average: " + ", ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def warm_page_cache(root: str) -> tuple[int, int]:
    n = size = 0
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                size += len(fh.read())
            n += f.lower().endswith((".jpg", ".jpeg"))
    return n, size


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=sys.executable, help="the venv's python (runs the workers)")
    p.add_argument("--python-dataloader-rs", default=None,
                   help="a Python >= 3.13 with dataloader-rs, Pillow and NumPy (default: --python)")
    p.add_argument("--spdl", default=str(HERE.parent / "target/release/spdl"))
    p.add_argument("--corpus", default=os.path.expanduser("~/.cache/spdl-corpus/imagenet-like-2000"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--systems", default=None, help="comma list (default: all)")
    p.add_argument("--configs", default="eval,train,eval_f32")
    p.add_argument("--threads", default="1,2,4")
    p.add_argument("--workers", default="0,1,2,4", help="DataLoader num_workers")
    p.add_argument("--limit", type=int, default=None, help="only the first N files")
    p.add_argument("--smoke", action="store_true", help="spdl-rs only, one round, threads 2")
    p.add_argument("--no-check", action="store_true", help="skip the pixel check")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--stem", default=None, help="file names under --out [default: images, images-smoke]")
    p.add_argument("--goals", choices=("default", "large"), default="default",
                   help="the targets listed under each table: the default corpus's, or the large-photo goals")
    p.add_argument("--command", default=None, help="the command line to record in the results file")
    p.add_argument("--skip", action="append", default=[], metavar="SYSTEM=REASON",
                   help="mark a system as skipped (e.g. its package did not install)")
    a = p.parse_args()
    a.threads = [int(x) for x in a.threads.split(",")]
    a.workers = [int(x) for x in a.workers.split(",")]
    configs = a.configs.split(",")
    names = a.systems.split(",") if a.systems else [s.name for s in SYSTEMS]
    if a.smoke:
        names = [n for n in names if n in SMOKE_SYSTEMS]
        a.rounds = 1
        a.threads = [2]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        p.error(f"unknown systems {unknown}; known: {', '.join(BY_NAME)}")

    load_before = machine_load()
    n_files, n_bytes = warm_page_cache(a.corpus)
    a.n_files = n_files
    print(f"bench images: {a.corpus}: {n_files} files, {n_bytes / 1e6:.1f} MB (page cache warmed); "
          f"{CORES} cores; {a.rounds} round(s)", file=sys.stderr)

    systems, skipped = [], {}
    forced = dict(x.split("=", 1) for x in a.skip)
    for n in names:
        s = BY_NAME[n]
        why = forced.get(n) or probe(s, a)
        if why:
            skipped[n] = why
            print(f"  skip {n}: {why}", file=sys.stderr)
        else:
            systems.append(s)

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = a.stem or ("images-smoke" if a.smoke else "images")
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"spdl-bench-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    a.boxes = write_boxes(a, tmp / "train-boxes.json") if any(c.startswith("train") for c in configs) else None
    a.tar = write_tar(a, tmp / "corpus.tar") if any(s.name == "turboloader" for s in systems) else None
    checks = {} if a.no_check else pixel_check(a, systems, configs, tmp)

    runs: dict = {}  # (config, system, n) -> [run]
    plan = [(c, s, n) for c in configs for s in systems if runs_config(s, c) for n in points(s, a)]
    for rnd in range(a.rounds):
        for config, s, n in plan:
            key = (config, s.name, n)
            prior = runs.get(key, [])
            if prior and all("skipped" in r for r in prior):
                continue
            m = measure(command(s, a, config, n))
            rep = parse_report(s, m)
            runs.setdefault(key, []).append(rep)
            short = (f"{rep['images_per_second']:.0f} img/s" if "images_per_second" in rep
                     else rep.get("error") or rep.get("skipped"))
            print(f"  round {rnd + 1}/{a.rounds} {config:9} {s.name:18} {n:2}: {short}", file=sys.stderr)
    load_after = machine_load()

    md = [
        f"# bench images{' (smoke)' if a.smoke else ''}{': large photos' if a.goals == 'large' else ''}",
        "",
        f"Corpus `{a.corpus}` ({n_files} files, {n_bytes / 1e6:.1f} MB, page cache warm), "
        f"{a.limit or 'all'} images per run, batches of 32 at 224x224; {a.rounds} round(s), systems "
        f"alternating, each run a fresh process. Machine: {CORES} cores, {platform.machine()}, "
        f"Python {platform.python_version()} (driver). Date: {time.strftime('%Y-%m-%d %H:%M')}.",
        "",
        "Columns: images/s median of the rounds (min–max); × DL = ratio to the DataLoader's best "
        "figure of that column; CPU = user + system of the process tree (children included) per "
        "image, less the worker's import CPU; peak PSS = the process tree's summed PSS, sampled "
        "every 50 ms; first batch from just before the loader is built; import = the worker's "
        "imports, start-up = the process's wall time less the loop (interpreter, imports, "
        "teardown). Pixels: the first batch against the reference system, mean absolute "
        f"difference (MAD) per value <= {TOLERANCE_U8} levels for u8 (<= {TOLERANCE_F32:.3f} "
        "in normalized units for f32); in train every system but the DataLoader crops the same "
        "boxes (spdl-rs's seeded draws, `spdl_rs.io.random_resized_crop`, handed to the other "
        f"workers) and is compared with SPDL 0.8 with MAD <= {TOLERANCE_TRAIN_U8}; the "
        "DataLoader (torchvision's own generator) is checked for shape and non-blank images "
        "only. `spdl load` is checked through `--dump`. A wrong "
        "geometry (letterbox, no crop, another crop) differs by 15 to 60 levels. train_f32 is "
        f"train normalized (MAD <= {TOLERANCE_TRAIN_F32:.3f} in normalized units); TurboLoader runs "
        "it only (its own crop draws: shape and non-blank check only).",
        "",
        f"Machine load (`uptime`, other users' work included) before: `{load_before}`; "
        f"after: `{load_after}`.",
    ]
    if a.command:
        md[2:2] = [f"Command: `{a.command}`", ""]
    summaries_all = {}
    for config in configs:
        summaries = {}
        for s in systems:
            for n in points(s, a):
                if (config, s.name, n) in runs:
                    summaries[(s.name, n)] = summarize(runs[(config, s.name, n)])
        summaries_all[config] = summaries
        tbl, targets = table(config, summaries, checks, skipped, a.goals)
        ref = checks.get(config, {}).get("reference")
        md += ["", f"## {CONFIG_TITLES[config]}", "", tbl, ""]
        if ref:
            md += [f"Pixel reference: `{ref}`.", ""]
        for title, t in targets.items():
            md += [f"{title}:", "", fmt_targets(t), ""]
    text = "\n".join(md) + "\n"
    (out / f"{stem}.md").write_text(text)
    raw = {
        "corpus": a.corpus, "files": n_files, "cores": CORES, "rounds": a.rounds, "skipped": skipped,
        "checks": checks,
        "runs": [{"config": c, "system": s, "n": n, "runs": r} for (c, s, n), r in runs.items()],
        "summaries": {c: [{"system": s, "n": n, **v} for (s, n), v in d.items()]
                      for c, d in summaries_all.items()},
    }
    (out / f"{stem}.json").write_text(json.dumps(raw, indent=1))
    r = subprocess.run([a.python, str(HERE / "chart.py"), str(out / f"{stem}.json"), str(out / f"{stem}.png")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"chart not drawn: {(r.stderr.strip().splitlines() or ['?'])[-1]}", file=sys.stderr)
    print(text)
    shutil.rmtree(tmp, ignore_errors=True)  # first-batch dumps and the train boxes
    return 0


if __name__ == "__main__":
    sys.exit(main())
