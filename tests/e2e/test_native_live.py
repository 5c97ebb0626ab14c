"""What the hook says about KubeRay's native Recreate, on the real operators
(docs/kuberay-1.6.md): the arming trap on v1.6.2 (and that it is real: the operator then
recreates nothing), a CRD that drops ``spec.upgradeStrategy`` on v1.5.0."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

import controlplane
from controlplane import unique_name
from test_presync_hook import App, _token_kubeconfig, raycluster

pytestmark = pytest.mark.e2e
NATIVE_HASH = "ray.io/upgrade-strategy-recreate-hash"
VERSION = "ray.io/kuberay-version"


def _native_app(plane, tmp_path: Path) -> App:
    return App(plane, plane.create_namespace(unique_name("native")), tmp_path)


def _write(app: App, image: str, strategy: str) -> None:
    obj = raycluster(image=image, strategy=strategy)
    obj["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    app.write(obj)
    config = app.dir / "raygitops.yaml"
    config.write_text(config.read_text() + "keepUpgradeStrategy: true\n")


def _head(app: App) -> dict:
    return next(p for p in app.pods() if p["metadata"]["labels"]["ray.io/node-type"] == "head"
                and not p["metadata"].get("deletionTimestamp"))


def _report(app: App, plan: Path, *extra: str, kubeconfig: str | None = None) -> dict:
    (cluster,) = json.loads(app.presync(plan, *extra, kubeconfig=kubeconfig).stdout)["clusters"]
    return cluster


def test_arming_trap_is_warned_and_real(control_plane_next, tmp_path: Path):
    """A head pod without the operator's hash (as KubeRay 1.5 made it): the hook warns, in a
    dry run too, and the operator indeed recreates nothing; raygitops' own recreate arms it."""
    app = _native_app(control_plane_next, tmp_path)
    try:
        _write(app, "rayproject/ray:2.41.0", "None")
        objs, _, _ = app.render()
        app.apply(objs)
        app.wait_pods()
        head = _head(app)
        assert NATIVE_HASH in head["metadata"]["annotations"]  # v1.6.2 armed it
        app.plane.kubectl("annotate", "pod", "-n", app.ns, head["metadata"]["name"], f"{NATIVE_HASH}-", f"{VERSION}-")

        _write(app, "rayproject/ray:2.42.0", "None")
        objs, hooks, plan = app.render()
        # with the rendered Role's token: its `patch` on RayClusters covers the CRD probe
        app.plane.apply([h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS], namespace=app.ns)
        kubeconfig = _token_kubeconfig(app, tmp_path / "hook.kubeconfig", app.ns)
        for extra in (("--dry-run",), ()):
            cluster = _report(app, plan, *extra, kubeconfig=kubeconfig)
            assert cluster["decision"] == "skip" and "native Recreate" in cluster["reason"]
            (warning,) = cluster["warnings"]
            assert "not armed" in warning and head["metadata"]["name"] in warning
        code, status = app.status()  # the live status predicts the operator's recreate, and warns
        (demo,) = status["clusters"]
        assert code == 3 and demo["state"] == "native" and "KubeRay's own spec hash" in demo["detail"], demo
        assert "not armed" in demo["warnings"][0] and demo["operatorVersion"] is None
        mark = app.plane.operator_log_mark()
        app.apply(objs)
        app.plane.wait_operator_reconciled("demo", app.ns, mark, timeout=30)
        time.sleep(10)
        assert _head(app)["metadata"]["uid"] == head["metadata"]["uid"]  # the trap: nothing recreated
        assert app.cluster()["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == "rayproject/ray:2.42.0"
        code, status = app.status()
        (demo,) = status["clusters"]
        assert code == 3 and demo["state"] == "native" and "did not replace them" in demo["detail"], demo

        # opting in to raygitops for this change reaches the pods, and the new head is armed
        _write(app, "rayproject/ray:2.42.0", "Recreate")
        objs, _, plan = app.render()
        cluster = _report(app, plan)
        assert cluster["outcome"] == "recreated" and "warnings" not in cluster
        app.apply(objs)
        new_head = app.plane.wait_for(lambda: (h := _head(app)) and h["metadata"]["uid"] != head["metadata"]["uid"]
                                      and NATIVE_HASH in h["metadata"]["annotations"] and h, timeout=60,
                                      message="a new, armed head pod")
        assert new_head["spec"]["containers"][0]["image"] == "rayproject/ray:2.42.0"
        app.wait_pods()
        code, status = app.status()
        (demo,) = status["clusters"]
        assert code == 0 and demo["operatorVersion"] == "v1.6.2" and not demo["warnings"], demo
    finally:
        app.plane.delete_namespace(app.ns, wait=False)


def test_a_crd_without_the_field_is_reported(control_plane, tmp_path: Path):
    """On v1.5.0 the API server prunes a kept ``spec.upgradeStrategy`` silently; the hook
    tells from the live CRD (a strict dry run) and warns."""
    app = _native_app(control_plane, tmp_path)
    try:
        _write(app, "rayproject/ray:2.41.0", "None")
        objs, _, plan = app.render()
        app.plane.kubectl("apply", "--validate=false", "-n", app.ns, "-f", "-",
                          input=yaml.safe_dump_all(objs))
        assert "upgradeStrategy" not in app.cluster()["spec"]  # pruned, silently
        cluster = _report(app, plan, "--dry-run")
        (warning,) = cluster["warnings"]
        assert "unknown to this cluster's RayCluster CRD" in warning
        assert "upgradeStrategy" not in app.cluster()["spec"]  # the probe stored nothing
    finally:
        app.plane.delete_namespace(app.ns, wait=False)
