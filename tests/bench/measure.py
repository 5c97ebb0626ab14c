"""Shared measuring for the benchmarks: subject and floor timed the same way (in-process vs
in-process, process vs process), in the same run, interleaved so machine noise hits both
alike; medians and spreads; a verdict per figure.

Modes: ``--quick`` (small sizes, seconds; run by tests/run.sh) is a tripwire: a figure fails
only when its best sample is above TRIPWIRE x its target, so a noisy machine does not fail CI
but a 2x regression does (a regression slows every sample; a busy machine, the ones it lands
on: a CI run beside a second suite saw 2.59x and 4.14x for one figure). The full mode holds
each figure to its median's target and, with ``--write-docs``, rewrites the benchmark's
section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "performance.md"
TRIPWIRE = 1.5


class BenchmarkError(Exception):
    """A measurement that cannot be trusted (empty, NaN, zero floor): the benchmark fails."""


@dataclass
class Figure:
    """One ratio: subject / floor, with the samples it came from."""

    name: str
    target: float
    subject: list[float]
    floor: list[float]
    unit: str = "s"
    floor_name: str = ""
    notes: str = ""
    # A figure not yet at its target: the level measured when it was last worked on. The
    # quick tripwire is then 1.5x this (a regression from today still fails CI) and the full
    # mode still holds the figure to its target.
    today: float | None = None
    ratios: list[float] = field(init=False)

    def __post_init__(self) -> None:
        if not self.subject or not self.floor or len(self.subject) != len(self.floor):
            raise BenchmarkError(f"{self.name}: no paired samples")
        values = [*self.subject, *self.floor]
        if any(math.isnan(v) or math.isinf(v) for v in values) or min(self.floor) <= 0:
            raise BenchmarkError(f"{self.name}: a sample is NaN, infinite or a zero floor: {values}")
        self.ratios = [s / f for s, f in zip(self.subject, self.floor)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.ratios), max(self.ratios)

    def limit(self, quick: bool) -> float:
        return max(self.target, self.today or 0.0) * TRIPWIRE if quick else self.target

    def ok(self, quick: bool) -> bool:
        return (min(self.ratios) if quick else self.ratio) <= self.limit(quick)

    def line(self, quick: bool) -> str:
        lo, hi = self.spread
        verdict = "ok" if self.ok(quick) else "ABOVE " + ("TRIPWIRE" if quick else "TARGET")
        return (f"{self.name}: {self.ratio:.2f}x (spread {lo:.2f}-{hi:.2f}, n={len(self.ratios)}; "
                f"subject {statistics.median(self.subject):.4g} {self.unit}, floor "
                f"{statistics.median(self.floor):.4g} {self.unit}) target <= {self.target}"
                f"{f' (quick tripwire {self.limit(True):.2f})' if quick else ''}: {verdict}"
                f"{'' if self.ratio <= self.target else ' (target not met)'}")


def interleaved(subject: Callable[[], float], floor: Callable[[], float], repeats: int,
                warmup: int = 1) -> tuple[list[float], list[float]]:
    """Alternate floor and subject `repeats` times (after `warmup` unrecorded rounds)."""
    subjects, floors = [], []
    for i in range(warmup + repeats):
        f, s = floor(), subject()
        if i >= warmup:
            floors.append(f)
            subjects.append(s)
    return subjects, floors


def timed(fn: Callable[[], object]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    return run


def process_seconds(argv: Sequence[str], **kw) -> Callable[[], float]:
    """Wall time of one process run to completion (output discarded, failure raises)."""
    def run() -> float:
        start = time.perf_counter()
        subprocess.run(list(argv), check=True, stdout=subprocess.DEVNULL, **kw)
        return time.perf_counter() - start
    return run


# The child reports its own high-water mark (VmHWM) at exit. rusage's ru_maxrss cannot be
# used: Python starts children with vfork/posix_spawn, and the kernel carries the PARENT's
# resident size (this benchmark's, with its generated apps) into the child's ru_maxrss.
_HWM_PROBE = ("import atexit, os, sys\n"
              "def _hwm():\n"
              "    status = open('/proc/self/status').read()\n"
              "    kib = next(l.split()[1] for l in status.splitlines() if l.startswith('VmHWM:'))\n"
              "    open(os.environ['RAYGITOPS_BENCH_HWM'], 'w').write(kib)\n"
              "atexit.register(_hwm)\n"
              "sys.argv[0] = 'raygitops'\n"
              "from raygitops.cli.main import main\n"
              "main()\n")


def peak_rss_bytes(*args: str) -> int:
    """Peak resident set size of `raygitops ARGS` run as its own process (the console
    script's code: `raygitops.cli.main.main`), read from the process's own VmHWM."""
    with tempfile.NamedTemporaryFile() as out:
        # stderr kept for a failure only: the corpus' newer fields make one warning each
        res = subprocess.run([sys.executable, "-c", _HWM_PROBE, *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env=dict(os.environ, RAYGITOPS_BENCH_HWM=out.name))
        if res.returncode:
            raise BenchmarkError(f"raygitops {' '.join(args)} failed: {res.stderr[-2000:]}")
        text = Path(out.name).read_text()
    if not text.strip().isdigit():
        raise BenchmarkError(f"no peak RSS reported by raygitops {' '.join(args)}")
    return int(text) * 1024


def arguments(doc: str | None, quick_repeats: int, full_repeats: int) -> argparse.Namespace:
    """The modes every benchmark takes: ``--quick``, ``--repeats N``, ``--write-docs``."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes; fail only above 1.5x a target")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--write-docs", action="store_true", help="rewrite docs/performance.md (full mode)")
    args = ap.parse_args()
    args.repeats = args.repeats or (quick_repeats if args.quick else full_repeats)
    return args


def raygitops_command() -> list[str]:
    """The installed console script (the real interpreter, not a shim), else `-m`."""
    script = Path(sysconfig.get_path("scripts")) / "raygitops"
    return [str(script)] if script.exists() else [sys.executable, "-m", "raygitops"]


def machine() -> str:
    cpus = os.cpu_count()
    return f"{platform.machine()}, {cpus} CPUs, Python {platform.python_version()}, {platform.platform(terse=True)}"


def report(figures: list[Figure], quick: bool) -> bool:
    """Print every figure; True when all hold (the tripwire in quick mode)."""
    for f in figures:
        print(f.line(quick), flush=True)
    ok = all(f.ok(quick) for f in figures)
    print("OK" if ok else "FAILED", flush=True)
    return ok


def doc_table(figures: list[Figure]) -> str:
    rows = ["| figure | target | measured (median) | spread | floor | notes |", "|---|---|---|---|---|---|"]
    for f in figures:
        lo, hi = f.spread
        floor = f"{f.floor_name}: {statistics.median(f.floor):.4g} {f.unit}"
        rows.append(f"| {f.name} | ≤ {f.target}× | {f.ratio:.2f}× {'✓' if f.ok(False) else '✗'} | "
                    f"{lo:.2f}–{hi:.2f} (n={len(f.ratios)}) | {floor} | {f.notes} |")
    return "\n".join(rows)


CURVES = REPO / "docs" / "perf"


def write_curve(name: str, columns: list[tuple[str, str]], rows: list[dict[str, float]]) -> str:
    """Keep a scale curve as data (docs/perf/NAME.json, which tests/bench/plot_curves.py
    draws) and return it as a Markdown table; ``columns`` are (key, heading)."""
    CURVES.mkdir(exist_ok=True)
    (CURVES / f"{name}.json").write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1) + "\n")
    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row[k]) for k, _ in columns) + " |")
    return "\n".join(lines)


def _cell(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def write_doc_section(name: str, body: str, doc: Path = DOC) -> None:
    """Replace the text between `<!-- NAME -->` and `<!-- /NAME -->` in ``doc`` (docs/performance.md)."""
    text = doc.read_text(encoding="utf-8")
    pattern = re.compile(rf"(<!-- {re.escape(name)} -->\n).*?(<!-- /{re.escape(name)} -->)", re.S)
    if not pattern.search(text):
        raise BenchmarkError(f"{doc.relative_to(doc.parents[1])} has no <!-- {name} --> section")
    doc.write_text(pattern.sub(lambda m: m.group(1) + body.rstrip() + "\n" + m.group(2), text), encoding="utf-8")
