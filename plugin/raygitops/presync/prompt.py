"""Where KubeRay stands in a suspend or a resume, read from its status conditions (pure).

KubeRay 1.5 and 1.6 (with the default ``RayClusterStatusConditions`` feature gate) take a suspend
in two reconciles: the first only sets the condition ``RayClusterSuspending``, the second
deletes the pods.  A resume likewise: the first sets ``RayClusterSuspended`` false, the
second creates the pods.  Between the two it waits for its own requeue, 2 s
(``DefaultRequeueDuration``), because its watch ignores status writes (its predicates pass
generation, label and annotation changes only).  The hook watches the cluster and writes
an annotation (it renews its lease) as soon as it sees a condition change, and the next
reconcile starts at once (:meth:`raygitops.presync.cycle.Cycle._prompt_operator`).  It also
resumes only once the operator reports the suspend finished (``RayClusterSuspended``): a
resume that lands while it still says ``RayClusterSuspending`` runs its delete-all-pods step
on the resumed cluster.
"""

from __future__ import annotations

from typing import Any

SUSPENDING = "RayClusterSuspending"
SUSPENDED = "RayClusterSuspended"
RUNNING = ""  # neither condition true
PROMPT_SECONDS = 2.5  # past the operator's own requeue (2 s): prompting would gain nothing


def _conditions(live: dict[str, Any] | None) -> list[dict[str, Any]]:
    status = (live or {}).get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []


def has_suspend_conditions(live: dict[str, Any] | None) -> bool:
    """Whether the operator reports suspend conditions at all (an operator older than 1.2,
    or one with the feature gate off, suspends and resumes in one reconcile)."""
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
