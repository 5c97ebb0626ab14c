"""Upgrading raygitops to the template hash scheme h3 deletes no pod (issue #39).

The clusters of ``fixtures/h1-render`` were rendered by raygitops before h3 (commit 9675527,
scheme h1, and h2.<list> where hash.ignore dropped a chart label; a config hash c1; see the
README there). Each app is synced as that render left it, on the real operator; then today's
raygitops renders the same app, its PreSync hook runs on the new plan (pods stamped h1/h2 are
compared by spec: in sync), the new manifests are applied, and the operator is left to settle:
no pod may be deleted. On KubeRay 1.6 with its own Recreate kept (``native``), the stamp the
operator hashes must not move either. Then a real change (an image) still recreates.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
from controlplane import unique_name

pytestmark = pytest.mark.e2e
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "h1-render"
HOOK = "argocd.argoproj.io/hook"


def _raygitops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", *args], capture_output=True, text=True, timeout=300)


def _app_objects(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the sync applies (the hook objects aside), namespace left to kubectl -n."""
    out = []
    for doc in docs:
        if HOOK in (doc["metadata"].get("annotations") or {}) or doc["kind"] in ("Job", "Role", "RoleBinding",
                                                                                  "ServiceAccount"):
            continue
        doc["metadata"].pop("namespace", None)
        out.append(doc)
    return out


def _render(app: Path, ns: str) -> tuple[list[dict[str, Any]], str]:
    res = _raygitops("render", str(app), "-n", ns, "--output", "json")
    assert res.returncode == 0, res.stderr
    objs = json.loads(res.stdout)["items"]
    plan = next(o["data"]["plan.json"] for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "raygitops-plan")
    return _app_objects(objs), plan


def _today(app: Path, dest: Path, image: str | None = None) -> Path:
    """The fixture app for today's raygitops: kwok's heads run no Ray, so the hook is told not
    to ask them for running jobs (the h1 release knew no ``hook.runningJobs``); ``image``: the
    plain cluster's image changed to it."""
    dest.mkdir()
    for f in app.iterdir():
        text = f.read_text()
        (dest / f.name).write_text(text if image is None else text.replace(
            "image: rayproject/ray:2.41.0\n", f"image: {image}\n", 2))
    config = yaml.safe_load((dest / "raygitops.yaml").read_text()) or {}
    config.setdefault("hook", {})["runningJobs"] = controlplane.KWOK_RUNNING_JOBS
    (dest / "raygitops.yaml").write_text(yaml.safe_dump(config))
    return dest


def _presync(plane, plan: str, tmp: Path) -> dict[str, Any]:
    path = tmp / "plan.json"
    path.write_text(plan)
    res = _raygitops("presync", "--plan", str(path), "--kubeconfig", plane.kubeconfig, "--log-format", "json",
                     "--no-wait-ready", "--drain-grace", "5", "--timeout", "180")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    return {c["name"]: c for c in json.loads(res.stdout)["clusters"]}


def _pods(plane, ns: str) -> dict[str, str]:
    """uid -> cluster/name of every live pod of the namespace's clusters."""
    pods = plane.kubectl_json("get", "pods", "-n", ns, "-l", "ray.io/cluster")["items"]
    return {p["metadata"]["uid"]: f"{p['metadata']['labels']['ray.io/cluster']}/{p['metadata']['name']}"
            for p in pods if not p["metadata"].get("deletionTimestamp")}


def _running(plane, ns: str, count: int) -> bool:
    pods = plane.kubectl_json("get", "pods", "-n", ns, "-l", "ray.io/cluster")["items"]
    return len(pods) == count and all(p.get("status", {}).get("phase") == "Running" for p in pods)


def _expected(objs: list[dict[str, Any]]) -> int:
    return sum(1 + sum(g["replicas"] for g in o["spec"]["workerGroupSpecs"]) for o in objs if o["kind"] == "RayCluster")


def _quiet(plane, ns: str, seconds: float = 10, timeout: float = 90) -> dict[str, str]:
    """The pods once the set has not changed for ``seconds`` (a native recreate follows an
    apply within a reconcile)."""
    last, since, end = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < end:
        now = _pods(plane, ns)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return now
        time.sleep(1)
    raise AssertionError("pods did not settle")


APPS = {"recreate": ("kuberay", "kuberay-next"), "native": ("kuberay-next",)}


@pytest.mark.parametrize("app,which", [(a, w) for a, ws in APPS.items() for w in ws])
def test_upgrading_raygitops_deletes_no_pod(app: str, which: str, request, tmp_path: Path) -> None:
    plane: controlplane.ControlPlane = request.getfixturevalue("control_plane" if which == "kuberay"
                                                               else "control_plane_next")
    ns = plane.create_namespace(unique_name("upgrade"))
    try:
        old = _app_objects(list(yaml.safe_load_all((FIXTURES / f"{app}.rendered.yaml").read_text())))
        assert all(("h1-" in json.dumps(o) or "h2." in json.dumps(o)) for o in old if o["kind"] == "RayCluster")
        plane.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump_all(old))
        plane.wait_for(lambda: _running(plane, ns, _expected(old)), timeout=180, message="the h1 render's pods")
        before = _quiet(plane, ns, seconds=5)

        new, plan = _render(_today(FIXTURES / app, tmp_path / "today"), ns)
        report = _presync(plane, plan, tmp_path)
        assert all(c["decision"] in ("in-sync", "skip") for c in report.values()), report
        plane.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump_all(new))
        after = _quiet(plane, ns)
        assert after == before, f"pods replaced by the upgrade: gone {sorted(set(before) - set(after))}"
        events = plane.kubectl_json("get", "events", "-n", ns)["items"]
        assert not [e for e in events if e["reason"] == "DeletedPod"], "a pod was deleted"
        status = _raygitops("status", str(tmp_path / "today"), "-n", ns, "--kubeconfig", plane.kubeconfig)
        assert status.returncode == 0, status.stdout + status.stderr

        if app == "recreate":  # the h3 hashes work: a real change still recreates, only it
            _, plan = _render(_today(FIXTURES / app, tmp_path / "changed", image="rayproject/ray:2.42.0"), ns)
            report = _presync(plane, plan, tmp_path)
            assert report["plain"]["decision"] == "recreate" and report["plain"].get("outcome") == "recreated", report
            assert {n: c["decision"] for n, c in report.items() if n != "plain"} == {"charted": "in-sync",
                                                                                    "groups": "in-sync"}, report
    finally:
        plane.delete_namespace(ns, wait=False)
