"""Time as a dependency: the hook reads the clock and sleeps only through a :class:`Clock`,
so that its cycle, drain, budget and lease run in simulated time under test.

``monotonic`` measures (deadlines, leases judged by observation), ``now`` is the wall clock
written into the lock for people to read, ``wait`` sleeps but wakes at once on a stop request.
"""

from __future__ import annotations

import threading
import time


class Clock:
    """The system's clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> float:
        return time.time()

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Sleep ``seconds`` or until ``stop`` is set; whether it is set."""
        return stop.wait(max(0.0, seconds))


SYSTEM = Clock()
