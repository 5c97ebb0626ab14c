"""Benchmark of the PreSync hook on the real control plane (tests/e2e/controlplane.py): real
kube-apiserver + etcd, the real KubeRay operator, kwok nodes.

    python tests/bench/bench_presync.py [--quick] [--repeats N] [--write-docs]

The hook runs as its Job runs it: a process with the in-pod credentials of a ServiceAccount
(a bound token from the TokenRequest API; tests/bench/podenv.py puts the files at the
kubelet's path), so it pays what the Job pays. Figures, each against a floor measured in the
same run, interleaved:
1. No drift, CLUSTERS RayClusters in 10 namespaces (operator stopped; objects created
   directly: 1,000 operator-made pods on 2 cores take minutes and add nothing measured):
   API requests per namespace (target <= 2, whatever the number of clusters), and the hook's
   wall time / one `kubectl get rayclusters,pods -A -o json` process (target <= 1.5).
2. One recreate cycle (real operator, kwok pods) as a process / the shell script doing it by
   hand on the same operator: `kubectl patch` suspend, `kubectl wait --for=delete`, `kubectl
   patch` new spec + resume (target <= 0.8). The last-pod-deleted -> resume-write latency
   seen by an independent watcher is printed beside it (must stay < 0.5 s).
3. N clusters drifted at once with `--max-parallel N` / one cluster, wall (target <= 1.5);
   in the full mode also with pods that take 2 s to stop (kwok deletes them at once
   otherwise, which leaves twenty cycles nothing to share but the CPU).
4. ReplaceGroups (issue #22): a head + group `keep` (2 pods) + group `big` (4 pods), only
   big's image changed, max-unavailable 2: wall from hook start to every pod replaced and
   Ready / the Recreate cycle of the same cluster and change, both with --wait-ready
   (target <= 1.5). Checked on every run, printed: head restarts 0, pods of `keep` deleted 0,
   the fewest Ready pods of `big` seen while it was replaced >= 4 - 2.
Full mode: 1,000 clusters, 20 at once, more rounds, and with --write-docs the hook's scale
curve (10, 100, 1,000 clusters) into docs/performance.md. Quick mode (tests/run.sh): 100
clusters, 5 at once, fails only above 1.5x a target (or today's level).
Exit status 1 when a figure misses (its tripwire in quick mode).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import controlplane  # noqa: E402
from measure import (BenchmarkError, Figure, arguments, doc_table, interleaved, machine,  # noqa: E402
                     process_seconds, raygitops_command, report, write_curve, write_doc_section)
from podenv import PodEnvUnavailable, pod_env, service_account_files, wrapper  # noqa: E402

from raygitops.model.hashing import hash_cluster, split_spec
from raygitops.model.names import HASH_ANNOTATION, HASHES_ANNOTATION
from raygitops.model.jobs import PROCEED, Policy  # noqa: E402
from raygitops.model.plan import ClusterPlan, HookSettings, Plan  # noqa: E402
from raygitops.kube.credentials import load_credentials  # noqa: E402
from raygitops.kube.client import Kube  # noqa: E402

NAMESPACES = 10
OLD, NEW = "rayproject/ray:2.41.0", "rayproject/ray:2.42.0"
LATENCY_TARGET = 0.5
SHUTDOWN = "2s"  # a pod's stop time in the second twenty-at-once figure (kwok's terminate-after)


def spec(image: str, workers: int, node: str | None, big: tuple[int, str] | None = None,
         shutdown: str | None = None) -> dict[str, Any]:
    """Head + group ``w`` of ``workers`` pods; with ``big`` (pods, image) a second group ``big``;
    with ``shutdown`` (``"2s"``) every pod takes that long to stop (kwok's terminate-after)."""
    def pod(name: str, image: str = image) -> dict[str, Any]:
        s: dict[str, Any] = {"containers": [{"name": name, "image": image,
                                             "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
        if node:
            s["nodeName"] = node
        return {"metadata": {"annotations": {controlplane.TERMINATE_AFTER: shutdown}}, "spec": s} if shutdown else {"spec": s}

    groups = [{"groupName": "w", "replicas": workers, "minReplicas": 0, "maxReplicas": 10,
               "rayStartParams": {}, "template": pod("ray-worker")}]
    if big:
        groups.append({"groupName": "big", "replicas": big[0], "minReplicas": 0, "maxReplicas": 10,
                       "rayStartParams": {}, "template": pod("ray-worker", big[1])})
    return {"rayVersion": "2.41.0", "headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head")},
            "workerGroupSpecs": groups}


def manifest(name: str, ns: str, s: dict[str, Any]) -> dict[str, Any]:
    hashes = hash_cluster(s)
    s = json.loads(json.dumps(s))
    for template, value in [(s["headGroupSpec"]["template"], hashes.head)] + [
            (g["template"], hashes.workers[g["groupName"]]) for g in s["workerGroupSpecs"]]:
        template.setdefault("metadata", {}).setdefault("annotations", {})[HASH_ANNOTATION] = value
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": ns,
                         "annotations": {"raygitops.dev/upgrade-strategy": "Recreate",
                                         HASHES_ANNOTATION: hashes.annotation()}},
            "spec": s}


def plan_for(ns: str, names: list[str], s: dict[str, Any], settings: HookSettings,
             strategy: str = "Recreate", max_unavailable: str | None = None) -> Plan:
    hashes, shaping = hash_cluster(s), split_spec(s)
    # kwok's heads run no Ray: no running job to ask for (docs/presync.md "Running jobs")
    return Plan(ns, [ClusterPlan(n, strategy, hashes, shaping, max_unavailable=max_unavailable,
                                 jobs_policy=Policy(PROCEED)) for n in names],
                settings)


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




class Hook:
    """``raygitops presync`` as the Job runs it: in-pod credentials of a ServiceAccount bound
    to cluster-admin (the benchmark's namespaces come and go), in a private mount namespace."""

    def __init__(self, plane: Any, work: Path):
        try:
            self.prefix = wrapper()
        except PodEnvUnavailable as err:
            raise BenchmarkError(str(err)) from None
        ns = plane.create_namespace(controlplane.unique_name("bench-hook"))
        plane.create_service_account("hook", ns)
        plane.kubectl("create", "clusterrolebinding", f"{ns}-hook", "--clusterrole=cluster-admin",
                      f"--serviceaccount={ns}:hook")
        files = service_account_files(work / "sa", plane.create_token("hook", ns), plane.pki.path("ca.crt"), ns)
        url = urlsplit(plane.server)
        self.env = pod_env(files, url.hostname or "127.0.0.1", url.port or 443)

    def run(self, plans: list[Path], *extra: str) -> tuple[dict[str, Any], float, str]:
        argv = [*self.prefix, *raygitops_command(), "presync", "--log-format", "json", *extra]
        for p in plans:
            argv += ["--plan", str(p)]
        t0 = time.perf_counter()
        res = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=900)
        wall = time.perf_counter() - t0
        if res.returncode != 0:
            raise BenchmarkError(f"hook failed ({res.returncode}): {res.stderr[-2000:]}")
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




# ----------------------------------------------------------------------------- no drift


def populate(plane: Any, prefix: str, clusters: int, pods: int) -> list[tuple[str, int]]:
    """CLUSTERS in-sync RayClusters with their pods, spread over NAMESPACES namespaces."""
    s = spec(OLD, pods - 1, None)
    layout = [(f"{prefix}-{i}", clusters // NAMESPACES + (i < clusters % NAMESPACES)) for i in range(NAMESPACES)]
    for ns, n in layout:
        plane.create_namespace(ns)
        objs = []
        for i in range(n):
            objs.append(manifest(f"rc-{i}", ns, s))
            objs += fake_pods(f"rc-{i}", ns, s, pods - 1)
        if objs:
            plane.kubectl("create", "-f", "-", input=yaml.safe_dump_all(objs), timeout=900)
    return layout


def plans(tmp: Path, layout: list[tuple[str, int]], s: dict[str, Any]) -> list[Path]:
    paths = []
    for ns, n in layout:
        p = tmp / f"plan-{ns}.json"
        p.write_text(plan_for(ns, [f"rc-{i}" for i in range(n)], s, HookSettings(timeout_seconds=300)).dumps())
        paths.append(p)
    return paths


def forget(plane: Any, layout: list[tuple[str, int]]) -> None:
    for ns, _ in layout:
        plane.delete_namespace(ns)
    plane.wait_for(lambda: not any(plane.get("namespace", ns) for ns, _ in layout), timeout=900, interval=2,
                   message="benchmark namespaces deleted")


def no_drift(plane: Any, hook: Hook, tmp: Path, clusters: int, pods: int, repeats: int) -> list[Figure]:
    print(f"== no drift: {clusters} RayClusters x {pods} pods in {NAMESPACES} namespaces", flush=True)
    plane.stop_operator()
    layout = populate(plane, "nd", clusters, pods)
    paths = plans(tmp, layout, spec(OLD, pods - 1, None))
    requests: list[float] = []

    def subject() -> float:
        report, wall, _ = hook.run(paths)
        if report["summary"]["inSync"] != clusters:
            raise BenchmarkError(f"no-drift run: {report['summary']}")
        requests.append(report["apiRequests"])
        return wall

    floor = [*plane.kubectl_argv(), "get", "rayclusters,pods", "-A", "-o", "json"]
    walls, floors = interleaved(subject, process_seconds(floor, env=plane.env), repeats)
    forget(plane, layout)
    return [Figure(f"hook, no drift: API requests / namespaces ({clusters:,} clusters)", 2.0,
                   requests[-repeats:], [float(NAMESPACES)] * repeats, unit="requests",
                   floor_name=f"{NAMESPACES} namespaces", notes="a LIST of RayClusters and one of pods per namespace"),
            Figure(f"hook, no drift, {clusters:,} clusters in {NAMESPACES} namespaces (process)", 1.5, walls, floors,
                   floor_name="one `kubectl get rayclusters,pods -A -o json`")]


def scale_curve(plane: Any, hook: Hook, tmp: Path, sizes: list[int], pods: int) -> str:
    rows = []
    for n in sizes:
        layout = populate(plane, f"curve{n}", n, pods)
        paths = plans(tmp, layout, spec(OLD, pods - 1, None))
        runs = [hook.run(paths) for _ in range(3)]
        kubectl = statistics.median(process_seconds([*plane.kubectl_argv(), "get", "rayclusters,pods", "-A",
                                                     "-o", "json"], env=plane.env)() for _ in range(3))
        rows.append({"clusters": n, "pods": n * pods, "requests": runs[0][0]["apiRequests"],
                     "seconds": statistics.median(r[1] for r in runs), "kubectlSeconds": kubectl})
        forget(plane, layout)
    return write_curve("presync", [("clusters", "clusters"), ("pods", "pods"), ("requests", "API requests"),
                                   ("seconds", "hook wall (process, s)"), ("kubectlSeconds", "`kubectl get -A` (s)")],
                       rows)


# ----------------------------------------------------------------------------- recreate


def wait_pods(plane: Any, ns: str, name: str, count: int) -> None:
    plane.wait_for(lambda: len([p for p in plane.kubectl_json("get", "pods", "-n", ns, "-l", f"ray.io/cluster={name}")["items"]
                                if p.get("status", {}).get("phase") in ("Running", "Pending")
                                and not p["metadata"].get("deletionTimestamp")]) == count,
                   timeout=180, message=f"{name} pods")


def fresh(plane: Any, ns: str, name: str, s: dict[str, Any], pods: int) -> None:
    plane.apply(manifest(name, ns, s))
    wait_pods(plane, ns, name, pods)


def settle(plane: Any, ns: str, names: list[str], pods: int) -> None:
    """Untimed, after a measured run: the operator has made the new pods, so it is idle when
    the next run (subject or floor) starts."""
    for name in names:
        wait_pods(plane, ns, name, pods)


def cycle(plane: Any, hook: Hook, tmp: Path, repeats: int, workers: int) -> Figure:
    print(f"== recreate cycle: 1 RayCluster x {1 + workers} pods (hook --no-wait-ready vs kubectl "
          "patch/wait/patch)", flush=True)
    plane.start_operator()
    node = "kwok-node-0" if plane.has("kwok") and not plane.has("kube-scheduler") else None
    ns = plane.create_namespace(controlplane.unique_name("bench-cycle"))
    old, new = spec(OLD, workers, node), spec(NEW, workers, node)
    settings = HookSettings(timeout_seconds=300, drain_grace_seconds=60, wait_ready=False)
    rounds = iter(range(10 ** 6))
    latencies: list[float] = []

    def by_hook() -> float:
        name = f"hook-{next(rounds)}"
        fresh(plane, ns, name, old, 1 + workers)
        p = tmp / f"cycle-{name}.json"
        p.write_text(plan_for(ns, [name], new, settings).dumps())
        obs = Observer(plane, ns, name)
        obs.start()
        report, wall, stderr = hook.run([p], "--no-wait-ready")
        time.sleep(0.2)
        lat = obs.latency()
        if report["summary"]["recreated"] != 1 or lat is None:
            raise BenchmarkError(f"hook cycle: {report['summary']}, latency {lat}")
        settle(plane, ns, [name], 1 + workers)
        latencies.append(lat)
        print(f"   hook  {name}: process {wall:.2f}s, cycle {report['clusters'][0]['seconds']:.2f}s, "
              f"last delete -> resume {lat:.3f}s; {timeline(stderr)}", flush=True)
        return wall

    def by_shell() -> float:
        name = f"shell-{next(rounds)}"
        fresh(plane, ns, name, old, 1 + workers)
        t = time.perf_counter()
        plane.kubectl("patch", "raycluster", name, "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":true}}')
        plane.kubectl("wait", "--for=delete", "pod", "-l", f"ray.io/cluster={name}", "-n", ns, "--timeout=120s",
                      timeout=150)
        resume = {"spec": dict(manifest(name, ns, new)["spec"], suspend=False)}
        plane.kubectl("patch", "raycluster", name, "-n", ns, "--type=merge", "-p", json.dumps(resume))
        wall = time.perf_counter() - t
        settle(plane, ns, [name], 1 + workers)
        print(f"   shell {name}: {wall:.2f}s", flush=True)
        return wall

    walls, floors = interleaved(by_hook, by_shell, repeats)
    plane.delete_namespace(ns)
    latency = statistics.median(latencies[-repeats:])
    if latency >= LATENCY_TARGET:
        raise BenchmarkError(f"last pod deleted -> resume write: {latency:.3f}s (must stay < {LATENCY_TARGET}s)")
    return Figure(f"one recreate cycle, 1 + {workers} pods (process)", 0.8, walls, floors,
                  floor_name="`kubectl patch; kubectl wait --for=delete; kubectl patch`",
                  notes=f"last pod deleted -> resume write {latency:.3f} s (watcher); the hook prompts the "
                        "operator, the script waits for its 2 s requeue before the pods go")


def cpu_seconds(plane: Any) -> dict[str, float]:
    """CPU seconds used so far by each of the control plane's processes (etcd,
    kube-apiserver, the operator, kwok, ...) and, as "hook", by this process's finished
    children (the hook runs)."""
    ticks = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for name, component in plane.components.items():
        if component.proc is None:
            continue
        try:
            fields = Path(f"/proc/{component.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[name] = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    used["hook"] = children.ru_utime + children.ru_stime
    return used


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per process between two :func:`cpu_seconds` (a process restarted
    meanwhile counts from zero)."""
    return {name: seconds - before.get(name, 0.0) if seconds >= before.get(name, 0.0) else seconds
            for name, seconds in after.items()}


def api_requests(plane: Any) -> dict[str, float]:
    """The API server's request counts so far (its ``apiserver_request_total``) by verb and
    resource[/subresource], from every client: the hook, the operator, kwok, the controllers."""
    counts: dict[str, float] = {}
    for line in plane.kubectl("get", "--raw", "/metrics").stdout.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.rindex("}")].split(","))
        label = {k: v.strip('"') for k, v in labels.items()}
        key = f"{label.get('verb')} {label.get('resource')}" + (f"/{label['subresource']}" if label.get("subresource") else "")
        counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def parallel(plane: Any, hook: Hook, tmp: Path, clusters: int, repeats: int, today: float | None = None,
             shutdown: str | None = None) -> Figure:
    """N clusters drifted at once against one; with ``shutdown`` (``"2s"``) every pod takes
    that long to stop, as real pods do, where by default kwok deletes them at once."""
    stop = f", pods take {shutdown} to stop" if shutdown else ""
    print(f"== {clusters} clusters drifted at once (--max-parallel {clusters}) vs one{stop}", flush=True)
    plane.start_operator()
    node = "kwok-node-0" if plane.has("kwok") and not plane.has("kube-scheduler") else None
    ns = plane.create_namespace(controlplane.unique_name("bench-par"))
    old, new = spec(OLD, 1, node, shutdown=shutdown), spec(NEW, 1, node, shutdown=shutdown)
    settings = HookSettings(timeout_seconds=600, drain_grace_seconds=60, wait_ready=False, max_parallel=clusters)
    rounds = iter(range(10 ** 6))
    cpu: dict[int, list[dict[str, float]]] = {clusters: [], 1: []}

    def recreate(count: int) -> float:
        r = next(rounds)
        names = [f"p{r}-{i}" for i in range(count)]
        for name in names:
            plane.apply(manifest(name, ns, old))
        settle(plane, ns, names, 2)
        p = tmp / f"par-{r}.json"
        p.write_text(plan_for(ns, names, new, settings).dumps())
        requests_before = api_requests(plane)
        before = cpu_seconds(plane)
        report, wall, _ = hook.run([p], "--no-wait-ready")
        cpu[count].append(cpu_used(before, cpu_seconds(plane)))
        made = {k: v - requests_before.get(k, 0.0) for k, v in api_requests(plane).items()}
        if report["summary"]["recreated"] != count:
            raise BenchmarkError(f"{count} at once: {report['summary']}")
        settle(plane, ns, names, 2)
        used = cpu[count][-1]
        print(f"   {count:>3} cluster(s): {wall:.2f}s, {sum(used.values()):.2f} CPU-s (" +
              ", ".join(f"{name} {seconds:.2f}" for name, seconds in sorted(used.items(), key=lambda x: -x[1])) +
              f"); {sum(made.values()):.0f} API requests (" +
              ", ".join(f"{key} {n:.0f}" for key, n in sorted(made.items(), key=lambda x: -x[1]) if n >= count) +
              ")", flush=True)
        return wall

    walls, floors = interleaved(lambda: recreate(clusters), lambda: recreate(1), repeats)
    plane.delete_namespace(ns)
    cores = os.cpu_count() or 1
    many = {name: statistics.median(run.get(name, 0.0) for run in cpu[clusters][-repeats:]) for name in cpu[clusters][-1]}
    total = statistics.median(sum(run.values()) for run in cpu[clusters][-repeats:])
    parts = ", ".join(f"{name} {seconds:.1f}" for name, seconds in sorted(many.items(), key=lambda x: -x[1])
                      if seconds >= 0.05)
    return Figure(f"{clusters} clusters drifted at once / one cluster (process, --max-parallel {clusters}{stop})", 1.5,
                  walls, floors, floor_name="the same hook, one drifted cluster", today=today,
                  notes=f"{clusters} at once take {statistics.median(walls) - statistics.median(floors):.2f} s more "
                        f"than one; CPU while the hook ran: {total:.1f} s at once ({parts}), "
                        f"{statistics.median(sum(run.values()) for run in cpu[1][-repeats:]):.2f} s for one; "
                        f"on {cores} cores {clusters} at once cannot take less than {total / cores:.2f} s "
                        f"({total / cores / statistics.median(floors):.1f}x the one-cluster wall)")


class ReadyFloor:
    """Samples the Ready, non-terminating pods of one group while the hook runs."""

    def __init__(self, plane: Any, ns: str, cluster: str, group: str):
        self.kube = Kube(load_credentials(plane.kubeconfig, None))
        self.args = (ns, f"ray.io/cluster={cluster},ray.io/group={group}")
        self.samples: list[int] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.05):
            pods, _ = self.kube.list_pods(*self.args)
            self.samples.append(sum(1 for p in pods if not p["metadata"].get("deletionTimestamp") and any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in p.get("status", {}).get("conditions", []))))

    def lowest(self) -> int:
        self.done.set()
        self.thread.join(10)
        return min(self.samples)


def replace_groups(plane: Any, hook: Hook, tmp: Path, repeats: int) -> Figure:
    keep, big, limit = 2, 4, 2
    print(f"== ReplaceGroups: head + keep ({keep}) + big ({big}), big's image changed, max-unavailable {limit} "
          "(vs the Recreate cycle of the same change)", flush=True)
    plane.start_operator()
    node = "kwok-node-0" if plane.has("kwok") and not plane.has("kube-scheduler") else None
    ns = plane.create_namespace(controlplane.unique_name("bench-replace"))
    old, new = spec(OLD, keep, node, (big, OLD)), spec(OLD, keep, node, (big, NEW))
    settings = HookSettings(timeout_seconds=300, drain_grace_seconds=60, wait_ready=True)
    rounds = iter(range(10 ** 6))
    lowest: list[int] = []

    def uids(name: str) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for p in plane.kubectl_json("get", "pods", "-n", ns, "-l", f"ray.io/cluster={name}")["items"]:
            if not p["metadata"].get("deletionTimestamp"):
                out.setdefault(p["metadata"]["labels"]["ray.io/group"], set()).add(p["metadata"]["uid"])
        return out

    def run(strategy: str) -> float:
        name = f"{strategy.lower()}-{next(rounds)}"
        fresh(plane, ns, name, old, 1 + keep + big)
        plane.wait_for(lambda: all(p.get("status", {}).get("phase") == "Running" for p in plane.kubectl_json(
            "get", "pods", "-n", ns, "-l", f"ray.io/cluster={name}")["items"]), timeout=120, message="running")
        before = uids(name)
        p = tmp / f"replace-{name}.json"
        p.write_text(plan_for(ns, [name], new, settings, strategy, str(limit) if strategy != "Recreate" else None)
                     .dumps())
        floor = ReadyFloor(plane, ns, name, "big")
        report, wall, stderr = hook.run([p], "--wait-ready")
        least = floor.lowest()
        after = uids(name)
        done = report["summary"].get("replaced" if strategy != "Recreate" else "recreated")
        if done != 1:
            raise BenchmarkError(f"{strategy}: {report['summary']}")
        if strategy != "Recreate":
            head_restarts = len(before["headgroup"] - after["headgroup"])
            keep_deleted = len(before["w"] - after["w"])
            if head_restarts or keep_deleted or least < big - limit or after["big"] & before["big"]:
                raise BenchmarkError(f"ReplaceGroups: head restarts {head_restarts}, keep deleted {keep_deleted}, "
                                     f"fewest Ready of big {least} (floor {big - limit}), "
                                     f"old big pods left {len(after['big'] & before['big'])}")
            lowest.append(least)
        print(f"   {strategy:13} {name}: {wall:.2f}s, fewest Ready pods of big {least}; {timeline(stderr)}",
              flush=True)
        plane.kubectl("delete", "raycluster", name, "-n", ns, "--wait=false")
        return wall

    walls, floors = interleaved(lambda: run("ReplaceGroups"), lambda: run("Recreate"), repeats)
    plane.delete_namespace(ns)
    return Figure("ReplaceGroups, 4 of 7 pods replaced 2 at a time / Recreate cycle of the same change "
                  "(process, --wait-ready)", 1.5, walls, floors, floor_name="the hook's Recreate cycle",
                  notes=f"head restarts 0, pods of the other group deleted 0, fewest Ready pods of the "
                        f"replaced group {min(lowest)} (floor {big - limit}), every run")


def main() -> int:
    args = arguments(__doc__, quick_repeats=2, full_repeats=5)
    clusters, pods, at_once = (100, 2, 5) if args.quick else (1000, 3, 20)
    with tempfile.TemporaryDirectory(prefix="raygitops-bench-presync-") as d, controlplane.running() as plane:
        tmp = Path(d)
        print(f"control plane up in {plane.startup_seconds:.1f}s", flush=True)
        hook = Hook(plane, tmp)
        figures = [*no_drift(plane, hook, tmp, clusters, pods, args.repeats),
                   cycle(plane, hook, tmp, args.repeats, workers=2 if args.quick else 4),
                   # CPU-bound on 2 cores since the operator is prompted (docs/performance.md)
                   parallel(plane, hook, tmp, at_once, args.repeats, today=2.4 if args.quick else 6.0),
                   # the same with pods that take time to stop: what twenty clusters can share
                   *([] if args.quick else [parallel(plane, hook, tmp, at_once, args.repeats, shutdown=SHUTDOWN)]),
                   replace_groups(plane, hook, tmp, args.repeats)]
        ok = report(figures, args.quick)
        if args.write_docs and not args.quick:
            write_doc_section("bench_presync", f"Machine: {machine()}.\n\n{doc_table(figures)}")
            plane.stop_operator()
            write_doc_section("bench_presync_curve", scale_curve(plane, hook, tmp, [10, 100, 1000], pods))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
