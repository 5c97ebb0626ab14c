"""The recreate lock and its lease (pure): annotation ``raygitops.dev/recreate``.

Value: compact JSON ``{"target", "phase", "holder", "renewedAt", "startedAt",
"leaseSeconds", "from"}``; ``target`` and ``from`` are hash sets
``{"head": "h1-…", "workers": {"<group>": "h1-…"}}``.  Every write of the lock carries the
resourceVersion the writer read (optimistic concurrency): two hooks can never both believe
they hold it.  A holder renews ``renewedAt`` while it works; a lock another hook has seen
unchanged for longer than its lease belongs to a dead holder and is taken over.

Phases of the full cycle (Recreate): ``locked`` (nothing of the desired spec written) →
``suspended`` (spec.suspend true, pods draining) → ``resumed`` (desired spec written, suspend
false) → lock removed; a failed cycle resumed as it was goes back to ``locked`` before its
unlock (a takeover then makes the cycle again).  ReplaceGroups: ``locked`` (nothing changed
yet, while the jobs step asks the Ray head) → ``replacing`` (desired spec written with the
lock, in one write; the changed groups' stale pods being deleted in batches) → lock removed.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

LOCKED, SUSPENDED, RESUMED, REPLACING = "locked", "suspended", "resumed", "replacing"
# Outcomes in the last-recreate record: only COMPLETED means "seen ready"; a later run waits
# for readiness again after the others (docs/presync.md, "A failed recreate stays failed").
COMPLETED, UNVERIFIED, FAILED = "Completed", "Unverified", "Failed"
PHASES = (LOCKED, SUSPENDED, RESUMED, REPLACING)
DEFAULT_LEASE_SECONDS = 60


def new_holder() -> str:
    """Who holds a lock: the pod name (hostname) in a Job, plus pid and a nonce."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:6]}"


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    except ValueError:
        try:
            return datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S%z").timestamp()
        except ValueError:
            return None


@dataclass(frozen=True)
class Lock:
    target: dict[str, Any]
    phase: str
    holder: str
    renewed_at: float
    started_at: float
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    source: dict[str, Any] | None = None
    groups: tuple[str, ...] = ()  # replacing: the worker groups whose stale pods it replaces

    def to_annotation(self) -> str:
        doc = {
            "target": self.target,
            "phase": self.phase,
            "holder": self.holder,
            "renewedAt": rfc3339(self.renewed_at),
            "startedAt": rfc3339(self.started_at),
            "leaseSeconds": self.lease_seconds,
            "from": self.source,
        }
        if self.groups:
            doc["groups"] = list(self.groups)
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    def expired(self, unchanged_for: float) -> bool:
        """A dead holder's lock: this reader has seen it unchanged for longer than its lease.
        Judged by observation on the reader's monotonic clock only, never by comparing
        ``renewedAt`` (the writer's clock) with ours: a skewed clock can neither steal a live
        lock nor keep a dead one (as Kubernetes leader election does)."""
        return unchanged_for > self.lease_seconds

    def renewed(self, now: float) -> "Lock":
        return replace(self, renewed_at=now)

    def at(self, phase: str, now: float) -> "Lock":
        return replace(self, phase=phase, renewed_at=now)

    def taken_over(self, holder: str, now: float, target: dict[str, Any]) -> "Lock":
        """The lock as its new holder writes it.  A full cycle that already wrote a spec
        (``resumed``) keeps its target; one that has not yet resumed adopts ours, and so does
        a replacement (nothing is suspended: its next write is our spec)."""
        return replace(self, holder=holder, renewed_at=now,
                       target=self.target if self.phase == RESUMED else target)


def parse(text: Any) -> Lock | None:
    """The lock in an annotation value; None when unreadable (treated as expired)."""
    if not isinstance(text, str):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("phase") not in PHASES or not isinstance(doc.get("target"), dict):
        return None
    renewed = parse_time(doc.get("renewedAt"))
    if renewed is None:
        return None
    started = parse_time(doc.get("startedAt")) or renewed
    try:
        lease = int(doc.get("leaseSeconds") or DEFAULT_LEASE_SECONDS)
    except (TypeError, ValueError):
        lease = DEFAULT_LEASE_SECONDS
    groups = doc.get("groups") if isinstance(doc.get("groups"), list) else []
    return Lock(doc["target"], doc["phase"], str(doc.get("holder", "")), renewed, started, lease,
                doc.get("from") if isinstance(doc.get("from"), dict) else None,
                tuple(g for g in groups if isinstance(g, str)))


def new_lock(holder: str, target: dict[str, Any], source: dict[str, Any] | None, now: float,
             lease_seconds: int = DEFAULT_LEASE_SECONDS) -> Lock:
    return Lock(target, LOCKED, holder, now, now, lease_seconds, source)


def json_record(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def last_recreate(lock: Lock, finished: float, outcome: str, summary: str | None = None) -> str:
    """The ``raygitops.dev/last-recreate`` value written when a cycle ends; a replacement
    (ReplaceGroups) also says so and what it did (``summary``)."""
    doc = {
        "from": lock.source,
        "to": lock.target,
        "startedAt": rfc3339(lock.started_at),
        "finishedAt": rfc3339(finished),
        "outcome": outcome,
    }
    if lock.phase == REPLACING:
        doc["strategy"] = "ReplaceGroups"
    if summary:
        doc["summary"] = summary
    return json_record(doc)

