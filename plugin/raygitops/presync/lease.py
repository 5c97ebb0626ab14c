"""The lease on a cluster's recreate lock.

Ours: every write of our lock renews it, and the cycle writes it again (a renewal: GET, then
a PATCH with that resourceVersion, again on a 409) when a third of a lease has passed since;
a lock that is no longer ours ends the cycle (:class:`~raygitops.presync.context.LostLock`).
Another's: judged by observation only (:class:`Observed`), never by comparing its
``renewedAt`` (the writer's clock) with ours, as Kubernetes leader election does.
"""

from __future__ import annotations

from typing import Any

from raygitops.clock import Clock
from raygitops.kube import retry
from raygitops.model import objmeta
from raygitops.model.names import LOCK_ANNOTATION
from raygitops.presync import patches
from raygitops.presync.context import Context, State


def written(c: Context) -> None:
    """Our lock was just written: the next renewal is due a third of a lease from now."""
    c.renew_at = c.clock.monotonic() + c.opts.lease_seconds / 3


def due(c: Context) -> bool:
    return c.clock.monotonic() >= c.renew_at


def renew(c: Context, s: State) -> None:
    """Write our lock again, now (its ``renewedAt`` moves, and with it the version)."""

    def write() -> None:
        c.get(s)
        c.patch(s, patches.lock_patch(s.live, c.my_lock(s).renewed(c.clock.now())))

    retry.on_conflict(write, "renewing the lease")
    written(c)


def renew_if_due(c: Context, s: State) -> None:
    if due(c):
        renew(c, s)


class Observed:
    """How long this run has seen the same lock value on a cluster (a holder that renews
    changes it at least every third of its lease)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.value: str | None = None
        self.since = clock.monotonic()

    def unchanged_for(self, live: dict[str, Any] | None) -> float:
        value = objmeta.annotations(live or {}).get(LOCK_ANNOTATION)
        if value != self.value:
            self.value, self.since = value, self.clock.monotonic()
        return self.clock.monotonic() - self.since
