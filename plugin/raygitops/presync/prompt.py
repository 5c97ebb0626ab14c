"""Where KubeRay stands in a suspend or a resume, read from its status conditions (pure), and
the prompting that follows it (:func:`prompt_operator`).

KubeRay 1.3 and later (with the ``RayClusterStatusConditions`` feature gate, on by default from
1.3: :data:`raygitops.model.operators.SUSPEND_CONDITIONS_FROM`) take a suspend in two reconciles: the first only sets the condition ``RayClusterSuspending``, the second
deletes the pods.  A resume likewise: the first sets ``RayClusterSuspended`` false, the
second creates the pods.  Between the two it waits for its own requeue, 2 s
(``DefaultRequeueDuration``), because its watch ignores status writes (its predicates pass
generation, label and annotation changes only).  The hook watches the cluster and writes
an annotation (it renews its lease) as soon as it sees a condition change, and the next
reconcile starts at once (:func:`prompt_operator`).  It also
resumes only once the operator reports the suspend finished (``RayClusterSuspended``): a
resume that lands while it still says ``RayClusterSuspending`` runs its delete-all-pods step
on the resumed cluster.
"""

from __future__ import annotations

from typing import Any

from raygitops.kube.client import ApiError, Conflict, NotFound
from raygitops.kube.watch import RELISTED, Follow
from raygitops.model import objmeta
from raygitops.presync import lease, patches
from raygitops.presync.context import Context, State

SUSPENDING = "RayClusterSuspending"
SUSPENDED = "RayClusterSuspended"
RUNNING = ""  # neither condition true
PROMPT_SECONDS = 2.5  # past the operator's own requeue (2 s): prompting would gain nothing


def _conditions(live: dict[str, Any] | None) -> list[dict[str, Any]]:
    status = (live or {}).get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []


def has_suspend_conditions(live: dict[str, Any] | None) -> bool:
    """Whether the operator reports suspend conditions at all (KubeRay 1.1 and 1.2, or one
    with the feature gate off, suspends and resumes in one reconcile: measured in
    docs/kuberay-versions.md)."""
    return any(c.get("type") in (SUSPENDING, SUSPENDED) for c in _conditions(live))


def suspend_state(live: dict[str, Any] | None) -> str:
    """``RayClusterSuspending``, ``RayClusterSuspended`` (whichever is true), or ``""``."""
    for condition in _conditions(live):
        if condition.get("type") in (SUSPENDING, SUSPENDED) and condition.get("status") == "True":
            return str(condition["type"])
    return RUNNING


# What the hook waits for, after its suspend write (the operator took it in), before its
# resume write (the operator finished the suspend), after its resume write (it took it in).
SUSPEND_TAKEN_IN = frozenset({SUSPENDING, SUSPENDED})
SUSPEND_DONE = frozenset({SUSPENDED})
RESUME_TAKEN_IN = frozenset({RUNNING})


def operator_has_work(state: str, suspend: bool) -> bool:
    """Whether the operator's next reconcile has something to do (delete or create pods, or
    write the next condition); a cluster that is suspended and meant to be has none."""
    return not (state == SUSPENDED and suspend)


# ---------------------------------------------------------------------------------------------
# Prompting (talks to the API through the cycle's context)

MAX_WATCH_RESTARTS = 3  # the RayCluster read again after a 410 or a drop, per wait


def prompt_operator(c: Context, s: State, goal: frozenset[str]) -> None:
    """Until the operator's status reaches ``goal``: each change it makes (suspending,
    suspended, neither) is answered with a lease renewal when its next reconcile has work to
    do (delete or create the pods), so that reconcile starts now rather than after its 2 s
    requeue.  At most :data:`PROMPT_SECONDS` after the last change; best effort: an API error
    only costs the operator's requeue (401 and 403 are raised: nothing else will work)."""
    if not has_suspend_conditions(s.live) or suspend_state(s.live) in goal:
        return  # no conditions: it suspends and resumes in one reconcile, nothing to prompt
    last: str | None = suspend_state(s.live)
    since = c.clock.monotonic()
    follow = Follow(lambda: _read(c, s), lambda rv, seconds: c.kube.watch_cluster(c.ns, c.plan.name, rv, seconds),
                    c.clock, objmeta.meta(s.live).get("resourceVersion", ""), MAX_WATCH_RESTARTS)
    try:
        while (left := since + PROMPT_SECONDS - c.clock.monotonic()) > 0:
            c.check_stop()
            for kind, obj in follow.window(left):
                if kind == RELISTED:
                    c.log.info(c.key, "watch", f"reading the RayCluster again: {follow.failure}")
                s.live = None if kind == "DELETED" else obj
                if s.live is None:
                    return  # deleted meanwhile: the cycle sees it gone
                lock = c.my_lock(s)
                state = suspend_state(s.live)
                if state == last:
                    continue
                last = state
                if operator_has_work(state, (s.live.get("spec") or {}).get("suspend") is True):
                    try:
                        c.patch(s, patches.lock_patch(s.live, lock.renewed(c.clock.now())))
                    except Conflict:
                        last = None  # written meanwhile (perhaps only the status): prompt again on that version
                        continue
                    except NotFound:
                        s.live = None
                        return  # deleted meanwhile: the cycle sees it gone
                    follow.resource_version = objmeta.meta(s.live).get("resourceVersion", "")
                    lease.written(c)
                    c.log.info(c.key, "prompt", "lease renewed: the operator's next reconcile starts now, "
                               "not after its 2 s requeue", operator=state or "running",
                               seconds=round(c.clock.monotonic() - since, 3))
                    since = c.clock.monotonic()  # the next step gets its own time
                if state in goal:
                    return
                if c.clock.monotonic() >= since + PROMPT_SECONDS or c.opts.stop.is_set():
                    break
    except ApiError as err:
        if err.status in (401, 403):
            raise
        c.log.info(c.key, "prompt", f"cannot prompt the operator ({err}): it acts on its own requeue")


def _read(c: Context, s: State) -> tuple[Any, str]:
    c.get(s)
    return s.live, objmeta.meta(s.live).get("resourceVersion", "") if s.live else ""
