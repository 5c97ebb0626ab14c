"""A fleet of RayClusters synced the way Argo CD does it, for the hook campaigns.

One app in ``namespace`` holds clusters of every kind the hook must treat differently; a
cluster in a *foreign* namespace (not in the app) carries the same name and opt-in.  A sync
= ``raygitops render`` -> ``raygitops presync`` as a process (through the fault proxy) until
it exits 0 -> ``kubectl apply`` of the non-hook manifests.

==============  ===========================================================================
``drift-a/b``   opted in; the image changes every round: recreated exactly once per round;
                its pods take 2 s to terminate
``stable``      opted in; only a label changes (not pod-shaping): no pod deleted
``noopt``       not opted in; the image changes: no pod deleted (stale by design)
``jobowned``    opted in, but label ``ray.io/originated-from-crd: RayJob``: no pod deleted
``foreign``     ``drift-a`` in another namespace, not in any plan: no pod deleted
==============  ===========================================================================
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controlplane import KWOK_RUNNING_JOBS, TERMINATE_AFTER
from reliability import invariants as inv

LEASE_SECONDS = "3"
# The drifting clusters' pods take this long to go once deleted (kwok, see controlplane.py):
# every drain follows them with its watch, as on a real cluster, so watch faults do hit.
DRIFTING_SHUTDOWN = "2s"
DRIFTING = ("drift-a", "drift-b")
UNTOUCHABLE = ("stable", "noopt", "jobowned")
OUT_OF_BAND = {"example.com/owner": "team-x"}  # set on every live cluster; the hook must keep it


def raycluster(name: str, image: str, opt_in: bool = True, labels: dict[str, str] | None = None,
               node_name: str | None = None, shutdown: str | None = None) -> dict[str, Any]:
    """``shutdown``: how long its pods take to terminate once deleted (``"2s"``)."""
    def pod(container: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{
            "name": container, "image": image,
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }]}
        if node_name:
            spec["nodeName"] = node_name
        template: dict[str, Any] = {"spec": spec}
        if shutdown:
            template["metadata"] = {"annotations": {TERMINATE_AFTER: shutdown}}
        return template

    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {}), "annotations": {}}
    if opt_in:
        meta["annotations"]["raygitops.dev/upgrade-strategy"] = "Recreate"
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta,
        "spec": {
            "rayVersion": "2.41.0",
            "headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head")},
            "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 3,
                                  "rayStartParams": {}, "template": pod("ray-worker")}],
        },
    }


@dataclass
class HookRun:
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    killed: bool = False

    @property
    def report(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None


@dataclass
class Fleet:
    plane: Any
    namespace: str
    foreign_namespace: str
    tmp: Path
    round: int = 0
    hook_timeout: int = 90
    drain_grace: int = 10
    runs: list[HookRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.app = self.tmp / "app"
        self.app.mkdir(parents=True, exist_ok=True)
        self.wait_ready = self.plane.has("kwok")
        self.node_name = "kwok-node-0" if self.plane.has("kwok") and not self.plane.has("kube-scheduler") else None

    # --- the app

    def clusters(self, version: int) -> list[dict[str, Any]]:
        image = f"rayproject/ray:2.{40 + version}.0"
        out = [raycluster(n, image, node_name=self.node_name, shutdown=DRIFTING_SHUTDOWN) for n in DRIFTING]
        stable = raycluster("stable", "rayproject/ray:2.40.0", node_name=self.node_name,
                            labels={"round": str(version)})
        out += [stable, raycluster("noopt", image, opt_in=False, node_name=self.node_name),
                raycluster("jobowned", image, node_name=self.node_name,
                           labels={"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "j"})]
        return out

    def write(self, version: int, only: set[str] | None = None, app: Path | None = None) -> Path:
        app = app or self.app
        app.mkdir(parents=True, exist_ok=True)
        for old in app.glob("*.yaml"):
            old.unlink()
        (app / "raygitops.yaml").write_text(yaml.safe_dump({
            "namespace": self.namespace,
            "hook": {"drainGraceSeconds": self.drain_grace, "timeoutSeconds": self.hook_timeout,
                     "runningJobs": KWOK_RUNNING_JOBS,
                     "maxParallel": 4, "waitReady": self.wait_ready}}))
        for c in self.clusters(version):
            if only is None or c["metadata"]["name"] in only:
                (app / f"{c['metadata']['name']}.yaml").write_text(yaml.safe_dump(c))
        return app

    def render(self, app: Path | None = None, tag: str = "") -> tuple[list[dict[str, Any]], Path | None]:
        res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(app or self.app), "--format", "json"],
                             capture_output=True, text=True, check=True, timeout=120)
        objs = json.loads(res.stdout)["items"]
        hooks = [o for o in objs if "argocd.argoproj.io/hook" in (o["metadata"].get("annotations") or {})]
        rest = [o for o in objs if o not in hooks]
        cms = [o for o in hooks if o["kind"] == "ConfigMap"]
        if not cms:
            return rest, None
        plan = self.tmp / f"plan-{self.round}{tag}.json"
        plan.write_text(cms[0]["data"]["plan.json"])
        return rest, plan

    def apply(self, objs: list[dict[str, Any]], namespace: str | None = None) -> None:
        self.plane.kubectl("apply", "-n", namespace or self.namespace, "-f", "-",
                           input=yaml.safe_dump_all(objs), timeout=120)

    def setup(self) -> list[dict[str, Any]]:
        """Round 0: create every cluster (the hook skips absent ones), the foreign one, and
        the out-of-band annotation; wait for all pods."""
        self.write(0)
        objs, plan = self.render()
        if plan is not None:
            self.hook(plan, self.plane.kubeconfig)
        self.apply(objs)
        foreign = raycluster("drift-a", "rayproject/ray:2.40.0", node_name=self.node_name)
        self.apply([foreign], namespace=self.foreign_namespace)
        for ns in (self.namespace, self.foreign_namespace):
            self.plane.kubectl("annotate", "rayclusters", "--all", "-n", ns, "--overwrite",
                               *[f"{k}={v}" for k, v in OUT_OF_BAND.items()])
        self.wait_pods({f"{self.namespace}/{n}": None for n in (*DRIFTING, *UNTOUCHABLE)}
                       | {f"{self.foreign_namespace}/drift-a": None})
        return objs

    # --- the hook

    def hook_argv(self, plan: Path, kubeconfig: str) -> list[str]:
        return [sys.executable, "-m", "raygitops", "presync", "--plan", str(plan), "--kubeconfig", kubeconfig,
                "--log-format", "json", "--lease-seconds", LEASE_SECONDS, "--timeout", str(self.hook_timeout),
                "--drain-grace", str(self.drain_grace), "--wait-ready" if self.wait_ready else "--no-wait-ready"]

    def hook_env(self) -> dict[str, str]:
        return {k: v for k, v in self.plane.env.items()
                if k not in ("KUBERNETES_SERVICE_HOST", "RAYGITOPS_TEST_PAUSE_AT", "RAYGITOPS_DEBUG")}

    def spawn(self, plan: Path, kubeconfig: str) -> subprocess.Popen:
        return subprocess.Popen(self.hook_argv(plan, kubeconfig), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self.hook_env(), start_new_session=True)

    def hook(self, plan: Path, kubeconfig: str, kill_after: float | None = None,
             timeout: float | None = None) -> HookRun:
        """One hook process; SIGKILLed (whole group) after ``kill_after`` s when given."""
        start = time.monotonic()
        proc = self.spawn(plan, kubeconfig)
        killed = False
        try:
            out, err = proc.communicate(timeout=kill_after if kill_after is not None else
                                        (timeout or self.hook_timeout + 60))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            killed = kill_after is not None
            if not killed:
                err += f"\n[campaign] hook hung: killed after {time.monotonic() - start:.0f} s"
        run = HookRun(None if killed else proc.returncode, out, err, time.monotonic() - start, killed)
        self.runs.append(run)
        return run

    # --- observations

    def live_clusters(self) -> list[dict[str, Any]]:
        items = []
        for ns in (self.namespace, self.foreign_namespace):
            items += self.plane.kubectl_json("get", "rayclusters", "-n", ns)["items"]
        return items

    def live_pods(self) -> list[dict[str, Any]]:
        items = []
        for ns in (self.namespace, self.foreign_namespace):
            items += self.plane.kubectl_json("get", "pods", "-n", ns, "-l", "ray.io/cluster")["items"]
        return items

    def wait_pods(self, want: dict[str, set[str] | None], timeout: float = 120) -> list[dict[str, Any]]:
        """Until each cluster has its 2 pods (head + 1 worker), running, on ``want[cluster]``
        hashes when given."""
        def ok():
            pods = [p for p in self.live_pods() if not p["metadata"].get("deletionTimestamp")]
            for cluster, hashes in want.items():
                mine = [p for p in pods if inv.pod_cluster(p) == cluster]
                if len(mine) != 2:
                    return None
                if hashes is not None and {inv.pod_hash(p) for p in mine} != hashes:
                    return None
                if self.wait_ready and not all((p.get("status") or {}).get("phase") == "Running" for p in mine):
                    return None
            return pods
        return self.plane.wait_for(ok, timeout=timeout, interval=1.0, message=f"pods of {sorted(want)}")

    def events(self, reason: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.plane.kubectl_json("get", "events", "-n", self.namespace)["items"]:
            if e.get("reason") == reason:
                name = f"{self.namespace}/{e['involvedObject']['name']}"
                counts[name] = counts.get(name, 0) + int(e.get("count") or 1)
        return counts
