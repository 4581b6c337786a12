"""Draws images/s against threads (DataLoader: num_workers) for each system, one panel per
configuration, from the JSON that `bench/images.py` writes. Needs matplotlib (in the bench
venv).

    python bench/chart.py bench/results/images.json bench/results/images.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, dst: str) -> None:
    data = json.load(open(src))
    configs = list(data["summaries"])
    fig, axes = plt.subplots(1, len(configs), figsize=(6 * len(configs), 4.5), squeeze=False)
    for ax, config in zip(axes[0], configs):
        by_system: dict = {}
        for row in data["summaries"][config]:
            if "ips" in row:
                by_system.setdefault(row["system"], []).append(row)
        for name, rows in sorted(by_system.items()):
            rows.sort(key=lambda r: r["n"])
            xs = [r["n"] for r in rows]
            ys = [r["ips"] for r in rows]
            err = [[r["ips"] - r["ips_min"] for r in rows], [r["ips_max"] - r["ips"] for r in rows]]
            label = name + (" (proxy)" if rows[0].get("proxy") else "")
            if name.startswith("limit"):
                ax.axhline(ys[0], linestyle="--", linewidth=1, label=f"{label} ({xs[0]} cores)",
                           color="gray" if name == "limit_decode" else "black")
            else:
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
        ticks = sorted({r["n"] for rows in by_system.values() for r in rows})
        ax.set_xticks(ticks)
        ax.set_title(config)
        ax.set_xlabel("threads (DataLoader: num_workers)")
        ax.set_ylabel("images/s (median, min-max)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"bench images: {data['files']} files, {data['cores']} cores, {data['rounds']} round(s)")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
