"""Decode less than a full decode (issue 33): spdl-rs's native stages and `spdl load` with and
without the finer DCT scales (`M/8`), against the full-decode-only ceiling and the DCT-scaled
ceiling, in one alternating run (each system once per round, in a rotating order, each run a
fresh process) so that the ratios hold on a shared machine.

    python bench/decode_less.py --corpus DIR [--configs eval,train,train_f32] [--rounds 3] \
        [--threads 2] [--before-pythonpath DIR] [--out bench/results/decode_less.md]

Systems (images/s, median of the rounds):

- ``native``: `bench/systems/spdl_rs_native.py` (`spdl_rs.ops` stages, fine DCT scales on) with
  the `spdl_rs` the Python finds; ``native_before``: the same script with `--before-pythonpath`
  first on `PYTHONPATH` (a copy of an earlier build's `spdl_rs` package), when given.
- ``cli``: `spdl load`; ``cli_coarse``: `spdl load --no-fine-scaled-decode` (1/2, 1/4, 1/8
  with 2x headroom only: the behaviour before).
- ``ceiling``: `bench/systems/limit_decode.py`, libjpeg-turbo full decode alone through
  `spdl_rs.io.decode_image` (the ceiling of `bench/images.py`).
- ``ceiling_scaled``: `spdl limit --decode-only --no-region-decode`: the whole image decoded at
  the DCT scale the transform allows (fine), nothing else.

The pixel tolerance of each step is measured by spdl-io's tests (`tests/scaled_decode.rs`, MAD
printed with `--nocapture`), not here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYSTEMS = HERE / "systems"


def commands(a, config: str) -> dict[str, tuple[list[str], dict]]:
    mode = "train" if config.startswith("train") else "eval"
    f32 = config.endswith("_f32")
    py = [a.python, "--config", config, "--corpus", a.corpus, "--threads", str(a.threads),
          "--batch-size", "32", "--size", "224", "--seed", "0"]
    cli = [a.spdl, "load", a.corpus, "--threads", str(a.threads), "--size", "224", "--json",
           "--transform", mode, "--seed", "0", "--batch-size", "32"]
    if f32:
        cli += ["--dtype", "f32", "--layout", "nchw"]
    limit = [a.spdl, "limit", a.corpus, "--threads", str(a.threads), "--size", "224", "--json",
             "--transform", mode, "--seed", "0", "--decode-only", "--no-region-decode"]
    env = dict(os.environ)
    out = {
        "native": ([py[0], str(SYSTEMS / "spdl_rs_native.py"), *py[1:]], env),
        "cli": (cli, env),
        "cli_coarse": (cli + ["--no-fine-scaled-decode"], env),
        "ceiling": ([py[0], str(SYSTEMS / "limit_decode.py"), "--config", "eval", "--corpus",
                     a.corpus, "--threads", str(a.threads)], env),
        "ceiling_scaled": (limit, env),
    }
    if a.before_pythonpath:
        before = dict(env, PYTHONPATH=a.before_pythonpath)
        out["native_before"] = (out["native"][0], before)
    return out


def images_per_second(stdout: str) -> float:
    line = stdout.strip()
    # The workers print one JSON line; `spdl load/limit --json` a pretty-printed object.
    rep = json.loads(line if line.startswith("{") and "\n" in line else line.splitlines()[-1])
    if "images_per_second" in rep:
        return float(rep["images_per_second"])
    return rep["images"] / rep["seconds"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--spdl", default=str(HERE.parent / "target/release/spdl"))
    p.add_argument("--corpus", required=True)
    p.add_argument("--configs", default="eval,train,train_f32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--before-pythonpath", default=None)
    p.add_argument("--out", default=None, help="append the markdown table here")
    a = p.parse_args()
    load_before = os.getloadavg()
    tables = []
    for config in a.configs.split(","):
        cmds = commands(a, config)
        names = list(cmds)
        rates: dict[str, list[float]] = {n: [] for n in names}
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                cmd, env = cmds[n]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"{config} {n}: exit {done.returncode}: {done.stderr[-400:]}", file=sys.stderr)
                    continue
                rates[n].append(images_per_second(done.stdout))
                print(f"{config} round {r} {n}: {rates[n][-1]:.0f} img/s", file=sys.stderr, flush=True)
        med = {n: statistics.median(v) for n, v in rates.items() if v}
        ceil, sceil = med.get("ceiling"), med.get("ceiling_scaled")
        rows = [f"### {config}, {a.threads} threads, {a.rounds} rounds", "",
                "| system | images/s median (min-max) | x full-decode ceiling | x DCT-scaled ceiling |",
                "|---|---|---|---|"]
        for n in names:
            if n not in med:
                rows.append(f"| {n} | failed | | |")
                continue
            v = rates[n]
            x = f"{med[n] / ceil:.2f}x" if ceil else "-"
            y = f"{med[n] / sceil:.2f}x" if sceil else "-"
            rows.append(f"| {n} | {med[n]:.0f} ({min(v):.0f}-{max(v):.0f}) | {x} | {y} |")
        tables.append("\n".join(rows))
    load_after = os.getloadavg()
    text = (f"Corpus `{a.corpus}`; {time.strftime('%Y-%m-%d %H:%M')}; load average before "
            f"{load_before[0]:.2f}, after {load_after[0]:.2f}.\n\n" + "\n\n".join(tables) + "\n")
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
