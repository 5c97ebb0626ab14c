"""Strip the values the API server fills in from the RayCluster CRD schema (pure).

The API server applies the CRD's ``default:`` entries to every RayCluster it stores: a
container port gets ``protocol: TCP``, a worker group ``numOfHosts: 1``, a ``secretKeyRef``
``name: ""``...  The live spec therefore differs from the manifest that was applied even
when nothing changed.  Before the hook hashes a live spec (the fallback when pods carry no
h1 hash) it strips those known defaults from BOTH sides, so that a defaulted field never
looks like drift (upgrading raygitops must never recreate a pod).

The table is the union of the ``default:`` entries of the KubeRay v1.1.1 to v1.7.0 RayCluster
CRDs (``config/crd/bases/ray.io_rayclusters.yaml``), written relative to where they apply: an
operator upgrade installs a CRD with more of them (v1.7.0 defaults a worker group's
``priority``), and the live spec gains them at once.
``tests/unit/test_crddefaults.py`` checks it against each CRD file.  A value is dropped
only where it equals its default: an explicit non-default value is kept.
"""

from __future__ import annotations

import copy
from typing import Any

# Paths: keys, "[]" = every item of a list.
Path = tuple[str, ...]

CONTAINER_DEFAULTS: tuple[tuple[Path, Any], ...] = (
    (("envFrom", "[]", "configMapRef", "name"), ""),
    (("envFrom", "[]", "secretRef", "name"), ""),
    (("env", "[]", "valueFrom", "configMapKeyRef", "name"), ""),
    (("env", "[]", "valueFrom", "fileKeyRef", "optional"), False),
    (("env", "[]", "valueFrom", "secretKeyRef", "name"), ""),
    (("livenessProbe", "grpc", "service"), ""),
    (("readinessProbe", "grpc", "service"), ""),
    (("startupProbe", "grpc", "service"), ""),
    (("ports", "[]", "protocol"), "TCP"),
)
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")

POD_DEFAULTS: tuple[tuple[Path, Any], ...] = (
    (("imagePullSecrets", "[]", "name"), ""),
    (("volumes", "[]", "azureDisk", "fsType"), "ext4"),
    (("volumes", "[]", "azureDisk", "readOnly"), False),
    (("volumes", "[]", "cephfs", "secretRef", "name"), ""),
    (("volumes", "[]", "cinder", "secretRef", "name"), ""),
    (("volumes", "[]", "configMap", "name"), ""),
    (("volumes", "[]", "csi", "nodePublishSecretRef", "name"), ""),
    (("volumes", "[]", "flexVolume", "secretRef", "name"), ""),
    (("volumes", "[]", "iscsi", "iscsiInterface"), "default"),
    (("volumes", "[]", "iscsi", "secretRef", "name"), ""),
    (("volumes", "[]", "projected", "sources", "[]", "configMap", "name"), ""),
    (("volumes", "[]", "projected", "sources", "[]", "secret", "name"), ""),
    (("volumes", "[]", "rbd", "keyring"), "/etc/ceph/keyring"),
    (("volumes", "[]", "rbd", "pool"), "rbd"),
    (("volumes", "[]", "rbd", "secretRef", "name"), ""),
    (("volumes", "[]", "rbd", "user"), "admin"),
    (("volumes", "[]", "scaleIO", "fsType"), "xfs"),
    (("volumes", "[]", "scaleIO", "secretRef", "name"), ""),
    (("volumes", "[]", "scaleIO", "storageMode"), "ThinProvisioned"),
    (("volumes", "[]", "storageos", "secretRef", "name"), ""),
)

# Relative to a group (headGroupSpec or a workerGroupSpecs item), beyond its pod template.
GROUP_DEFAULTS: tuple[tuple[Path, Any], ...] = (
    (("numOfHosts",), 1),
    (("replicas",), 0),
    (("minReplicas",), 0),
    (("maxReplicas",), 2147483647),
    (("headService", "spec", "ports", "[]", "protocol"), "TCP"),
    (("headService", "status", "loadBalancer", "ingress", "[]", "ports", "[]", "protocol"), "TCP"),  # <= 1.2
    (("priority",), 0),  # KubeRay 1.7, worker groups
)

# Relative to the RayCluster spec, outside the groups.
CLUSTER_DEFAULTS: tuple[tuple[Path, Any], ...] = (
    *((("autoscalerOptions", *p), d) for p, d in CONTAINER_DEFAULTS if p[0] in ("env", "envFrom")),
    # KubeRay 1.7
    *((("historyServerOptions", "collectorOptions", *p), d) for p, d in CONTAINER_DEFAULTS if p[0] == "env"),
    (("networkPolicy", "mode"), "DenyAll"),
    *(
        (("gcsFaultToleranceOptions", field, "valueFrom", *ref), d)
        for field in ("redisPassword", "redisUsername")
        for ref, d in (
            (("configMapKeyRef", "name"), ""),
            (("fileKeyRef", "optional"), False),
            (("secretKeyRef", "name"), ""),
        )
    ),
)


def _strip(node: Any, path: Path, default: Any) -> None:
    """Drop the value at ``path`` under ``node`` wherever it equals ``default`` (in place)."""
    if not path:
        return
    head, rest = path[0], path[1:]
    if head == "[]":
        if isinstance(node, list):
            for item in node:
                _strip(item, rest, default)
        return
    if not isinstance(node, dict) or head not in node:
        return
    if not rest:
        value = node[head]
        # bool is an int in Python: compare type too, so `1` never strips `True`.
        if type(value) is type(default) and value == default:
            del node[head]
        return
    _strip(node[head], rest, default)


def _strip_all(node: Any, table: tuple[tuple[Path, Any], ...]) -> None:
    for path, default in table:
        _strip(node, path, default)


def strip_pod_spec(pod_spec: Any) -> None:
    """Strip defaults from a pod spec (``template.spec``), in place."""
    if not isinstance(pod_spec, dict):
        return
    _strip_all(pod_spec, POD_DEFAULTS)
    for key in CONTAINER_LISTS:
        containers = pod_spec.get(key)
        if isinstance(containers, list):
            for container in containers:
                _strip_all(container, CONTAINER_DEFAULTS)


def strip_group(group: Any) -> None:
    """Strip defaults from a head or worker group, in place."""
    if not isinstance(group, dict):
        return
    _strip_all(group, GROUP_DEFAULTS)
    template = group.get("template")
    if isinstance(template, dict):
        strip_pod_spec(template.get("spec"))


def strip_defaults(spec: Any) -> Any:
    """A copy of a RayCluster ``spec`` without the values the CRD schema defaults."""
    spec = copy.deepcopy(spec)
    if not isinstance(spec, dict):
        return spec
    _strip_all(spec, CLUSTER_DEFAULTS)
    strip_group(spec.get("headGroupSpec"))
    workers = spec.get("workerGroupSpecs")
    if isinstance(workers, list):
        for group in workers:
            strip_group(group)
    return spec


def all_default_paths() -> list[tuple[str, Any]]:
    """Every (absolute dotted path, default) the table covers, in the notation of a CRD walk
    (``.spec.headGroupSpec.template.spec.containers[].ports[].protocol``); for the test that
    compares the table with the CRD."""
    out: list[tuple[str, Any]] = []

    def dotted(prefix: str, path: Path) -> str:
        text = prefix
        for part in path:
            text += "[]" if part == "[]" else "." + part
        return text

    for p, d in CLUSTER_DEFAULTS:
        out.append((dotted(".spec", p), d))
    for group in (".spec.headGroupSpec", ".spec.workerGroupSpecs[]"):
        for p, d in GROUP_DEFAULTS:
            out.append((dotted(group, p), d))
        pod = group + ".template.spec"
        for p, d in POD_DEFAULTS:
            out.append((dotted(pod, p), d))
        for key in CONTAINER_LISTS:
            for p, d in CONTAINER_DEFAULTS:
                out.append((dotted(f"{pod}.{key}[]", p), d))
    return out
