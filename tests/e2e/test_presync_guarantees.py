"""The hook never harms a cluster: each guarantee of docs/presync.md ("Guarantees") on the real
control plane, with the hook run as a process the way the Job runs it.

Helpers (App, raycluster, ...) come from test_presync_hook.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from test_presync_hook import LAST, LOCK, App, desired_hashes, raycluster, rendered

pytestmark = pytest.mark.e2e
OLD, NEW = "rayproject/ray:2.41.0", "rayproject/ray:2.42.0"


@pytest.fixture
def app(control_plane, namespace, tmp_path) -> App:
    return App(control_plane, namespace, tmp_path)


def _report(res: subprocess.CompletedProcess) -> dict[str, Any]:
    return json.loads(res.stdout)


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["clusters"]}


def _dead_lock(phase: str) -> str:
    """The lock of an earlier raygitops run that died long ago."""
    return json.dumps({"target": {"head": "h1-00000000000000000000", "workers": {}}, "phase": phase,
                       "holder": "raygitops-presync-old/1/dead00", "renewedAt": "2020-01-01T00:00:00.000000Z",
                       "startedAt": "2020-01-01T00:00:00.000000Z", "leaseSeconds": 60, "from": None})


def _annotate(app: App, name: str, key: str, value: str) -> None:
    app.plane.kubectl("annotate", "--overwrite", "raycluster", name, "-n", app.ns, f"{key}={value}")


def _patch_spec(app: App, name: str, spec: dict[str, Any]) -> None:
    app.plane.kubectl("patch", "raycluster", name, "-n", app.ns, "--type=merge", "-p", json.dumps({"spec": spec}))


# ----------------------------------------------------------------------------- G1


def test_g1_render_refuses_hook_owned_annotations(tmp_path: Path):
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    obj = raycluster(strategy=None)
    obj["metadata"]["annotations"][LOCK] = _dead_lock("suspended")
    (app_dir / "demo.yaml").write_text(json.dumps(obj))
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(app_dir)], capture_output=True, text=True)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.count("\n") == 1, res.stderr
    assert f"{app_dir}/demo.yaml:1: RayCluster demo: metadata.annotations.{LOCK}:" in res.stderr


@pytest.mark.parametrize("suspended", [False, True])
def test_g1_a_cluster_that_does_not_opt_in_is_never_recreated(app: App, suspended: bool):
    """A raygitops lock on a cluster that does not opt in (left by an earlier run, or applied
    by hand): reported and dropped; a cluster raygitops had suspended is resumed as it is;
    no pod of it is deleted, whatever its drift."""
    app.sync(raycluster("demo"), raycluster("plain", strategy=None))
    app.wait_pods("demo")
    app.wait_pods("plain")
    _annotate(app, "plain", LOCK, _dead_lock("suspended"))
    if suspended:
        _patch_spec(app, "plain", {"suspend": True})
        app.plane.wait_for(lambda: not app.pods("plain"), timeout=60, message="plain suspended")
    uids = app.uids("plain")
    before = app.cluster("plain")["spec"]
    app.write(raycluster("demo"), raycluster("plain", strategy=None, image=NEW))
    objs, _, plan = app.render()
    res = app.presync(plan, "--no-wait-ready")
    report = _report(res)
    assert not report["failed"], res.stderr
    assert report["apiRequestsByVerb"].get("delete", 0) == 0, report
    plain = _by_name(report)["plain"]
    assert plain["decision"] == "release" and "raygitops lock" in plain["reason"], plain
    assert "raygitops-presync-old/1/dead00" in res.stderr
    live = app.cluster("plain")
    assert LOCK not in live["metadata"]["annotations"]
    assert live["spec"].get("suspend") is not True
    assert live["spec"]["headGroupSpec"] == before["headGroupSpec"]  # resumed as it was, not to the new spec
    if suspended:
        pods = app.wait_pods("plain")
        assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {OLD}
    else:
        assert app.uids("plain") == uids
    assert app.events("RecreateStarted", "plain") == []
