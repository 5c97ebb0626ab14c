"""Drift decisions (pure): what the hook should do with one RayCluster of the plan.

Inputs are the plan entry, the live RayCluster (or None) and its live pods, all plain dicts;
the output is a :class:`Decision`.  No I/O here.

Per group (the head, each worker group by ``groupName``):
- a pod carrying an h1 ``raygitops.dev/template-hash`` is stale iff it differs from desired;
- a pod with no hash, or a hash of another scheme, is never drift by itself: the LIVE spec is
  hashed with the same rules (after stripping the CRD defaults the API server added, from
  both sides) and the group drifts only if that differs from the desired spec;
- pods of a worker group the plan no longer has are stale.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from raygitops.model.configrefs import DRIFTS, HASH_ANNOTATIONS
from raygitops.model.crddefaults import strip_defaults
from raygitops.model.hashing import NO_RULES, GroupHashes, HashRules, digest_of, hash_cluster, is_hash, scheme_of
from raygitops.model.names import HASH_ANNOTATION, HASHES_ANNOTATION
from raygitops.model.names import NATIVE_HASH_ANNOTATION
from raygitops.model.objmeta import annotations, labels, meta
from raygitops.model.plan import ClusterPlan
from raygitops.model import lock as locks
from raygitops.model.strategy import REPLACE_GROUPS, cluster_owner, opted_in
from raygitops.model import names
from raygitops.model.names import CLUSTER_LABEL, GROUP_LABEL, HEAD_GROUP, NODE_TYPE_LABEL


SKIP = "skip"
IN_SYNC = "in-sync"
RECREATE_ACTION = "recreate"
REPLACE_ACTION = "replace"  # ReplaceGroups, only worker groups drifted: replace their pods, keep the head
CYCLE_ACTIONS = (RECREATE_ACTION, REPLACE_ACTION)
RELEASE = "release"  # a lock on a cluster the plan wants suspended: drop the lock only
VERIFY = "verify"  # pods run the desired template but the recreate to it was never verified ready
FAIL = "fail"  # this cluster cannot be evaluated (its live spec, the API): reported, others go on


@dataclass
class GroupDrift:
    desired: str
    live: list[str]  # distinct hashes seen on the group's pods ("" = none)
    how: str  # "pod-hash" | "spec-hash" | "removed-group"
    pods: int

    def to_json(self) -> dict[str, Any]:
        return {"desired": self.desired, "live": self.live, "how": self.how, "pods": self.pods}


@dataclass
class Decision:
    namespace: str
    name: str
    action: str
    reason: str
    pods: int = 0
    drift: dict[str, GroupDrift] = field(default_factory=dict)
    source: dict[str, Any] | None = None  # hashes the pods run now ("from")
    resource_version: str | None = None  # of the live RayCluster the decision was made on
    outside_git: bool = False  # suspended by somebody else: the cycle only has to resume it
    warnings: list[str] = field(default_factory=list)  # said, never a failure (native_warnings)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        data = {
            "namespace": self.namespace,
            "name": self.name,
            "decision": self.action,
            "reason": self.reason,
            "pods": self.pods,
            "drift": {k: v.to_json() for k, v in self.drift.items()},
        }
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data


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


def foreign_pods(live: dict[str, Any], pods: list[dict[str, Any]]) -> list[str]:
    """Names of the pods that carry the cluster's label but are not its own (terminating
    ones aside)."""
    uid = meta(live).get("uid")
    return sorted(meta(p).get("name", "") for p in pods if not terminating(p) and not owned_by(p, uid))


def terminating(pod: dict[str, Any]) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def desired_spec(plan: ClusterPlan) -> dict[str, Any]:
    """A RayCluster spec assembled from the plan's pod-shaping parts."""
    spec = dict(plan.pod_spec.cluster)
    spec["headGroupSpec"] = plan.pod_spec.head
    spec["workerGroupSpecs"] = [dict(g, groupName=name) for name, g in plan.pod_spec.workers.items()]
    return spec


def comparable_hashes(spec: dict[str, Any], rules: HashRules = NO_RULES) -> GroupHashes:
    """Hashes of a spec after stripping the CRD defaults: what the fallback compares (their
    digests: a spec without an ignored key hashes as h1, one with it as h2)."""
    return hash_cluster(strip_defaults(spec), rules)


def live_hashes_annotation(live: dict[str, Any]) -> dict[str, Any] | None:
    text = annotations(live).get(HASHES_ANNOTATION)
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _to_hashes(groups: dict[str, str | None]) -> dict[str, Any]:
    return {
        "head": groups.get("head"),
        "workers": {k.split(":", 1)[1]: v for k, v in sorted(groups.items()) if k.startswith("worker:")},
    }


def decide(namespace: str, plan: ClusterPlan, live: dict[str, Any] | None,
           pods: list[dict[str, Any]]) -> Decision:
    """The decision for one cluster of the plan, in named steps: absent, a lock left by an
    earlier run, not the hook's to recreate, suspended outside Git, then drift per group."""
    d = Decision(namespace, plan.name, SKIP, "")
    if live is None:
        d.reason = "absent from the cluster (Argo CD will create it)"
        return d
    d.resource_version = meta(live).get("resourceVersion")
    owner = plan.owner or cluster_owner(live)
    lock_text = annotations(live).get(names.LOCK_ANNOTATION)
    if lock_text is not None:
        return _decide_locked(d, plan, owner, lock_text, live, pods)
    skipped = _not_recreated(plan, owner)
    if skipped:
        d.reason = skipped
        return d
    spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
    live_pods = [p for p in pods if not terminating(p) and owned_by(p, meta(live).get("uid"))]  # foreign pods never drift
    d.pods = len(live_pods)
    if spec.get("suspend") is True:
        # Git does not ask for it: finish the job (drain, resume with the desired spec).
        d.action, d.outside_git = RECREATE_ACTION, True
        d.reason = "suspended outside Git (desired spec.suspend is not true, no raygitops lock): resuming it"
        return d
    try:
        d.drift, d.source = _group_drift(plan, spec, live_pods, live_hashes_annotation(live) or {})
    except _CannotHash as err:
        d.action, d.reason = FAIL, f"cannot hash the live spec: {err}"
        return d
    return _conclude(d, plan, live, live_pods)


def _decide_locked(d: Decision, plan: ClusterPlan, owner: str | None, lock_text: str,
                   live: dict[str, Any], pods: list[dict[str, Any]]) -> Decision:
    """A raygitops lock on the live cluster: an earlier run's cycle to finish, or to drop."""
    lock = locks.parse(lock_text)
    found = f"phase {lock.phase}, holder {lock.holder}" if lock else "unreadable"
    if plan.suspend:
        d.action, d.reason = RELEASE, "desired spec.suspend is true: dropping the raygitops lock only"
    elif not opted_in(plan.strategy) or owner:
        # Never a recreate here, whatever the annotations say: the lock is reported and
        # dropped, a cluster an earlier run suspended is resumed as it is.
        why = f"owned by {owner}" if owner else f"not opted in (strategy {plan.strategy})"
        d.action, d.reason = RELEASE, f"{why} but carries a raygitops lock ({found}): dropping it, deleting nothing"
    elif lock is not None and lock.phase == locks.REPLACING and plan.strategy == REPLACE_GROUPS \
            and not _head_drifted(d, plan, live, pods):
        d.action = REPLACE_ACTION
        d.reason = f"a replacement of worker groups is in progress ({found}): finishing it"
        d.pods = sum(1 for p in pods if not terminating(p))
    else:
        d.action = RECREATE_ACTION
        d.reason = f"a recreate cycle is in progress ({found}): finishing it"
        d.pods = sum(1 for p in pods if not terminating(p))
    return d


def _head_drifted(d: Decision, plan: ClusterPlan, live: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
    """Whether the head group drifts (a replacement in progress then becomes a full cycle);
    the groups that do go into ``d.drift``."""
    spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
    owned = [p for p in pods if not terminating(p) and owned_by(p, meta(live).get("uid"))]
    try:
        d.drift, d.source = _group_drift(plan, spec, owned, live_hashes_annotation(live) or {})
    except _CannotHash:
        return True
    return "head" in d.drift


def _not_recreated(plan: ClusterPlan, owner: str | None) -> str | None:
    """Why the hook leaves an unlocked cluster alone, if it does."""
    if not opted_in(plan.strategy):
        return NATIVE_ONLY if plan.native else f"not opted in (strategy {plan.strategy})"
    if plan.suspend:
        return "desired spec.suspend is true"
    if owner:
        return f"owned by {owner}: never suspended by raygitops"
    return None


class _CannotHash(Exception):
    """The live spec cannot be hashed (render would refuse it)."""


def _group_drift(plan: ClusterPlan, spec: dict[str, Any], live_pods: list[dict[str, Any]],
                 annotated: dict[str, Any]) -> tuple[dict[str, GroupDrift], dict[str, Any]]:
    """Drift per group: a pod with another h1 hash, a group Git removed, or (for pods without
    an h1 hash) a live spec that hashes differently; and the hashes the pods run now."""
    desired = plan.hashes.groups()
    by_group: dict[str, list[dict[str, Any]]] = {}
    for pod in live_pods:
        key = group_key(pod)
        if key is not None:
            by_group.setdefault(key, []).append(pod)
    drift: dict[str, GroupDrift] = {}
    source: dict[str, str | None] = {}
    compared: tuple[GroupHashes, GroupHashes] | None = None  # (live, desired), hashed once when needed
    for key, group_pods in sorted(by_group.items()):
        config = _config_drift(plan, key, group_pods)
        if config is not None:
            drift[key] = config
        seen = Counter(annotations(p).get(HASH_ANNOTATION) or "" for p in group_pods)
        hashes = sorted(seen)
        source[key] = seen.most_common(1)[0][0] or _annotated(annotated, key)
        if key not in desired:
            drift[key] = GroupDrift("", hashes, "removed-group", len(group_pods))
            continue
        # only hashes made under the same rules compare (h1 with h1, h2.x with h2.x)
        same = [h for h in hashes if is_hash(h) and scheme_of(h) == scheme_of(desired[key])]
        if any(h != desired[key] for h in same):
            drift[key] = GroupDrift(desired[key], hashes, "pod-hash", len(group_pods))
        elif len(same) != len(hashes):  # other pods carry no hash of these rules: compare the specs
            if compared is None:
                try:
                    compared = comparable_hashes(spec, plan.rules), comparable_hashes(desired_spec(plan), plan.rules)
                except Exception as err:  # noqa: BLE001 - a live spec render would refuse must not stop the run
                    raise _CannotHash(str(err)) from None
            live_h, desired_h = compared[0].groups().get(key), compared[1].groups().get(key)
            if live_h is None or desired_h is None or digest_of(live_h) != digest_of(desired_h):
                drift[key] = GroupDrift(desired[key], hashes, "spec-hash", len(group_pods))
    return drift, _to_hashes(source)


def runs_desired(pod: dict[str, Any], plan: ClusterPlan, key: str) -> bool:
    """Whether a pod of group ``key`` was made from the desired template and, where the group
    reads tracked config, with the desired config hash."""
    ann = annotations(pod)
    if ann.get(HASH_ANNOTATION) != plan.hashes.groups().get(key):
        return False
    return all(key not in hashes or ann.get(HASH_ANNOTATIONS[kind]) == hashes[key]
               for kind, hashes in plan.config_hashes().items())


def _config_drift(plan: ClusterPlan, key: str, group_pods: list[dict[str, Any]]) -> GroupDrift | None:
    """A group whose pods carry a config hash (ConfigMaps', or Secrets') other than the
    desired one (configrefs). A pod without one (stamped before that kind was hashed, or its
    config not tracked then) is never drift by it: upgrading raygitops recreates nothing."""
    for kind, hashes in plan.config_hashes().items():
        desired = hashes.get(key)
        seen = sorted({annotations(p).get(HASH_ANNOTATIONS[kind]) or "" for p in group_pods})
        if desired and any(h and h != desired for h in seen):
            return GroupDrift(desired, seen, DRIFTS[kind], len(group_pods))
    return None


def _conclude(d: Decision, plan: ClusterPlan, live: dict[str, Any], live_pods: list[dict[str, Any]]) -> Decision:
    """Recreate what drifted; else in sync, unless the last recreate to this spec is unverified."""
    if d.drift:
        replace = plan.strategy == REPLACE_GROUPS and "head" not in d.drift
        d.action = REPLACE_ACTION if replace else RECREATE_ACTION
        d.reason = ("worker groups drifted, head kept: " if replace else "drifted: ") + ", ".join(
            f"{k} ({v.how}{': ' + '/'.join(h or 'none' for h in v.live) if v.how == 'pod-hash' else ''}"
            f"{' -> ' + v.desired if v.desired else ''})"
            for k, v in sorted(d.drift.items())
        )
        return d
    d.action = IN_SYNC
    d.reason = "every pod runs the desired template" if live_pods else "no pods to recreate"
    unverified = unverified_recreate(live, plan)
    if unverified and live_pods:
        d.action = VERIFY
        d.reason = (f"every pod runs the desired template, but the recreate to it ended {unverified}: "
                    "not in sync until the cluster is seen ready")
    return d


NATIVE_ONLY = ("left to KubeRay's native Recreate (spec.upgradeStrategy.type: Recreate, "
               "raygitops.dev/upgrade-strategy: None): the operator replaces the pods itself "
               "after the sync when its spec hash changes; raygitops does not gate it")


def native_warnings(plan: ClusterPlan, live: dict[str, Any] | None, pods: list[dict[str, Any]],
                    crd_knows: bool | None, recreating: bool) -> list[str]:
    """What would keep KubeRay's native Recreate from acting on a cluster whose desired spec
    asks for it (``plan.native``); ``crd_knows``: whether the live RayCluster CRD has
    ``spec.upgradeStrategy`` (None: not known); ``recreating``: the hook recreates the
    cluster now (its new pods are stamped by the operator, so the trap is moot).

    - a CRD older than KubeRay 1.6 drops the field: the operator never recreates;
    - the arming trap: the operator compares its spec hash with the annotation on the head
      pod and does nothing when the head pod has none (created by KubeRay 1.5, before an
      operator upgrade), so the first change after it recreates nothing."""
    if not plan.native or live is None:
        return []
    if crd_knows is False:
        return ["spec.upgradeStrategy is unknown to this cluster's RayCluster CRD (KubeRay "
                "older than 1.6): the API server drops it and the operator never recreates "
                "the pods; upgrade KubeRay or let raygitops recreate "
                "(raygitops.dev/upgrade-strategy: Recreate)"]
    uid = meta(live).get("uid")
    heads = [p for p in pods if not terminating(p) and owned_by(p, uid) and group_key(p) == "head"]
    unarmed = [meta(p).get("name") for p in heads if not annotations(p).get(NATIVE_HASH_ANNOTATION)]
    if not unarmed or recreating:
        return []
    who = ("a change that only the operator's hash sees (serviceType, headServiceAnnotations, "
           "...) will not reach the pods until raygitops recreates them once"
           if opted_in(plan.strategy) else
           "this change will NOT reach the pods; opt in to raygitops for it "
           "(raygitops.dev/upgrade-strategy: Recreate) or delete the pods once")
    return [f"native Recreate is not armed: head pod {', '.join(sorted(unarmed))} carries no "
            f"{NATIVE_HASH_ANNOTATION} (created by KubeRay older than 1.6), so the operator "
            f"compares no hash and recreates nothing: {who}"]


def last_recreate(live: dict[str, Any]) -> dict[str, Any] | None:
    """The ``raygitops.dev/last-recreate`` record of the live cluster (None if absent or
    unreadable)."""
    text = annotations(live).get(names.LAST_ANNOTATION)
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def unverified_recreate(live: dict[str, Any], plan: ClusterPlan) -> str | None:
    """The outcome (``Failed``, ``Unverified``) of the last recreate when it went to this
    plan's target and was not seen ready; None otherwise."""
    doc = last_recreate(live)
    if doc is None or doc.get("to") != plan.hashes.to_json():
        return None
    outcome = doc.get("outcome")
    return None if outcome == locks.COMPLETED else str(outcome)


def _annotated(annotated: dict[str, Any], key: str) -> str | None:
    if key == "head":
        value = annotated.get("head")
    else:
        value = (annotated.get("workers") or {}).get(key.split(":", 1)[1])
    return value if isinstance(value, str) else None


def pods_by_cluster(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Group a namespace-wide pod list by ``ray.io/cluster``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        name = labels(pod).get(CLUSTER_LABEL)
        if name:
            out.setdefault(name, []).append(pod)
    return out


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def worker_pods(group: dict[str, Any], autoscaled: bool) -> int:
    """Pods the operator keeps now for one worker group: its replicas times numOfHosts, the
    replicas clamped to [minReplicas, maxReplicas] unless the autoscaler sets them."""
    if group.get("suspend") is True:
        return 0
    low, high = _int(group.get("minReplicas"), 0), _int(group.get("maxReplicas"), 2**31 - 1)
    replicas = _int(group.get("replicas"), low)
    if not autoscaled:
        replicas = min(max(replicas, low), high)
    return replicas * max(1, _int(group.get("numOfHosts"), 1))


def expected_pods(spec: dict[str, Any]) -> tuple[int, bool]:
    """(pods the operator keeps for this spec, whether exactly that many): the head plus each
    worker group's pods (:func:`worker_pods`).  With the autoscaler on, the replicas move: at
    least the minimum then."""
    autoscaled = spec.get("enableInTreeAutoscaling") is True
    count = 1
    for group in spec.get("workerGroupSpecs") or []:
        if isinstance(group, dict):
            count += worker_pods({**group, "replicas": group.get("minReplicas")} if autoscaled else group, False)
    return count, not autoscaled


def pod_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def pods_ready_for(plan: ClusterPlan, live_cluster: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[bool, str]:
    """Whether the cluster runs the desired templates, ready: every live pod it owns carries
    its group's desired hash and has condition Ready, and there are as many as its spec asks
    for.  Judged from the pods themselves, never from ``status.state`` (which can still say
    ``ready`` from before the suspend)."""
    desired = plan.hashes.groups()
    uid = meta(live_cluster).get("uid")
    live = [p for p in pods if not terminating(p) and owned_by(p, uid) and group_key(p) is not None]
    stale = [p for p in live if annotations(p).get(HASH_ANNOTATION) != desired.get(group_key(p) or "")]
    spec = live_cluster.get("spec") if isinstance(live_cluster.get("spec"), dict) else {}
    want, exact = expected_pods(spec)
    unready = [meta(p).get("name", "") for p in live if not pod_ready(p)]
    if stale:
        return False, f"{len(stale)} pods without the desired hash"
    if not any(group_key(p) == "head" for p in live):
        return False, "no head pod yet"
    if len(live) < want or (exact and len(live) > want):
        return False, f"{len(live)} of {want} pods"
    if unready:
        return False, f"{len(unready)} of {len(live)} pods not Ready ({', '.join(sorted(unready)[:3])})"
    return True, f"{len(live)} pods Ready with the desired hashes"


def cluster_ready(live: dict[str, Any]) -> tuple[bool, str]:
    """status.state == ready, or condition RayClusterProvisioned=True."""
    status = live.get("status") if isinstance(live.get("status"), dict) else {}
    if status.get("state") == "ready":
        return True, "status.state ready"
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "RayClusterProvisioned" and cond.get("status") == "True":
            return True, "condition RayClusterProvisioned"
    return False, f"status.state {status.get('state') or 'unset'}"
