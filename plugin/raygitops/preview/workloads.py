"""RayServices and RayJobs in the preview (pure): what KubeRay does with the change
(:mod:`raygitops.model.workloads`), with the pods of the cluster it builds, under the target
KubeRay (``kuberayVersion``; the newest known when unset), and where another known version
answers otherwise, what that one does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raygitops.model import podrules, pods, workloads
from raygitops.model.pods import PodCount
from raygitops.model.strategy import EMBEDDED_SPEC

KINDS = tuple(EMBEDDED_SPEC)  # RayJob, RayService
CREATE = "create"
DELETE = "delete"
# report order: what needs attention first
CLASSES = (workloads.NEW_CLUSTER, workloads.STALE, workloads.NEXT_CLUSTER, DELETE, CREATE, workloads.IN_PLACE,
           workloads.UNCHANGED)


@dataclass
class WorkloadImpact:
    kind: str
    namespace: str
    name: str
    klass: str
    reason: str
    kuberay: str  # the version the answer is for ("1.6": the rules of that line)
    pods: PodCount  # the pods of the cluster KubeRay builds (new-cluster, next-cluster, create)
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "class": self.klass,
                "reason": self.reason, "kuberay": self.kuberay, "pods": self.pods.to_json(), "notes": list(self.notes)}


def _identity(obj: dict[str, Any], default_namespace: str | None) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return obj.get("kind", ""), meta.get("namespace") or default_namespace or "", meta.get("name") or ""


def _index(objects: list[dict[str, Any]], default_namespace: str | None) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {_identity(o, default_namespace): o for o in objects
            if o.get("kind") in KINDS and str(o.get("apiVersion", "")).startswith("ray.io/")}


def _cluster_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    value = spec.get(EMBEDDED_SPEC[obj["kind"]]) if isinstance(spec, dict) else None
    return value if isinstance(value, dict) else {}


def _predict(kind: str, base: dict[str, Any], head: dict[str, Any], version: str | None) -> workloads.Prediction:
    return workloads.rayservice(base, head, version) if kind == "RayService" else workloads.rayjob(base, head)


def _line(version: str | None) -> str:
    return podrules.rules_for(version).name


def classify(base_objects: list[dict[str, Any]], head_objects: list[dict[str, Any]], version: str | None,
             default_namespace: str | None) -> list[WorkloadImpact]:
    """Every RayService and RayJob of either side, matched by kind, namespace and name."""
    old, new = _index(base_objects, default_namespace), _index(head_objects, default_namespace)
    out = []
    for key in sorted(set(old) | set(new)):
        kind, namespace, name = key
        if key not in old:
            out.append(WorkloadImpact(kind, namespace, name, CREATE, f"new {kind}: KubeRay builds its cluster",
                                      _line(version), pods.pods_of(_cluster_spec(new[key]))))
            continue
        if key not in new:
            out.append(WorkloadImpact(kind, namespace, name, DELETE, f"{kind} removed: its cluster is deleted (if Argo "
                                      "CD prunes it)", _line(version), pods.pods_of(_cluster_spec(old[key]))))
            continue
        answer = _predict(kind, old[key], new[key], version)
        affected = pods.pods_of(_cluster_spec(new[key])) if answer.klass in (
            workloads.NEW_CLUSTER, workloads.NEXT_CLUSTER) else PodCount()
        impact = WorkloadImpact(kind, namespace, name, answer.klass, answer.reason, _line(version), affected)
        if answer.klass == workloads.NEW_CLUSTER:
            impact.notes.append(f"the running cluster's {pods.pods_of(_cluster_spec(old[key]))} pods are deleted once "
                                "the new one serves")
        for rules in podrules.RULES:
            if rules.name == impact.kuberay:
                continue
            other = _predict(kind, old[key], new[key], rules.name)
            if other.klass != answer.klass:
                impact.notes.append(f"on KubeRay {rules.name}: {other.klass} ({other.reason})")
        out.append(impact)
    order = {k: i for i, k in enumerate(CLASSES)}
    out.sort(key=lambda w: (order[w.klass], w.namespace, w.kind, w.name))
    return out
