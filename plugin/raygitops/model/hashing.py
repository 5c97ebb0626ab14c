"""Template hashes (scheme h1, and h2 when rules leave template keys out): one per RayCluster group (docs/design.md "Template hash").

The *pod-shaping spec* of a group is exactly the input of its hash: the group object minus
its scaling and service keys, plus the cluster-level spec minus the groups and the keys that
never reach a pod.  The hook writes this spec back on resume, and the preview reports it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from raygitops.model.canonical import canonical_bytes
from raygitops.errors import RaygitopsError
from raygitops.model.names import HASH_ANNOTATION

SCHEME = "h1"
# Pod-template label and annotation keys left out of the hash by default (raygitops.yaml
# `hash.ignore` replaces the list): bookkeeping that changes with every chart release and
# says nothing about what the pods run.  Shell-style patterns.
DEFAULT_IGNORED_KEYS = ("helm.sh/chart", "chart", "heritage", "app.kubernetes.io/managed-by",
                        "app.kubernetes.io/version")
_HASH_RE = re.compile(r"(h1|h2\.[0-9a-f]{6})-[0-9a-f]{16}")


@dataclass(frozen=True)
class HashRules:
    """What a hash leaves out beyond the fixed rules: template label/annotation keys.

    A group hash whose template held none of them is exactly the h1 hash (so adding rules
    changes no existing hash); one that dropped a key is tagged ``h2.<6 hex of the rules>``,
    so hashes made under other rules never compare as equal or as different: the hook then
    compares specs (docs/design.md "Template hash")."""

    ignore: tuple[str, ...] = ()

    def tag(self) -> str:
        digest = hashlib.sha256(json.dumps(sorted(set(self.ignore))).encode()).hexdigest()[:6]
        return f"h2.{digest}"

    def ignored(self, key: Any) -> bool:
        return isinstance(key, str) and any(fnmatch.fnmatchcase(key, pattern) for pattern in self.ignore)


NO_RULES = HashRules()

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


def _without_ignored(group_part: dict[str, Any], rules: HashRules) -> tuple[dict[str, Any], bool]:
    """The group without the ignored template label/annotation keys; whether any was there."""
    template = group_part.get("template")
    meta = template.get("metadata") if isinstance(template, dict) else None
    if not rules.ignore or not isinstance(meta, dict):
        return group_part, False
    kept_meta = dict(meta)
    dropped = False
    for field_name in ("labels", "annotations"):
        values = meta.get(field_name)
        if isinstance(values, dict) and any(rules.ignored(k) for k in values):
            kept_meta[field_name] = {k: v for k, v in values.items() if not rules.ignored(k)}
            dropped = True
    if not dropped:
        return group_part, False
    return {**group_part, "template": {**template, "metadata": kept_meta}}, True


def hash_group(cluster_part: dict[str, Any], group_part: dict[str, Any], rules: HashRules = NO_RULES) -> str:
    """``h1-`` (or ``h2.<rules>-`` when the rules dropped a key) + 16 hex digits of SHA-256
    over the canonical group + cluster input."""
    group_part, dropped = _without_ignored(group_part, rules)
    digest = hashlib.sha256(canonical_bytes({"cluster": cluster_part, "group": group_part}))
    return f"{rules.tag() if dropped else SCHEME}-{digest.hexdigest()[:16]}"


def hash_spec(shaping: PodShapingSpec, rules: HashRules = NO_RULES) -> GroupHashes:
    """The hashes of every group."""
    return GroupHashes(
        head=hash_group(shaping.cluster, shaping.head, rules),
        workers={name: hash_group(shaping.cluster, g, rules) for name, g in shaping.workers.items()},
    )


def hash_cluster(spec: Any, rules: HashRules = NO_RULES) -> GroupHashes:
    """The hashes of a RayCluster ``spec``."""
    return hash_spec(pod_shaping_spec(spec), rules)


def is_hash(value: Any) -> bool:
    """Whether ``value`` is a raygitops template hash (anything else is never drift by itself)."""
    return isinstance(value, str) and _HASH_RE.fullmatch(value) is not None


def scheme_of(value: str) -> str:
    """``h1`` or ``h2.<rules>``: hashes compare only within one."""
    return value.rsplit("-", 1)[0]


def digest_of(value: str) -> str:
    """The 16 hex digits: equal for the same input whatever the tag."""
    return value.rsplit("-", 1)[1]


def stamp_group(group: dict[str, Any], value: str, key: str = HASH_ANNOTATION) -> None:
    """Write ``value`` into the group's template annotation ``key`` (KubeRay copies them onto
    every pod it creates), creating template metadata as needed; mutates ``group``."""
    template = group.get("template")
    if not isinstance(template, dict):
        raise RaygitopsError(f"group {group.get('groupName', 'head')!r} has no pod template")
    if not isinstance(template.get("metadata"), dict):  # put metadata first, where people look
        template = group["template"] = {"metadata": {}, **{k: v for k, v in template.items() if k != "metadata"}}
    metadata = template["metadata"]
    if not isinstance(metadata.get("annotations"), dict):
        metadata["annotations"] = {}
    metadata["annotations"][key] = value
