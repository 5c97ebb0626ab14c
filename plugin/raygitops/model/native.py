"""KubeRay's own ``upgradeStrategy: Recreate`` (1.6+), predicted (pure).

The operator (ray-operator ``shouldRecreatePodsForUpgrade``, v1.6.0 to v1.7) hashes the
stored RayCluster spec and compares it with ``ray.io/upgrade-strategy-recreate-hash`` on the
head pod; when they differ it deletes every pod at once.  Its hash
(``GenerateHashWithoutReplicasAndWorkersToDelete``) covers the whole spec after the API
server's defaulting, minus: worker ``replicas`` / ``minReplicas`` / ``maxReplicas`` /
``scaleStrategy.workersToDelete``, the ``tolerations`` and ``schedulingGates`` of every pod
template, and ``upgradeStrategy`` itself.  Quantities are hashed in their canonical form.

It never fires when the head pod carries no hash annotation (created by KubeRay 1.5, the
"arming trap") or a different ``ray.io/kuberay-version`` (an operator upgrade re-stamps the
pod instead).  docs/kuberay-1.6.md has the measured table.
"""

from __future__ import annotations

import copy
from typing import Any

from raygitops.model.canonical import normalize
from raygitops.model.convert import version_tuple
from raygitops.model.crddefaults import strip_defaults

FIRST_VERSION = "1.6"
_MUTED_WORKER_KEYS = ("replicas", "minReplicas", "maxReplicas")
_MUTED_POD_KEYS = ("tolerations", "schedulingGates")


def knows_upgrade_strategy(version: str) -> bool:
    """Whether KubeRay ``version`` (as :func:`raygitops.model.convert.kuberay_version` returns it)
    has ``spec.upgradeStrategy``."""
    return version_tuple(version)[:2] >= version_tuple(FIRST_VERSION)


def _mute_template(group: Any, mute_pod_keys: bool) -> dict[str, Any]:
    """Drop what the operator mutes from a group's pod template; return the template's
    annotations, taken out (see :func:`hash_input`)."""
    if not isinstance(group, dict) or not isinstance(group.get("template"), dict):
        return {}
    template = group["template"]
    pod_spec = template.get("spec")
    if isinstance(pod_spec, dict) and mute_pod_keys:
        for key in _MUTED_POD_KEYS:
            pod_spec.pop(key, None)
    meta = template.get("metadata")
    annotations = meta.pop("annotations", None) if isinstance(meta, dict) else None
    return dict(annotations) if isinstance(annotations, dict) else {}


def _muted(spec: Any, kuberay_version: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The spec as ``GenerateHashWithoutReplicasAndWorkersToDelete`` of that version hashes it
    (CRD defaults stripped), its templates' annotations taken out; 1.5's (RayService only)
    mutes only the scaling fields, 1.6's also the templates' tolerations and schedulingGates,
    and ``upgradeStrategy``."""
    since_1_6 = kuberay_version is None or knows_upgrade_strategy(kuberay_version)
    spec = strip_defaults(copy.deepcopy(spec)) if isinstance(spec, dict) else {}
    if since_1_6:
        spec.pop("upgradeStrategy", None)
    annotations = [_mute_template(spec.get("headGroupSpec"), since_1_6)]
    groups = spec.get("workerGroupSpecs")
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict):
            for key in _MUTED_WORKER_KEYS:
                group.pop(key, None)
            if isinstance(group.get("scaleStrategy"), dict):
                group["scaleStrategy"].pop("workersToDelete", None)
        annotations.append(_mute_template(group, since_1_6))
    return spec, annotations


def hash_input(spec: Any) -> tuple[Any, list[dict[str, Any]]]:
    """What the operator's hash sees of a RayCluster ``spec``, comparable by ``==``.

    The canonical tree (raygitops' form: quantities by value, empties dropped) ignores
    ``raygitops.dev/*`` annotations, but the operator does not: the pod templates'
    annotations are returned apart, whole, so a ``raygitops.dev/template-hash`` that render
    changed still counts as the change it is to the operator."""
    muted, annotations = _muted(spec, FIRST_VERSION)
    return normalize(muted), annotations


def service_hash_input(spec: Any, kuberay_version: str | None) -> tuple[Any, list[dict[str, Any]]]:
    """What a RayService's hash of its ``rayClusterConfig`` sees (KubeRay ``kuberay_version``:
    1.5's ``generateHashWithoutReplicasAndWorkersToDelete`` of rayservice_controller.go, 1.6's
    of utils/util.go), comparable by ``==``."""
    muted, annotations = _muted(spec, kuberay_version)
    return normalize(muted), annotations


def spec_hash_changes(base_spec: Any, head_spec: Any) -> bool:
    """Whether the operator's hash of ``head_spec`` differs from that of ``base_spec``: with
    ``upgradeStrategy: Recreate`` on an armed head pod, the operator recreates every pod."""
    return hash_input(base_spec) != hash_input(head_spec)
