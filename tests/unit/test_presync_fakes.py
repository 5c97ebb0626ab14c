"""An in-memory API server + KubeRay stand-in for the hook's unit tests, and its own tests.

FakeKube implements the methods of ``raygitops.kube.client.Kube`` the hook uses, with
resourceVersions, 409 on a stale precondition, RFC 7386 merge patches, watch streams and a
toy operator: ``spec.suspend: true`` deletes the pods (at once, or when the test says),
``suspend: false`` creates pods from the templates (copying template annotations); with
``replaces_pods`` it also replaces a pod the hook deletes on a running cluster, half a
second later, from the group's current template (what a replacement waits for). The API
server bumps ``metadata.generation`` on a spec change; the toy operator observes every write at
once (``status.observedGeneration``) unless a test makes it lag (:meth:`FakeKube.lag`: until
:meth:`FakeKube.catch_up` it refills from the spec it saw last, as a real operator whose watch
of the RayCluster is delayed).

Time is simulated by default (:class:`FakeClock`): the hook's waits and the fake's watch
calls advance it at once, so a test of a 60 s lease or a timed-out drain takes no real
second. A test whose operator or second hook runs in a thread passes ``clock=SYSTEM``.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import queue
import threading
import time
import uuid
from typing import Any

import pytest

from raygitops.clock import Clock
from raygitops.model.hashing import hash_cluster, split_spec
from raygitops.model.names import HASH_ANNOTATION
from raygitops.model.plan import ClusterPlan
from raygitops.kube.client import ApiError, Conflict, Gone, NotFound

NS = "ray"


def merge_apply(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_apply(out.get(key), value)
    return out


def cluster_spec(image: str = "rayproject/ray:2.41.0", workers: tuple[str, ...] = ("small",),
                 replicas: int = 2, env: str = "info") -> dict[str, Any]:
    def container(name: str, *ports: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": name, "image": image,
            "env": [{"name": "RAY_LOG_LEVEL", "value": env}],
            "ports": [{"containerPort": 6379, "name": "gcs"}, *ports],
            "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
        }

    return {
        "rayVersion": "2.41.0",
        # the head declares the dashboard's port: KubeRay's head Service then has it, and the
        # hook can ask the head for running jobs (render refuses a head it cannot ask)
        "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                          "template": {"spec": {"containers": [
                              container("ray-head", {"containerPort": 8265, "name": "dashboard"})]}}},
        "workerGroupSpecs": [
            {"groupName": g, "replicas": replicas, "minReplicas": 1, "maxReplicas": 4, "rayStartParams": {},
             "template": {"spec": {"containers": [container("ray-worker")]}}}
            for g in workers
        ],
    }


def make_plan(name: str = "demo", spec: dict[str, Any] | None = None, strategy: str = "Recreate",
              suspend: bool = False, owner: str | None = None) -> ClusterPlan:
    spec = spec or cluster_spec()
    return ClusterPlan(name, strategy, hash_cluster(spec), split_spec(spec), suspend, owner)


def stamped(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as render writes it (template hash annotations)."""
    spec = copy.deepcopy(spec)
    hashes = hash_cluster(spec)
    groups = [("head", spec["headGroupSpec"])] + [(g["groupName"], g) for g in spec["workerGroupSpecs"]]
    for name, group in groups:
        value = hashes.head if name == "head" else hashes.workers[name]
        group["template"].setdefault("metadata", {}).setdefault("annotations", {})[HASH_ANNOTATION] = value
    return spec


def with_crd_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    """What the API server stores: CRD defaults applied."""
    spec = copy.deepcopy(spec)
    for group in [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]:
        for c in group["template"]["spec"]["containers"]:
            for port in c.get("ports", []):
                port.setdefault("protocol", "TCP")
            for env in c.get("env", []):
                ref = (env.get("valueFrom") or {}).get("secretKeyRef")
                if ref is not None:
                    ref.setdefault("name", "")
    for group in spec.get("workerGroupSpecs", []):
        group.setdefault("numOfHosts", 1)
        group.setdefault("minReplicas", 0)
        group.setdefault("maxReplicas", 2147483647)
        group.setdefault("replicas", 0)
    return spec


class FakeClock(Clock):
    """Simulated time (a discrete-event simulation): a wait returns at once and moves the
    clock by what it waited, running on the way whatever a test scheduled with
    :meth:`call_later` (an operator's next reconcile, another hook's write, a SIGTERM)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start
        self._due: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self._lock = threading.RLock()

    def monotonic(self) -> float:
        return self.t

    def now(self) -> float:
        return 1_800_000_000.0 + self.t

    def call_later(self, delay: float, fn: Any, *args: Any) -> None:
        with self._lock:
            heapq.heappush(self._due, (self.t + max(0.0, delay), next(self._seq), lambda: fn(*args)))

    def advance(self, seconds: float) -> None:
        """Move ``seconds`` on, running what falls due on the way, in order."""
        with self._lock:
            target = self.t + max(0.0, seconds)
            while self._due and self._due[0][0] <= target:
                when, _, fn = heapq.heappop(self._due)
                self.t = max(self.t, when)
                fn()
            self.t = target

    def advance_to_next(self, limit: float) -> bool:
        """Move on to the next scheduled event (running it) if it falls before the instant
        ``limit``, else to ``limit``; whether an event ran (a watch then looks again)."""
        with self._lock:
            if self._due and self._due[0][0] <= limit:
                self.advance(self._due[0][0] - self.t)
                return True
            self.advance(limit - self.t)
            return False

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        if not stop.is_set():
            self.advance(seconds)
        return stop.is_set()


class FakeKube:
    def __init__(self, operator: bool = True, delete_on_suspend: bool = True, clock: Clock | None = None,
                 replaces_pods: bool = False):
        self.clock = clock if clock is not None else FakeClock()
        self.simulated = isinstance(self.clock, FakeClock)
        self.lock = threading.RLock()
        self.rv = itertools.count(100)
        self.clusters: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> pod
        self.events: list[dict[str, Any]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.watchers: list[queue.Queue] = []
        self.operator = operator
        self.delete_on_suspend = delete_on_suspend
        self.replaces_pods = replaces_pods
        self.requests = 0
        self.by_verb: dict[str, int] = {}
        self.deleted_pods: list[str] = []
        self.delete_graces: list[int | None] = []
        self.fail_next: list[Exception] = []  # raised by the next calls (any method)
        self.deadline: float | None = None  # set by the run, as on the real client
        self.crd_has_upgrade_strategy = True  # KubeRay >= 1.6 CRD
        self.crd_has_suspend = True  # KubeRay >= 1.1 CRD (else the API server prunes spec.suspend)
        # The Ray head behind every head Service's dashboard port: what GET /api/jobs/ answers
        # (Ray's JobDetails dicts; None: the proxy answers 503, as for a head without one)
        self.ray_jobs: list[dict[str, Any]] | None = []
        self.proxied: list[tuple[str, str, str]] = []  # (namespace, service:port, path) asked
        self.views: dict[tuple[str, str], dict[str, Any]] = {}  # a lagging operator's last seen cluster
        # What the preflight reads: the objects that exist ((resource, namespace or None, name)),
        # the nodes (one that holds any test pod), what the hook may not read ("nodes" for
        # their list, "node" for a GET of one, or a resource), the node new pods land on
        self.objects: set[tuple[str, str | None, str]] = set()
        self.nodes: list[dict[str, Any]] = [node("node-1")]
        self.forbidden: set[str] = set()
        self.pod_node: str | None = None
        # other namespaced objects (the fixed-name hook objects), by (group, resource, namespace, name)
        self.hook_objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self.deleted_objects: list[tuple[str, str, str, str]] = []

    # ---------------------------------------------------------------- helpers for tests

    def _count(self, verb: str) -> None:
        self.requests += 1
        self.by_verb[verb] = self.by_verb.get(verb, 0) + 1
        if self.fail_next:
            raise self.fail_next.pop(0)

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self.rv))

    def add_cluster(self, name: str, spec: dict[str, Any], namespace: str = NS, pods: bool = True,
                    labels: dict[str, str] | None = None, owner_kind: str | None = None,
                    annotations: dict[str, str] | None = None) -> dict[str, Any]:
        obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()), "generation": 1,
                            "labels": dict(labels or {}), "annotations": dict(annotations or {})},
               "spec": copy.deepcopy(spec), "status": {"state": "ready", "observedGeneration": 1}}
        if owner_kind:
            obj["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": owner_kind,
                                                   "name": "owner", "uid": "x", "controller": True}]
        self._bump(obj)
        self.clusters[(namespace, name)] = obj
        if pods:
            self.create_pods(namespace, name)
        return obj

    def lag(self, name: str, namespace: str = NS) -> None:
        """From now on the operator sees the cluster as it is now (its watch of it delayed)."""
        with self.lock:
            self.views[(namespace, name)] = copy.deepcopy(self.clusters[(namespace, name)])

    def catch_up(self, name: str, namespace: str = NS) -> None:
        """The delayed watch delivers: the operator sees the cluster as it is, and says so."""
        with self.lock:
            self.views.pop((namespace, name), None)
            obj = self.clusters.get((namespace, name))
            if obj is not None:
                self._observe(obj)
                self._bump(obj)

    def _view(self, namespace: str, name: str) -> dict[str, Any]:
        return self.views.get((namespace, name)) or self.clusters[(namespace, name)]

    def _observe(self, obj: dict[str, Any]) -> None:
        obj.setdefault("status", {})["observedGeneration"] = obj["metadata"].get("generation", 1)

    def create_pods(self, namespace: str, name: str, hash_override: str | None = None) -> None:
        spec = self._view(namespace, name)["spec"]
        groups = [("head", "headgroup", spec["headGroupSpec"], 1)] + [
            ("worker", g["groupName"], g, g.get("replicas", 0)) for g in spec.get("workerGroupSpecs", [])
        ]
        for node_type, group, g, count in groups:
            ann = dict(((g.get("template") or {}).get("metadata") or {}).get("annotations") or {})
            if hash_override is not None:
                if hash_override == "":
                    ann.pop(HASH_ANNOTATION, None)
                else:
                    ann[HASH_ANNOTATION] = hash_override
            for i in range(count):
                self.add_pod(namespace, name, node_type, group, ann)

    def add_pod(self, namespace: str, cluster: str, node_type: str, group: str, annotations: dict[str, str],
                finalizers: list[str] | None = None) -> dict[str, Any]:
        uid = str(uuid.uuid4())
        owner = self.clusters[(namespace, cluster)]["metadata"]
        pod = {"metadata": {"name": f"{cluster}-{group}-{uid[:5]}", "namespace": namespace, "uid": uid,
                            "labels": {"ray.io/cluster": cluster, "ray.io/node-type": node_type,
                                       "ray.io/group": group},
                            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster,
                                                 "uid": owner["uid"], "controller": True}],
                            "annotations": dict(annotations), "finalizers": list(finalizers or [])},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
        if self.pod_node:
            pod["spec"] = {"nodeName": self.pod_node}
        with self.lock:
            self._bump(pod)
            self.pods[uid] = pod
            self._notify("ADDED", pod)
        return pod

    def remove_pod(self, uid: str) -> None:
        with self.lock:
            pod = self.pods.pop(uid, None)
            if pod is not None:
                self._bump(pod)
                self.deleted_pods.append(uid)
                self._notify("DELETED", pod)

    def _notify(self, kind: str, pod: dict[str, Any]) -> None:
        for q in self.watchers:
            q.put((kind, copy.deepcopy(pod)))

    def pods_of(self, name: str, namespace: str = NS) -> list[dict[str, Any]]:
        return [p for p in self.pods.values()
                if p["metadata"]["labels"]["ray.io/cluster"] == name and p["metadata"]["namespace"] == namespace]

    def _operate(self, obj: dict[str, Any]) -> None:
        if not self.operator:
            return
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        if obj["spec"].get("suspend") is True:
            obj["status"] = {"state": "suspended"}
            if self.delete_on_suspend:
                for pod in self.pods_of(name, ns):
                    if not pod["metadata"].get("finalizers"):
                        self.remove_pod(pod["metadata"]["uid"])
                    else:
                        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        elif not self.pods_of(name, ns):
            self.create_pods(ns, name)
            obj["status"] = {"state": "ready"}

    # ---------------------------------------------------------------- the Kube interface

    def list_clusters(self, namespace: str) -> list[dict[str, Any]]:
        self._count("list")
        with self.lock:
            return [copy.deepcopy(c) for (ns, _), c in self.clusters.items() if ns == namespace]

    def get_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._count("get")
        with self.lock:
            obj = self.clusters.get((namespace, name))
            return copy.deepcopy(obj) if obj else None

    def watch_cluster(self, namespace: str, name: str, resource_version: str, timeout_seconds: int):
        """Each version of the cluster newer than ``resource_version`` (the fake changes
        clusters in place, so the stream looks every millisecond; a real watch also sends the
        versions in between, which the hook reads the same way), then DELETED once it is gone."""
        self._count("watch")
        seen = int(resource_version or 0)
        end = self.clock.monotonic() + timeout_seconds
        while self.clock.monotonic() < end:
            with self.lock:
                obj = self.clusters.get((namespace, name))
                version = copy.deepcopy(obj) if obj is not None else None
            if version is None:
                yield "DELETED", {"metadata": {"name": name, "namespace": namespace}}
                return
            if int(version["metadata"]["resourceVersion"]) > seen:
                seen = int(version["metadata"]["resourceVersion"])
                yield "MODIFIED", version
            elif self.simulated:  # nothing new: on to what happens next, or the end of the call
                self.clock.advance_to_next(end)
            else:
                time.sleep(0.001)

    def knows_upgrade_strategy(self, namespace: str, name: str) -> bool:
        self._count("dry-run")
        return self.crd_has_upgrade_strategy

    def get_raycluster_crd(self) -> dict[str, Any] | None:
        """The RayCluster CRD's served schema, as far as ``raygitops status`` reads it."""
        self._count("get")
        spec = {"properties": {"upgradeStrategy": {"type": "object"}} if self.crd_has_upgrade_strategy else {}}
        return {"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"properties": {"spec": spec}}}}]}}

    def patch_cluster(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self._count("patch")
        with self.lock:
            obj = self.clusters.get((namespace, name))
            if obj is None:
                raise NotFound(404, "NotFound", name)
            want = (patch.get("metadata") or {}).get("resourceVersion")
            if want and want != obj["metadata"]["resourceVersion"]:
                raise Conflict(409, "Conflict", "the object has been modified")
            patch = copy.deepcopy(patch)
            patch.get("metadata", {}).pop("resourceVersion", None)
            new = merge_apply(obj, patch)
            if not self.crd_has_suspend:
                new.get("spec", {}).pop("suspend", None)
            if new.get("spec") != obj.get("spec"):
                new["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
            self._bump(new)
            self.clusters[(namespace, name)] = new
            self.patches.append((name, patch))
            if (namespace, name) not in self.views:
                self._operate(new)
                if self.operator:
                    self._observe(new)
            return copy.deepcopy(new)

    def list_pods(self, namespace: str, selector: str) -> tuple[list[dict[str, Any]], str]:
        self._count("list")
        key, _, value = selector.partition("=")
        with self.lock:
            pods = [copy.deepcopy(p) for p in self.pods.values() if p["metadata"]["namespace"] == namespace
                    and key in p["metadata"]["labels"] and (not value or p["metadata"]["labels"][key] == value)]
            return pods, str(next(self.rv))

    def watch_pods(self, namespace: str, selector: str, resource_version: str, timeout_seconds: int):
        self._count("watch")
        q: queue.Queue = queue.Queue()
        with self.lock:
            self.watchers.append(q)
        _, _, value = selector.partition("=")
        end = self.clock.monotonic() + timeout_seconds
        try:
            while True:
                try:
                    kind, pod = q.get_nowait() if self.simulated else q.get(timeout=timeout_seconds)
                except queue.Empty:
                    if self.simulated and self.clock.advance_to_next(end):
                        continue  # something happened: look again
                    return
                if kind == "GONE":
                    raise Gone(410, "Expired", "too old")
                if pod["metadata"]["labels"].get("ray.io/cluster") == value:
                    yield kind, pod
        finally:
            with self.lock:
                self.watchers.remove(q)

    def delete_pod(self, namespace: str, name: str, uid: str | None = None, grace_seconds: int | None = None) -> bool:
        self._count("delete")
        self.delete_graces.append(grace_seconds)
        with self.lock:
            for pod in list(self.pods.values()):
                if pod["metadata"]["name"] == name and (uid is None or pod["metadata"]["uid"] == uid):
                    self.remove_pod(pod["metadata"]["uid"])
                    if self.replaces_pods and self.operator:
                        self.clock.call_later(0.5, self._fill, namespace, pod["metadata"]["labels"]["ray.io/cluster"])
                    return True
        return False

    def get_through_service(self, namespace: str, service: str, path: str) -> Any:
        self._count("proxy")
        self.proxied.append((namespace, service, path))
        if self.ray_jobs is None:
            raise ApiError(503, "ServiceUnavailable", f"no endpoints available for service {service!r}")
        return copy.deepcopy(self.ray_jobs)

    def _fill(self, namespace: str, name: str) -> None:
        """The operator's reconcile of a running cluster: each group back to its replicas,
        from its current template (a removed group gets none)."""
        with self.lock:
            obj = self.clusters.get((namespace, name))
            if obj is None:
                return
            spec = self._view(namespace, name)["spec"]
            if spec.get("suspend") is True:
                return
            groups = [("head", "headgroup", spec["headGroupSpec"], 1)] + [
                ("worker", g["groupName"], g, g.get("replicas", 0)) for g in spec.get("workerGroupSpecs", [])]
            for node_type, group, g, count in groups:
                have = sum(1 for p in self.pods_of(name, namespace) if p["metadata"]["labels"]["ray.io/group"] == group)
                ann = dict(((g.get("template") or {}).get("metadata") or {}).get("annotations") or {})
                for _ in range(count - have):
                    self.add_pod(namespace, name, node_type, group, ann)

    def _refuse(self, what: str) -> None:
        if what in self.forbidden:
            raise ApiError(403, "Forbidden", f"the hook may not read {what}")

    def exists(self, api: str, resource: str, name: str, namespace: str | None = None) -> bool:
        self._count("get")
        self._refuse(resource)
        return (resource, namespace, name) in self.objects

    def list_nodes(self) -> list[dict[str, Any]]:
        self._count("list")
        self._refuse("nodes")
        return copy.deepcopy(self.nodes)

    def get_node(self, name: str) -> dict[str, Any] | None:
        self._count("get")
        self._refuse("node")
        return next((copy.deepcopy(n) for n in self.nodes if n["metadata"]["name"] == name), None)
    def get_object(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        self._count("get")
        with self.lock:
            obj = self.hook_objects.get((group, resource, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def delete_object(self, group: str, resource: str, namespace: str, name: str, uid: str | None = None) -> bool:
        self._count("delete")
        key = (group, resource, namespace, name)
        with self.lock:
            obj = self.hook_objects.get(key)
            if obj is None or (uid and obj["metadata"].get("uid") != uid):
                return False
            del self.hook_objects[key]
            self.deleted_objects.append(key)
            return True

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        self._count("create")
        self.events.append(event)

    def event_reasons(self, name: str) -> list[str]:
        return [e["reason"] for e in self.events if e["involvedObject"]["name"] == name]


def node(name: str, cpu: str = "64", memory: str = "256Gi", labels: dict[str, str] | None = None,
         taints: list[dict[str, Any]] | None = None, **extra: str) -> dict[str, Any]:
    """A Node as the preflight reads it: labels, taints, allocatable."""
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": list(taints or [])},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110", **extra}}}


def ray_job(ident: str = "raysubmit_1", status: str = "RUNNING", started: float | None = None,
            entrypoint: str = "python train.py") -> dict[str, Any]:
    """One of Ray's JobDetails as GET /api/jobs/ lists it (start_time in milliseconds)."""
    return {"type": "SUBMISSION", "submission_id": ident, "job_id": None, "status": status,
            "entrypoint": entrypoint, "start_time": int((started or 1_800_000_000.0) * 1000), "end_time": None,
            "metadata": {}, "message": "", "driver_info": None}


# ------------------------------------------------------------------ tests of the fake itself


def test_merge_apply_rfc7386():
    assert merge_apply({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}, "f": [1]}) == {
        "a": 1, "b": {"d": 3, "e": 4}, "f": [1]}


def test_fake_conflict_and_operator():
    kube = FakeKube()
    obj = kube.add_cluster("demo", stamped(cluster_spec()))
    assert len(kube.pods_of("demo")) == 3
    with pytest.raises(Conflict):
        kube.patch_cluster(NS, "demo", {"metadata": {"resourceVersion": "1"}, "spec": {"suspend": True}})
    kube.patch_cluster(NS, "demo", {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                    "spec": {"suspend": True}})
    assert kube.pods_of("demo") == []
