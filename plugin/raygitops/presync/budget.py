"""The time budget of one hook run: no cycle starts without the time to finish it.

A cycle that suspends a cluster must be able to drain it and resume it before ``--timeout``.
Before any cycle has finished, a cycle is assumed to take :data:`FLOOR_SECONDS` (at most half
the budget, so a short ``--timeout`` still lets one cycle run); after that, the longest cycle
seen in this run times :data:`MARGIN`.  A cluster that would not fit is ``deferred``: not
touched, picked up by the next sync.
"""

from __future__ import annotations

import threading

from raygitops.clock import SYSTEM, Clock

FLOOR_SECONDS = 30.0
MARGIN = 1.25


class Budget:
    def __init__(self, deadline: float, timeout: float, clock: Clock = SYSTEM):
        self.deadline = deadline  # clock.monotonic()
        self.clock = clock
        self.floor = min(FLOOR_SECONDS, timeout / 2)
        self._longest: float | None = None
        self._lock = threading.Lock()

    def estimate(self) -> float:
        """Seconds one more cycle is expected to take."""
        with self._lock:
            return self.floor if self._longest is None else self._longest * MARGIN

    def record(self, seconds: float) -> None:
        """A cycle (suspend to unlock) took this long."""
        with self._lock:
            self._longest = seconds if self._longest is None else max(self._longest, seconds)

    def shortfall(self) -> str | None:
        """Why a cycle must not start now; None when the rest of the budget covers one."""
        left, need = self.deadline - self.clock.monotonic(), self.estimate()
        if left >= need:
            return None
        basis = "the longest cycle of this run" if self._longest is not None else "the floor before the first cycle"
        return f"{max(left, 0):.0f}s of the hook's timeout left, a cycle takes about {need:.0f}s ({basis})"
