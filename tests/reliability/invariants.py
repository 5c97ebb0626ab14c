"""Invariants of the recreate cycle, checked after every hook run of a campaign (reusable).

Every check returns a list of violations (empty: fine) so a campaign can count them and
report all at once.  Objects are plain dicts as the API returns them.

- :func:`suspended_clusters`: no cluster left suspended unless desired (a failed run may leave
  one suspended only with a raygitops lock on it, for the next run to finish);
- :func:`pods_on_target`: the pods of a recreated cluster all carry the new hash;
- :func:`hook_only_changes`: the hook changed nothing but the pod-shaping spec, spec.suspend
  and ``raygitops.dev/*`` annotations (status, managedFields, resourceVersion, generation
  ignored);
- :class:`PodWatch`: every pod deletion while a campaign round runs (a watch, not polling, so
  no deletion is missed): pods wrongly deleted (clusters that must not be touched) and
  clusters recreated more than once per target (a pod carrying the target hash deleted).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from raygitops.model.hashing import CLUSTER_EXCLUDED, GROUP_EXCLUDED
from raygitops.model.objmeta import annotations

HASH = "raygitops.dev/template-hash"
HASHES = "raygitops.dev/template-hashes"
LOCK = "raygitops.dev/recreate"
LAST = "raygitops.dev/last-recreate"
PREFIX = "raygitops.dev/"


def key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def desired_hashes(obj: dict[str, Any]) -> set[str]:
    """The hashes of a rendered (or live) RayCluster's ``template-hashes`` annotation."""
    doc = json.loads(annotations(obj)[HASHES])
    return {doc["head"], *doc["workers"].values()}


def pod_hash(pod: dict[str, Any]) -> str | None:
    return annotations(pod).get(HASH)


def pod_cluster(pod: dict[str, Any]) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return f"{pod['metadata'].get('namespace', '')}/{labels.get('ray.io/cluster', '')}"


# ----------------------------------------------------------------------------- suspend


def suspended_clusters(live: Iterable[dict[str, Any]], desired_suspended: set[str] = frozenset(),
                       allow_locked: bool = False) -> list[str]:
    """Clusters suspended that should not be.  ``allow_locked``: after a FAILED run, a cluster
    the hook could not resume is allowed while its lock is still on it (the next run
    finishes the cycle); after a successful run nothing is allowed."""
    bad = []
    for obj in live:
        if (obj.get("spec") or {}).get("suspend") is not True or key(obj) in desired_suspended:
            continue
        if allow_locked and LOCK in annotations(obj):
            continue
        lock = annotations(obj).get(LOCK)
        bad.append(f"{key(obj)} left suspended (lock: {lock or 'none'})")
    return bad


def locks_left(live: Iterable[dict[str, Any]]) -> list[str]:
    return [f"{key(o)} still locked: {annotations(o)[LOCK]}" for o in live if LOCK in annotations(o)]


# ----------------------------------------------------------------------------- pods


def pods_on_target(pods: Iterable[dict[str, Any]], cluster: str, target: set[str]) -> list[str]:
    """Every live (not terminating) pod of ``cluster`` carries a hash of ``target``."""
    bad = []
    for pod in pods:
        if pod_cluster(pod) != cluster or pod["metadata"].get("deletionTimestamp"):
            continue
        if pod_hash(pod) not in target:
            bad.append(f"{cluster}: pod {pod['metadata']['name']} runs {pod_hash(pod)}, not {sorted(target)}")
    return bad


# ----------------------------------------------------------------------------- hook-only changes


def _outside_pod_shaping(obj: dict[str, Any]) -> dict[str, Any]:
    """What the hook must never change: the object minus status, server-managed metadata,
    raygitops.dev/* annotations, spec.suspend and the pod-shaping spec.  Worker groups are
    keyed by name and keep only their scaling/service keys (the resume adds new groups and
    drops removed ones, so only groups on both sides are compared: see hook_only_changes)."""
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    meta = obj.setdefault("metadata", {})
    for k in ("managedFields", "resourceVersion", "generation"):
        meta.pop(k, None)
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(PREFIX)}
    # kubectl's last-applied-configuration is the APPLY's business, not the hook's
    meta["annotations"].pop("kubectl.kubernetes.io/last-applied-configuration", None)
    spec = obj.get("spec") or {}
    kept = {k: v for k, v in spec.items() if k in CLUSTER_EXCLUDED and k not in
            ("suspend", "headGroupSpec", "workerGroupSpecs")}
    head = spec.get("headGroupSpec") or {}
    kept["headGroupSpec"] = {k: v for k, v in head.items() if k in GROUP_EXCLUDED and k != "suspend"}
    kept["workerGroupSpecs"] = {
        g.get("groupName"): {k: v for k, v in g.items() if k in GROUP_EXCLUDED and k != "suspend"}
        for g in spec.get("workerGroupSpecs") or [] if isinstance(g, dict)}
    obj["spec"] = kept
    return obj


def hook_only_changes(before: Iterable[dict[str, Any]], after: Iterable[dict[str, Any]]) -> list[str]:
    """Fields the hook changed that it must not (compares live objects around a hook run)."""
    after_by_key = {key(o): o for o in after}
    bad = []
    for old in before:
        new = after_by_key.get(key(old))
        if new is None:
            bad.append(f"{key(old)} disappeared")
            continue
        a, b = _outside_pod_shaping(old), _outside_pod_shaping(new)
        wa, wb = a["spec"].pop("workerGroupSpecs"), b["spec"].pop("workerGroupSpecs")
        for name in set(wa) & set(wb):
            if wa[name] != wb[name]:
                bad.append(f"{key(old)}: worker group {name} scaling fields changed: {wa[name]} -> {wb[name]}")
        if a != b:
            bad.append(f"{key(old)}: fields outside the pod-shaping spec changed: {_diff(a, b)}")
    return bad


def _diff(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                return _diff(a.get(k), b.get(k), f"{path}.{k}")
        return path
    return f"{path}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}"


# ----------------------------------------------------------------------------- pod watch


@dataclass
class Deletion:
    uid: str
    cluster: str  # namespace/name
    name: str
    hash: str | None
    at: float


@dataclass
class PodWatch:
    """Watches the Ray pods (label ``ray.io/cluster``) of some namespaces with the admin
    credentials, recording every deletion (``DELETED`` events; a 410 or a dropped stream
    re-lists and diffs, so nothing is missed)."""

    kubeconfig: str
    namespaces: list[str]
    deletions: list[Deletion] = field(default_factory=list)
    live: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid -> pod
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[str] = field(default_factory=list)

    def __enter__(self) -> "PodWatch":
        from kubernetes import config

        self._api_client = config.new_client_from_config(self.kubeconfig)
        ready = []
        for ns in self.namespaces:
            event = threading.Event()
            ready.append(event)
            t = threading.Thread(target=self._run, args=(ns, event), name=f"podwatch-{ns}", daemon=True)
            t.start()
            self._threads.append(t)
        for event in ready:
            event.wait(30)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)

    def settle(self, seconds: float = 1.0) -> None:
        """Give the watch time to deliver the last events."""
        time.sleep(seconds)

    def _record_gone(self, uids: Iterable[str]) -> None:
        for uid in uids:
            pod = self.live.pop(uid, None)
            if pod is not None:
                self.deletions.append(Deletion(uid, pod_cluster(pod), pod["metadata"]["name"], pod_hash(pod),
                                               time.monotonic()))

    def _run(self, namespace: str, ready: threading.Event) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        api = client.CoreV1Api(self._api_client)
        mine: set[str] = set()
        while not self._stop.is_set():
            try:
                listed = api.list_namespaced_pod(namespace, label_selector="ray.io/cluster",
                                                 _preload_content=False)
                doc = json.loads(listed.data)
                now = {p["metadata"]["uid"]: p for p in doc["items"]}
                with self._lock:
                    self._record_gone(mine - set(now))
                    self.live.update(now)
                    mine = set(now)
                ready.set()
                rv = doc["metadata"]["resourceVersion"]
                resp = api.list_namespaced_pod(namespace, label_selector="ray.io/cluster", watch=True,
                                               resource_version=rv, timeout_seconds=5,
                                               allow_watch_bookmarks=False, _preload_content=False)
                for line in resp:
                    if self._stop.is_set():
                        break
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        break  # 410: list again
                    uid = obj["metadata"]["uid"]
                    with self._lock:
                        if event["type"] == "DELETED":
                            self.live[uid] = obj
                            self._record_gone([uid])
                            mine.discard(uid)
                        else:
                            self.live[uid] = obj
                            mine.add(uid)
                resp.release_conn()
            except (ApiException, OSError, ValueError) as err:  # pragma: no cover - retried
                self.errors.append(str(err)[:200])
                time.sleep(0.5)

    # --- verdicts

    def deleted_uids(self, cluster: str) -> set[str]:
        with self._lock:
            return {d.uid for d in self.deletions if d.cluster == cluster}

    def wrongly_deleted(self, untouchable: Iterable[str]) -> list[str]:
        """Pods of clusters the hook must leave alone that were deleted."""
        clusters = set(untouchable)
        with self._lock:
            return [f"{d.cluster}: pod {d.name} ({d.uid}) deleted" for d in self.deletions if d.cluster in clusters]

    def recreated_twice(self, cluster: str, target: set[str]) -> list[str]:
        """A pod already on the target hash was deleted: the cluster went through a second
        cycle for the same target (or lost a new pod)."""
        with self._lock:
            return [f"{cluster}: pod {d.name} on the target hash {d.hash} deleted (second recreate?)"
                    for d in self.deletions if d.cluster == cluster and d.hash in target]
