"""Template hashes: one per RayCluster group (docs/design.md "Template hash").

Scheme h3 (``h3.<rules>-<digest>``) hashes, per group, what the target KubeRay operator reads
to build that group's pods (:func:`raygitops.model.podrules.pod_inputs`): a change that makes
the same pods leaves it, one that makes different pods moves it.  The tag names the rules the
digest was made under (the operator line's pod rules and ``hash.ignore``): hashes compare only
under the same tag; pods stamped under other rules are compared by spec (model/verdict.py).

Scheme h1 (``h1-``, and ``h2.<list>-`` when ``hash.ignore`` dropped a key) is the hash of
raygitops before h3: the group minus a fixed list of scaling and service keys, plus the
cluster spec minus another.  It stays for the clusters that keep KubeRay's own
``upgradeStrategy`` (``ClusterPlan.native``): the operator hashes the template annotation the
hash is written to, so a new scheme would make it recreate their pods once by itself.
Pods stamped h1 elsewhere are compared by spec, never recreated for the scheme.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from raygitops.model import podrules
from raygitops.model.canonical import canonical_bytes
from raygitops.errors import RaygitopsError
from raygitops.model.names import HASH_ANNOTATION

SCHEME = "h3"
LEGACY_SCHEME = "h1"
# Pod-template label and annotation keys left out of the hash by default (raygitops.yaml
# `hash.ignore` replaces the list): bookkeeping that changes with every chart release and
# says nothing about what the pods run.  Shell-style patterns.
DEFAULT_IGNORED_KEYS = ("helm.sh/chart", "chart", "heritage", "app.kubernetes.io/managed-by",
                        "app.kubernetes.io/version")
_HASH_RE = re.compile(r"(h1|h2\.[0-9a-f]{6}|h3\.[0-9a-f]{6})-[0-9a-f]{16}")


@dataclass(frozen=True)
class HashRules:
    """How a hash is made: the operator line whose pod rules it follows (``pods``, a
    :data:`raygitops.model.podrules.BY_NAME` key), the template label/annotation keys it leaves
    out (``ignore``), and whether it is the legacy scheme h1 instead (``legacy``: the pod rules
    then only say which fields shape pods, for the preview).

    An h3 hash is tagged ``h3.<6 hex of both>``; an h1 hash whose template held none of the
    ignored keys is plain ``h1``, one that dropped a key ``h2.<6 hex of the list>``.  Hashes
    made under other rules never compare as equal or as different: the hook then compares
    specs (docs/design.md "Template hash")."""

    ignore: tuple[str, ...] = ()
    pods: str = podrules.RULES[-1].name
    legacy: bool = False

    def tag(self) -> str:
        return _tag(self.ignore, self.pods, self.legacy)

    def ignored(self, key: Any) -> bool:
        return isinstance(key, str) and any(fnmatch.fnmatchcase(key, pattern) for pattern in self.ignore)

    @property
    def pod_rules(self) -> podrules.PodRules:
        return podrules.BY_NAME[self.pods]

    def for_kuberay(self, version: str | None) -> "HashRules":
        """These rules under the pod rules of KubeRay ``version`` (None: the newest known)."""
        return HashRules(self.ignore, podrules.rules_for(version).name, self.legacy)

    def as_legacy(self) -> "HashRules":
        return HashRules(self.ignore, self.pods, legacy=True)


@functools.lru_cache(maxsize=64)
def _tag(ignore: tuple[str, ...], pods: str, legacy: bool) -> str:
    """HashRules.tag, made once per rules (render hashes every group of every cluster)."""
    if legacy:
        return "h2." + hashlib.sha256(json.dumps(sorted(set(ignore))).encode()).hexdigest()[:6]
    return f"{SCHEME}." + hashlib.sha256(json.dumps([pods, sorted(set(ignore))]).encode()).hexdigest()[:6]


NEWEST = HashRules()  # scheme h3 of the newest known operator, no hash.ignore
NO_RULES = HashRules(legacy=True)  # the legacy scheme h1 without hash.ignore

# What scheme h1 leaves out (frozen: it is the hash of the clusters stamped h1).
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
# A worker group's fields the autoscaler (and the user's scaling) own: the hook's resume
# keeps the live values; KubeRay's own spec hash leaves them out too.
SCALING = ("replicas", "minReplicas", "maxReplicas", "scaleStrategy")


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
class SpecParts:
    """A RayCluster spec split by group: the cluster-level fields, the head group, the worker
    groups by name (each without its ``groupName``).  The plan carries the desired spec so;
    the hook's resume writes it."""

    cluster: dict[str, Any]
    head: dict[str, Any]
    workers: dict[str, dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "head": self.head, "workers": self.workers}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SpecParts":
        return cls(data.get("cluster") or {}, data.get("head") or {}, data.get("workers") or {})

    def spec(self) -> dict[str, Any]:
        """The spec again (worker groups in their order, each with its ``groupName``)."""
        out = dict(self.cluster)
        out["headGroupSpec"] = self.head
        out["workerGroupSpecs"] = [{"groupName": name, **g} for name, g in self.workers.items()]
        return out


def split_spec(spec: Any) -> SpecParts:
    """Split a RayCluster ``spec`` by group; raises on a malformed spec."""
    if not isinstance(spec, dict):
        raise RaygitopsError("RayCluster spec is not a mapping", field="spec")
    head = spec.get("headGroupSpec")
    if not isinstance(head, dict):
        raise RaygitopsError("RayCluster has no spec.headGroupSpec", field="spec")
    workers: dict[str, dict[str, Any]] = {}
    groups = spec.get("workerGroupSpecs") or []
    if not isinstance(groups, list):
        raise RaygitopsError("spec.workerGroupSpecs is not a list", field="spec.workerGroupSpecs")
    for index, group in enumerate(groups):
        if not isinstance(group, dict):
            raise RaygitopsError(f"spec.workerGroupSpecs[{index}] is not a mapping", field=f"spec.workerGroupSpecs[{index}]")
        name = group.get("groupName")
        if not isinstance(name, str) or not name:
            raise RaygitopsError(f"spec.workerGroupSpecs[{index}] has no groupName", field=f"spec.workerGroupSpecs[{index}]")
        if name in workers:
            raise RaygitopsError(f"duplicate worker groupName {name!r}", field=f"spec.workerGroupSpecs[{index}].groupName")
        workers[name] = {k: v for k, v in group.items() if k != "groupName"}
    return SpecParts(
        cluster={k: v for k, v in spec.items() if k not in ("headGroupSpec", "workerGroupSpecs")},
        head=head,
        workers=workers,
    )


def _without(mapping: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in keys}


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


def _legacy_group(cluster_part: dict[str, Any], group_part: dict[str, Any], rules: HashRules) -> str:
    """Scheme h1: ``h1-`` (or ``h2.<rules>-`` when the rules dropped a key) + 16 hex digits of
    SHA-256 over the canonical group + cluster input."""
    group_part, dropped = _without_ignored(_without(group_part, GROUP_EXCLUDED), rules)
    digest = hashlib.sha256(canonical_bytes({"cluster": _without(cluster_part, CLUSTER_EXCLUDED),
                                             "group": group_part}))
    return f"{rules.tag() if dropped else LEGACY_SCHEME}-{digest.hexdigest()[:16]}"


def hash_spec(parts: SpecParts, rules: HashRules = NEWEST,
              cluster_annotations: dict[str, Any] | None = None) -> GroupHashes:
    """The hashes of every group (``cluster_annotations``: the RayCluster's, some of which the
    pod builder reads; h1 ignores them)."""
    if rules.legacy:
        # h1 hashed the group with its groupName
        return GroupHashes(
            head=_legacy_group(parts.cluster, parts.head, rules),
            workers={name: _legacy_group(parts.cluster, {"groupName": name, **g}, rules)
                     for name, g in parts.workers.items()},
        )
    inputs = podrules.pod_inputs(parts.spec(), cluster_annotations or {}, rules.pod_rules, rules.ignored)
    tag = rules.tag()
    hashes = {key: f"{tag}-{hashlib.sha256(canonical_bytes(value)).hexdigest()[:16]}" for key, value in inputs.items()}
    return GroupHashes(head=hashes.pop("head"), workers={k.split(":", 1)[1]: v for k, v in hashes.items()})


def hash_cluster(spec: Any, rules: HashRules = NEWEST, cluster_annotations: dict[str, Any] | None = None) -> GroupHashes:
    """The hashes of a RayCluster ``spec``."""
    return hash_spec(split_spec(spec), rules, cluster_annotations)


def is_hash(value: Any) -> bool:
    """Whether ``value`` is a raygitops template hash (anything else is never drift by itself)."""
    return isinstance(value, str) and _HASH_RE.fullmatch(value) is not None


def scheme_of(value: str) -> str:
    """``h1``, ``h2.<rules>`` or ``h3.<rules>``: hashes compare only within one."""
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
