"""Render speed and memory, each a ratio against a floor measured in the same run.

    python tests/bench/bench_render.py [--quick] [--repeats N] [--write-docs]

1. ``raygitops render``, streamed, of 1,000 RayClusters + 1,000 other documents, in-process /
   PyYAML's libyaml safe load + dump of the same files, in-process (target <= 1.15).
2. ``raygitops render`` of KubeRay's v1.7.0 samples as their authors wrote them (the corpus'
   RayCluster documents cycled to 1,000 clusters, renamed, a ConfigMap after each, 20 files,
   ``kuberayVersion: "1.7"``) as a process / a process that loads and dumps the same files
   with PyYAML's C loader and dumper (target <= 1.15). Left out, said so, without ../shared.
3. ``raygitops render`` of a one-cluster app as a process / ``python -c "import yaml, jinja2"``
   as a process, same interpreter (target <= 1.5): what the CMP pays per Application.
4. Peak RSS of ``raygitops render`` (process) on a ~29 MiB app (20,000 clusters) / the app's size on disk
   (target <= 4).
Full mode also measures the scale curve (10 ... 10,000 clusters, the generated app and the
samples as written: time and peak RSS) and, with ``--write-docs``, rewrites its sections of
docs/performance.md. ``--quick`` (CI tripwire) uses 100 + 100 documents (the samples' figure
keeps its 1,000 clusters) and one memory run on a ~7 MiB app and fails only above 1.5x a
target (or 1.5x today's level for a figure not yet at its target): a render twice as slow
trips it.
Exit status 1 when a figure misses (its tripwire in quick mode).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from appgen import CORPUS_KUBERAY_MINOR, write_app, write_sample_app  # noqa: E402
from yamlfloor import libyaml_floor  # noqa: E402
from sharedpaths import corpus_files  # noqa: E402
from measure import (Figure, arguments, doc_table, interleaved, machine, peak_rss_bytes,  # noqa: E402
                     process_seconds, raygitops_command, report, timed, write_curve,
                     write_doc_section)

from raygitops.model.crdschema import schema_version  # noqa: E402
from raygitops.render.output import yaml_stream  # noqa: E402
from raygitops.render.pipeline import start_render  # noqa: E402

MIB = 1024 * 1024


def app_bytes(app: Path) -> int:
    return sum(p.stat().st_size for p in app.rglob("*") if p.is_file())


def render_in_process(app: Path) -> None:
    """What ``raygitops render`` does: each object dumped as it is rendered (into a string
    here, like the floor, rather than the command's spool)."""
    yaml_stream(start_render(str(app), env={}, keep=False).objects())


def throughput(work: Path, clusters: int, repeats: int) -> Figure:
    app = write_app(work / f"big-{clusters}", clusters=clusters, others=clusters)
    subject, floor = interleaved(timed(lambda: render_in_process(app)), timed(lambda: libyaml_floor(app)), repeats)
    return Figure(f"render {clusters:,} RayClusters + {clusters:,} documents (in-process)", 1.15, subject, floor,
                  floor_name="libyaml load + dump")


def samples_figure(clusters: int, subject: list[float], floor: list[float]) -> Figure:
    own = schema_version(CORPUS_KUBERAY_MINOR)[1]  # once KubeRay 1.7's schema ships (issue 38)
    return Figure(f"`raygitops render` KubeRay's samples as written: {clusters:,} RayClusters + {clusters:,} "
                  "ConfigMaps, 20 files (process)", 1.15, subject, floor,
                  floor_name="libyaml load + dump (process)",
                  notes=f'kuberayVersion "{CORPUS_KUBERAY_MINOR}": ' + (
                      "checked against its own CRD schema" if own else
                      "newer than every shipped CRD schema, the fields the newest does not know are one "
                      "warning line each"))


def real_samples(work: Path, clusters: int, repeats: int) -> Figure | None:
    """Render of the corpus' RayClusters as written (their comments, indentation, flow
    collections and quoting: what the generated app, written by PyYAML, does not have), as a
    process against the libyaml process; None without ../shared."""
    app = write_sample_app(work / f"samples-{clusters}", clusters)
    if app is None:
        return None
    quiet = {"stderr": subprocess.DEVNULL}  # the warnings
    subject, floor = interleaved(process_seconds([*raygitops_command(), "render", str(app)], **quiet),
                                 process_seconds([sys.executable, str(BENCH / "yamlfloor.py"), str(app)]), repeats)
    return samples_figure(clusters, subject, floor)


def start_up(work: Path, repeats: int) -> Figure:
    app = write_app(work / "small", clusters=1, others=0)
    subject, floor = interleaved(process_seconds([*raygitops_command(), "render", str(app)]),
                                 process_seconds([sys.executable, "-c", "import yaml, jinja2"]), repeats)
    return Figure("`raygitops render` one-cluster app (process)", 1.5, subject, floor,
                  floor_name="`python -c 'import yaml, jinja2'`")


def memory(work: Path, megabytes: float, repeats: int, today: float | None = None) -> Figure:
    """Peak RSS on an app of about ``megabytes`` whatever the cluster template (the corpus
    samples are larger than the built-in one): the interpreter's fixed ~22 MiB weighs on the
    ratio, so the size, not the cluster count, must be the same wherever it runs."""
    probe = write_app(work / "mem-probe", clusters=100, others=0)
    clusters = max(100, round(100 * megabytes * MIB / app_bytes(probe)))
    shutil.rmtree(probe)
    app = write_app(work / f"mem-{clusters}", clusters=clusters, others=0)
    size = app_bytes(app)
    rss = [peak_rss_bytes("render", str(app)) / MIB for _ in range(repeats)]
    return Figure(f"render peak RSS / input size ({size / MIB:.0f} MiB app)", 4.0, rss, [size / MIB] * repeats,
                  unit="MiB", floor_name="input size", today=today,
                  notes="render holds one file's documents at a time and, of each RayCluster written, its "
                        "entry of the plan as compact JSON")


def scale_curve(work: Path, sizes: list[int]) -> str:
    """Render time (in-process) and peak RSS (process) of the generated app and, with
    ../shared, of the samples as written (a ConfigMap per cluster, 20 files)."""
    rows = []
    for n in sizes:
        app = write_app(work / f"curve-{n}", clusters=n, others=0)
        row = {"clusters": n, **_curve_point(app, n)}
        shutil.rmtree(app)
        samples = write_sample_app(work / f"curve-samples-{n}", n)
        if samples is not None:
            row.update({f"samples{k[0].upper()}{k[1:]}": v for k, v in _curve_point(samples, n).items()})
            shutil.rmtree(samples)
        rows.append(row)
    columns = [("clusters", "clusters"), ("inputMiB", "input (MiB)"), ("seconds", "render (in-process, s)"),
               ("secondsPer1000", "s per 1,000 clusters"), ("peakRssMiB", "peak RSS (process, MiB)")]
    if "samplesSeconds" in rows[0]:
        columns += [("samplesInputMiB", "samples: input (MiB)"), ("samplesSeconds", "samples: render (s)"),
                    ("samplesSecondsPer1000", "samples: s per 1,000"), ("samplesPeakRssMiB", "samples: peak RSS (MiB)")]
    return write_curve("render", columns, rows)


def _curve_point(app: Path, clusters: int) -> dict[str, float]:
    seconds = statistics.median(timed(lambda: render_in_process(app))() for _ in range(3))
    return {"inputMiB": app_bytes(app) / MIB, "seconds": seconds, "secondsPer1000": seconds / clusters * 1000,
            "peakRssMiB": peak_rss_bytes("render", str(app)) / MIB}


def main() -> int:
    args = arguments(__doc__, quick_repeats=5, full_repeats=9)
    repeats = args.repeats
    work = Path(tempfile.mkdtemp(prefix="raygitops-bench-"))
    try:
        # 1,000 clusters in quick mode too: at 100 the process start-up (imports) is most of the
        # figure, and a render twice as slow per cluster would not show (tests/unit/test_bench_measure.py)
        samples = real_samples(work, 1000, repeats)
        if samples is None:
            print("bench_render: ../shared/corpus is absent: the figure and curve of KubeRay's samples as "
                  "written are left out", flush=True)
        figures = [throughput(work, 100 if args.quick else 1000, repeats),
                   *([samples] if samples else []),
                   start_up(work, repeats),
                   # today's levels at 7 MiB: 5.4x with the corpus' clusters (2.9x at 29 MiB: the
                   # interpreter's 22 MiB weigh less), 6.6x with the built-in one where ../shared
                   # is absent; holding the app's documents again (10.8x, 15.6x) trips the wire
                   memory(work, 7, 1, today=5.5 if corpus_files() else 7.0) if args.quick
                   else memory(work, 29, 3)]
        ok = report(figures, args.quick)
        if args.write_docs and not args.quick:
            write_doc_section("bench_render", f"Machine: {machine()}.\n\n{doc_table(figures)}")
            write_doc_section("bench_render_curve", scale_curve(work, [10, 100, 1000, 10000]))
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
