"""``raygitops status`` on the real control plane: in sync, drifted, stale, absent, a cycle in
progress, suspended outside Git, in each format; exit 0 only when every cluster is in sync."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from test_presync_hook import App, _spawn, _start, _wait_paused, raycluster

pytestmark = pytest.mark.e2e
NEW = "rayproject/ray:2.42.0"


@pytest.fixture
def csa_app(control_plane, namespace, tmp_path) -> App:
    return App(control_plane, namespace, tmp_path)


def _by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["clusters"]}


def test_status_follows_git_and_the_cluster(csa_app: App):
    app = csa_app
    _start(app)
    code, report = app.status()
    assert code == 0 and _by_name(report)["demo"]["state"] == "in-sync", report
    assert report["summary"]["text"] == "1 RayCluster, in sync"

    # a change in Git, not synced yet: the next sync recreates it; a new cluster is absent;
    # a cluster that is not opted in whose pods run an old template is stale
    plain = raycluster(name="plain", strategy=None)
    app.write(raycluster(image="rayproject/ray:2.41.0"), plain)
    objs, _, _ = app.render()
    app.apply(objs)
    app.wait_pods("plain")
    app.write(raycluster(image=NEW), raycluster(name="plain", image=NEW, strategy=None), raycluster(name="later"))
    objs, _, _ = app.render()
    app.apply([o for o in objs if o["metadata"]["name"] == "plain"])  # applied, never recreated
    code, report = app.status()
    got = _by_name(report)
    assert code == 3
    assert got["demo"]["state"] == "drifted" and got["demo"]["driftedGroups"] == ["head", "worker:small"]
    assert "the next sync recreates the cluster (3 pods)" in got["demo"]["detail"]
    assert got["plain"]["state"] == "stale" and "not opted in" in got["plain"]["detail"]
    assert got["later"]["state"] == "absent"
    assert report["summary"]["states"] == {"failed": 0, "unverified": 0, "in-progress": 0, "drifted": 1, "native": 0, "stale": 1,
                                           "suspended": 0, "absent": 1, "in-sync": 0}
    # the same in the other formats
    for fmt, needle in (("text", "demo"), ("markdown", "| `")):
        res = subprocess.run([sys.executable, "-m", "raygitops", "status", str(app.dir), "--kubeconfig",
                              app.plane.kubeconfig, "--output", fmt], capture_output=True, text=True,
                             env=app.hook_env(), timeout=60)
        assert res.returncode == 3 and needle in res.stdout and "drifted" in res.stdout, res
        assert "3 RayClusters: 1 drifted, 1 stale, 1 absent" in res.stdout


def test_status_shows_a_cycle_in_progress_and_a_cluster_suspended_outside_git(csa_app: App):
    app = csa_app
    _start(app)
    app.write(raycluster(image=NEW))
    _, _, plan = app.render()
    proc = _spawn(app, plan, {"RAYGITOPS_TEST_PAUSE_AT": "suspended"})
    try:
        _wait_paused(proc, "suspended")
        code, report = app.status()
        demo = _by_name(report)["demo"]
        assert code == 3 and demo["state"] == "in-progress" and demo["lock"]["phase"] == "suspended", demo
        assert "holder" in demo["detail"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    app.plane.kubectl("annotate", "raycluster", "demo", "-n", app.ns, "raygitops.dev/recreate-")
    code, report = app.status()
    demo = _by_name(report)["demo"]
    assert code == 3 and demo["state"] == "suspended" and "resumes it" in demo["detail"], demo


def test_status_errors_are_one_line(csa_app: App, tmp_path):
    app = csa_app
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "c.yaml").write_text("kind: RayCluster\nmetadata: {name: x\n")
    res = subprocess.run([sys.executable, "-m", "raygitops", "status", str(tmp_path / "broken"), "--kubeconfig",
                          app.plane.kubeconfig], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and res.stdout == "" and len(res.stderr.strip().splitlines()) == 1
    assert "c.yaml:" in res.stderr
    app.write(raycluster())
    res = subprocess.run([sys.executable, "-m", "raygitops", "status", str(app.dir), "--kubeconfig",
                          str(tmp_path / "missing.kubeconfig")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and res.stdout == "" and len(res.stderr.strip().splitlines()) == 1, res
