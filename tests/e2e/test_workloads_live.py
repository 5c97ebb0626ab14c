"""What ``raygitops diff`` says KubeRay does with a RayService change, checked against the
real operators (model/workloads.py): a change it predicts as ``new-cluster`` makes the
operator build another RayCluster for the RayService (a pending cluster appears), one it
predicts ``in-place`` or ``stale`` makes none.

On kwok no Ray runs: a ready head pod would send the operator to the Ray dashboard, which
fails, before it reaches ``calculateStatus``. So the head pods are left unscheduled (a
nodeSelector no node has): the operator skips the Serve reconcile of a cluster whose head is
not ready, the RayService's first cluster stays its pending one, and KubeRay compares the new
spec with that cluster's as it does with a serving one (``shouldPrepareNewCluster`` takes the
pending cluster first).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane import unique_name

pytestmark = pytest.mark.e2e


def _service(name: str, image: str = "rayproject/ray:2.41.0") -> dict[str, Any]:
    container = {"name": "ray", "image": image, "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
    return {
        "apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": name},
        "spec": {
            "serveConfigV2": "applications: []\n",
            "rayClusterConfig": {
                "rayVersion": "2.41.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                    "containers": [container], "nodeSelector": {"e2e.raygitops.dev/nowhere": "true"}}}},
                "workerGroupSpecs": [{"groupName": "serve", "replicas": 1, "minReplicas": 0, "maxReplicas": 3,
                                      "rayStartParams": {},
                                      "template": {"spec": {"containers": [copy.deepcopy(container)]}}}],
            },
        },
    }


def _image(doc: dict[str, Any]) -> None:
    doc.update(_service(doc["metadata"]["name"], "rayproject/ray:2.42.0"))


def _replicas(doc: dict[str, Any]) -> None:
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = 2


def _tolerations(doc: dict[str, Any]) -> None:
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["tolerations"] = [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]


CHANGES = {"svc-image": _image, "svc-replicas": _replicas, "svc-tolerations": _tolerations}


def _predicted(plane, tmp: Path, ns: str) -> dict[str, dict[str, Any]]:
    dirs = {}
    for side in ("base", "head"):
        d = tmp / side
        d.mkdir()
        (d / "raygitops.yaml").write_text(f"namespace: {ns}\nkuberayVersion: '{plane.kuberay.lstrip('v')}'\n")
        docs = []
        for name, change in CHANGES.items():
            doc = _service(name)
            if side == "head":
                change(doc)
            docs.append(doc)
        (d / "services.yaml").write_text(yaml.safe_dump_all(docs))
        dirs[side] = d
    res = subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(dirs["base"]), "--head",
                          str(dirs["head"]), "--output", "json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return {w["name"]: w for w in json.loads(res.stdout)["workloads"]}, dirs


def _clusters(plane, ns: str) -> dict[str, set[str]]:
    """RayService name -> the RayClusters it owns."""
    out: dict[str, set[str]] = {}
    for c in plane.kubectl_json("get", "rayclusters", "-n", ns)["items"]:
        for ref in c["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "RayService":
                out.setdefault(ref["name"], set()).add(c["metadata"]["name"])
    return out


def test_rayservice_changes_as_the_operator_answers_them(plane, tmp_path: Path) -> None:
    ns = plane.create_namespace(unique_name("svc"))
    try:
        predicted, dirs = _predicted(plane, tmp_path, ns)
        plane.kubectl("apply", "-n", ns, "-f", str(dirs["base"] / "services.yaml"))
        first = plane.wait_for(lambda: (lambda c: c if set(c) == set(CHANGES) else None)(_clusters(plane, ns)),
                               timeout=120, message="each RayService's first RayCluster")
        time.sleep(3)
        plane.kubectl("apply", "-n", ns, "-f", str(dirs["head"] / "services.yaml"))
        # KubeRay requeues a RayService every 2 s: a new cluster comes within a few reconciles
        deadline, new = time.monotonic() + 30, {}
        while time.monotonic() < deadline:
            now = _clusters(plane, ns)
            new = {s: sorted(now.get(s, set()) - first[s]) for s in CHANGES}
            if all(new[s] for s, w in predicted.items() if w["class"] == "new-cluster"):
                time.sleep(10)  # and none where none is predicted, for a while longer
                now = _clusters(plane, ns)
                new = {s: sorted(now.get(s, set()) - first[s]) for s in CHANGES}
                break
            time.sleep(1)
        observed = {s: "new-cluster" if new[s] else "no new cluster" for s in CHANGES}
        expected = {s: "new-cluster" if w["class"] == "new-cluster" else "no new cluster" for s, w in predicted.items()}
        print(f"\nKubeRay {plane.kuberay}: predicted {({s: w['class'] for s, w in predicted.items()})}, observed {observed}")
        assert observed == expected, (predicted, new)
        assert predicted["svc-image"]["class"] == "new-cluster" and predicted["svc-image"]["pods"] == {"min": 2, "max": 2}
        assert predicted["svc-tolerations"]["class"] == ("stale" if plane.kuberay >= "v1.6" else "new-cluster")
    finally:
        plane.delete_namespace(ns, wait=False)
