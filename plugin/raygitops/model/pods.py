"""Ray pods (pure): which group a pod belongs to, whose it is, whether it is Ready, and how
many pods the operator keeps for a spec.

The count is KubeRay's own rule (``GetWorkerGroupDesiredReplicas`` and ``reconcilePods`` of
ray-operator, the same in 1.1 to 1.7 but for the two notes below), in one place, so that the
hook, ``raygitops diff`` and ``raygitops status`` count alike:

- a worker group marked ``suspend: true`` has no pods;
- ``replicas`` (absent: ``minReplicas``) clamped to ``[minReplicas, maxReplicas]`` (defaults
  0 and 2^31-1); when ``minReplicas > maxReplicas``, ``maxReplicas`` (KubeRay 1.7 refuses such
  a spec);
- times ``numOfHosts``, read as at least 1 (the operator does the same, for CRDs without it);
- the head is one pod; a suspended cluster has none.

With the autoscaler on (``enableInTreeAutoscaling``) the autoscaler moves ``replicas``
within the bounds, so a count *ahead of time* is a range (:class:`PodCount`); the pods the
operator keeps *now* follow the live replicas (:func:`desired_workers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from raygitops.model.names import CLUSTER_LABEL, GROUP_LABEL, HEAD_GROUP, NODE_TYPE_LABEL
from raygitops.model.objmeta import labels, meta

MAX_REPLICAS = 2**31 - 1  # the CRD's default maxReplicas (math.MaxInt32)


@dataclass(frozen=True)
class PodCount:
    """A number of pods, or a range when the autoscaler decides (``max`` None: unbounded)."""

    min: int = 0
    max: int | None = 0

    def __add__(self, other: "PodCount") -> "PodCount":
        top = None if self.max is None or other.max is None else self.max + other.max
        return PodCount(self.min + other.min, top)

    @classmethod
    def exactly(cls, count: int) -> "PodCount":
        return cls(count, count)

    @property
    def exact(self) -> bool:
        return self.min == self.max

    @property
    def is_zero(self) -> bool:
        return self.min == 0 and self.max == 0

    def __str__(self) -> str:
        if self.max is None:
            return f"{self.min}+"
        if self.min == self.max:
            return str(self.min)
        return f"{self.min}–{self.max}"

    def to_json(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max}


def total(counts: Iterable[PodCount]) -> PodCount:
    out = PodCount()
    for count in counts:
        out = out + count
    return out


# ---------------------------------------------------------------------------------------------
# How many pods the operator keeps


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _bounds(group: dict[str, Any]) -> tuple[int, int, int]:
    """(minReplicas, maxReplicas, numOfHosts) as the operator reads them."""
    low = _int(group.get("minReplicas"), 0)
    high = _int(group.get("maxReplicas"), MAX_REPLICAS)
    return low, high, max(1, _int(group.get("numOfHosts"), 1))


def desired_workers(group: dict[str, Any]) -> int:
    """Pods the operator keeps now for one worker group (its live ``replicas``)."""
    if group.get("suspend") is True:
        return 0
    low, high, hosts = _bounds(group)
    replicas = _int(group.get("replicas"), low)
    replicas = high if low > high else min(max(replicas, low), high)
    return max(0, replicas) * hosts


def group_pods(group: dict[str, Any], autoscaling: bool) -> PodCount:
    """Pods of one worker group ahead of time: :func:`desired_workers`, or, when the
    autoscaler decides, ``minReplicas..maxReplicas`` times ``numOfHosts`` (unbounded at the
    default maximum)."""
    if not autoscaling or group.get("suspend") is True:
        return PodCount.exactly(desired_workers(group))
    low, high, hosts = _bounds(group)
    if low > high:
        return PodCount.exactly(desired_workers(group))
    return PodCount(max(0, low) * hosts, None if high >= MAX_REPLICAS else high * hosts)


def autoscaling(spec: dict[str, Any]) -> bool:
    return spec.get("enableInTreeAutoscaling") is True


def worker_groups(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The worker groups of a spec by ``groupName``."""
    groups = spec.get("workerGroupSpecs")
    return {g["groupName"]: g for g in groups if isinstance(g, dict) and isinstance(g.get("groupName"), str)} \
        if isinstance(groups, list) else {}


def pods_of(spec: dict[str, Any], groups: Iterable[str] | None = None) -> PodCount:
    """Pods of the given groups of a spec (``head``, ``worker:<name>``; all when None)."""
    if spec.get("suspend") is True:
        return PodCount()
    workers = worker_groups(spec)
    wanted = set(groups) if groups is not None else {"head"} | {f"worker:{n}" for n in workers}
    count = PodCount.exactly(1) if "head" in wanted else PodCount()
    scaled = autoscaling(spec)
    return count + total(group_pods(g, scaled) for n, g in workers.items() if f"worker:{n}" in wanted)


def pods_now(spec: dict[str, Any]) -> PodCount:
    """Pods the operator keeps for a live spec now: exact with the replicas as they are;
    with the autoscaler, at least each group's minimum (it may be scaling)."""
    if spec.get("suspend") is True:
        return PodCount()
    workers = worker_groups(spec).values()
    if autoscaling(spec):
        return PodCount(1, None) + total(PodCount(group_pods(g, True).min, None) for g in workers)
    return PodCount.exactly(1 + sum(desired_workers(g) for g in workers))


# ---------------------------------------------------------------------------------------------
# One pod


def group_key(pod: dict[str, Any]) -> str | None:
    """``head`` / ``worker:<groupName>`` of a Ray pod; None for other pods (e.g. the GCS
    cleanup Job's)."""
    lab = labels(pod)
    node_type = lab.get(NODE_TYPE_LABEL)
    group = lab.get(GROUP_LABEL)
    if node_type == "head" or (node_type is None and group == HEAD_GROUP):
        return "head"
    if node_type in ("worker", None) and group:
        return f"worker:{group}"
    return None


def owned_by(pod: dict[str, Any], cluster_uid: str | None) -> bool:
    """Whether the pod's controller ownerReference is the RayCluster with this uid."""
    for ref in meta(pod).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return bool(cluster_uid) and ref.get("uid") == cluster_uid
    return False


def terminating(pod: dict[str, Any]) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def own_pods(live: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cluster's own pods that are not going away (a pod that merely carries its label is
    not its own)."""
    uid = meta(live).get("uid")
    return [p for p in pods if not terminating(p) and owned_by(p, uid)]


def foreign_pods(live: dict[str, Any], pods: list[dict[str, Any]]) -> list[str]:
    """Names of the pods that carry the cluster's label but are not its own (terminating
    ones aside)."""
    uid = meta(live).get("uid")
    return sorted(meta(p).get("name", "") for p in pods if not terminating(p) and not owned_by(p, uid))


def by_cluster(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A namespace-wide pod list grouped by ``ray.io/cluster``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        name = labels(pod).get(CLUSTER_LABEL)
        if name:
            out.setdefault(name, []).append(pod)
    return out


def by_group(pods: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Ray pods grouped by :func:`group_key` (others left out)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        key = group_key(pod)
        if key is not None:
            out.setdefault(key, []).append(pod)
    return out
