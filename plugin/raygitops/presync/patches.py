"""The patches of the recreate cycle (pure): JSON merge patches carrying the
resourceVersion they were computed from, so the API server rejects them (409) when the
RayCluster changed in between.

The resume patch is the heart of the cycle: ONE write that sets the desired spec (every
group's template stamped with its desired hash) AND ``spec.suspend: false``, so the operator
never sees the old templates unsuspended.  It writes the whole spec the sync will apply, so
that KubeRay's own Recreate (1.6, whose hash covers the whole spec and which stamps it on the
new head pod) finds nothing of its own to recreate for once the sync applied it: one commit,
one recreate.  It keeps from the live object only what the sync's apply does not decide or
cannot change: the scaling fields of existing worker groups (``replicas``, ``minReplicas``,
``maxReplicas``, ``scaleStrategy``: the autoscaler owns them, and KubeRay's hash leaves them
out) and ``managedBy`` (immutable).  Worker groups the plan adds are added (the CRD defaults
their scaling fields until Argo CD applies the manifest), groups it drops are dropped.  The
RayCluster annotations the pod builder reads (``ray.io/ft-enabled``, ...) are written in the
same patch.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from raygitops.model import podrules
from raygitops.model.hashing import SCALING, stamp_group
from raygitops.model.plan import ClusterPlan
from raygitops.model.lock import Lock
from raygitops.model.names import LAST_ANNOTATION, LOCK_ANNOTATION, OUTCOME_ANNOTATION
from raygitops.model.objmeta import annotations


def merge_diff(old: Any, new: Any) -> Any:
    """The RFC 7386 merge patch turning ``old`` into ``new`` (lists are replaced whole,
    removed keys become null)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return copy.deepcopy(new)
    out: dict[str, Any] = {}
    for key in old:
        if key not in new:
            out[key] = None
    for key, value in new.items():
        if key in old and old[key] == value:
            continue
        if isinstance(value, dict) and isinstance(old.get(key), dict):
            out[key] = merge_diff(old[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _keep(target: dict[str, Any], live: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        target.pop(key, None)
        if key in live:
            target[key] = copy.deepcopy(live[key])


def resume_spec(live_spec: dict[str, Any], plan: ClusterPlan) -> dict[str, Any]:
    """The full spec the resume patch writes."""
    desired, hashes = plan.spec, plan.hashes
    spec = copy.deepcopy(desired.cluster)
    _keep(spec, live_spec, ("managedBy",))

    head = copy.deepcopy(desired.head)
    stamp_group(head, hashes.head)
    spec["headGroupSpec"] = head

    live_groups = {
        g.get("groupName"): g for g in live_spec.get("workerGroupSpecs") or [] if isinstance(g, dict)
    }
    order = [n for n in live_groups if n in desired.workers]
    order += [n for n in desired.workers if n not in live_groups]
    workers = []
    for name in order:
        group = {"groupName": name, **copy.deepcopy(desired.workers[name])}
        if name in live_groups:
            _keep(group, live_groups[name], SCALING)
        stamp_group(group, hashes.workers[name])
        workers.append(group)
    spec["workerGroupSpecs"] = workers
    spec["suspend"] = False
    return spec


def _rv(live: dict[str, Any]) -> str:
    return (live.get("metadata") or {}).get("resourceVersion", "")


def lock_patch(live: dict[str, Any], lock: Lock) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": _rv(live), "annotations": {LOCK_ANNOTATION: lock.to_annotation()}}}


def suspend_patch(live: dict[str, Any], lock: Lock) -> dict[str, Any]:
    patch = lock_patch(live, lock)
    patch["spec"] = {"suspend": True}
    return patch


def resume_patch(live: dict[str, Any], plan: ClusterPlan, lock: Lock) -> dict[str, Any]:
    """Desired spec + ``suspend: false`` + lock phase ``resumed`` (+ the annotations the pod
    builder reads), in one write."""
    live_spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
    patch = lock_patch(live, lock)
    live_read = podrules.pod_annotations(annotations(live))
    patch["metadata"]["annotations"].update(merge_diff(live_read, plan.pod_annotations))
    spec_patch = merge_diff(live_spec, resume_spec(live_spec, plan))
    spec_patch["suspend"] = False  # always explicit, even when already false
    patch["spec"] = spec_patch
    return patch


def wake_patch(live: dict[str, Any], lock: Lock | None) -> dict[str, Any]:
    """``spec.suspend: false`` and nothing else of the spec: the cluster comes back as it is
    (its pods from the live templates), with the lock at ``lock`` or removed (None)."""
    value = lock.to_annotation() if lock is not None else None
    return {"metadata": {"resourceVersion": _rv(live), "annotations": {LOCK_ANNOTATION: value}},
            "spec": {"suspend": False}}


def unlock_patch(live: dict[str, Any], last: str | None) -> dict[str, Any]:
    """Drop the lock; with ``last`` (a :func:`~raygitops.model.lock.last_recreate` record)
    also write the record and its outcome."""
    annotations: dict[str, Any] = {LOCK_ANNOTATION: None}
    if last is not None:
        annotations.update(record_annotations(last))
    return {"metadata": {"resourceVersion": _rv(live), "annotations": annotations}}


def record_annotations(last: str) -> dict[str, str]:
    """The last-recreate record and, beside it, its outcome as a plain string."""
    return {LAST_ANNOTATION: last, OUTCOME_ANNOTATION: str(json.loads(last).get("outcome"))}
