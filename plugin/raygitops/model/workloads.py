"""What KubeRay does with a change to a RayService or a RayJob (pure), per operator version.

raygitops never recreates the clusters these own (the hook skips them); the preview says what
KubeRay itself does instead, read in ray-operator's ``rayservice_controller.go``
(``reconcileRayCluster``, ``shouldUpdateCluster``, ``shouldPrepareNewCluster``,
``isClusterSpecHashEqual``, ``isZeroDowntimeUpgradeEnabled``; 1.5.0 and 1.6.2) and
``rayjob_controller.go``:

- a RayService compares its hash of ``rayClusterConfig`` (worker ``replicas``, ``minReplicas``,
  ``maxReplicas``, ``workersToDelete`` left out; from 1.6 also the templates' ``tolerations``
  and ``schedulingGates``, and ``upgradeStrategy``: :func:`raygitops.model.native.service_hash_input`)
  with the one it made the running cluster from. Equal: the running cluster is left as it is
  (a ``serveConfigV2`` change is sent to its Serve applications; a change of tolerations or
  schedulingGates alone, which 1.6 leaves out, never reaches the pods). Equal once the worker
  groups appended at the end are left out: they are added to the running cluster. Else, with
  ``upgradeStrategy.type`` ``NewCluster`` or unset (zero-downtime upgrade, unless the
  operator runs with ``ENABLE_ZERO_DOWNTIME=false``), it builds a **new cluster** from the new
  spec, moves the traffic to it once it is ready and deletes the old one; with ``None`` (or
  ``NewClusterWithIncrementalUpgrade`` without its feature gate, off by default) nothing: the
  running pods keep the old spec. From 1.6 a ``suspend`` toggle is applied to the running
  cluster first.
- a RayJob builds its cluster when it starts and never updates it: a change reaches the
  cluster of its next run (the RayJob created again).

``tests/e2e/test_workloads_live.py`` checks the RayService answers on the real operators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raygitops.model import native, operators
from raygitops.model.canonical import normalize

NEW_CLUSTER = "new-cluster"
IN_PLACE = "in-place"
STALE = "stale"
NEXT_CLUSTER = "next-cluster"
UNCHANGED = "unchanged"
ZERO_DOWNTIME_TYPES = ("NewCluster",)  # NewClusterWithIncrementalUpgrade needs a gate that is off by default


@dataclass(frozen=True)
class Prediction:
    klass: str
    reason: str


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return _mapping(obj.get("spec"))


def _worker_groups(cluster_spec: dict[str, Any]) -> list[Any]:
    groups = cluster_spec.get("workerGroupSpecs")
    return groups if isinstance(groups, list) else []


def _first_groups(cluster_spec: dict[str, Any], count: int) -> dict[str, Any]:
    out = dict(cluster_spec)
    out["workerGroupSpecs"] = _worker_groups(cluster_spec)[:count]
    return out


def _groups(cluster_spec: dict[str, Any]) -> list[str]:
    return [str(g.get("groupName")) for g in _worker_groups(cluster_spec) if isinstance(g, dict)]


def rayservice(base: dict[str, Any], head: dict[str, Any], kuberay_version: str | None) -> Prediction:
    """What KubeRay ``kuberay_version`` (None: the newest known) does with a running RayService
    ``base`` (its cluster made from base's spec) once ``head`` is applied."""
    old, new = _mapping(_spec(base).get("rayClusterConfig")), _mapping(_spec(head).get("rayClusterConfig"))
    version = kuberay_version or operators.SERVICE_SUSPEND_IN_PLACE_FROM  # the newest known answers as 1.6
    if operators.operator(version).service_suspend_in_place and \
            (old.get("suspend") is True) != (new.get("suspend") is True):
        return Prediction(IN_PLACE, f"spec.rayClusterConfig.suspend {'set' if new.get('suspend') is True else 'cleared'}: "
                                    "KubeRay applies it to the running cluster in place")
    if native.service_hash_input(old, version) == native.service_hash_input(new, version):
        if normalize(_spec(base).get("serveConfigV2")) != normalize(_spec(head).get("serveConfigV2")):
            return Prediction(IN_PLACE, "serveConfigV2 changed: KubeRay sends the new Serve config to the running "
                                        "cluster; no pod is replaced")
        if native.service_hash_input(old, "1.5") != native.service_hash_input(new, "1.5"):
            return Prediction(STALE, "only the pod templates' tolerations or schedulingGates changed, which KubeRay "
                                     f"{version} leaves out of its RayService hash (external controllers such as "
                                     "Kueue set them): it neither updates nor replaces the running cluster, whose "
                                     "pods keep the old ones")
        if normalize(old) != normalize(new):
            return Prediction(IN_PLACE, "only worker replicas, min/maxReplicas or workersToDelete changed, which "
                                        "KubeRay leaves out of its RayService hash (the autoscaler's): it leaves the "
                                        "running cluster as it is; no pod is replaced")
        return Prediction(IN_PLACE if base != head else UNCHANGED, "the cluster spec is unchanged: no pod is replaced")
    added = _groups(new)[len(_groups(old)):]
    if added and native.service_hash_input(old, version) == native.service_hash_input(
            _first_groups(new, len(_groups(old))), version):
        return Prediction(IN_PLACE, f"worker group {', '.join(added)} appended: KubeRay adds it to the running "
                                    "cluster; no pod is replaced")
    strategy = _mapping(_spec(head).get("upgradeStrategy")).get("type")
    if strategy is None or strategy in ZERO_DOWNTIME_TYPES:
        return Prediction(NEW_CLUSTER, "the cluster spec changed: KubeRay builds a new RayCluster from it, moves the "
                                       "traffic to it once it is ready and then deletes the old one (zero-downtime "
                                       "upgrade" + ("" if strategy else ", the default") + ")")
    return Prediction(STALE, f"upgradeStrategy.type {strategy}: KubeRay neither updates nor replaces the running "
                             "cluster; its pods keep the old spec")


def rayjob(base: dict[str, Any], head: dict[str, Any]) -> Prediction:
    """What KubeRay does with a RayJob whose manifest goes from ``base`` to ``head``."""
    if normalize(_spec(base)) == normalize(_spec(head)):
        return Prediction(IN_PLACE if base != head else UNCHANGED, "the job's spec is unchanged")
    what = "rayClusterSpec" if normalize(_spec(base).get("rayClusterSpec")) != normalize(
        _spec(head).get("rayClusterSpec")) else "the job's spec"
    return Prediction(NEXT_CLUSTER, f"{what} changed: KubeRay builds a RayJob's cluster when the job starts and never "
                                    "updates it; the change reaches the cluster of its next run (the RayJob created "
                                    "again), not the running one")
