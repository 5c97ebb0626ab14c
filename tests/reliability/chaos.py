"""Operator chaos: a stopped KubeRay operator (tests/e2e control plane), for a block or at
given moments of a cycle."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import dataclass
from typing import Iterator


@contextlib.contextmanager
def operator_paused(plane) -> Iterator[None]:
    """The operator is stopped inside the block and started again after it."""
    plane.stop_operator()
    try:
        yield
    finally:
        plane.start_operator()


@dataclass(frozen=True)
class Outage:
    """The operator stopped ``at`` seconds after the outages start (SIGTERM, its graceful
    shutdown, or with ``kill`` SIGKILL), and started again ``down`` seconds later."""

    at: float
    down: float
    kill: bool = False

    def to_json(self) -> list:
        return [round(self.at, 3), round(self.down, 3), self.kill]


def draw_outages(rng: random.Random, count: int, within: float, down: tuple[float, float] = (0.5, 6.0)) -> list[Outage]:
    """``count`` outages at random moments of the first ``within`` seconds, one after another."""
    moments = sorted(rng.uniform(0.0, within) for _ in range(count))
    return [Outage(at, rng.uniform(*down), rng.random() < 0.5) for at in moments]


def periodic_outages(rng: random.Random, down: float, period: float, within: float) -> list[Outage]:
    """A slow operator: stopped for ``down`` seconds about every ``period`` seconds."""
    out, t = [], 0.0
    while True:
        t += period * (0.5 + rng.random())
        if t >= within:
            return out
        out.append(Outage(t, down))
        t += down


def start_operator(plane, attempts: int = 8) -> None:
    """Start the operator as a kubelet restarts a crashed container: again, with a growing
    pause, while it exits at once (KubeRay exits when its first discovery request fails, as
    under faults on its requests)."""
    import controlplane

    for attempt in range(attempts):
        try:
            plane.start_operator()
            return
        except controlplane.ComponentExited:
            if attempt + 1 == attempts:
                raise
            time.sleep(min(8.0, 0.5 * 2 ** attempt))


class OperatorOutages:
    """Runs :class:`Outage`\\ s in a background thread from :meth:`start`; :meth:`stop` ends
    them early and leaves the operator running. Counts the outages it made."""

    def __init__(self, plane, outages: list[Outage]):
        self.plane, self.outages = plane, sorted(outages, key=lambda o: o.at)
        self.done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="operator-outages", daemon=True)

    def _run(self) -> None:
        began = time.monotonic()
        for outage in self.outages:
            if self._stop.wait(max(0.0, began + outage.at - time.monotonic())):
                return
            self.plane.stop_operator(kill=outage.kill)
            self.done += 1
            self._stop.wait(outage.down)
            start_operator(self.plane)

    def __enter__(self) -> "OperatorOutages":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=120)
        if not self.plane.operator_running:
            start_operator(self.plane)
