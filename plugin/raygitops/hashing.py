"""Template hashes of scheme h1: one per RayCluster group (docs/design.md "Template hash").

The *pod-shaping spec* of a group is exactly the input of its hash: the group object minus
its scaling and service keys, plus the cluster-level spec minus the groups and the keys that
never reach a pod.  The hook writes this spec back on resume, and the preview reports it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from raygitops.canonical import canonical_bytes
from raygitops.errors import RaygitopsError

SCHEME = "h1"
HASH_ANNOTATION = "raygitops.dev/template-hash"
HASHES_ANNOTATION = "raygitops.dev/template-hashes"

GROUP_EXCLUDED = frozenset(
    {
        "replicas",
        "minReplicas",
        "maxReplicas",
        "scaleStrategy",
        "suspend",
        "idleTimeoutSeconds",
        "serviceType",
        "headService",
        "enableIngress",
    }
)
CLUSTER_EXCLUDED = frozenset(
    {
        "headGroupSpec",
        "workerGroupSpecs",
        "suspend",
        "upgradeStrategy",
        "managedBy",
        "headServiceAnnotations",
    }
)


@dataclass(frozen=True)
class GroupHashes:
    """The hashes of one RayCluster: the head and each worker group by name."""

    head: str
    workers: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"head": self.head, "workers": dict(self.workers)}

    def annotation(self) -> str:
        """The compact JSON written to ``raygitops.dev/template-hashes``."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "GroupHashes":
        return cls(head=data["head"], workers=dict(data.get("workers") or {}))

    def groups(self) -> dict[str, str]:
        """Group key → hash, the head under ``"head"``, workers under ``"worker:<name>"``."""
        out = {"head": self.head}
        out.update({f"worker:{name}": h for name, h in self.workers.items()})
        return out


@dataclass(frozen=True)
class PodShapingSpec:
    """What decides a RayCluster's pods: cluster-level part, head group, worker groups."""

    cluster: dict[str, Any]
    head: dict[str, Any]
    workers: dict[str, dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "head": self.head, "workers": self.workers}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PodShapingSpec":
        return cls(data.get("cluster") or {}, data.get("head") or {}, data.get("workers") or {})


def _without(mapping: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in keys}


def pod_shaping_spec(spec: Any) -> PodShapingSpec:
    """Split a RayCluster ``spec`` into its pod-shaping parts; raises on a malformed spec."""
    if not isinstance(spec, dict):
        raise RaygitopsError("RayCluster spec is not a mapping")
    head = spec.get("headGroupSpec")
    if not isinstance(head, dict):
        raise RaygitopsError("RayCluster has no spec.headGroupSpec")
    workers: dict[str, dict[str, Any]] = {}
    groups = spec.get("workerGroupSpecs") or []
    if not isinstance(groups, list):
        raise RaygitopsError("spec.workerGroupSpecs is not a list")
    for index, group in enumerate(groups):
        if not isinstance(group, dict):
            raise RaygitopsError(f"spec.workerGroupSpecs[{index}] is not a mapping")
        name = group.get("groupName")
        if not isinstance(name, str) or not name:
            raise RaygitopsError(f"spec.workerGroupSpecs[{index}] has no groupName")
        if name in workers:
            raise RaygitopsError(f"duplicate worker groupName {name!r}")
        workers[name] = _without(group, GROUP_EXCLUDED)
    return PodShapingSpec(
        cluster=_without(spec, CLUSTER_EXCLUDED),
        head=_without(head, GROUP_EXCLUDED),
        workers=workers,
    )


def hash_group(cluster_part: dict[str, Any], group_part: dict[str, Any]) -> str:
    """``h1-`` + 16 hex digits of SHA-256 over the canonical group + cluster input."""
    digest = hashlib.sha256(canonical_bytes({"cluster": cluster_part, "group": group_part}))
    return f"{SCHEME}-{digest.hexdigest()[:16]}"


def hash_spec(shaping: PodShapingSpec) -> GroupHashes:
    """The h1 hashes of every group."""
    return GroupHashes(
        head=hash_group(shaping.cluster, shaping.head),
        workers={name: hash_group(shaping.cluster, g) for name, g in shaping.workers.items()},
    )


def hash_cluster(spec: Any) -> GroupHashes:
    """The h1 hashes of a RayCluster ``spec``."""
    return hash_spec(pod_shaping_spec(spec))


def is_h1(value: Any) -> bool:
    """Whether ``value`` is a hash of this scheme (anything else is never drift by itself)."""
    return (
        isinstance(value, str)
        and len(value) == len(SCHEME) + 17
        and value.startswith(SCHEME + "-")
        and all(c in "0123456789abcdef" for c in value[len(SCHEME) + 1 :])
    )


def stamp_group(group: dict[str, Any], value: str) -> None:
    """Write ``value`` into the group's template annotations (KubeRay copies them onto every
    pod it creates), creating template metadata as needed; mutates ``group``."""
    template = group.get("template")
    if not isinstance(template, dict):
        raise RaygitopsError(f"group {group.get('groupName', 'head')!r} has no pod template")
    if not isinstance(template.get("metadata"), dict):  # put metadata first, where people look
        template = group["template"] = {"metadata": {}, **{k: v for k, v in template.items() if k != "metadata"}}
    metadata = template["metadata"]
    if not isinstance(metadata.get("annotations"), dict):
        metadata["annotations"] = {}
    metadata["annotations"][HASH_ANNOTATION] = value
