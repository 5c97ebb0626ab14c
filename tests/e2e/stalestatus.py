"""Stale ``status.state: ready`` on a RayCluster, for as long as a test runs a sync (issue #21)."""

from __future__ import annotations

import threading

from controlplane import ControlPlane


class StaleReady:
    """Keeps writing ``status.state: ready`` on a RayCluster (status subresource) while it
    runs: the state left from before a suspend that a racing resume can leave behind. The
    hook must never take it for readiness; ``writes`` counts the writes that landed."""

    def __init__(self, plane: ControlPlane, namespace: str, name: str = "demo"):
        self.plane, self.namespace, self.name = plane, namespace, name
        self._stop, self.writes = threading.Event(), 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "StaleReady":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            res = self.plane.kubectl("patch", "raycluster", self.name, "-n", self.namespace, "--subresource=status",
                                     "--type=merge", "-p", '{"status":{"state":"ready"}}', check=False)
            self.writes += res.returncode == 0
