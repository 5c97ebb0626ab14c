"""Which app a RayCluster belongs to: annotation ``raygitops.dev/claimed-by`` on it.

A hook whose plan names its app (``ARGOCD_APP_NAME`` or ``--app-name`` at render) claims
every live cluster of its plan that it acts on before it decides anything: it writes its app
into the annotation with the resourceVersion it read (a precondition: 409 when anyone wrote
in between; then it reads again and looks again).  A cluster another app claimed fails
closed, naming both apps: two Applications render it, and each would recreate it to its
own spec.  Of two hooks that claim one cluster at once exactly one write succeeds; the
other reads the winner's claim and fails, so both can never pass.

A claim stays while the cluster lives.  A cluster moved from one app to another keeps its
old claim until someone removes it (the failure says how): the hook cannot tell a moved
cluster from one both apps still render.  A hook without an app (the fixed hook names)
neither claims nor checks.
"""

from __future__ import annotations

from typing import Any

from raygitops.kube import retry
from raygitops.kube.client import Conflict
from raygitops.model import objmeta, strategy
from raygitops.model.names import CLAIM_ANNOTATION
from raygitops.model.plan import ClusterPlan, Plan


def claimed_by(live: dict[str, Any]) -> str | None:
    value = objmeta.annotations(live).get(CLAIM_ANNOTATION)
    return value if isinstance(value, str) and value else None


def conflict(app: str, namespace: str, name: str, other: str) -> str:
    """The failure of a cluster ``other`` claimed, for the hook of ``app`` (pure)."""
    return (f"RayCluster {namespace}/{name} is claimed by app {other}, and the plan of app {app} lists it too: "
            f"two apps render it, and each would recreate it to its own spec; refusing. Render it in one app "
            f"only (if it moved to {app} for good: kubectl annotate raycluster -n {namespace} {name} "
            f"{CLAIM_ANNOTATION}-)")


def acts_on(entry: ClusterPlan) -> bool:
    """The clusters a hook claims: the ones it may write (opted in, or KubeRay's Recreate)."""
    return strategy.opted_in(entry.strategy) or entry.native


def claim(kube: Any, plan: Plan, live: dict[str, dict[str, Any]], write: bool = True) -> dict[str, str]:
    """Claim ``plan``'s live clusters for its app; ``live`` (by name, from the namespace's
    LIST) gets each cluster as written.  The failures, by cluster name.  Without ``write``
    (a dry run) an unclaimed cluster stays so."""
    app = plan.app
    if app is None:
        return {}
    failures = {}
    for entry in plan.clusters:
        if entry.name not in live or not acts_on(entry):
            continue  # a cluster not there yet is claimed at the next sync

        def look_and_claim(name: str = entry.name) -> str | None:
            obj = live.get(name)
            if obj is None:  # deleted meanwhile: nothing to claim
                return None
            other = claimed_by(obj)
            if other == app:
                return None
            if other is not None:
                return conflict(app, plan.namespace or "", name, other)
            if not write:
                return None
            try:
                live[name] = kube.patch_cluster(plan.namespace, name, {"metadata": {
                    "resourceVersion": objmeta.meta(obj).get("resourceVersion"),
                    "annotations": {CLAIM_ANNOTATION: app}}})
            except Conflict:
                fresh = kube.get_cluster(plan.namespace, name)
                if fresh is None:
                    live.pop(name, None)
                else:
                    live[name] = fresh
                raise
            return None

        failure = retry.on_conflict(look_and_claim, f"claiming RayCluster {plan.namespace}/{entry.name}")
        if failure is not None:
            failures[entry.name] = failure
    return failures
