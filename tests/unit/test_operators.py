"""What each KubeRay operator does (raygitops.model.operators): the facts the support table in
docs/kuberay-versions.md measures on the real operators, and the refusal of a KubeRay that
raygitops cannot serve (from every source of kuberayVersion, one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raygitops.model import operators

APP = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: demo, annotations: {raygitops.dev/upgrade-strategy: Recreate}}
spec:
  headGroupSpec:
    rayStartParams: {}
    template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.41.0}]}}
"""


@pytest.mark.parametrize("version,conditions,native", [
    ("1.1.1", False, False), ("1.2.2", False, False), ("1.3", True, False), ("1.4.2", True, False),
    ("1.5.0", True, False), ("1.6.2", True, True), ("1.7", True, True), ("2.0", True, True),
])
def test_the_behaviour_of_each_line(version: str, conditions: bool, native: bool) -> None:
    op = operators.operator(version)
    assert (op.suspend_conditions, op.native_recreate, op.stamps_head_pod) == (conditions, native, native)
    assert op.node_type_label and op.removed_group_pods_kept
    assert operators.unsupported(version) is None


@pytest.mark.parametrize("version", ["1.0", "1.0.0", "0.6.0"])
def test_a_kuberay_without_spec_suspend_is_not_served(version: str) -> None:
    why = operators.unsupported(version)
    assert why and f"KubeRay {version} has no RayCluster spec.suspend (added in 1.1)" in why
    with pytest.raises(ValueError, match="raygitops serves KubeRay 1.1 and later"):
        operators.supported_version(version)
    assert operators.supported_version("v1.1.1") == "1.1.1"


def test_a_dropped_suspend_is_told_from_one_set_back() -> None:
    assert operators.suspend_dropped({"spec": {"headGroupSpec": {}}})
    assert not operators.suspend_dropped({"spec": {"suspend": False}})
    assert not operators.suspend_dropped({"spec": {"suspend": True}})
    assert not operators.suspend_dropped(None)


def _render(app: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", "render", str(app), *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def test_render_refuses_an_unserved_kuberay_from_every_source(tmp_path: Path) -> None:
    """kuberayVersion 1.0 is refused in one line naming the source, nothing written; 1.1
    renders."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "c.yaml").write_text(APP)
    cases = [
        (("--kuberay-version", "1.0.0"), None, "raygitops: --kuberay-version: KubeRay 1.0.0 has no RayCluster spec.suspend"),
        ((), {"ARGOCD_APP_PARAMETERS": json.dumps([{"name": "kuberay-version", "string": "1.0"}])},
         "raygitops: ARGOCD_APP_PARAMETERS: parameter 'kuberay-version': KubeRay 1.0 has no"),
    ]
    for args, env, message in cases:
        res = _render(app, *args, env=env)
        assert res.returncode == 1 and res.stdout == "" and res.stderr.startswith(message), res.stderr
        assert res.stderr.count("\n") == 1
    (app / "raygitops.yaml").write_text('kuberayVersion: "1.0"\n')
    res = _render(app)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith(f"raygitops: {app / 'raygitops.yaml'}:1: kuberayVersion: KubeRay 1.0 has no"), res.stderr
    (app / "raygitops.yaml").write_text('kuberayVersion: "1.1"\n')
    assert _render(app).returncode == 0


def test_what_an_operator_upgrade_does_is_noted() -> None:
    assert operators.upgrade_notes(None, "1.6.2") == [] and operators.upgrade_notes("1.6.0", "1.6.2") == []
    minor = operators.upgrade_notes("1.4.2", "1.5.0")
    assert len(minor) == 1 and "upgrade replaces no pod by itself" in minor[0]
    native = operators.upgrade_notes("1.5.0", "1.6.2")
    assert len(native) == 2 and "not armed" in native[1] and "KubeRay 1.5.0 made" in native[1]
    down = operators.upgrade_notes("1.7", "1.6")
    assert "downgrade" in down[0] and "KubeRay 1.6's CRD drops the fields added after it" in down[1]


def test_diff_says_what_a_kuberay_version_change_does(tmp_path: Path) -> None:
    """The pull request that records an operator upgrade (kuberayVersion 1.5.0 -> 1.6.2, the
    manifests unchanged): no pod is recreated, the template hashes follow the new line's pod
    rules (a new scheme tag, compared by spec), and the notes say what the upgrade itself does."""
    for side, version in (("base", "1.5.0"), ("head", "1.6.2")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "c.yaml").write_text(APP)
        (tmp_path / side / "raygitops.yaml").write_text(f'kuberayVersion: "{version}"\n')
    res = subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(tmp_path / "base"), "--head",
                          str(tmp_path / "head"), "--output", "json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    (cluster,) = report["clusters"]
    assert cluster["class"] == "in-place" and "follow KubeRay 1.6's pod rules now" in cluster["reason"], cluster
    assert report["notes"] == operators.upgrade_notes("1.5.0", "1.6.2")
