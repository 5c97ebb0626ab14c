"""What the next sync does to one RayCluster (pure): the one answer the hook, ``raygitops
diff`` and ``raygitops status`` share.

In: the plan entry (what Git wants) and an :class:`Observed` cluster (what runs): made from
the live RayCluster and its pods (:func:`observe`, the hook and status), or from the render
of the base revision as the sync left it (:func:`observe_render`, the preview). Out: a
:class:`Verdict`, which the three only word.

Which groups run an old template (``Verdict.drift``), per group, the head and each worker
group by ``groupName``, whatever the strategy:

- pods carrying a template hash of the desired hash's scheme that differs from it
  (**pod-hash**);
- pods without such a hash are never drift by themselves: the observed spec is hashed with
  the plan's rules (CRD defaults stripped from both sides) and the group drifts only if that
  differs from the desired spec (**spec-hash**), so neither adopting nor upgrading raygitops
  recreates a pod by itself;
- pods carrying a config hash (ConfigMaps', Secrets') other than the desired one
  (**config-hash**, **secret-hash**); a pod carrying none is never drift by it;
- pods of a worker group the plan no longer has (**removed-group**): the operator leaves them
  running.

What the hook does about it (``Verdict.action``), in named steps: absent; a lock left by an
earlier run (finish or drop it); not the hook's to recreate (not opted in, desired suspended,
owned by a RayJob or RayService: ``skip``, the drift reported as stale); suspended outside
Git (resume it); drifted (``recreate``, or ``replace`` under ReplaceGroups when only worker
groups drift); else in sync, unless the last recreate to this target was never seen ready
(``verify``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from raygitops.model import lock as locks
from raygitops.model import native, operators, podrules, pods
from raygitops.model.configrefs import DRIFTS, HASH_ANNOTATIONS
from raygitops.model.crddefaults import strip_defaults
from raygitops.model.hashing import NEWEST, GroupHashes, HashRules, digest_of, hash_cluster, is_hash, scheme_of
from raygitops.model.names import (
    HASH_ANNOTATION,
    HASHES_ANNOTATION,
    LAST_ANNOTATION,
    LOCK_ANNOTATION,
    NATIVE_HASH_ANNOTATION,
)
from raygitops.model.objmeta import annotations, meta
from raygitops.model.plan import ClusterPlan
from raygitops.model.pods import PodCount
from raygitops.model.strategy import (
    DEFAULT_MAX_UNAVAILABLE,
    REPLACE_GROUPS,
    cluster_owner,
    opted_in,
    resolve_max_unavailable,
)

# Actions: what the hook does with the cluster.
SKIP = "skip"
IN_SYNC = "in-sync"
RECREATE = "recreate"
REPLACE = "replace"  # ReplaceGroups, only worker groups drifted: replace their pods, keep the head
CYCLES = (RECREATE, REPLACE)
RELEASE = "release"  # a lock on a cluster the hook must not recreate: drop the lock only
VERIFY = "verify"  # pods run the desired template but the recreate to it was never verified ready
FAIL = "fail"  # this cluster cannot be evaluated (its live spec): reported, others go on

NATIVE_ONLY = ("left to KubeRay's native Recreate (spec.upgradeStrategy.type: Recreate, "
               "raygitops.dev/upgrade-strategy: None): the operator replaces the pods itself "
               "after the sync when its spec hash changes; raygitops does not gate it")


@dataclass(frozen=True)
class GroupPods:
    """What one group runs: its pods' template hashes (with how many carry each; ``""`` for
    none), the config hashes they carry by kind, and how many pods there are."""

    templates: tuple[tuple[str, int], ...]
    configs: dict[str, tuple[str, ...]]
    count: PodCount


@dataclass(frozen=True)
class Observed:
    """A RayCluster as it runs: its spec and annotations, who owns it, and its own pods by
    group (``head``, ``worker:<name>``; terminating pods and pods it does not own left out)."""

    spec: dict[str, Any]
    annotations: dict[str, Any]
    groups: dict[str, GroupPods]
    owner: str | None = None
    resource_version: str | None = None


@dataclass(frozen=True)
class GroupDrift:
    desired: str
    live: list[str]  # distinct hashes seen on the group's pods ("" = none)
    how: str  # "pod-hash" | "spec-hash" | "config-hash" | "secret-hash" | "removed-group"
    pods: PodCount

    def to_json(self) -> dict[str, Any]:
        return {"desired": self.desired, "live": self.live, "how": self.how, "pods": _count_json(self.pods)}


@dataclass
class Verdict:
    namespace: str
    name: str
    action: str
    reason: str
    pods: PodCount = field(default_factory=PodCount)  # the cluster's own pods now
    drift: dict[str, GroupDrift] = field(default_factory=dict)  # groups running an old template
    source: dict[str, Any] | None = None  # hashes the pods run now ("from")
    resource_version: str | None = None  # of the live RayCluster the verdict was made on
    outside_git: bool = False  # suspended by somebody else: the cycle only has to resume it
    lock: locks.Lock | None = None  # a raygitops lock on the cluster
    locked: bool = False  # it carries a lock (readable or not)
    owner: str | None = None
    cannot_hash: str | None = None  # why the drift of the observed spec is unknown
    warnings: list[str] = field(default_factory=list)  # said, never a failure (native_warnings)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def replaces(self) -> bool:
        return self.action == REPLACE

    def replaced_groups(self) -> tuple[str, ...]:
        """The worker groups a replacement replaces (still existing ones; removed groups'
        pods go anyway)."""
        return tuple(sorted(k.split(":", 1)[1] for k, v in self.drift.items()
                            if k.startswith("worker:") and v.how != "removed-group"))

    def to_json(self) -> dict[str, Any]:
        data = {
            "namespace": self.namespace,
            "name": self.name,
            "decision": self.action,
            "reason": self.reason,
            "pods": _count_json(self.pods),
            "drift": {k: v.to_json() for k, v in self.drift.items()},
        }
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data


def _count_json(count: PodCount) -> Any:
    return count.min if count.exact else count.to_json()


# ---------------------------------------------------------------------------------------------
# Observations


def observe(live: dict[str, Any], pod_list: list[dict[str, Any]]) -> Observed:
    """The live RayCluster and its pods (those with its label; foreign and terminating ones are
    left out here)."""
    groups = {}
    for key, group_pods in pods.by_group(pods.own_pods(live, pod_list)).items():
        templates = Counter(annotations(p).get(HASH_ANNOTATION) or "" for p in group_pods)
        configs = {kind: tuple(sorted({annotations(p).get(name) or "" for p in group_pods}))
                   for kind, name in HASH_ANNOTATIONS.items()}
        groups[key] = GroupPods(tuple(sorted(templates.items())), configs, PodCount.exactly(len(group_pods)))
    spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
    return Observed(spec, dict(annotations(live)), groups, cluster_owner(live), meta(live).get("resourceVersion"))


def observe_render(spec: dict[str, Any], plan: ClusterPlan, cluster_annotations: dict[str, Any]) -> Observed:
    """A cluster as the sync of a render left it (the preview's base): its spec applied, each
    group's pods made from its template (as many as the operator keeps: a range when the
    autoscaler decides), no lock."""
    desired_config = plan.config_hashes()
    groups = {}
    for key, value in plan.hashes.groups().items():
        count = pods.pods_of(spec, [key])
        if count.is_zero:
            continue
        configs = {kind: (hashes[key],) if key in hashes else ("",) for kind, hashes in desired_config.items()}
        groups[key] = GroupPods(((value, 1),), configs, count)
    owner = plan.owner
    return Observed(spec, dict(cluster_annotations), groups, owner, None)


# ---------------------------------------------------------------------------------------------
# The verdict


def judge(namespace: str, plan: ClusterPlan, seen: Observed | None) -> Verdict:
    """What the next sync does to the cluster of ``plan`` that runs as ``seen`` (None: absent)."""
    v = Verdict(namespace, plan.name, SKIP, "")
    if seen is None:
        v.reason = "absent from the cluster (Argo CD will create it)"
        return v
    v.resource_version = seen.resource_version
    v.owner = plan.owner or seen.owner
    v.pods = pods.total(g.count for g in seen.groups.values())
    lock_text = seen.annotations.get(LOCK_ANNOTATION)
    if lock_text is not None:
        return _locked(v, plan, seen, lock_text)
    try:
        v.drift, v.source = _group_drift(plan, seen)
    except _CannotHash as err:
        v.cannot_hash = str(err)
    skipped = _not_recreated(plan, v.owner)
    if skipped:
        v.reason = skipped
        return v
    if seen.spec.get("suspend") is True:
        # Git does not ask for it: finish the job (drain, resume with the desired spec).
        v.action, v.outside_git = RECREATE, True
        v.reason = "suspended outside Git (desired spec.suspend is not true, no raygitops lock): resuming it"
        return v
    if v.cannot_hash is not None:
        v.action, v.reason = FAIL, f"cannot hash the live spec: {v.cannot_hash}"
        return v
    return _conclude(v, plan, seen)


def decide(namespace: str, plan: ClusterPlan, live: dict[str, Any] | None, pod_list: list[dict[str, Any]]) -> Verdict:
    """:func:`judge` of a live RayCluster (None: absent) and the pods with its label: what the
    hook and status ask."""
    return judge(namespace, plan, None if live is None else observe(live, pod_list))


def _locked(v: Verdict, plan: ClusterPlan, seen: Observed, lock_text: str) -> Verdict:
    """A raygitops lock on the live cluster: an earlier run's cycle to finish, or to drop."""
    v.locked, v.lock = True, locks.parse(lock_text)
    lock = v.lock
    found = f"phase {lock.phase}, holder {lock.holder}" if lock else "unreadable"
    if plan.suspend:
        v.action, v.reason = RELEASE, "desired spec.suspend is true: dropping the raygitops lock only"
    elif not opted_in(plan.strategy) or v.owner:
        # Never a recreate here, whatever the annotations say: the lock is reported and
        # dropped, a cluster an earlier run suspended is resumed as it is.
        why = f"owned by {v.owner}" if v.owner else f"not opted in (strategy {plan.strategy})"
        v.action, v.reason = RELEASE, f"{why} but carries a raygitops lock ({found}): dropping it, deleting nothing"
    elif lock is not None and lock.phase in (locks.LOCKED, locks.REPLACING) and plan.strategy == REPLACE_GROUPS \
            and not _head_drifted(v, plan, seen):
        # a lock still in phase locked has changed nothing yet: a replacement, as drifted
        v.action = REPLACE
        v.reason = f"a replacement of worker groups is in progress ({found}): finishing it"
    else:
        v.action = RECREATE
        v.reason = f"a recreate cycle is in progress ({found}): finishing it"
    return v


def _head_drifted(v: Verdict, plan: ClusterPlan, seen: Observed) -> bool:
    """Whether the head group drifts (a replacement in progress then becomes a full cycle);
    the groups that do go into ``v.drift``."""
    try:
        v.drift, v.source = _group_drift(plan, seen)
    except _CannotHash:
        return True
    return "head" in v.drift


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
    """The observed spec cannot be hashed (render would refuse it)."""


def comparable_hashes(spec: dict[str, Any], rules: HashRules = NEWEST,
                      cluster_annotations: dict[str, Any] | None = None) -> GroupHashes:
    """Hashes of a spec after stripping the CRD defaults: what the fallback compares (their
    digests: under scheme h1 a spec without an ignored key hashes as h1, one with it as h2)."""
    return hash_cluster(strip_defaults(spec), rules, podrules.pod_annotations(cluster_annotations or {}))


def _group_drift(plan: ClusterPlan, seen: Observed) -> tuple[dict[str, GroupDrift], dict[str, Any]]:
    """Drift per group (the module's docstring), and the hashes the pods run now."""
    desired = plan.hashes.groups()
    drift: dict[str, GroupDrift] = {}
    source: dict[str, str | None] = {}
    compared: tuple[GroupHashes, GroupHashes] | None = None  # (live, desired), hashed once when needed
    annotated = _hashes_annotation(seen.annotations)
    for key, group in sorted(seen.groups.items()):
        config = _config_drift(plan, key, group)
        if config is not None:
            drift[key] = config
        hashes = sorted(h for h, _ in group.templates)
        source[key] = max(group.templates, key=lambda t: t[1])[0] or _annotated(annotated, key)
        if key not in desired:
            drift[key] = GroupDrift("", hashes, "removed-group", group.count)
            continue
        # only hashes made under the same rules compare (h1 with h1, h2.x with h2.x)
        same = [h for h in hashes if is_hash(h) and scheme_of(h) == scheme_of(desired[key])]
        if any(h != desired[key] for h in same):
            drift[key] = GroupDrift(desired[key], hashes, "pod-hash", group.count)
        elif len(same) != len(hashes):  # other pods carry no hash of these rules: compare the specs
            if compared is None:
                try:
                    compared = (comparable_hashes(seen.spec, plan.rules, seen.annotations),
                                comparable_hashes(plan.spec.spec(), plan.rules, plan.pod_annotations))
                except Exception as err:  # noqa: BLE001 - a live spec render would refuse must not stop the run
                    raise _CannotHash(str(err)) from None
            live_h, desired_h = compared[0].groups().get(key), compared[1].groups().get(key)
            if live_h is None or desired_h is None or digest_of(live_h) != digest_of(desired_h):
                drift[key] = GroupDrift(desired[key], hashes, "spec-hash", group.count)
    return drift, _to_hashes(source)


def _config_drift(plan: ClusterPlan, key: str, group: GroupPods) -> GroupDrift | None:
    """A group whose pods carry a config hash (ConfigMaps', or Secrets') other than the
    desired one. A pod without one (stamped before that kind was hashed, or its config not
    tracked then) is never drift by it: upgrading raygitops recreates nothing."""
    for kind, hashes in plan.config_hashes().items():
        wanted = hashes.get(key)
        seen = list(group.configs.get(kind, ("",)))
        if wanted and any(h and h != wanted for h in seen):
            return GroupDrift(wanted, seen, DRIFTS[kind], group.count)
    return None


def _conclude(v: Verdict, plan: ClusterPlan, seen: Observed) -> Verdict:
    """Recreate what drifted; else in sync, unless the last recreate to this spec is unverified."""
    if v.drift:
        replace = plan.strategy == REPLACE_GROUPS and "head" not in v.drift
        v.action = REPLACE if replace else RECREATE
        v.reason = ("worker groups drifted, head kept: " if replace else "drifted: ") + ", ".join(
            f"{k} ({d.how}{': ' + '/'.join(h or 'none' for h in d.live) if d.how == 'pod-hash' else ''}"
            f"{' -> ' + d.desired if d.desired else ''})"
            for k, d in sorted(v.drift.items())
        )
        return v
    v.action = IN_SYNC
    v.reason = "every pod runs the desired template" if seen.groups else "no pods to recreate"
    unverified = unverified_recreate(seen.annotations, plan)
    if unverified and seen.groups:
        v.action = VERIFY
        v.reason = (f"every pod runs the desired template, but the recreate to it ended {unverified}: "
                    "not in sync until the cluster is seen ready")
    return v


def _hashes_annotation(cluster_annotations: dict[str, Any]) -> dict[str, Any]:
    text = cluster_annotations.get(HASHES_ANNOTATION)
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _annotated(annotated: dict[str, Any], key: str) -> str | None:
    value = annotated.get("head") if key == "head" else (annotated.get("workers") or {}).get(key.split(":", 1)[1])
    return value if isinstance(value, str) else None


def _to_hashes(groups: dict[str, str | None]) -> dict[str, Any]:
    return {
        "head": groups.get("head"),
        "workers": {k.split(":", 1)[1]: v for k, v in sorted(groups.items()) if k.startswith("worker:")},
    }


# ---------------------------------------------------------------------------------------------
# The last recreate, and pods made from the desired templates


def last_recreate(cluster_annotations: dict[str, Any]) -> dict[str, Any] | None:
    """The ``raygitops.dev/last-recreate`` record (None if absent or unreadable)."""
    text = cluster_annotations.get(LAST_ANNOTATION)
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def unverified_recreate(cluster_annotations: dict[str, Any], plan: ClusterPlan) -> str | None:
    """The outcome (``Failed``, ``Unverified``) of the last recreate when it went to this
    plan's target and was not seen ready; None otherwise."""
    doc = last_recreate(cluster_annotations)
    if doc is None or doc.get("to") != plan.hashes.to_json():
        return None
    outcome = doc.get("outcome")
    return None if outcome == locks.COMPLETED else str(outcome)


def runs_desired(pod: dict[str, Any], plan: ClusterPlan, key: str) -> bool:
    """Whether a pod of group ``key`` was made from the desired template and, where the group
    reads tracked config, with the desired config hash."""
    ann = annotations(pod)
    if ann.get(HASH_ANNOTATION) != plan.hashes.groups().get(key):
        return False
    return all(key not in hashes or ann.get(HASH_ANNOTATIONS[kind]) == hashes[key]
               for kind, hashes in plan.config_hashes().items())


def ready_for(plan: ClusterPlan, live: dict[str, Any], pod_list: list[dict[str, Any]],
              cycled: frozenset[str] | None = None) -> tuple[bool, str]:
    """Whether the cluster runs the desired templates, ready: no live pod it owns is stale
    (:func:`stale`), every one has condition Ready, and there are as many as its spec asks
    for.  Judged from the pods themselves, never from ``status.state`` (which can still say
    ``ready`` from before the suspend)."""
    own = [p for p in pods.own_pods(live, pod_list) if pods.group_key(p) is not None]
    old = [p for p in own if stale(plan, p, cycled)]
    spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
    want = pods.pods_now(spec)
    unready = [meta(p).get("name", "") for p in own if not pods.ready(p)]
    if old:
        return False, f"{len(old)} pods without the desired hash"
    if not any(pods.group_key(p) == "head" for p in own):
        return False, "no head pod yet"
    if len(own) < want.min or (want.max is not None and len(own) > want.max):
        return False, f"{len(own)} of {want.min} pods"
    if unready:
        return False, f"{len(unready)} of {len(own)} pods not Ready ({', '.join(sorted(unready)[:3])})"
    return True, f"{len(own)} pods Ready with the desired hashes"


def stale(plan: ClusterPlan, pod: dict[str, Any], cycled: frozenset[str] | None = None) -> bool:
    """Whether a Ray pod has no place in the desired cluster after a cycle: its group is not in
    the desired spec, or the cycle made its group anew (``cycled``, group keys; None: every
    group) and the pod was not made from its desired template. A group the cycle left alone
    (ReplaceGroups' head and kept groups) is in sync by the verdict's own rules, hashes of
    another scheme compared by spec, so its pods are not judged by hash here."""
    key = pods.group_key(pod)
    if key is None:
        return False
    if key not in plan.hashes.groups():
        return True
    return (cycled is None or key in cycled) and not runs_desired(pod, plan, key)


def leftovers(plan: ClusterPlan, live: dict[str, Any], pod_list: list[dict[str, Any]],
              cycled: frozenset[str] | None = None) -> list[str]:
    """The cluster's own pods, terminating ones included, that a finished recreate or
    replacement must not have left (:func:`stale`; names, sorted). A pod that merely carries
    the cluster's label is not its own and never counts."""
    uid = meta(live).get("uid")
    return sorted(meta(p).get("name", "") for p in pod_list if pods.owned_by(p, uid) and stale(plan, p, cycled))


def end_state(plan: ClusterPlan, live: dict[str, Any], pod_list: list[dict[str, Any]], generation: int | None,
              ready: bool, cycled: frozenset[str] | None = None) -> tuple[bool, str]:
    """Whether what a recreate or a replacement reports holds, live: the operator has observed
    the spec the hook wrote (``generation``: :func:`raygitops.model.operators.unobserved`), no
    pod of a removed group or of an old template is left (:func:`leftovers`), and with
    ``ready`` the pods the spec asks for are Ready (:func:`ready_for`, :func:`cluster_ready`).
    The reason, in words, when it does not."""
    waiting = operators.unobserved(live, generation)
    if waiting:
        return False, waiting
    left = leftovers(plan, live, pod_list, cycled)
    if left:
        return False, f"{len(left)} pods of a removed group or an old template left ({', '.join(left[:5])})"
    if not ready:
        return True, "no pod of a removed group or an old template left; readiness not checked"
    pods_ok, pods_msg = ready_for(plan, live, pod_list, cycled)
    cluster_ok, cluster_msg = cluster_ready(live)
    return pods_ok and cluster_ok, f"{pods_msg}, {cluster_msg}" if pods_ok and cluster_ok else f"{pods_msg}; {cluster_msg}"


def cluster_ready(live: dict[str, Any]) -> tuple[bool, str]:
    """status.state == ready, or condition RayClusterProvisioned=True."""
    status = live.get("status") if isinstance(live.get("status"), dict) else {}
    if status.get("state") == "ready":
        return True, "status.state ready"
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "RayClusterProvisioned" and cond.get("status") == "True":
            return True, "condition RayClusterProvisioned"
    return False, f"status.state {status.get('state') or 'unset'}"


# ---------------------------------------------------------------------------------------------
# What a replacement does, as diff and status report it


def replacement(plan: ClusterPlan, drift: dict[str, GroupDrift], counts: dict[str, PodCount] | None = None) -> dict[str, Any]:
    """What a ReplaceGroups sync does, per group, in the JSON shape ``raygitops status`` and
    ``diff`` report: the drifted worker groups (changed, or removed), each with its pods
    (``counts`` where given, else the drift's own) and, for a changed one, how many at a
    time; a group with a bound of its own (max-unavailable-by-group) carries it."""
    counts = counts or {}
    groups: list[dict[str, Any]] = []
    for key, d in sorted(drift.items()):
        name = key.split(":", 1)[1]
        count = counts.get(key, d.pods)
        if d.how == "removed-group":
            groups.append({"group": name, "change": "removed", "pods": count.to_json()})
            continue
        groups.append({"group": name, "change": "changed", "pods": count.to_json(),
                       **({"maxUnavailable": plan.limit_of(name)} if name in plan.max_unavailable_by_group else {}),
                       "atATime": resolve_max_unavailable(plan.limit_of(name), count.min)})
    touched = {k.split(":", 1)[1] for k in drift}
    kept = [g for g in sorted(plan.spec.workers) if g not in touched]
    return {"maxUnavailable": plan.max_unavailable or DEFAULT_MAX_UNAVAILABLE,
            "groups": sorted(groups, key=lambda g: g["change"] != "changed"), "kept": ["head", *kept]}


def replacement_words(shape: dict[str, Any]) -> str:
    """``replaces 4 pods of group gpu (2 at a time); head and group cpu untouched``."""
    parts = []
    for g in shape["groups"]:
        low, high = g["pods"]["min"], g["pods"]["max"]
        count = f"{low}+" if high is None else str(low) if low == high else f"{low}–{high}"
        noun = "pod" if count == "1" else "pods"
        if g["change"] == "removed":
            parts.append(f"deletes {count} {noun} of removed group {g['group']}")
        else:
            parts.append(f"replaces {count} {noun} of group {g['group']} ({g['atATime']} at a time)")
    kept = [k if k == "head" else f"group {k}" for k in shape["kept"]]
    return "; ".join(parts + [listed(kept) + " untouched"])


def listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# ---------------------------------------------------------------------------------------------
# KubeRay's own Recreate after the sync


def native_recreates(plan: ClusterPlan, v: Verdict, seen: Observed | None, applied: dict[str, Any]) -> bool:
    """Whether KubeRay's native Recreate replaces the pods after the sync applies
    ``applied`` (the spec the cluster has once synced): the plan keeps
    ``spec.upgradeStrategy``, the hook does not recreate it now, and the operator's own spec
    hash changes (:func:`raygitops.model.native.spec_hash_changes`). A cluster without pods
    now, or desired suspended, has none to replace: KubeRay makes its pods from the new spec
    when it resumes."""
    if seen is None or not plan.native or v.action in CYCLES or plan.suspend or not seen.groups:
        return False
    return native.spec_hash_changes(seen.spec, applied)


def native_warnings(plan: ClusterPlan, v: Verdict, live: dict[str, Any] | None, pod_list: list[dict[str, Any]],
                    crd_knows: bool | None) -> list[str]:
    """What would keep KubeRay's native Recreate from acting on a cluster whose desired spec
    asks for it (``plan.native``); ``crd_knows``: whether the live RayCluster CRD has
    ``spec.upgradeStrategy`` (None: not known).

    - a CRD older than KubeRay 1.6 drops the field: the operator never recreates;
    - the arming trap: the operator compares its spec hash with the annotation on the head
      pod and does nothing when the head pod has none (created by KubeRay 1.5, before an
      operator upgrade), so the first change after it recreates nothing; moot when the hook
      recreates the cluster now (the new head pod is stamped by the operator)."""
    if not plan.native or live is None:
        return []
    if crd_knows is False:
        return ["spec.upgradeStrategy is unknown to this cluster's RayCluster CRD (KubeRay "
                "older than 1.6): the API server drops it and the operator never recreates "
                "the pods; upgrade KubeRay or let raygitops recreate "
                "(raygitops.dev/upgrade-strategy: Recreate)"]
    heads = [p for p in pods.own_pods(live, pod_list) if pods.group_key(p) == "head"]
    unarmed = [meta(p).get("name") for p in heads if not annotations(p).get(NATIVE_HASH_ANNOTATION)]
    if not unarmed or v.action == RECREATE:
        return []
    who = ("a change that only the operator's hash sees (serviceType, headServiceAnnotations, "
           "...) will not reach the pods until raygitops recreates them once"
           if opted_in(plan.strategy) else
           "this change will NOT reach the pods; opt in to raygitops for it "
           "(raygitops.dev/upgrade-strategy: Recreate) or delete the pods once")
    return [f"native Recreate is not armed: head pod {', '.join(sorted(unarmed))} carries no "
            f"{NATIVE_HASH_ANNOTATION} (created by KubeRay older than 1.6), so the operator "
            f"compares no hash and recreates nothing: {who}"]

