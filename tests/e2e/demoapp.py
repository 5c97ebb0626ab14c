"""The RayCluster ``demo`` of one test namespace and its hook runs, as the Flux and Helm e2e
tests watch them (three pods: a head and two workers)."""

from __future__ import annotations

from typing import Any

import controlplane
from jobrunner import JobRunner


class DemoCluster:
    def __init__(self, plane: controlplane.ControlPlane, runner: JobRunner, namespace: str):
        self.plane, self.runner, self.ns = plane, runner, namespace

    def cluster(self) -> dict[str, Any]:
        return self.plane.get("raycluster", "demo", self.ns)

    def pods(self) -> list[dict[str, Any]]:
        return self.plane.cluster_pods(self.ns, "demo")

    def running(self, hashes: set[str]) -> list[dict[str, Any]]:
        return self.plane.wait_cluster_running(self.ns, "demo", hashes, count=3)

    def hook_runs(self) -> list[int | None]:
        return self.runner.runs_in(self.ns)

    def hook_report(self) -> dict[str, Any]:
        return self.runner.last_report(self.ns)
