"""Benchmark: ``raygitops diff`` of two 1,000-RayCluster apps, 10 % of them changed.

    python tests/bench/bench_diff.py [--clusters N] [--changed-percent P] [--repeat R] [--quick]

The floor is measured in the same run: two plain renders (``render_app`` of base, then of
head).  The figure is diff time / floor; the target is <= 1.3 (the diff is two renders plus a
comparison, so the comparison must cost less than a third of a render).  Clusters are varied
from the KubeRay samples in ``../shared/corpus`` when present, else from a built-in template.
Exit status 1 when a ratio is above the target; ``--quick`` (100 clusters, tests/run.sh's
tripwire) only above 1.5x the target (see measure.py).
"""

from __future__ import annotations

import argparse
import copy
import gc
import io
import os
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from measure import TRIPWIRE  # noqa: E402
from sharedpaths import CORPUS, CORPUS_KUBERAY  # noqa: E402

from raygitops.render.pipeline import render_app
from raygitops.preview import report_json, report_markdown, report_text
from raygitops.preview.impact import classify
from raygitops.preview.revisions import render_sides
from raygitops.render.renderer import is_raycluster

REPO = Path(__file__).resolve().parents[2]
TARGET = 1.3
PER_FILE = 50

TEMPLATE = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: template
spec:
  rayVersion: "2.9.0"
  headGroupSpec:
    rayStartParams: {dashboard-host: 0.0.0.0}
    template:
      spec:
        containers:
          - name: ray-head
            image: rayproject/ray:2.9.0
            env: [{name: RAY_LOG, value: info}]
            resources: {limits: {cpu: "2", memory: 4Gi}, requests: {cpu: "2", memory: 4Gi}}
            ports: [{containerPort: 6379, name: gcs}, {containerPort: 8265, name: dashboard}]
  workerGroupSpecs:
    - groupName: workers
      replicas: 4
      minReplicas: 0
      maxReplicas: 10
      rayStartParams: {}
      template:
        spec:
          containers:
            - name: ray-worker
              image: rayproject/ray:2.9.0
              resources: {limits: {cpu: "4", memory: 8Gi}, requests: {cpu: "4", memory: 8Gi}}
"""


def templates() -> list[dict]:
    found: list[dict] = []
    if CORPUS.is_dir():
        for path in sorted(CORPUS.glob("ray-cluster*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc and is_raycluster(doc):
                    found.append(doc)
    return found or [yaml.safe_load(TEMPLATE)]


def change(doc: dict, i: int) -> None:
    """The PR's change to a cluster: a new image on the head (pod-shaping), and replicas."""
    head = doc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["image"] = f"rayproject/ray:2.10.{i}"
    for group in doc["spec"].get("workerGroupSpecs") or []:
        group["replicas"] = (group.get("replicas") or 0) + 1
        group["maxReplicas"] = max(group.get("maxReplicas") or 0, group["replicas"])


def generate(root: Path, clusters: int, changed_percent: float) -> tuple[Path, Path]:
    base_dir, head_dir = root / "base", root / "head"
    base_dir.mkdir()
    head_dir.mkdir()
    pool = templates()
    every = max(1, round(100 / changed_percent)) if changed_percent > 0 else 0
    base_docs, head_docs = [], []
    for i in range(clusters):
        doc = copy.deepcopy(pool[i % len(pool)])
        doc["metadata"] = {"name": f"cluster-{i:05d}", "namespace": f"team-{i % 7}",
                           "annotations": ({"raygitops.dev/upgrade-strategy": "Recreate"}
                                           if i % 4 == 0 else {})}
        doc["spec"].pop("upgradeStrategy", None)
        base_docs.append(doc)
        new = copy.deepcopy(doc)
        if every and i % every == 0:
            change(new, i)
        head_docs.append(new)
    for directory, docs in ((base_dir, base_docs), (head_dir, head_docs)):
        if CORPUS.is_dir():  # the samples' own KubeRay: their newer fields are warnings, not errors
            (directory / "raygitops.yaml").write_text(f"kuberayVersion: {CORPUS_KUBERAY}\n")
        for start in range(0, len(docs), PER_FILE):
            (directory / f"clusters-{start // PER_FILE:03d}.yaml").write_text(
                yaml.safe_dump_all(docs[start:start + PER_FILE], sort_keys=False))
    return base_dir, head_dir


def timed(func) -> tuple[float, float]:
    """(wall, CPU) seconds of one call.  CPU time of this process is what the ratio is judged
    on: the machine may be shared, and other processes' load inflates wall time unevenly."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    func()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--changed-percent", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100 clusters; fail only above 1.5x the target")
    args = parser.parse_args()
    if args.quick:
        args.clusters = 100
    limit = TARGET * TRIPWIRE if args.quick else TARGET

    env = {k: v for k, v in os.environ.items() if not k.startswith("ARGOCD_")}
    with tempfile.TemporaryDirectory(prefix="raygitops-bench-diff-") as tmp:
        base, head = generate(Path(tmp), args.clusters, args.changed_percent)
        sides = {}

        def floor() -> None:
            render_app(str(base), env=env)
            render_app(str(head), env=env)

        def diff(fmt: str):
            def run() -> None:
                b, h = render_sides(str(base), str(head), env=env)
                report = classify(b.result, h.result)
                if fmt == "json":
                    text = report_json.render(report, b.side, h.side)
                elif fmt == "markdown":
                    text = report_markdown.render(report, b.side, h.side)
                else:
                    text = report_text.render(report, b.side, h.side)
                sides["report"] = report
                sides["size"] = len(text)
            return run

        def cli() -> None:
            from raygitops.cli.main import main as cli_main

            out = io.StringIO()
            with redirect_stdout(out):
                try:
                    cli_main(["diff", "--base", str(base), "--head", str(head),
                              "--output", "markdown"], standalone_mode=False)
                except SystemExit:
                    pass

        formats = ("markdown", "json", "text")
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in
                                                       ("floor", *formats, "cli")}
        floor()  # warm-up: imports, libyaml, page cache
        diff("markdown")()
        for _ in range(args.repeat):  # interleaved, best of N
            runs["floor"].append(timed(floor))
            for fmt in formats:
                runs[fmt].append(timed(diff(fmt)))
            runs["cli"].append(timed(cli))
        report = sides["report"]
        wall_floor = min(w for w, _ in runs["floor"])
        cpu_floor = min(c for _, c in runs["floor"])
        print(f"apps: {args.clusters} RayClusters per side, {args.changed_percent:g} % changed "
              f"({'corpus' if CORPUS.is_dir() else 'built-in template'}), best of {args.repeat}")
        print("classes: " + ", ".join(f"{k}={report.count(k)}" for k in
                                      ("recreate", "stale", "in-place", "unchanged")))
        print(f"{'':34} {'wall':>8} {'ratio':>6} {'cpu':>8} {'ratio':>6}")
        print(f"{'floor: render_app(base)+(head)':34} {wall_floor:7.3f}s {1:6.2f} "
              f"{cpu_floor:7.3f}s {1:6.2f}")
        worst = 0.0
        for name in (*formats, "cli"):
            wall = min(w for w, _ in runs[name])
            cpu = min(c for _, c in runs[name])
            label = f"diff --output {name}" if name != "cli" else "CLI diff --output markdown"
            print(f"{label:34} {wall:7.3f}s {wall / wall_floor:6.2f} {cpu:7.3f}s "
                  f"{cpu / cpu_floor:6.2f}")
            worst = max(worst, cpu / cpu_floor)
        print(f"target: CPU-time ratio <= {TARGET}{f' (quick tripwire {limit:.2f})' if args.quick else ''}: "
              f"worst {worst:.2f} {'OK' if worst <= limit else 'ABOVE'}")
        return 0 if worst <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
