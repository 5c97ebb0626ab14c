"""The Argo CD health check (argocd/health/raycluster.lua) on RayClusters of the real operator.

A RayCluster rendered from examples/plain is driven through its states by the real KubeRay
operator (kwok pods become Ready): created → ready → suspending → suspended → a raygitops
recreate lock → resumed → ready; a second cluster whose head pod the API server rejects
shows a failure. Every version of the object is captured with a watch (nothing transient is
missed) and the Lua runs on each one (Lua 5.1 emulation of Argo CD's VM, argocd/health/evaluate.py).

Set RAYGITOPS_CAPTURE_DIR to keep the captured objects (e.g. to refresh argocd/health/testdata).
"""

from __future__ import annotations

import bisect
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from controlplane import ControlPlane

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "argocd" / "health"))
import evaluate as luahealth  # noqa: E402

LOCK = "raygitops.dev/recreate"


class Watch:
    """`kubectl get raycluster NAME -w -o json`: every version of the object, in order.

    When the API server ends the watch, kubectl exits; it is started again, and its first
    output is the current version, so the newest version is never lost (``ended`` says how
    each earlier kubectl ended). Waits poll the object as well (``poll``)."""

    def __init__(self, cp: ControlPlane, namespace: str, name: str):
        self.argv = [str(cp.bin_dir / "kubectl"), f"--kubeconfig={cp.kubeconfig}", "get", "raycluster", name,
                     "-n", namespace, "--watch", "-o", "json"]
        self.env, self.namespace, self.name = cp.env, namespace, name
        self.objects: list[dict] = []
        self.versions: list[int] = []  # the objects' resourceVersions, ascending
        self.polled = 0  # versions the watch had not delivered when a poll read them
        self.ended: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.proc = self._start()
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env, start_new_session=True)

    def _follow(self) -> None:
        while True:
            self._read(self.proc)
            code = self.proc.wait()
            if self.stopping.is_set():
                return
            assert self.proc.stderr is not None
            self.ended.append(f"exit {code}: {self.proc.stderr.read().strip()[-300:]}")
            time.sleep(0.5)
            self.proc = self._start()

    def _read(self, proc: subprocess.Popen) -> None:
        decoder = json.JSONDecoder()
        buffer = ""
        assert proc.stdout is not None
        for line in proc.stdout:
            buffer += line
            while buffer.strip():
                try:
                    obj, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break
                buffer = buffer.lstrip()[end:]
                self._append(obj)

    def _append(self, obj: dict) -> bool:
        """Keep ``obj`` in resourceVersion order (etcd revisions), once; False if kept already."""
        version = int(obj["metadata"]["resourceVersion"])
        with self.lock:
            index = bisect.bisect_left(self.versions, version)
            if index < len(self.versions) and self.versions[index] == version:
                return False
            self.versions.insert(index, version)
            self.objects.insert(index, obj)
            return True

    def poll(self, cp: ControlPlane) -> None:
        """The current version too, in case the watch stalls (a kubectl that hangs rather
        than exits was seen once under load: the cluster Ready, the capture not)."""
        if self._append(cp.kubectl_json("get", "raycluster", self.name, "-n", self.namespace)):
            self.polled += 1

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.objects)

    def explain(self, cp: ControlPlane) -> str:
        """What a timed-out wait saw: the health of each captured version, the watch, the
        cluster's pods, the nodes (kwok's; a missed heartbeat taints them), the Events, and
        whether the operator runs."""
        objects = self.snapshot()
        lines = [f"{len(objects)} versions captured ({self.polled} by a poll); kubectl watch "
                 + ("running" if self.proc.poll() is None else f"exited {self.proc.returncode}")
                 + f", started again after {self.ended or 'no exit'}"
                 + f"; operator {'running' if cp.operator_running else 'STOPPED'}"]
        lines += [f"  {s}: {m}" for s, m in health_trace(objects)[-8:]]
        namespace = self.namespace
        try:
            for pod in cp.kubectl_json("get", "pods", "-n", namespace)["items"]:
                ready = [c["status"] for c in pod["status"].get("conditions") or [] if c["type"] == "Ready"]
                lines.append(f"  pod {pod['metadata']['name']}: {pod['status'].get('phase')}, Ready {ready}, "
                             f"node {pod['spec'].get('nodeName')}")
            for node in cp.kubectl_json("get", "nodes")["items"]:
                ready = [c["status"] for c in node["status"].get("conditions") or [] if c["type"] == "Ready"]
                lines.append(f"  node {node['metadata']['name']}: Ready {ready}, taints "
                             f"{[t['key'] for t in node['spec'].get('taints') or []]}")
            for event in cp.kubectl_json("get", "events", "-n", namespace)["items"][-10:]:
                lines.append(f"  event {event['reason']} {event['involvedObject']['name']}: {event.get('message')}")
        except Exception as exc:  # noqa: BLE001 - a diagnostic must not hide the timeout
            lines.append(f"  (pods and events not read: {exc})")
        return "\n".join(lines)

    def stop(self) -> list[dict]:
        self.stopping.set()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.thread.join(5)
        return self.snapshot()


def rendered_cluster(namespace: str, name: str) -> dict:
    """examples/plain rendered by raygitops (template hashes included), the RayCluster only."""
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(REPO / "examples" / "plain"),
                          "--namespace", namespace], capture_output=True, text=True, check=True, timeout=60)
    rc = next(d for d in yaml.safe_load_all(res.stdout) if d and d["kind"] == "RayCluster")
    rc["metadata"]["name"] = name
    rc["metadata"]["namespace"] = namespace
    for group in rc["spec"]["workerGroupSpecs"]:
        group.update(replicas=1, minReplicas=1)
    return rc


def get(cp: ControlPlane, namespace: str, name: str) -> dict:
    return cp.kubectl_json("get", "raycluster", name, "-n", namespace)


def patch(cp: ControlPlane, namespace: str, name: str, body: dict) -> None:
    cp.kubectl("patch", "raycluster", name, "-n", namespace, "--type=merge", "-p", json.dumps(body))


def condition(obj: dict, kind: str) -> str | None:
    return next((c["status"] for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind), None)


def wait_health(cp: ControlPlane, watch: Watch, status: str, timeout: float = 180, message: str = "") -> dict:
    """Until the newest captured version evaluates to ``status``; returns that version."""

    def newest() -> dict | None:
        watch.poll(cp)
        objects = watch.snapshot()
        if objects and luahealth.evaluate(objects[-1])["status"] == status:
            return objects[-1]
        return None

    try:
        return cp.wait_for(newest, timeout=timeout, message=message or f"health {status}")
    except TimeoutError as err:
        raise TimeoutError(f"{err}\n{watch.explain(cp)}") from None


def keep(name: str, objects: list[dict]) -> None:
    target = os.environ.get("RAYGITOPS_CAPTURE_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        Path(target, f"{name}.json").write_text(json.dumps(objects, indent=1))


def health_trace(objects: list[dict]) -> list[tuple[str, str]]:
    """(status, message) per captured version, consecutive duplicates collapsed."""
    trace: list[tuple[str, str]] = []
    for obj in objects:
        h = luahealth.evaluate(obj)
        if not trace or trace[-1] != (h["status"], h["message"]):
            trace.append((h["status"], h["message"]))
    return trace


def test_health_through_the_lifecycle(control_plane: ControlPlane, namespace: str) -> None:
    cp, name = control_plane, "health"
    missing = [c for c in ("kwok", "kube-scheduler") if not cp.has(c)]
    if missing:
        pytest.skip(f"pods never become ready without {' and '.join(missing)}")
    cp.apply(rendered_cluster(namespace, name), namespace)
    watch = Watch(cp, namespace, name)
    try:
        wait_health(cp, watch, "Healthy", message="a new cluster becomes Healthy")

        patch(cp, namespace, name, {"spec": {"suspend": True}})
        suspended = wait_health(cp, watch, "Suspended", message="a user-suspended cluster is Suspended")
        assert condition(suspended, "RayClusterSuspended") == "True"

        # raygitops' recreate: the same suspend, but the hook holds the lock -> Progressing
        lock = {"target": {"head": "h1-0000000000000000"}, "phase": "drain",
                "holder": "raygitops-presync-e2e", "renewedAt": "2026-12-01T00:00:00Z"}
        patch(cp, namespace, name, {"metadata": {"annotations": {LOCK: json.dumps(lock)}}})
        locked = wait_health(cp, watch, "Progressing", timeout=30, message="the recreate lock shows Progressing")
        assert LOCK in locked["metadata"]["annotations"] and locked["spec"]["suspend"] is True
        # the hook's resume: unlock + suspend false in one patch
        patch(cp, namespace, name, {"metadata": {"annotations": {LOCK: None}}, "spec": {"suspend": False}})
        wait_health(cp, watch, "Healthy", message="the resumed cluster becomes Healthy again")
    finally:
        objects = watch.stop()
        keep("lifecycle", objects)

    trace = health_trace(objects)
    statuses = [s for s, _ in trace]
    # the watch starts after the apply: the first version seen is still being created, or ready
    assert statuses[0] in ("Progressing", "Healthy"), trace
    # the order the states must appear in (other Progressing steps may sit in between)
    expected = ["Healthy", "Suspended", "Progressing", "Healthy"]
    position = 0
    for status in statuses:
        if position < len(expected) and status == expected[position]:
            position += 1
    assert position == len(expected), trace
    # A loaded machine can make kwok miss node heartbeats: the pods then turn unready and the
    # operator reports HeadPodReady False (seen once as reason "Unknown"). That is a true
    # Degraded, and the only one allowed on this healthy path.
    assert all(m.startswith("Head pod is not ready") for s, m in trace if s == "Degraded"), trace
    # every version in between, as the operator wrote it, maps to the expected state
    for obj in objects:
        h = luahealth.evaluate(obj)
        if LOCK in obj["metadata"].get("annotations", {}):
            assert h["status"] == "Progressing" and "raygitops" in h["message"], h
        elif condition(obj, "RayClusterSuspending") == "True":
            assert h["status"] == "Progressing" and "Suspending" in h["message"], h
        elif obj["spec"].get("suspend") and condition(obj, "RayClusterSuspended") == "True":
            assert h["status"] == "Suspended", h
    # the suspending step was seen: the operator persists RayClusterSuspending=True before deleting pods
    assert any(condition(o, "RayClusterSuspending") == "True" for o in objects), trace


def test_health_of_a_cluster_whose_pods_cannot_be_created(control_plane: ControlPlane, namespace: str) -> None:
    cp, name = control_plane, "health-broken"
    rc = rendered_cluster(namespace, name)
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}  # the API server rejects the pod
    cp.apply(rc, namespace)
    watch = Watch(cp, namespace, name)
    try:
        degraded = wait_health(cp, watch, "Degraded", timeout=60, message="a cluster without head pod is Degraded")
    finally:
        objects = watch.stop()
        keep("replica-failure", objects)
    message = luahealth.evaluate(degraded)["message"]
    assert "ReplicaFailure" in message and "FailedCreateHeadPod" in message, message
    assert condition(degraded, "ReplicaFailure") == "True"
