"""An ApplicationSet's renders against Argo CD's exec timeout (issue 49).

    python tests/bench/bench_apps.py [--clusters 1000] [--apps 6] [--repeats 3]

1. ``raygitops render`` of one app of ``--clusters`` RayClusters (appgen.write_app: the KubeRay
   samples varied, half opted in, four namespaces), as a process with its own
   ``ARGOCD_APP_NAME``, the way the Argo CD plugin runs it: median wall time and peak RSS.
2. ``--apps`` such apps rendered at once, one process each (what the repo-server sidecar does
   when an ApplicationSet's Applications refresh together): the slowest one's wall time.
Both against ``ARGOCD_EXEC_TIMEOUT``'s default, 90 s (and the repo-server's 60 s RPC
timeout, which kills the plugin's process first, docs/argocd.md).  Exit status 1 when a render
takes longer than 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from appgen import write_app  # noqa: E402
from measure import machine, peak_rss_bytes, raygitops_command  # noqa: E402

EXEC_TIMEOUT_SECONDS = 90  # ARGOCD_EXEC_TIMEOUT's default
RPC_TIMEOUT_SECONDS = 60  # the repo-server's, which ends the plugin's process first


def render_seconds(app: Path, name: str) -> float:
    env = {**os.environ, "ARGOCD_APP_NAME": name, "ARGOCD_APP_NAMESPACE": "ray"}
    start = time.perf_counter()
    subprocess.run([*raygitops_command(), "render", "."], cwd=app, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--apps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="raygitops-bench-apps-") as work:
        app = write_app(Path(work) / "app", clusters=args.clusters, others=0)
        alone = [render_seconds(app, "team-0") for _ in range(args.repeats)]
        rss = peak_rss_bytes("render", str(app))
        with ThreadPoolExecutor(max_workers=args.apps) as pool:
            at_once = list(pool.map(lambda i: render_seconds(app, f"team-{i}"), range(args.apps)))
    figures = {
        "machine": machine(), "loadAverage": os.getloadavg()[0], "clusters": args.clusters,
        "aloneSeconds": round(statistics.median(alone), 2), "alonePeakRssMiB": round(rss / 2**20, 1),
        "apps": args.apps, "atOnceSlowestSeconds": round(max(at_once), 2),
        "execTimeoutSeconds": EXEC_TIMEOUT_SECONDS, "rpcTimeoutSeconds": RPC_TIMEOUT_SECONDS,
    }
    print(json.dumps(figures, indent=2))
    return 0 if max(*alone, *at_once) < RPC_TIMEOUT_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
