"""Render speed: `raygitops render` of 1,000 RayClusters + 1,000 other documents against a
floor measured in the same run (PyYAML's libyaml safe loader + dumper over the same files),
and the wall time of the CLI on a one-cluster app including interpreter start-up.

Run: python tests/bench/bench_render.py   (targets: ratio <= 1.5, one-cluster CLI < 0.3 s)
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from appgen import write_app  # noqa: E402

from raygitops.output import yaml_stream  # noqa: E402
from raygitops.pipeline import render_app  # noqa: E402

REPEATS = 5


def floor(app: Path) -> float:
    """libyaml load + dump of every file: the least any renderer must do."""
    start = time.perf_counter()
    docs = []
    for path in sorted(app.glob("*.yaml")):
        docs.extend(yaml.load_all(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader))
    yaml.dump_all(docs, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False)
    return time.perf_counter() - start


def render(app: Path) -> float:
    start = time.perf_counter()
    yaml_stream(render_app(str(app), env={}).objects)
    return time.perf_counter() - start


def cli_seconds(app: Path) -> list[float]:
    """Wall time of the installed console script (the real interpreter, not a shim)."""
    script = Path(sysconfig.get_path("scripts")) / "raygitops"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "raygitops"]
    times = []
    for _ in range(7):
        start = time.perf_counter()
        subprocess.run([*command, "render", str(app)], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="raygitops-bench-"))
    try:
        big = write_app(work / "big", clusters=1000, others=1000)
        small = write_app(work / "small", clusters=1, others=0)
        render(big)  # warm caches and imports for both
        floors, renders = [], []
        for _ in range(REPEATS):  # interleaved, so machine noise hits both alike
            floors.append(floor(big))
            renders.append(render(big))
        f, r = min(floors), min(renders)
        cli = cli_seconds(small)
        print(f"render 1000 RayClusters + 1000 documents: {r:.3f} s (best of {REPEATS})")
        print(f"floor  libyaml load + dump, same files:   {f:.3f} s (best of {REPEATS})")
        print(f"ratio  render / floor: {r / f:.2f}  (target <= 1.5)")
        print(f"cli    one-cluster render incl. start-up: median {statistics.median(cli):.3f} s, "
              f"max {max(cli):.3f} s  (target < 0.3 s)")
        return 0 if r / f <= 1.5 and statistics.median(cli) < 0.3 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
