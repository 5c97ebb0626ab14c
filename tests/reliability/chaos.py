"""Operator chaos: a stopped or slow KubeRay operator (tests/e2e control plane)."""

from __future__ import annotations

import contextlib
import random
import threading
from typing import Iterator


@contextlib.contextmanager
def operator_paused(plane) -> Iterator[None]:
    """The operator is stopped inside the block and started again after it."""
    plane.stop_operator()
    try:
        yield
    finally:
        plane.start_operator()


class FlakyOperator:
    """A slow operator: stopped for ``down`` seconds every ``period`` seconds (seeded jitter)
    in a background thread, until :meth:`stop`.  Counts its outages."""

    def __init__(self, plane, down: float = 3.0, period: float = 8.0, seed: int = 0):
        self.plane, self.down, self.period = plane, down, period
        self.random = random.Random(seed)
        self.outages = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flaky-operator", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period * (0.5 + self.random.random())):
            self.plane.stop_operator()
            self.outages += 1
            self._stop.wait(self.down)
            self.plane.start_operator()

    def __enter__(self) -> "FlakyOperator":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        if not self.plane.operator_running:
            self.plane.start_operator()
