"""The upgrade from fixed hook names: a hook with per-app names removes the hook objects of
its own app that raygitops made before it had them (``raygitops-presync`` ServiceAccount,
Role, RoleBinding and Job, ``raygitops-plan`` ConfigMap, ``raygitops-plan-secrets`` Secret).

Argo CD never prunes a hook object, not even one that left the rendered manifests
(gitops-engine ``getSyncTasks`` skips every live hook), and ``BeforeHookCreation`` deletes
only an object of the same name: without this they would stay, orphaned, forever.  An object
is this app's when Argo CD's tracking says so (label ``app.kubernetes.io/instance`` or
annotation ``argocd.argoproj.io/tracking-id``): another app of the namespace still on the
fixed names keeps its own.  The old Secret is deleted, never read (it may carry the content
of another app's Secrets), when the old ConfigMap the same render made is this app's.  That ConfigMap is read first and
deleted last: without it (the upgrade done, or never needed) the step costs one GET.
Deleting them deletes no RayCluster pod: the old Job's own pod goes with it.  Best effort:
a failure is a warning, the next sync tries again.
"""

from __future__ import annotations

from typing import Any

from raygitops.kube.client import ApiError
from raygitops.model import objmeta
from raygitops.model.hooknames import LEGACY, LEGACY_OBJECTS, hook_names
from raygitops.model.plan import Plan
from raygitops.presync.logs import RUN, Log

INSTANCE_LABEL = "app.kubernetes.io/instance"  # Argo CD's label tracking
TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"  # its annotation tracking: "<app>:<group>/<kind>:<ns>/<name>"
SECRET = ("", "secrets")
EVIDENCE = ("", "configmaps")  # whose the Secret is: the ConfigMap's owner's


def tracked_by(obj: dict[str, Any], app: str) -> bool:
    """Whether Argo CD tracks ``obj`` as a resource of ``app`` (pure)."""
    tracking = objmeta.annotations(obj).get(TRACKING_ANNOTATION)
    return objmeta.labels(obj).get(INSTANCE_LABEL) == app or (
        isinstance(tracking, str) and tracking.startswith(f"{app}:"))


def remove(kube: Any, plan: Plan, log: Log, dry_run: bool = False) -> list[str]:
    """Delete the fixed-name hook objects of ``plan``'s app in its namespace; what was (or,
    dry, would be) deleted, as ``resource/name``."""
    if plan.app is None or hook_names(plan.app).legacy or plan.namespace is None:
        return []
    ns, removed = plan.namespace, []
    try:
        evidence = kube.get_object(*EVIDENCE, ns, LEGACY.plan)
        if evidence is None or not tracked_by(evidence, plan.app):
            return []  # removed already (the ConfigMap goes last), never there, or another app's
        for group, resource, name in LEGACY_OBJECTS:
            if (group, resource) == SECRET:
                obj, ours = None, evidence is not None and tracked_by(evidence, plan.app)
            else:
                obj = evidence if (group, resource) == EVIDENCE else kube.get_object(group, resource, ns, name)
                ours = obj is not None and tracked_by(obj, plan.app)
            if not ours:
                continue
            uid = objmeta.meta(obj).get("uid") if obj is not None else None
            if dry_run or kube.delete_object(group, resource, ns, name, uid):
                removed.append(f"{resource}/{name}")
    except ApiError as err:
        log.warn(RUN, "upgrade", f"could not remove the fixed-name hook objects of app {plan.app} in namespace "
                 f"{ns} (the next sync tries again): {err}")
    if removed:
        log.info(RUN, "upgrade", f"{'would remove' if dry_run else 'removed'} the fixed-name hook objects of app "
                 f"{plan.app} in namespace {ns}: {', '.join(removed)}")
    return removed
