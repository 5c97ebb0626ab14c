"""What a merge does to each RayCluster (pure: two RenderResults in, a Report out).

Classes, one per RayCluster matched by namespace/name:

- ``recreate``  — opted in (strategy Recreate at head) and a group's template hash changed:
  the PreSync hook deletes every pod of the cluster and KubeRay creates them again;
- ``replace``   — opted in with ReplaceGroups and only worker groups changed (or were
  removed): the hook replaces those groups' pods in batches, the head and the other groups
  keep theirs (docs/presync.md "Two strategies");
- ``native-recreate`` — the spec keeps ``upgradeStrategy: Recreate`` for a KubeRay >= 1.6
  operator and the operator's own spec hash changed: KubeRay deletes every pod once the
  sync applies the new spec (after the sync, not gated by the hook; raygitops.model.native);
- ``stale``     — a group's hash changed but the cluster is not opted in (or is owned by a
  RayJob/RayService, which raygitops never recreates): the running pods keep the old template;
- ``in-place``  — only fields outside the hash changed (replicas, autoscaling bounds, labels,
  a quantity written another way, a worker group added or removed …): no running pod is
  replaced; the pods of an added worker group are created (its ``pods``);
- ``create`` / ``delete`` / ``unchanged``.

RayServices and RayJobs get a class of their own (:mod:`raygitops.preview.workloads`): what
KubeRay does with their change (``new-cluster``, ``in-place``, ``stale``, ``next-cluster``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable

from raygitops.model import configrefs, jobs, podrules, pods, preflight, validation, verdict
from raygitops.model.hashing import GroupHashes, HashRules, hash_cluster
from raygitops.model.names import HOOK_LABEL, NATIVE_HASH_ANNOTATION
from raygitops.model.objmeta import annotations, labels
from raygitops.model.pods import PodCount, pods_of
from raygitops.preview import workloads
from raygitops.preview.changes import DEFAULT_MASKING, FieldChange, Masking, field_changes
from raygitops.render.renderer import RenderedCluster, RenderResult, is_raycluster
from raygitops.model.strategy import RECREATE, REPLACE_GROUPS, opted_in
from raygitops.model.workloads import NEW_CLUSTER

RECREATE_CLASS = "recreate"
REPLACE_CLASS = "replace"
NATIVE_CLASS = "native-recreate"
STALE = "stale"
IN_PLACE = "in-place"
CREATE = "create"
DELETE = "delete"
UNCHANGED = "unchanged"
# Report order: what needs attention first.
CLASSES = (RECREATE_CLASS, REPLACE_CLASS, NATIVE_CLASS, STALE, DELETE, CREATE, IN_PLACE, UNCHANGED)



@dataclass(frozen=True)
class GroupChange:
    group: str  # "head" or "worker:<name>"
    change: str  # "changed", "added", "removed"
    base_hash: str | None
    head_hash: str | None
    pods: PodCount
    config: tuple[str, ...] = ()  # a config-only change: "ConfigMap/<name> (keys a, b)"

    @property
    def label(self) -> str:
        return self.group.split(":", 1)[1] if self.group.startswith("worker:") else self.group

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "change": self.change,
            "hash": {"base": self.base_hash, "head": self.head_hash},
            "pods": self.pods.to_json(),
            **({"config": list(self.config)} if self.config else {}),
        }


@dataclass
class ClusterImpact:
    namespace: str
    name: str
    klass: str
    reason: str
    strategy_base: str | None
    strategy_head: str | None
    owner: str | None
    suspend_base: bool | None
    suspend_head: bool | None
    autoscaling: bool
    pods: PodCount  # affected: recreated, left stale, created (a new cluster's, an added group's) or deleted
    pods_total: PodCount  # all pods of the cluster at head (at base for a delete)
    groups: list[GroupChange] = field(default_factory=list)
    changes: list[FieldChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source_base: str | None = None
    source_head: str | None = None
    replacement: dict[str, Any] | None = None  # class replace: per group, what goes and how many at a time
    running_jobs: jobs.Policy | None = None  # recreate / replace by the hook: what it does about running Ray jobs

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def hashed_groups(self) -> list[GroupChange]:
        return [g for g in self.groups if g.change == "changed"]

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "class": self.klass,
            "reason": self.reason,
            "strategy": {"base": self.strategy_base, "head": self.strategy_head},
            "owner": self.owner,
            "suspend": {"base": self.suspend_base, "head": self.suspend_head},
            "autoscaling": self.autoscaling,
            "pods": self.pods.to_json(),
            "podsTotal": self.pods_total.to_json(),
            "groups": [g.to_json() for g in self.groups],
            "notes": list(self.notes),
            "changes": [c.to_json() for c in self.changes],
            "source": {"base": self.source_base, "head": self.source_head},
            **({"replace": self.replacement} if self.replacement is not None else {}),
            **({"runningJobs": {"policy": self.running_jobs.action, "waitSeconds": self.running_jobs.wait_seconds,
                                "asks": self.running_jobs.action != jobs.PROCEED}}
               if self.running_jobs is not None else {}),
        }


@dataclass
class KindCount:
    api_group: str
    kind: str
    created: int = 0
    changed: int = 0
    deleted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"apiGroup": self.api_group, "kind": self.kind, "created": self.created,
                "changed": self.changed, "deleted": self.deleted}


@dataclass
class Report:
    clusters: list[ClusterImpact]
    others: list[KindCount]
    notes: list[str] = field(default_factory=list)
    workloads: list[workloads.WorkloadImpact] = field(default_factory=list)  # RayServices and RayJobs

    def by_class(self, klass: str) -> list[ClusterImpact]:
        return [c for c in self.clusters if c.klass == klass]

    def count(self, klass: str) -> int:
        return sum(1 for c in self.clusters if c.klass == klass)

    def pods(self, *klasses: str) -> PodCount:
        total = PodCount()
        for klass in klasses:
            for c in self.by_class(klass):
                total = total + c.pods
        return total

    @property
    def recreated(self) -> int:
        """Clusters whose pods this merge replaces, by the hook or by the operator."""
        return self.count(RECREATE_CLASS) + self.count(NATIVE_CLASS)

    def workloads_of(self, klass: str) -> list[workloads.WorkloadImpact]:
        return [w for w in self.workloads if w.klass == klass]

    @property
    def changed(self) -> list[ClusterImpact]:
        return [c for c in self.clusters if c.klass != UNCHANGED]

    @property
    def verdict(self) -> str:
        """``recreate``, ``replace``, ``delete``, ``stale``, ``changes`` or ``none``: the most serious thing
        the merge does to pods (a deleted or stale cluster is never "changes")."""
        if self.recreated or self.workloads_of(NEW_CLUSTER):  # a RayService's new cluster replaces its pods
            return "recreate"
        if self.count(REPLACE_CLASS):
            return "replace"
        if self.count(DELETE):
            return "delete"
        if self.count(STALE) or self.workloads_of(STALE):
            return "stale"
        if self.changed or any(k.created or k.changed or k.deleted for k in self.others):
            return "changes"
        return "none"

    def fails(self, classes: Iterable[str]) -> bool:
        """Whether a cluster, RayService or RayJob of one of ``classes`` is in the report
        (``--fail-on``)."""
        wanted = set(classes)
        return any(c.klass in wanted for c in self.clusters) or any(w.klass in wanted for w in self.workloads)


# ---------------------------------------------------------------------------------------------
# Matching


def _is_hook(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, dict) and labels.get(HOOK_LABEL[0]) == HOOK_LABEL[1]


def _app_objects(result: RenderResult | None) -> list[dict[str, Any]]:
    if result is None:
        return []
    return [o for o in result.objects[: len(result.sources)] if not _is_hook(o)]


def _identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    api = obj.get("apiVersion", "")
    meta = obj.get("metadata") or {}
    return (api.split("/")[0] if "/" in api else "", obj.get("kind", ""),
            meta.get("namespace") or "", meta.get("name") or meta.get("generateName") or "")


def _cluster_index(result: RenderResult | None) -> dict[str, tuple[RenderedCluster, dict]]:
    """namespace/name → (cluster, its rendered object)."""
    if result is None:
        return {}
    objects = [o for o in result.objects[: len(result.sources)] if is_raycluster(o)]
    # render appends clusters in document order, one per RayCluster object
    return {c.key: (c, o) for c, o in zip(result.clusters, objects, strict=True)}


# ---------------------------------------------------------------------------------------------
# Classification


def _group_changes(base: RenderedCluster, head: RenderedCluster) -> list[GroupChange]:
    old, new = base.plan.hashes.groups(), head.plan.hashes.groups()
    out: list[GroupChange] = []
    for group in list(new) + [g for g in old if g not in new]:
        before, after = old.get(group), new.get(group)
        config: tuple[str, ...] = ()
        if before == after:
            config = _config_changes(base, head, group)
            if not config:
                continue
        change = "changed" if before and after else ("added" if after else "removed")
        spec = head.spec if after else base.spec
        out.append(GroupChange(group, change, before, after, pods_of(spec, [group]), config))
    return out


def _config_changes(base: RenderedCluster, head: RenderedCluster, group: str) -> tuple[str, ...]:
    """What changed in the config a group reads, when both sides hash it (a side without a
    config hash, such as a render from before config hashes, recreates nothing)."""
    old, new = base.plan.config_hashes(), head.plan.config_hashes()
    changed = [kind for kind in new
               if old.get(kind, {}).get(group) and new[kind].get(group) and old[kind][group] != new[kind][group]]
    if not changed:
        return ()
    reads = set(configrefs.references(_group_template(base.spec, group))) | set(
        configrefs.references(_group_template(head.spec, group)))
    out = []
    for ref in sorted((set(base.config) | set(head.config)) & reads):
        if ref[0] not in changed:
            continue
        keys = configrefs.changed_keys(base.config.get(ref), head.config.get(ref))  # names only, never values
        if keys or (ref in base.config) != (ref in head.config):
            out.append(f"{ref[0]}/{ref[1]}" + (f" (keys {', '.join(keys)})" if keys else ""))
    return tuple(out) or tuple(f"its {kind}s" for kind in changed)


def _what_changed(groups: list[GroupChange]) -> str:
    """``template of a and config of b (ConfigMap/x (keys k))``."""
    template = [g.label for g in groups if not g.config]
    config = [g for g in groups if g.config]
    parts = [f"template of {', '.join(template)}"] if template else []
    parts += [f"config of {g.label} ({'; '.join(g.config)})" for g in config]
    return " and ".join(parts)


def _verb_groups(groups: list[GroupChange]) -> str:
    names = [g.label for g in groups]
    return ", ".join(names)


def _group_template(spec: dict[str, Any], group: str) -> Any:
    """The pod template of group ``group`` ("head", "worker:<name>"); None when absent."""
    holder = spec.get("headGroupSpec") if group == "head" else pods.worker_groups(spec).get(group.partition(":")[2])
    return holder.get("template") if isinstance(holder, dict) else None


def _classify_pair(base: RenderedCluster, base_obj: dict, head: RenderedCluster,
                   head_obj: dict, masking: Masking = DEFAULT_MASKING) -> ClusterImpact:
    """One cluster on both sides: what the next sync does to it once base has been synced
    (the verdict on base as it runs, against head's plan), worded for the preview."""
    plan_b, plan_h = base.plan, head.plan
    impact = ClusterImpact(
        namespace=head.namespace, name=head.name, klass=UNCHANGED, reason="",
        strategy_base=plan_b.strategy, strategy_head=plan_h.strategy, owner=plan_h.owner,
        suspend_base=plan_b.suspend, suspend_head=plan_h.suspend, autoscaling=pods.autoscaling(head.spec),
        pods=PodCount(), pods_total=pods_of(head.spec),
        source_base=base.source, source_head=head.source,
    )
    if base_obj == head_obj and plan_b.strategy == plan_h.strategy:
        impact.reason = "no change"
        return impact
    seen = verdict.observe_render(base.spec, plan_b, annotations(base_obj))
    v = verdict.judge(head.namespace, plan_h, seen)
    # a group whose hash moved only by its rules (hash.ignore) runs what it should: not listed
    impact.groups = [g for g in _group_changes(base, head) if g.change != "changed" or g.group in v.drift]
    if base_obj != head_obj:
        impact.changes = _mark_same_value(field_changes(base_obj, head_obj, masking=masking, rules=plan_h.rules),
                                          plan_b.hashes,
                                          plan_h.hashes)
    changed = impact.hashed_groups
    removed = [g for g in impact.groups if g.change == "removed" and g.group in v.drift]
    added = [g for g in impact.groups if g.change == "added"]
    drifted = changed + removed
    # pods that run an old template: changed groups as head scales them, removed ones as they run
    stale_pods = pods_of(head.spec, [g.group for g in changed]) + pods.total(g.pods for g in removed)
    what = _what_drifted(changed, removed, article="")
    if drifted and plan_h.suspend:
        # The hook leaves a cluster whose desired spec is suspended alone; KubeRay deletes
        # its pods and creates them from the new template on resume.
        impact.klass = IN_PLACE
        impact.reason = (f"template of {_verb_groups(drifted)} changed, but the "
                         "desired spec is suspended: no pod is recreated now (KubeRay creates "
                         "the pods from the new template when the cluster resumes)")
    elif v.action == verdict.REPLACE:
        # only worker groups: the hook replaces their pods, the head and the rest stay
        impact.klass, impact.pods = REPLACE_CLASS, stale_pods
        impact.replacement = verdict.replacement(plan_h, v.drift, {g.group: pods_of(head.spec, [g.group])
                                                                    for g in changed})
        impact.reason = f"opted in (ReplaceGroups): {verdict.replacement_words(impact.replacement)}"
        if any(g.config for g in changed):
            impact.reason += f" (the {_what_changed(changed)} changed)"
    elif v.action == verdict.RECREATE and drifted:
        impact.klass = RECREATE_CLASS
        impact.pods = impact.pods_total + pods.total(g.pods for g in removed)  # those are deleted, not made again
        impact.reason = (f"opted in ({plan_h.strategy}) and {_what_drifted(changed, removed)}: every pod is deleted "
                         "and created again" + (" (ReplaceGroups takes the full cycle when the head changes)"
                                                if plan_h.strategy == REPLACE_GROUPS else ""))
    elif verdict.native_recreates(plan_h, v, seen, head.spec):
        impact.klass = NATIVE_CLASS
        impact.pods = impact.pods_total
        impact.reason = ("spec.upgradeStrategy: Recreate and the KubeRay operator's own spec "
                         "hash changed: KubeRay deletes every pod when the sync applies the new "
                         "spec (after the sync; the PreSync hook does not gate it)")
    elif drifted and v.owner:
        impact.klass, impact.pods = STALE, stale_pods
        kind = v.owner.split("/")[0]
        impact.reason = (f"{what}, but the cluster is owned by {v.owner}: raygitops never recreates it "
                         f"(the {kind} manages its clusters); running pods keep the old template")
    elif drifted:
        impact.klass, impact.pods = STALE, stale_pods
        impact.reason = (f"{what}, but the cluster is not opted in: "
                         "running pods keep the old template (opt in with annotation "
                         "raygitops.dev/upgrade-strategy: Recreate)")
    else:
        impact.klass, impact.pods = IN_PLACE, pods.total(g.pods for g in added)
        parts = []
        if added:
            parts.append(f"worker group {_verb_groups(added)} added (KubeRay creates its pods)")
        gone = [g for g in impact.groups if g.change == "removed"]
        if gone:
            parts.append(f"worker group {_verb_groups(gone)} removed (it has no pods)")
        if not parts and plan_b.rules.tag() != plan_h.rules.tag():
            parts.append(f"the template hashes follow KubeRay {plan_h.rules.pods}'s pod rules now ({plan_b.rules.tag()} "
                         f"→ {plan_h.rules.tag()}): the hook compares pods stamped with the old ones by spec")
        if not parts:
            parts.append("only fields outside the template hash changed")
        impact.reason = "; ".join(parts) + ": no pod is recreated"
    if impact.klass in (RECREATE_CLASS, REPLACE_CLASS) and not v.owner:
        # the preview has no cluster to ask: it says the policy, and that the hook will ask
        impact.running_jobs = plan_h.jobs_policy
        impact.notes.append(jobs.outlook(plan_h.jobs_policy, jobs.NOT_ASKED_YET, 0.0))
        replaced = v.replaced_groups() if impact.klass == REPLACE_CLASS else None
        impact.notes.append(preflight.outlook(plan_h.preflight_policy,
                                              plan_h.preflight_needs(replaced) if plan_h.preflights else None))
    _notes(impact, plan_b, plan_h)
    impact.notes += _other_versions(base, head, head_obj, {g.group for g in changed})
    return impact


def _other_versions(base: RenderedCluster, head: RenderedCluster, head_obj: dict[str, Any],
                    changed: set[str]) -> list[str]:
    """Where another KubeRay line raygitops knows answers otherwise than the target (the
    groups whose pods change, or a refusal): what it does (model/podrules.py)."""
    rules = head.plan.rules
    if rules.legacy:  # scheme h1: the same for every version
        return []
    notes = []
    for line in podrules.RULES:
        if line.name == rules.pods:
            continue
        other = HashRules(rules.ignore, line.name)
        before = hash_cluster(base.spec, other, base.plan.pod_annotations).groups()
        after = hash_cluster(head.spec, other, head.plan.pod_annotations).groups()
        groups = {g for g, h in after.items() if before.get(g) not in (None, h)}
        port = validation.port_for(line.name)
        refused = port and validation.refusal(head.spec, annotations(head_obj), labels(head_obj), port)
        if refused:
            notes.append(f"on KubeRay {line.name} (not the target) the operator refuses this RayCluster: "
                         f"{refused.message} {refused.cite()}")
        elif groups != changed:
            notes.append(f"on KubeRay {line.name} (not the target): "
                         + (f"the pods of {', '.join(sorted(groups))} change" if groups else "no group's pods change"))
    return notes


def _what_drifted(changed: list[GroupChange], removed: list[GroupChange], article: str = "the ") -> str:
    """``the template of a changed and worker group b was removed (its pods count as drift)``."""
    what = []
    if changed:
        what.append(f"{article}{_what_changed(changed)} changed")
    if removed:
        what.append(f"worker group {_verb_groups(removed)} was removed (its pods count as drift)")
    return " and ".join(what)


# What the PreSync hook does with a cluster of each strategy (the note on a strategy change).
STRATEGY_WORDS = {
    RECREATE: "the hook recreates the whole cluster when a template changes",
    REPLACE_GROUPS: "the hook replaces only the pods of changed worker groups, in batches (a head change "
                    "still recreates the whole cluster)",
}


def strategy_change(before: str, after: str, recreated_now: bool, owner: str | None) -> str:
    """The note on a change of upgrade strategy: going from one opt-in to the other, opting
    out, or opting in (the hook then acts on pods an earlier change left stale, which the
    preview cannot see, unless it recreates the cluster this sync anyway).  An owned cluster's
    is the change alone: the hook never acts on it (another note says so)."""
    change = f"upgrade strategy {before} → {after}"
    if owner:
        return change
    if opted_in(before) and opted_in(after):
        return f"{change}: a strategy change, from this sync on {STRATEGY_WORDS[after]}"
    if opted_in(before):
        return f"{change}: opted out, from this sync on the PreSync hook leaves this cluster's pods alone"
    if opted_in(after) and not recreated_now:
        return (f"{change}: newly opted in: if the running pods still carry an older template (an earlier change "
                "left them stale), the PreSync hook replaces them on this sync")
    return change


def _notes(impact: ClusterImpact, plan_b: Any, plan_h: Any) -> None:
    if plan_b is not None and plan_b.strategy != plan_h.strategy:
        impact.notes.append(strategy_change(plan_b.strategy, plan_h.strategy, impact.klass == RECREATE_CLASS,
                                            plan_h.owner))
    if plan_h.native:
        impact.notes.append(
            "KubeRay's native Recreate (spec.upgradeStrategy) acts only on a head pod that an "
            f"operator of the same version created (annotation {NATIVE_HASH_ANNOTATION}); on "
            "a head pod made by KubeRay 1.5 nothing is recreated: run `raygitops presync "
            "--dry-run` against the cluster to check (docs/kuberay-1.6.md)")
    if plan_h.owner and opted_in(plan_h.strategy):
        impact.notes.append(f"owned by {plan_h.owner}: the PreSync hook skips it despite "
                            f"the {plan_h.strategy} opt-in")
    if plan_h.suspend and (plan_b is None or not plan_b.suspend):
        impact.notes.append("desired spec.suspend: true — KubeRay deletes all pods of this "
                            "cluster and keeps it suspended")
    elif plan_h.suspend:
        impact.notes.append("desired spec.suspend: true — the cluster stays suspended (no pods)")
    elif plan_b is not None and plan_b.suspend:
        impact.notes.append("spec.suspend: true → false — KubeRay creates the pods from the "
                            "head template")


def _mark_same_value(changes: list[FieldChange], old: GroupHashes,
                     new: GroupHashes) -> list[FieldChange]:
    """Pod-shaping changes whose group hash did not move are a notation change only."""
    before, after = old.groups(), new.groups()
    unchanged = {g for g in after if before.get(g) == after[g]}
    all_same = unchanged == set(after) and set(before) == set(after)
    out = []
    for c in changes:
        same = c.pod_shaping and (
            (c.group is not None and c.group in unchanged) or (c.group is None and all_same)
        )
        if same:
            c = dataclasses.replace(c, same_value=True)
        out.append(c)
    return out


def _one_side(cluster: RenderedCluster, klass: str) -> ClusterImpact:
    plan = cluster.plan
    total = pods_of(cluster.spec)
    created = klass == CREATE
    impact = ClusterImpact(
        namespace=cluster.namespace, name=cluster.name, klass=klass,
        reason="new RayCluster: KubeRay creates its pods" if created
        else "RayCluster removed: its pods are deleted (if Argo CD prunes it)",
        strategy_base=None if created else plan.strategy,
        strategy_head=plan.strategy if created else None,
        owner=plan.owner,
        suspend_base=None if created else plan.suspend,
        suspend_head=plan.suspend if created else None,
        autoscaling=pods.autoscaling(cluster.spec), pods=total, pods_total=total,
        source_base=None if created else cluster.source,
        source_head=cluster.source if created else None,
    )
    if created and plan.suspend:
        impact.notes.append("desired spec.suspend: true — created suspended (no pods)")
    return impact


def _other_counts(base: RenderResult | None, head: RenderResult | None) -> list[KindCount]:
    old = {_identity(o): o for o in _app_objects(base) if not is_raycluster(o)}
    new = {_identity(o): o for o in _app_objects(head) if not is_raycluster(o)}
    counts: dict[tuple[str, str], KindCount] = {}

    def bump(identity: tuple[str, str, str, str], what: str) -> None:
        key = identity[:2]
        entry = counts.setdefault(key, KindCount(*key))
        setattr(entry, what, getattr(entry, what) + 1)

    for identity, obj in new.items():
        if identity not in old:
            bump(identity, "created")
        elif old[identity] != obj:
            bump(identity, "changed")
    for identity in old:
        if identity not in new:
            bump(identity, "deleted")
    return sorted(counts.values(), key=lambda k: (k.kind, k.api_group))


def _masking(result: RenderResult | None) -> Masking:
    """The app's own masking patterns (``preview:`` in raygitops.yaml; head's, as it is the
    side being reviewed)."""
    settings = result.settings if result is not None else None
    if settings is None:
        return DEFAULT_MASKING
    return Masking(tuple(settings.mask_names), tuple(settings.unmask_names))


def _version(base: RenderResult | None, head: RenderResult | None) -> str | None:
    """The KubeRay the app targets (head's kuberayVersion, else base's; None: the newest)."""
    for result in (head, base):
        if result is not None and result.settings is not None and result.settings.kuberay_version:
            return result.settings.kuberay_version
    return None


def classify(base: RenderResult | None, head: RenderResult | None) -> Report:
    """Compare two renders of an app (None: the app does not exist on that side)."""
    old, new = _cluster_index(base), _cluster_index(head)
    masking = _masking(head if head is not None else base)
    impacts: list[ClusterImpact] = []
    for key, (cluster, obj) in new.items():
        if key in old:
            impacts.append(_classify_pair(old[key][0], old[key][1], cluster, obj, masking))
        else:
            impacts.append(_one_side(cluster, CREATE))
    for key, (cluster, _obj) in old.items():
        if key not in new:
            impacts.append(_one_side(cluster, DELETE))
    order = {k: i for i, k in enumerate(CLASSES)}
    impacts.sort(key=lambda c: (order[c.klass], c.namespace, c.name))
    untracked = sorted({u for cluster, _ in new.values() for u in cluster.untracked})
    notes = [f"not tracked: {', '.join(untracked)} (read by pods but not rendered by the app: "
             "a change to it recreates nothing)"] if untracked else []
    default_ns = (head or base).default_namespace if (head or base) is not None else None
    owned = workloads.classify(_app_objects(base), _app_objects(head), _version(base, head), default_ns)
    return Report(impacts, _other_counts(base, head), notes, owned)
