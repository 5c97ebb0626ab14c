"""Draw the scale curves the benchmarks' full modes keep in docs/perf/*.json into
docs/perf/scale.svg (matplotlib, from requirements/plot.txt: bench-only, never a dependency of
raygitops or its tests).

    python tests/bench/plot_curves.py        # run by tests/bench/full.sh in its own venv

Log-log axes, with a dotted line of slope 1 through the last point of each curve: a curve
parallel to it grows linearly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

CURVES = Path(__file__).resolve().parents[2] / "docs" / "perf"
PANELS = [  # (curve, y key, title, y label)
    ("render", "seconds", "render time", "seconds (in-process)"),
    ("render", "peakRssMiB", "render peak memory", "peak RSS (MiB, process)"),
    ("presync", "seconds", "hook, no drift: wall", "seconds (process)"),
    ("presync", "requests", "hook, no drift: API requests", "requests"),
]


def linear_guide(ax, xs: list[float], ys: list[float]) -> None:
    x_last, y_last = xs[-1], ys[-1]
    ax.plot(xs, [y_last * x / x_last for x in xs], ":", color="grey", label="linear")


def main() -> int:
    data = {name: json.loads((CURVES / f"{name}.json").read_text()) for name in {p[0] for p in PANELS}}
    plt.rcParams["svg.hashsalt"] = "raygitops"  # the same data draws the same file
    plt.rcParams["svg.fonttype"] = "none"  # text as text: a small file
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for ax, (name, key, title, ylabel) in zip(axes.flat, PANELS):
        rows = data[name]["rows"]
        xs, ys = [r["clusters"] for r in rows], [r[key] for r in rows]
        ax.plot(xs, ys, "o-", label="measured" if name != "render" else "generated app")
        samples = f"samples{key[0].upper()}{key[1:]}"  # render: KubeRay's samples as written, if measured
        if name == "render" and all(samples in r for r in rows):
            ax.plot(xs, [r[samples] for r in rows], "s-", label="KubeRay's samples as written")
        if key != "requests":
            linear_guide(ax, xs, ys)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("RayClusters")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"raygitops scale curves ({data['render']['machine']})", fontsize=9)
    fig.tight_layout()
    out = CURVES / "scale.svg"
    fig.savefig(out, metadata={"Date": None})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
