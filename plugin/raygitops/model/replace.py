"""ReplaceGroups (pure): which stale worker pods to delete next, within max-unavailable.

The desired spec is already on the RayCluster (written with the ``replacing`` lock), so every
pod the operator creates for a group carries the group's desired hash.  Each turn of the
hook's loop looks at the live pods and says what may be deleted now, as a Deployment's
rolling update does with ``maxUnavailable`` and ``maxSurge: 0``:

- per changed group, *unavailable* = the pods the spec asks for minus the group's Ready,
  non-terminating pods; stale pods that are not Ready go first (deleting them costs no
  availability), then Ready stale pods while unavailable stays within max-unavailable;
- pods of a worker group the spec no longer has are all deleted (their group is gone);
- the head and every group not being replaced are never touched, and only pods the
  RayCluster owns are candidates (a pod that merely carries the label is not);
- the replacement is done when no stale pod is left; waiting for the last replacements to
  be Ready is the cycle's wait-ready step (skipped with ``--no-wait-ready``, as after a
  full cycle).

The spec's replica count is read on every turn: the autoscaler may move it while a group is
replaced, and the hook never writes it (nor ``workersToDelete``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from raygitops.model.objmeta import meta
from raygitops.model.plan import ClusterPlan
from raygitops.model.drift import group_key, owned_by, pod_ready, runs_desired, terminating, worker_pods
from raygitops.model.strategy import DEFAULT_MAX_UNAVAILABLE, resolve_max_unavailable


@dataclass
class GroupState:
    """One changed worker group at one turn."""

    name: str
    want: int  # pods the live spec asks for (replicas x numOfHosts)
    stale: int  # non-terminating pods without the desired hash
    fresh_ready: int  # Ready pods with the desired hash
    unavailable: int
    max_unavailable: int

    @property
    def settled(self) -> bool:
        return self.stale == 0 and self.fresh_ready >= self.want

    def describe(self) -> str:
        return (f"group {self.name}: {self.fresh_ready} of {self.want} Ready with the new template, "
                f"{self.stale} stale, {self.unavailable} unavailable (at most {self.max_unavailable})")


@dataclass
class Batch:
    """What to do at this turn."""

    delete: list[dict[str, Any]] = field(default_factory=list)  # pods to delete now
    groups: list[GroupState] = field(default_factory=list)
    removed: int = 0  # non-terminating pods of groups the spec no longer has

    @property
    def done(self) -> bool:
        """No stale pod left to delete (the replacements may still be starting)."""
        return self.removed == 0 and all(g.stale == 0 for g in self.groups)

    def describe(self) -> str:
        parts = [g.describe() for g in self.groups if not g.settled]
        if self.removed:
            parts.append(f"{self.removed} pods of removed groups")
        return "; ".join(parts) or "every replaced group is Ready with the new template"


def next_batch(plan: ClusterPlan, live: dict[str, Any], pods: list[dict[str, Any]],
               groups: Iterable[str]) -> Batch:
    """The pods to delete now for the worker ``groups`` being replaced, and where each stands."""
    spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
    autoscaled = spec.get("enableInTreeAutoscaling") is True
    live_groups = {g.get("groupName"): g for g in spec.get("workerGroupSpecs") or [] if isinstance(g, dict)}
    uid = meta(live).get("uid")
    by_group: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        key = group_key(pod)
        if key and key.startswith("worker:") and not terminating(pod) and owned_by(pod, uid):
            by_group.setdefault(key.split(":", 1)[1], []).append(pod)

    batch = Batch()
    for name, group_pods in sorted(by_group.items()):
        if name not in live_groups and name not in plan.pod_spec.workers:
            batch.removed += len(group_pods)
            batch.delete += sorted(group_pods, key=_name)
    for name in sorted(set(groups)):
        if name not in plan.hashes.workers or name not in live_groups:
            continue  # removed: handled above
        group_pods = by_group.get(name, [])
        want = worker_pods(live_groups[name], autoscaled)
        stale = [p for p in group_pods if not runs_desired(p, plan, f"worker:{name}")]
        ready = [p for p in group_pods if pod_ready(p)]
        limit = resolve_max_unavailable(plan.limit_of(name), want)
        unavailable = max(0, want - len(ready))
        unready_stale = sorted((p for p in stale if not pod_ready(p)), key=_name)
        ready_stale = sorted((p for p in stale if pod_ready(p)), key=_name)
        room = max(0, limit - unavailable)
        batch.delete += unready_stale + ready_stale[:room]
        fresh_ready = sum(1 for p in ready if runs_desired(p, plan, f"worker:{name}"))
        batch.groups.append(GroupState(name, want, len(stale), fresh_ready, unavailable, limit))
    return batch


def _name(pod: dict[str, Any]) -> str:
    return str(meta(pod).get("name", ""))


def summary(deleted: dict[str, int], groups: Iterable[str], removed: int, kept: Iterable[str]) -> str:
    """What a replacement did, for the log, the Event and ``last-recreate``:
    ``replaced 4 pods of group gpu; head and group cpu kept``."""
    parts = [f"replaced {_pods(deleted.get(g, 0))} of group {g}" for g in sorted(groups)]
    if removed:
        parts.append(f"deleted {_pods(removed)} of removed groups")
    return "; ".join(parts + [listed(["head"] + [f"group {g}" for g in sorted(kept)]) + " kept"])


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def replacement(plan: ClusterPlan, changed: dict[str, dict[str, Any]], removed: dict[str, dict[str, Any]],
                kept: list[str]) -> dict[str, Any]:
    """What a ReplaceGroups sync does, per group, in the JSON shape ``raygitops status`` and
    ``diff`` report: ``changed`` and ``removed`` map group names to their pods (``{min, max}``);
    a group with a bound of its own (max-unavailable-by-group) carries it."""
    groups: list[dict[str, Any]] = [
        {"group": name, "change": "changed", "pods": pods,
         **({"maxUnavailable": plan.limit_of(name)} if name in plan.max_unavailable_by_group else {}),
         "atATime": resolve_max_unavailable(plan.limit_of(name), pods["min"])}
        for name, pods in changed.items()]
    groups += [{"group": name, "change": "removed", "pods": pods} for name, pods in removed.items()]
    return {"maxUnavailable": plan.max_unavailable or DEFAULT_MAX_UNAVAILABLE, "groups": groups,
            "kept": ["head", *kept]}


def replacement_plan(plan: ClusterPlan, drifted: dict[str, Any]) -> dict[str, Any]:
    """:func:`replacement` of a cluster whose worker groups ``drifted`` (``worker:<name>`` ->
    :class:`~raygitops.model.drift.GroupDrift`), counted in live pods."""
    counts = {key.split(":", 1)[1]: ({"min": d.pods, "max": d.pods}, d.how == "removed-group")
              for key, d in sorted(drifted.items())}
    return replacement(plan,
                       {n: pods for n, (pods, gone) in counts.items() if not gone},
                       {n: pods for n, (pods, gone) in counts.items() if gone},
                       [g for g in sorted(plan.pod_spec.workers) if g not in counts])


def replacement_words(replacement: dict[str, Any]) -> str:
    """``replaces 4 pods of group gpu (2 at a time); head and group cpu untouched``."""
    parts = []
    for g in replacement["groups"]:
        low, high = g["pods"]["min"], g["pods"]["max"]
        count = f"{low}+" if high is None else str(low) if low == high else f"{low}–{high}"
        noun = "pod" if count == "1" else "pods"
        if g["change"] == "removed":
            parts.append(f"deletes {count} {noun} of removed group {g['group']}")
        else:
            parts.append(f"replaces {count} {noun} of group {g['group']} ({g['atATime']} at a time)")
    kept = [k if k == "head" else f"group {k}" for k in replacement["kept"]]
    return "; ".join(parts + [listed(kept) + " untouched"])


def listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
