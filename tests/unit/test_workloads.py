"""What KubeRay does with a change to a RayService or a RayJob (model/workloads.py,
preview/workloads.py), per operator version; the live operators: tests/e2e/test_workloads_live.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raygitops.model import workloads


def service(image: str = "rayproject/ray:2.41.0", **spec) -> dict:
    group = {"groupName": "serve", "replicas": 2, "minReplicas": 1, "maxReplicas": 4, "rayStartParams": {},
             "template": {"spec": {"containers": [{"name": "w", "image": image}]}}}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "s", "namespace": "ml"},
            "spec": {"serveConfigV2": "applications: []\n",
                     "rayClusterConfig": {"rayVersion": "2.41.0",
                                          "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                                              "containers": [{"name": "h", "image": image}]}}},
                                          "workerGroupSpecs": [group]},
                     **spec}}


def cluster(doc: dict) -> dict:
    return doc["spec"]["rayClusterConfig"]


def changed(mutate) -> dict:
    doc = service()
    mutate(doc)
    return doc


CASES = {
    # change: (KubeRay 1.5, KubeRay 1.6)
    "image": (lambda d: d.update(service("rayproject/ray:2.42.0")), ("new-cluster", "new-cluster")),
    "replicas": (lambda d: cluster(d)["workerGroupSpecs"][0].update(replicas=3), ("in-place", "in-place")),
    "tolerations": (lambda d: cluster(d)["headGroupSpec"]["template"]["spec"].update(
        tolerations=[{"key": "gpu", "operator": "Exists"}]), ("new-cluster", "stale")),
    "serve config": (lambda d: d["spec"].update(serveConfigV2="applications: [{name: a}]\n"), ("in-place", "in-place")),
    "a group appended": (lambda d: cluster(d)["workerGroupSpecs"].append(
        {**copy.deepcopy(cluster(d)["workerGroupSpecs"][0]), "groupName": "more"}), ("in-place", "in-place")),
    "a group removed": (lambda d: cluster(d).update(workerGroupSpecs=[]), ("new-cluster", "new-cluster")),
    "suspend": (lambda d: cluster(d).update(suspend=True), ("new-cluster", "in-place")),
    "upgradeStrategy None": (lambda d: (d.update(service("rayproject/ray:2.42.0")),
                                        d["spec"].update(upgradeStrategy={"type": "None"})), ("stale", "stale")),
    "upgradeStrategy NewCluster": (lambda d: (d.update(service("rayproject/ray:2.42.0")),
                                              d["spec"].update(upgradeStrategy={"type": "NewCluster"})),
                                   ("new-cluster", "new-cluster")),
    "incremental upgrade, gate off": (lambda d: (d.update(service("rayproject/ray:2.42.0")), d["spec"].update(
        upgradeStrategy={"type": "NewClusterWithIncrementalUpgrade"})), ("stale", "stale")),
    "metadata only": (lambda d: d["metadata"].update(labels={"team": "ml"}), ("in-place", "in-place")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rayservice_per_version(case: str) -> None:
    mutate, (v15, v16) = CASES[case]
    head = changed(mutate)
    assert workloads.rayservice(service(), head, "1.5").klass == v15
    assert workloads.rayservice(service(), head, "1.6.2").klass == v16
    assert workloads.rayservice(service(), head, None).klass == v16  # unset: the newest known
    assert workloads.rayservice(service(), service(), "1.6").klass == "unchanged"


def test_rayjob_changes_reach_the_next_cluster() -> None:
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
           "spec": {"entrypoint": "python a.py", "rayClusterSpec": cluster(service())}}
    new = copy.deepcopy(job)
    new["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "ray:2"
    answer = workloads.rayjob(job, new)
    assert answer.klass == "next-cluster" and "rayClusterSpec" in answer.reason
    entry = copy.deepcopy(job)
    entry["spec"]["entrypoint"] = "python b.py"
    assert workloads.rayjob(job, entry).klass == "next-cluster"
    assert workloads.rayjob(job, copy.deepcopy(job)).klass == "unchanged"


def _app(root: Path, doc: dict, version: str | None) -> Path:
    root.mkdir(parents=True)
    (root / "raygitops.yaml").write_text(f"kuberayVersion: '{version}'\n" if version else "")
    (root / "s.yaml").write_text(yaml.safe_dump(doc))
    return root


def _diff(base: Path, head: Path, fmt: str = "json") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(base), "--head", str(head),
                           "--output", fmt], capture_output=True, text=True, timeout=60)


def test_the_preview_of_a_rayservice_image_change(tmp_path: Path) -> None:
    """The issue's user: an image bump of a RayService previewed "No pod is recreated"."""
    res = _diff(_app(tmp_path / "b", service(), "1.6.2"), _app(tmp_path / "h", service("rayproject/ray:2.42.0"), "1.6.2"))
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    (w,) = report["workloads"]
    assert (w["kind"], w["class"], w["kuberay"], w["pods"]) == ("RayService", "new-cluster", "1.6", {"min": 3, "max": 3})
    assert report["verdict"] == "recreate" and "new cluster" in report["summary"]["text"]
    assert "No pod is recreated" not in _diff(tmp_path / "b", tmp_path / "h", "text").stdout


def test_the_preview_names_the_version_where_the_answer_differs(tmp_path: Path) -> None:
    head = changed(CASES["tolerations"][0])
    res = _diff(_app(tmp_path / "b", service(), None), _app(tmp_path / "h", head, None))
    (w,) = json.loads(res.stdout)["workloads"]
    assert w["class"] == "stale" and w["kuberay"] == "1.6"
    assert any(n.startswith("on KubeRay 1.5: new-cluster") for n in w["notes"]), w["notes"]


def test_a_rayservice_the_operator_refuses_is_an_error(tmp_path: Path) -> None:
    head = service()
    cluster(head)["workerGroupSpecs"][0]["idleTimeoutSeconds"] = 60
    res = _diff(_app(tmp_path / "b", service(), "1.6"), _app(tmp_path / "h", head, "1.6"))
    assert res.returncode == 1 and "KubeRay v1.6.2 refuses this RayService: worker group serve: idleTimeoutSeconds" \
        in res.stderr, res.stderr
