"""Reliability figures of the hostile-input campaign against render/diff (the PreSync hook's
figures under faults, kills and outages come from the soak: tests/reliability/soak.py).

Run: python tests/bench/bench_reliability.py [--quick] [--seed N]
Prints one table (also in docs/reliability.md).  Exit 1 when a must-be-zero figure is not.
--quick: render catalog without its 30 MB app, 500 fuzz inputs; default: the whole catalog,
3,000 fuzz inputs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from reliability import hostile  # noqa: E402


def hostile_figures(quick: bool, seed: int) -> hostile.Figures:
    cases = hostile.catalog()
    if quick:
        cases = [c for c in cases if "30MB-valid" not in c.name]
    t0 = time.monotonic()
    figures = hostile.run_catalog(cases, "subprocess", progress=lambda s: None)
    print(f"  render catalog (subprocesses): {figures.tried} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    t0 = time.monotonic()
    diff = hostile.run_catalog([c for c in cases if not c.args and c.stdin is None], "inprocess", command="diff")
    print(f"  diff catalog (in-process): {diff.tried} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    figures.merge(diff)
    t0 = time.monotonic()
    fuzzed = hostile.fuzz(500 if quick else 3000, seed=seed, progress=lambda s: print("  " + s, file=sys.stderr))
    print(f"  mutation fuzz (in-process): {fuzzed.tried} inputs, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    figures.merge(fuzzed)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("RAYGITOPS_SEED", "1")))
    args = parser.parse_args()
    start = time.monotonic()
    print("hostile inputs ...", file=sys.stderr)
    h = hostile_figures(args.quick, args.seed)
    rows = [
        ("hostile inputs tried (render + diff)", str(h.tried)),
        ("crashes: traceback, signal, hang (must be 0)", str(h.crashes)),
        ("other hostile-input failures (must be 0)", str(len(h.failures) - h.crashes)),
        ("peak memory of render on the largest input",
         f"{h.largest_input_rss_kb / 1024:.0f} MiB ({h.largest_input_bytes / 2**20:.0f} MiB input)"),
        ("peak memory of any hostile case", f"{h.peak_rss_kb / 1024:.0f} MiB ({h.peak_rss_case})"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'figure'.ljust(width)}  value")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    print(f"\n({time.monotonic() - start:.0f} s)")
    for failure in h.failures:
        print(f"FAIL {failure}", file=sys.stderr)
    return 1 if h.crashes or h.failures else 0


if __name__ == "__main__":
    sys.exit(main())
