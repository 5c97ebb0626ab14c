"""Read what ``raygitops status`` compares with Git (the only I/O of the status command):
per namespace, the RayClusters and the Ray pods (two LIST requests), the RayCluster CRD once
when a cluster keeps ``spec.upgradeStrategy``, and for each drifted cluster whose next sync asks
its Ray head for running jobs, that head (one GET through the service proxy, as the hook asks
it).  Read-only: nothing is written."""

from __future__ import annotations

from typing import Any

import time

from raygitops.model import objmeta
from raygitops.model import pods
from raygitops.kube.client import ApiError, Kube
from raygitops.kube.preflightlive import gather
from raygitops.kube.rayhead import ask_jobs
from raygitops.render.renderer import RenderResult
from raygitops.status.assess import ClusterStatus, asks_head, assess, crd_knows_upgrade_strategy, preflight_needs
from raygitops.model import names


def _crd_knows(kube: Kube) -> tuple[bool | None, str | None]:
    try:
        crd = kube.get_raycluster_crd()
    except ApiError as err:
        return None, f"could not read the RayCluster CRD to check spec.upgradeStrategy: {err}"
    if crd is None:
        return None, "the RayCluster CRD is not installed"
    return crd_knows_upgrade_strategy(crd), None


def statuses(kube: Kube, result: RenderResult) -> list[ClusterStatus]:
    """The status of every RayCluster the app renders, in render order."""
    crd_knows, problem = _crd_knows(kube) if any(c.plan.native for c in result.clusters) else (None, None)
    live: dict[str, tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]] = {}
    out = []
    for cluster in result.clusters:
        ns = cluster.namespace
        if ns not in live:
            clusters = {objmeta.meta(c).get("name"): c for c in kube.list_clusters(ns)}
            pod_list, _ = kube.list_pods(ns, names.CLUSTER_LABEL)
            live[ns] = (clusters, pods.by_cluster(pod_list))
        clusters, pods_by = live[ns]
        live_cluster, cluster_pods = clusters.get(cluster.name), pods_by.get(cluster.name, [])
        status = assess(cluster, live_cluster, cluster_pods, crd_knows)
        # the next sync's hook asks its head first, and preflights: so does status
        head = ask_jobs(kube, ns, cluster.plan.head_dashboard(), live_cluster, cluster_pods) \
            if asks_head(status, cluster) else None
        needs = preflight_needs(status, cluster)
        found = gather(kube, ns, needs, lambda: cluster_pods) if needs is not None else None
        if head is not None or found is not None:
            status = assess(cluster, live_cluster, cluster_pods, crd_knows, head, time.time(), found)
        if problem and cluster.plan.native:
            status.warnings.insert(0, problem)
        out.append(status)
    return out
