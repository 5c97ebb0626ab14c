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

from raygitops.model import pods
from raygitops.model.objmeta import meta
from raygitops.model.plan import ClusterPlan
from raygitops.model.strategy import resolve_max_unavailable
from raygitops.model.verdict import listed, runs_desired


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


def next_batch(plan: ClusterPlan, live: dict[str, Any], pod_list: list[dict[str, Any]],
               groups: Iterable[str]) -> Batch:
    """The pods to delete now for the worker ``groups`` being replaced, and where each stands."""
    spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
    live_groups = pods.worker_groups(spec)
    by_group = {key.split(":", 1)[1]: group_pods
                for key, group_pods in pods.by_group(pods.own_pods(live, pod_list)).items() if key != "head"}

    batch = Batch()
    for name, group_pods in sorted(by_group.items()):
        if name not in live_groups and name not in plan.spec.workers:
            batch.removed += len(group_pods)
            batch.delete += sorted(group_pods, key=_name)
    for name in sorted(set(groups)):
        if name not in plan.hashes.workers or name not in live_groups:
            continue  # removed: handled above
        group_pods = by_group.get(name, [])
        want = pods.desired_workers(live_groups[name])
        stale = [p for p in group_pods if not runs_desired(p, plan, f"worker:{name}")]
        ready = [p for p in group_pods if pods.ready(p)]
        limit = resolve_max_unavailable(plan.limit_of(name), want)
        unavailable = max(0, want - len(ready))
        unready_stale = sorted((p for p in stale if not pods.ready(p)), key=_name)
        ready_stale = sorted((p for p in stale if pods.ready(p)), key=_name)
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
