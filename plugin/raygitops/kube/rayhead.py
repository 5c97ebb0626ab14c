"""Asking a RayCluster's head which Ray jobs run (the hook before a cycle, ``raygitops status``
for its report): what the pods tell first, then Ray's Jobs REST API through the API server's
service proxy (:meth:`raygitops.kube.client.Kube.get_through_service`). Never raises: an
answer that cannot be had is :data:`raygitops.model.jobs.UNKNOWN`, for the policy to decide.
"""

from __future__ import annotations

from typing import Any

from raygitops.kube.client import ApiError
from raygitops.model import jobs


def ask_jobs(kube: Any, namespace: str, dashboard: jobs.Dashboard, live: dict[str, Any],
             pod_list: list[dict[str, Any]]) -> jobs.HeadJobs:
    """What the head of ``live`` (with its pods ``pod_list``) says of its running jobs: no
    head pod or one not Ready (not asked), its answer, or unknown (and why)."""
    seen = jobs.head_state(live, pod_list)
    if seen is not None:
        return seen
    if dashboard.port is None:
        return jobs.no_dashboard(dashboard)
    try:
        return jobs.answered(kube.get_through_service(namespace, dashboard.proxy_name, jobs.JOBS_PATH))
    except (ApiError, ValueError) as err:
        return jobs.unknown(f"asking {dashboard.proxy_name} failed: {err}")
