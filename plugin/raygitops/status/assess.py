"""Git against the live cluster, per RayCluster (pure: rendered cluster + live objects in, a
:class:`ClusterStatus` out).  The verdict the hook acts on decides
(:mod:`raygitops.model.verdict`), so "drifted" here is exactly what the next sync's hook
recreates; this module only words it.

States, most serious first:

- ``failed``      — pods run the desired template, but the recreate to it ended ``Failed``
  (not ready in time): the next sync's hook waits for readiness again, and fails again
  unless the cluster is ready by then; or the live spec cannot be judged;
- ``unverified``  — the same after a recreate whose readiness was not checked
  (``--no-wait-ready``) or was interrupted (``Unverified``);
- ``in-progress`` — a recreate cycle holds the cluster (lock: holder, phase, since);
- ``drifted``     — opted in, and pods run an old template: the next sync recreates it (or
  replaces the drifted worker groups, under ReplaceGroups);
- ``native``      — left to KubeRay's native Recreate, and the next sync changes the
  operator's hash (it then recreates after the sync), or pods run an old template;
- ``stale``       — pods run an old template and nothing will recreate them (not opted in,
  or owned by a RayJob/RayService);
- ``suspended``   — suspended although Git does not ask for it;
- ``absent``      — not in the cluster: the next sync creates it;
- ``in-sync``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raygitops.model import jobs, preflight
from raygitops.model import lock as locks
from raygitops.model import names, objmeta, pods, verdict
from raygitops.render.renderer import RenderedCluster
from raygitops.sources.files import deep_merge

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
    running_jobs: dict[str, Any] | None = None  # drifted: what its Ray head said of running jobs (model/jobs.py)
    # drifted: the live preflight of the next sync's cycle (model/preflight.py): what it checked,
    # what failed, and whether the sync would go on
    preflight: dict[str, Any] | None = None
    replaced_groups: tuple[str, ...] | None = None  # the worker groups the next sync replaces (not in the JSON)

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
            **({"runningJobs": self.running_jobs} if self.running_jobs is not None else {}),
            **({"preflight": self.preflight} if self.preflight is not None else {}),
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


def _head_version(pod_list: list[dict[str, Any]]) -> str | None:
    for pod in pod_list:
        if pods.group_key(pod) == "head" and not pods.terminating(pod):
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


def asks_head(status: ClusterStatus, cluster: RenderedCluster) -> bool:
    """Whether the next sync's hook asks this cluster's head for running jobs (it takes pods
    down, and its policy is not proceed): then status asks it too, and says what it said."""
    return status.state == DRIFTED and cluster.plan.asks is not None


def preflight_needs(status: ClusterStatus, cluster: RenderedCluster) -> preflight.Needs | None:
    """What the next sync's cycle on this cluster preflights (status looks for it too), or
    None when it runs none."""
    if status.state != DRIFTED or not cluster.plan.preflights:
        return None
    return cluster.plan.preflight_needs(status.replaced_groups)


def assess(cluster: RenderedCluster, live: dict[str, Any] | None, pod_list: list[dict[str, Any]],
           crd_knows: bool | None, head: jobs.HeadJobs | None = None, now: float = 0.0,
           found: preflight.Live | None = None) -> ClusterStatus:
    """The status of one rendered RayCluster against its live object and pods, (``head``)
    what its Ray head said of running jobs at ``now`` (seconds since the epoch), and
    (``found``) what its preflight found live."""
    plan = cluster.plan
    status = ClusterStatus(cluster.namespace, cluster.name, IN_SYNC, "", plan.strategy, plan.native)
    if live is None:
        status.state, status.detail = ABSENT, "not in the cluster: the next sync creates it"
        return status
    seen = verdict.observe(live, pod_list)
    v = verdict.judge(cluster.namespace, plan, seen)
    status.lock, status.last_recreate = _lock(live), verdict.last_recreate(seen.annotations)
    status.operator_version = _head_version(pod_list)
    status.pods = v.pods.min
    status.groups = sorted(v.drift)
    status.warnings = verdict.native_warnings(plan, v, live, pod_list, crd_knows)
    if v.action == verdict.REPLACE and not v.locked:
        status.replace = verdict.replacement(plan, v.drift)
        status.replaced_groups = v.replaced_groups()
    status.state, status.detail = _state(cluster, v, seen, status.replace)
    if head is not None and asks_head(status, cluster):
        status.running_jobs = {"policy": cluster.plan.jobs_policy.action, **head.to_json(now)}
        status.detail += "; " + jobs.outlook(cluster.plan.jobs_policy, head, now)
    needs = preflight_needs(status, cluster)
    if needs is not None and found is not None:
        failures = preflight.check(needs, found)
        stopping = preflight.blocking(failures, cluster.plan.preflight_policy)
        status.preflight = {"checks": needs.describe(), "failures": [f.line() for f in failures],
                            "unknown": [f.unknown for f in failures], "wouldFail": bool(stopping)}
        status.detail += ("; preflight now: " + (f"the sync would fail, not touching it: {preflight.summary(stopping)}"
                                                 if stopping else "passes" + (f" ({preflight.summary(failures)}: "
                                                                              "policy proceed)" if failures else "")))
    return status


def _state(cluster: RenderedCluster, v: verdict.Verdict, seen: verdict.Observed,
           replacement: dict[str, Any] | None) -> tuple[str, str]:
    """The state and its detail, from the verdict (most serious first)."""
    plan = cluster.plan
    old = ", ".join(sorted(v.drift))
    if v.locked:
        lock = v.lock
        return IN_PROGRESS, (f"a recreate cycle holds it: phase {lock.phase}, holder {lock.holder}, "
                             f"since {locks.rfc3339(lock.started_at)}" if lock is not None
                             else "carries an unreadable raygitops lock: the next sync's hook resolves it")
    if seen.spec.get("suspend") is True and not plan.suspend:
        return SUSPENDED, ("suspended, but Git does not ask for it: the next sync's hook resumes it with the "
                           "desired spec" if v.outside_git else "suspended, but Git does not ask for it")
    if v.action == verdict.VERIFY:
        outcome = verdict.unverified_recreate(seen.annotations, plan)
        return (FAILED if outcome == locks.FAILED else UNVERIFIED,
                f"pods run the desired template, but the recreate to it ended {outcome} (not seen "
                "ready): the next sync's hook waits for readiness again")
    if plan.suspend:
        return IN_SYNC, "suspended, as Git asks"
    if replacement is not None:
        return DRIFTED, f"{old} run an old template: the next sync {verdict.replacement_words(replacement)}"
    if v.action == verdict.RECREATE:
        return DRIFTED, f"{old} run an old template: the next sync recreates the cluster ({v.pods.min} pods)"
    if verdict.native_recreates(plan, v, seen, overlay(seen.spec, cluster.spec)):
        return NATIVE, ("the next sync changes KubeRay's own spec hash: with native Recreate the operator "
                        f"replaces every pod after the sync ({v.pods.min} pods)")
    if v.drift and plan.native:
        return NATIVE, (f"{old} run an old template although the spec is applied: KubeRay's native "
                        "Recreate did not replace them (see the warnings)")
    if v.drift:
        return STALE, (f"{old} run an old template and nothing will recreate them: "
                       + (f"owned by {v.owner}" if v.owner else "not opted in (raygitops.dev/upgrade-strategy: "
                          "Recreate opts in)"))
    if v.action == verdict.FAIL or v.cannot_hash:
        return FAILED, v.reason if v.action == verdict.FAIL else f"cannot hash the live spec: {v.cannot_hash}"
    return IN_SYNC, v.reason
