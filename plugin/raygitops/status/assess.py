"""Git against the live cluster, per RayCluster (pure: rendered cluster + live objects in, a
:class:`ClusterStatus` out).  The hook's own drift rules decide (raygitops.model.drift), so
"drifted" here is exactly what the next sync's hook recreates.

States, most serious first:

- ``failed``      — pods run the desired template, but the recreate to it ended ``Failed``
  (not ready in time): the next sync's hook waits for readiness again, and fails again
  unless the cluster is ready by then;
- ``unverified``  — the same after a recreate whose readiness was not checked
  (``--no-wait-ready``) or was interrupted (``Unverified``);
- ``in-progress`` — a recreate cycle holds the cluster (lock: holder, phase, since);
- ``drifted``     — opted in, and pods run an old template: the next sync recreates it;
- ``native``      — left to KubeRay's native Recreate, and the next sync changes the
  operator's hash (it then recreates after the sync), or pods run an old template;
- ``stale``       — pods run an old template and nothing will recreate them (not opted in,
  or owned by a RayJob/RayService);
- ``suspended``   — suspended although Git does not ask for it;
- ``absent``      — not in the cluster: the next sync creates it;
- ``in-sync``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from raygitops.model import native, objmeta
from raygitops.model import drift
from raygitops.model import lock as locks
from raygitops.render.renderer import RenderedCluster
from raygitops.sources.files import deep_merge
from raygitops.model.replace import replacement_plan, replacement_words
from raygitops.model.strategy import RECREATE, REPLACE_GROUPS, cluster_owner, opted_in
from raygitops.model import names

FAILED, UNVERIFIED, IN_PROGRESS, DRIFTED, NATIVE, STALE, SUSPENDED, ABSENT, IN_SYNC = (
    "failed", "unverified", "in-progress", "drifted", "native", "stale", "suspended", "absent", "in-sync")
STATES = (FAILED, UNVERIFIED, IN_PROGRESS, DRIFTED, NATIVE, STALE, SUSPENDED, ABSENT, IN_SYNC)


@dataclass
class ClusterStatus:
    namespace: str
    name: str
    state: str
    detail: str
    strategy: str
    native: bool
    pods: int = 0
    groups: list[str] = field(default_factory=list)  # groups whose pods run an old template
    lock: dict[str, Any] | None = None
    last_recreate: dict[str, Any] | None = None
    operator_version: str | None = None  # ray.io/kuberay-version on the head pod (KubeRay >= 1.6)
    warnings: list[str] = field(default_factory=list)
    replace: dict[str, Any] | None = None  # ReplaceGroups: per group, what the next sync replaces

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace, "name": self.name, "state": self.state, "detail": self.detail,
            "strategy": self.strategy, "nativeRecreate": self.native, "pods": self.pods,
            "driftedGroups": list(self.groups), "lock": self.lock, "lastRecreate": self.last_recreate,
            "operatorVersion": self.operator_version, "warnings": list(self.warnings),
            **({"replace": self.replace} if self.replace is not None else {}),
        }


def crd_knows_upgrade_strategy(crd: dict[str, Any]) -> bool:
    """Whether a RayCluster CRD object has ``spec.upgradeStrategy`` in its served schema."""
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == "v1":
            props = (((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {})
            return "upgradeStrategy" in ((props.get("spec") or {}).get("properties") or {})
    return False


def overlay(live: Any, desired: Any) -> Any:
    """The live spec after a sync applies ``desired``: a field Git never sets keeps its live
    value, as under kubectl's three-way merge and server-side apply (e.g. the
    ``suspend: false`` the hook's resume wrote), so it is no change to the operator's hash."""
    if not isinstance(live, dict) or not isinstance(desired, dict):
        return desired
    return deep_merge(live, desired)


def _head_version(pods: list[dict[str, Any]]) -> str | None:
    for pod in pods:
        if drift.group_key(pod) == "head" and not drift.terminating(pod):
            return objmeta.annotations(pod).get(names.KUBERAY_VERSION_ANNOTATION)
    return None


def _lock(live: dict[str, Any]) -> dict[str, Any] | None:
    text = objmeta.annotations(live).get(names.LOCK_ANNOTATION)
    if text is None:
        return None
    lock = locks.parse(text)
    if lock is None:
        return {"readable": False}
    return {"phase": lock.phase, "holder": lock.holder, "startedAt": locks.rfc3339(lock.started_at),
            "renewedAt": locks.rfc3339(lock.renewed_at)}


def assess(cluster: RenderedCluster, live: dict[str, Any] | None, pods: list[dict[str, Any]],
           crd_knows: bool | None) -> ClusterStatus:
    """The status of one rendered RayCluster against its live object and pods."""
    plan = cluster.plan
    status = ClusterStatus(cluster.namespace, cluster.name, IN_SYNC, "", plan.strategy, plan.native)
    if live is None:
        status.state, status.detail = ABSENT, "not in the cluster: the next sync creates it"
        return status
    status.lock, status.last_recreate = _lock(live), drift.last_recreate(live)
    status.operator_version = _head_version(pods)
    # The hook's drift rules, as if the cluster opted in: what runs an old template.
    probe = drift.decide(cluster.namespace, dataclasses.replace(plan, strategy=RECREATE, owner=None, suspend=False),
                         live, pods)
    status.pods = probe.pods
    status.groups = sorted(probe.drift)
    opted = opted_in(plan.strategy) and not (plan.owner or cluster_owner(live))
    status.warnings = drift.native_warnings(plan, live, pods, crd_knows,
                                            recreating=opted and probe.action == drift.RECREATE_ACTION)
    live_suspended = (live.get("spec") or {}).get("suspend") is True
    old = ", ".join(status.groups)
    if status.lock is not None:
        lock = status.lock
        status.state = IN_PROGRESS
        status.detail = (f"a recreate cycle holds it: phase {lock.get('phase')}, holder {lock.get('holder')}, "
                         f"since {lock.get('startedAt')}" if lock.get("readable", True)
                         else "carries an unreadable raygitops lock: the next sync's hook resolves it")
    elif live_suspended and not plan.suspend:
        status.state = SUSPENDED
        status.detail = ("suspended, but Git does not ask for it: the next sync's hook resumes it with the "
                         "desired spec" if opted else "suspended, but Git does not ask for it")
    elif probe.action == drift.VERIFY:
        outcome = drift.unverified_recreate(live, plan)
        status.state = FAILED if outcome == locks.FAILED else UNVERIFIED
        status.detail = (f"pods run the desired template, but the recreate to it ended {outcome} (not seen "
                         "ready): the next sync's hook waits for readiness again")
    elif plan.suspend:
        status.detail = "suspended, as Git asks"
    elif probe.action == drift.RECREATE_ACTION and opted and plan.strategy == REPLACE_GROUPS \
            and "head" not in probe.drift:
        status.state = DRIFTED
        status.replace = replacement_plan(plan, probe.drift)
        status.detail = f"{old} run an old template: the next sync {replacement_words(status.replace)}"
    elif probe.action == drift.RECREATE_ACTION and opted:
        status.state = DRIFTED
        status.detail = f"{old} run an old template: the next sync recreates the cluster ({probe.pods} pods)"
    elif plan.native and native.spec_hash_changes(live.get("spec"), overlay(live.get("spec"), cluster.spec)):
        status.state = NATIVE
        status.detail = ("the next sync changes KubeRay's own spec hash: with native Recreate the operator "
                         f"replaces every pod after the sync ({probe.pods} pods)")
    elif probe.action == drift.RECREATE_ACTION and plan.native:
        status.state = NATIVE
        status.detail = (f"{old} run an old template although the spec is applied: KubeRay's native "
                         "Recreate did not replace them (see the warnings)")
    elif probe.action == drift.RECREATE_ACTION:
        owner = plan.owner or cluster_owner(live)
        status.state = STALE
        status.detail = (f"{old} run an old template and nothing will recreate them: "
                         + (f"owned by {owner}" if owner else "not opted in (raygitops.dev/upgrade-strategy: "
                            "Recreate opts in)"))
    elif probe.action == drift.FAIL:
        status.state = FAILED
        status.detail = probe.reason
    else:
        status.detail = probe.reason
    return status
