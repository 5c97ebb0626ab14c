"""Kubernetes Events on the RayCluster (core v1; the Role grants ``create`` only).

Reasons: RecreateStarted, WaitingForJobs, PodsDrained, Resumed, RecreateCompleted (Normal),
RecreateFailed, RunningJobs, PreflightFailed (Warning).  An Event that cannot be written is logged and otherwise ignored: Events are for
people, the state lives in the annotations.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

COMPONENT = "raygitops-presync"
STARTED = "RecreateStarted"
DRAINED = "PodsDrained"
RESUMED = "Resumed"
COMPLETED = "RecreateCompleted"
FAILED = "RecreateFailed"
WAITING_FOR_JOBS = "WaitingForJobs"  # Ray jobs run: the cycle waits before it takes pods down
JOBS_RUNNING = "RunningJobs"  # ... and does not start (policy fail, or the wait is up)
PREFLIGHT_FAILED = "PreflightFailed"  # the new pods could not come up: not started, not touched
WARNING_REASONS = frozenset({FAILED, JOBS_RUNNING, PREFLIGHT_FAILED})


def event_body(live: dict[str, Any], reason: str, message: str, now: float | None = None) -> dict[str, Any]:
    """The Event object for ``reason`` on the RayCluster ``live`` (pure)."""
    meta = live.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now if now is not None else time.time()))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": live.get("apiVersion", "ray.io/v1"),
            "kind": "RayCluster",
            "name": name,
            "namespace": namespace,
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if reason in WARNING_REASONS else "Normal",
        "source": {"component": COMPONENT},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
