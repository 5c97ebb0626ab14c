"""Benchmark of the PreSync hook on the real control plane (tests/e2e/controlplane.py).

    python tests/bench/bench_presync.py [--clusters 200] [--pods 5] [--namespaces 4] [--repeat 3]

1. No-drift run over CLUSTERS RayClusters x PODS pods in NAMESPACES namespaces, and the same
   clusters in 1 namespace, and a quarter of them in 1 namespace: API requests (every HTTP
   request of the hook's client is counted and reported in its JSON summary) and wall time.
   The requests must grow with namespaces, not clusters.  Floors, measured in the same run:
   the same two LISTs per namespace made in-process with the same client (no decisions), and
   `kubectl get` of them (what a shell script pays).
   The objects are created WITHOUT the operator (stopped; pods created directly with the
   operator's labels and the hash annotations): 1,000 operator-made pods on 2 cores take
   minutes and add nothing to what is measured.
2. Recreate cycle with the real operator and kwok pods: latency from the last pod deletion
   to the resume write, seen by an independent watcher (target < 0.5 s), and the cycle time
   against a shell baseline doing the same by hand in the same run:
   `kubectl patch` suspend + `kubectl wait --for=delete pod -l ray.io/cluster=X` +
   `kubectl patch` (new template + resume).

Figures are printed as ratios.  Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import controlplane  # noqa: E402

from raygitops.hashing import HASH_ANNOTATION, HASHES_ANNOTATION, hash_cluster, pod_shaping_spec  # noqa: E402
from raygitops.plan import ClusterPlan, HookSettings, Plan  # noqa: E402
from raygitops.presync.credentials import load_credentials  # noqa: E402
from raygitops.presync.kubeapi import Kube  # noqa: E402

LATENCY_TARGET = 0.5


def spec(image: str, workers: int, node: str | None) -> dict[str, Any]:
    def pod(name: str) -> dict[str, Any]:
        s: dict[str, Any] = {"containers": [{"name": name, "image": image,
                                             "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
        if node:
            s["nodeName"] = node
        return {"spec": s}

    return {
        "rayVersion": "2.41.0",
        "headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head")},
        "workerGroupSpecs": [{"groupName": "w", "replicas": workers, "minReplicas": 0, "maxReplicas": 10,
                              "rayStartParams": {}, "template": pod("ray-worker")}],
    }


def manifest(name: str, ns: str, s: dict[str, Any]) -> dict[str, Any]:
    hashes = hash_cluster(s)
    s = json.loads(json.dumps(s))
    s["headGroupSpec"]["template"]["metadata"] = {"annotations": {HASH_ANNOTATION: hashes.head}}
    for g in s["workerGroupSpecs"]:
        g["template"]["metadata"] = {"annotations": {HASH_ANNOTATION: hashes.workers[g["groupName"]]}}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": ns,
                         "annotations": {"raygitops.dev/upgrade-strategy": "Recreate",
                                         HASHES_ANNOTATION: hashes.annotation()}},
            "spec": s}


def plan_for(ns: str, names: list[str], s: dict[str, Any], settings: HookSettings) -> Plan:
    hashes, shaping = hash_cluster(s), pod_shaping_spec(s)
    return Plan(ns, [ClusterPlan(n, "Recreate", hashes, shaping) for n in names], settings)


def fake_pods(name: str, ns: str, s: dict[str, Any], workers: int) -> list[dict[str, Any]]:
    hashes = hash_cluster(s)
    out = []
    for i in range(1 + workers):
        head = i == 0
        out.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{'head' if head else f'w-{i}'}", "namespace": ns,
                         "labels": {"ray.io/cluster": name, "ray.io/node-type": "head" if head else "worker",
                                    "ray.io/group": "headgroup" if head else "w", "ray.io/is-ray-node": "yes"},
                         "annotations": {HASH_ANNOTATION: hashes.head if head else hashes.workers["w"]}},
            "spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.41.0"}]},
        })
    return out


def run_hook(plane, plans: list[Path], *extra: str) -> tuple[dict[str, Any], float, str]:
    argv = [sys.executable, "-m", "raygitops", "presync", "--kubeconfig", plane.kubeconfig,
            "--log-format", "json", *extra]
    for p in plans:
        argv += ["--plan", str(p)]
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, env=plane.env, timeout=900)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"hook failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(res.stdout), wall, res.stderr


def timeline(stderr: str) -> str:
    """Compact per-step timeline of one cluster's cycle from the hook's JSON log."""
    marks, t0 = [], None
    for line in stderr.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("cluster") == "*":
            continue
        ts = doc["ts"]
        secs = int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + float(ts[17:23])
        t0 = secs if t0 is None else t0
        marks.append(f"{doc['step']}+{secs - t0:.2f}")
    return " ".join(marks)


# ----------------------------------------------------------------------------- part 1


def bench_no_drift(plane, tmp: Path, clusters: int, pods: int, namespaces: int, repeat: int) -> dict[str, Any]:
    print(f"\n== no-drift run: {clusters} RayClusters x {pods} pods "
          f"(operator stopped: objects created directly)", flush=True)
    plane.stop_operator()
    s = spec("rayproject/ray:2.41.0", pods - 1, None)
    settings = HookSettings(timeout_seconds=300)
    layouts = {
        f"{namespaces}ns x {clusters // namespaces}": [(f"b{namespaces}-{i}", clusters // namespaces) for i in range(namespaces)],
        f"1ns x {clusters}": [("b1-0", clusters)],
        f"1ns x {clusters // namespaces}": [("bq-0", clusters // namespaces)],
    }
    created = []
    t0 = time.perf_counter()
    for layout in layouts.values():
        for ns, n in layout:
            plane.create_namespace(ns)
            created.append(ns)
            objs = []
            for i in range(n):
                objs.append(manifest(f"rc-{i}", ns, s))
                objs += fake_pods(f"rc-{i}", ns, s, pods - 1)
            plane.kubectl("create", "-f", "-", input=yaml.safe_dump_all(objs), timeout=600)
    print(f"   created {sum(n for l in layouts.values() for _, n in l)} RayClusters and their pods "
          f"in {time.perf_counter() - t0:.1f}s", flush=True)

    results: dict[str, Any] = {}
    for label, layout in layouts.items():
        paths = []
        for ns, n in layout:
            p = tmp / f"plan-{ns}.json"
            p.write_text(plan_for(ns, [f"rc-{i}" for i in range(n)], s, settings).dumps())
            paths.append(p)
        walls, inner, reqs = [], [], []
        for _ in range(repeat):
            report, wall, _ = run_hook(plane, paths)
            assert report["summary"]["inSync"] == sum(n for _, n in layout), report["summary"]
            walls.append(wall)
            inner.append(report["seconds"])
            reqs.append(report["apiRequests"])
        # floors: the same two LISTs per namespace, in-process (same HTTP client, no decisions),
        # and with kubectl (what a shell script would pay)
        kube = Kube(load_credentials(plane.kubeconfig, None))
        floor, kfloor = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            for ns, _n in layout:
                kube.list_clusters(ns)
                kube.list_pods(ns, "ray.io/cluster")
            floor.append(time.perf_counter() - t)
            t = time.perf_counter()
            for ns, _n in layout:
                plane.kubectl("get", "rayclusters", "-n", ns, "-o", "json", timeout=120)
                plane.kubectl("get", "pods", "-n", ns, "-l", "ray.io/cluster", "-o", "json", timeout=120)
            kfloor.append(time.perf_counter() - t)
        results[label] = {
            "namespaces": len(layout), "clusters": sum(n for _, n in layout),
            "requests": statistics.median(reqs),
            "wall": statistics.median(walls), "inner": statistics.median(inner),
            "floor": statistics.median(floor), "kubectlFloor": statistics.median(kfloor),
        }
        r = results[label]
        print(f"   {label:>14}: {r['requests']:.0f} API requests (counted per HTTP request by the hook's "
              f"client), run {r['inner']:.3f}s, process {r['wall']:.2f}s; floors: same LISTs in-process "
              f"{r['floor']:.3f}s, with kubectl {r['kubectlFloor']:.2f}s", flush=True)
    for ns in created:
        plane.delete_namespace(ns)
    # let the namespace controller finish before the next part measures anything
    t0 = time.perf_counter()
    plane.wait_for(lambda: not any(plane.get("namespace", ns) for ns in created), timeout=900, interval=2,
                   message="benchmark namespaces deleted")
    print(f"   (deleted the benchmark namespaces in {time.perf_counter() - t0:.1f}s)", flush=True)
    return results


# ----------------------------------------------------------------------------- part 2


class Observer:
    """Independent watcher: time of the last pod DELETED and of the resume write."""

    def __init__(self, plane, ns: str, cluster: str):
        self.kube = Kube(load_credentials(plane.kubeconfig, None))
        self.ns, self.cluster = ns, cluster
        self.last_delete = None
        self.resumed = None
        self.pods: set[str] = set()
        self.stop = False
        self.ready = threading.Event()

    def start(self) -> None:
        items, rv = self.kube.list_pods(self.ns, f"ray.io/cluster={self.cluster}")
        self.pods = {p["metadata"]["uid"] for p in items}
        crs = self.kube.request("GET", f"/apis/ray.io/v1/namespaces/{self.ns}/rayclusters",
                                {"fieldSelector": f"metadata.name={self.cluster}"})
        crv = crs["metadata"]["resourceVersion"]
        self.threads = [threading.Thread(target=self._pods, args=(rv,), daemon=True),
                        threading.Thread(target=self._clusters, args=(crv,), daemon=True)]
        for t in self.threads:
            t.start()
        time.sleep(0.3)

    def _pods(self, rv: str) -> None:
        while not self.stop:
            for kind, obj in self.kube.watch_pods(self.ns, f"ray.io/cluster={self.cluster}", rv, 5):
                rv = obj["metadata"].get("resourceVersion", rv)
                uid = obj["metadata"].get("uid")
                if kind == "DELETED" and uid in self.pods:
                    self.pods.discard(uid)
                    if not self.pods:
                        self.last_delete = time.perf_counter()
                if self.stop:
                    return

    def _clusters(self, rv: str) -> None:
        path = f"/apis/ray.io/v1/namespaces/{self.ns}/rayclusters"
        seen_suspend = False
        while not self.stop and self.resumed is None:
            resp = self.kube.request("GET", path, {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "5",
                                                   "fieldSelector": f"metadata.name={self.cluster}"},
                                     stream=True, timeout=20)
            for line in resp:
                ev = json.loads(line)
                obj = ev["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                suspend = (obj.get("spec") or {}).get("suspend")
                if suspend is True:
                    seen_suspend = True
                elif seen_suspend and self.resumed is None:
                    self.resumed = time.perf_counter()
            resp.release_conn()

    def latency(self) -> float | None:
        self.stop = True
        if self.last_delete is None or self.resumed is None:
            return None
        return self.resumed - self.last_delete


def bench_cycle(plane, tmp: Path, repeat: int, workers: int) -> dict[str, Any]:
    print(f"\n== recreate cycle: 1 RayCluster x {1 + workers} pods, real operator + kwok "
          f"(hook with --no-wait-ready vs kubectl patch/wait/patch)", flush=True)
    plane.start_operator()
    node = "kwok-node-0" if plane.has("kwok") and not plane.has("kube-scheduler") else None
    ns = plane.create_namespace(controlplane.unique_name("bench-cycle"))
    old, new = spec("rayproject/ray:2.41.0", workers, node), spec("rayproject/ray:2.42.0", workers, node)
    hook_times, hook_lat, hook_inner, shell_times, shell_lat = [], [], [], [], []
    settings = HookSettings(timeout_seconds=300, drain_grace_seconds=60, wait_ready=False)

    def fresh(name: str, s: dict[str, Any]) -> None:
        plane.apply(manifest(name, ns, s))
        plane.wait_for(lambda: len([p for p in plane.kubectl_json("get", "pods", "-n", ns, "-l", f"ray.io/cluster={name}")["items"]
                                    if p.get("status", {}).get("phase") in ("Running", "Pending")
                                    and not p["metadata"].get("deletionTimestamp")]) == 1 + workers,
                       timeout=120, message=f"{name} pods")

    for r in range(repeat):
        # --- hook
        name = f"hook-{r}"
        fresh(name, old)
        p = tmp / f"cycle-{name}.json"
        p.write_text(plan_for(ns, [name], new, settings).dumps())
        obs = Observer(plane, ns, name)
        obs.start()
        report, wall, stderr = run_hook(plane, [p], "--no-wait-ready")
        time.sleep(0.2)
        lat = obs.latency()
        assert report["summary"]["recreated"] == 1, report
        item = report["clusters"][0]
        hook_times.append(wall)
        hook_inner.append(item["seconds"])
        hook_lat.append(lat if lat is not None else float("nan"))
        print(f"   hook  #{r}: process {wall:.2f}s, cycle {item['seconds']:.2f}s, last delete -> resume "
              f"{lat if lat is not None else float('nan'):.3f}s (observer), {item.get('drainToResumeSeconds')}s (hook)",
              flush=True)
        print(f"          timeline: {timeline(stderr)}", flush=True)

        # --- shell baseline
        name = f"shell-{r}"
        fresh(name, old)
        obs = Observer(plane, ns, name)
        obs.start()
        t = time.perf_counter()
        plane.kubectl("patch", "raycluster", name, "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":true}}')
        plane.kubectl("wait", "--for=delete", "pod", "-l", f"ray.io/cluster={name}", "-n", ns, "--timeout=120s",
                      timeout=150)
        resume = {"spec": dict(manifest(name, ns, new)["spec"], suspend=False)}
        plane.kubectl("patch", "raycluster", name, "-n", ns, "--type=merge", "-p", json.dumps(resume))
        wall = time.perf_counter() - t
        time.sleep(0.2)
        lat = obs.latency()
        shell_times.append(wall)
        shell_lat.append(lat if lat is not None else float("nan"))
        print(f"   shell #{r}: {wall:.2f}s, last delete -> resume {lat if lat is not None else float('nan'):.3f}s",
              flush=True)
    plane.delete_namespace(ns)
    return {"hook": statistics.median(hook_times), "hookCycle": statistics.median(hook_inner),
            "hookLatency": statistics.median(hook_lat), "shell": statistics.median(shell_times),
            "shellLatency": statistics.median(shell_lat)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--pods", type=int, default=5)
    ap.add_argument("--namespaces", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-no-drift", action="store_true")
    ap.add_argument("--skip-cycle", action="store_true")
    args = ap.parse_args()

    plane = controlplane.ControlPlane()
    print("starting the control plane...", flush=True)
    plane.start()
    print(f"control plane up in {plane.startup_seconds:.1f}s (kwok: {plane.has('kwok')}, "
          f"scheduler: {plane.has('kube-scheduler')})", flush=True)
    ok = True
    try:
        with tempfile.TemporaryDirectory(prefix="bench-presync-") as d:
            tmp = Path(d)
            if not args.skip_no_drift:
                nd = bench_no_drift(plane, tmp, args.clusters, args.pods, args.namespaces, args.repeat)
                many, one, quarter = list(nd.values())
                print("\n   figures (no drift):")
                print(f"   requests, {many['namespaces']} ns / 1 ns (same {one['clusters']} clusters): "
                      f"{many['requests'] / one['requests']:.2f}  (= namespace ratio {many['namespaces']})")
                print(f"   requests, {one['clusters']} / {quarter['clusters']} clusters (1 ns): "
                      f"{one['requests'] / quarter['requests']:.2f}  (target 1.00: independent of clusters)")
                print(f"   requests per cluster at {one['clusters']} clusters: {one['requests'] / one['clusters']:.3f} "
                      f"(a per-cluster GET+LIST design: 2.000)")
                for label, r in nd.items():
                    print(f"   {label:>14}: run time / in-process LIST floor {r['inner'] / r['floor']:.2f}; "
                          f"hook process (incl. Python start-up) / kubectl floor {r['wall'] / r['kubectlFloor']:.2f}")
                ok &= many["requests"] == 2 * many["namespaces"] and one["requests"] == quarter["requests"]
            if not args.skip_cycle:
                cy = bench_cycle(plane, tmp, args.repeat, args.pods - 1)
                print("\n   figures (recreate cycle, medians):")
                print(f"   last pod deletion -> resume write: hook {cy['hookLatency']:.3f}s "
                      f"(target < {LATENCY_TARGET}s), shell {cy['shellLatency']:.3f}s, "
                      f"hook/shell {cy['hookLatency'] / cy['shellLatency']:.2f}")
                print(f"   cycle time hook (process) / shell: {cy['hook'] / cy['shell']:.2f} "
                      f"({cy['hook']:.2f}s vs {cy['shell']:.2f}s; in-process cycle {cy['hookCycle']:.2f}s, "
                      f"ratio {cy['hookCycle'] / cy['shell']:.2f})")
                ok &= cy["hookLatency"] < LATENCY_TARGET
    finally:
        plane.cleanup()
    print("\nOK" if ok else "\nTARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
