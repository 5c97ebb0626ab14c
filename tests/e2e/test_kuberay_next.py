"""The hook on the next KubeRay (KUBERAY_NEXT_VERSION, 1.6: native Recreate), on its own
control plane with its own CRDs.

The hook's core e2e tests run here unchanged (imported, so they are collected again with
this module's fixtures): recreate exactly once, no pod deleted without drift, a killed hook
finished by the next run, the dry run, a signal mid-drain.  Then
the interplay with the operator's own ``upgradeStrategy: Recreate``.
"""

from __future__ import annotations

import json
import time

import pytest

# (A recreate that cannot get ready is run on this operator by test_kuberay_versions.py, for
# every KubeRay; the gate's "every run until fixed" is the hook's, on 1.5 here.)
from test_presync_guarantees import (  # noqa: F401 - collected again on this operator
    test_g3_a_signal_mid_drain_resumes_unlocks_and_exits_nonzero,
)
from test_presync_hook import (  # noqa: F401 - collected again on this operator
    App,
    _start,
    desired_hashes,
    raycluster,
    rendered,
    test_a_hook_killed_inside_its_recovery_never_reports_a_recreate_that_did_not_happen,
    test_dry_run_reports_without_changing,
    test_image_change_recreates_exactly_once,
    test_killed_hook_is_finished_by_the_next_run,
    test_no_pod_deleted,
    test_the_operator_is_prompted_along_suspend_and_resume,
)

pytestmark = pytest.mark.e2e
NATIVE_HASH = "ray.io/upgrade-strategy-recreate-hash"


@pytest.fixture
def control_plane(control_plane_next):
    return control_plane_next


@pytest.fixture
def app(control_plane, namespace, tmp_path) -> App:
    return App(control_plane, namespace, tmp_path)  # client-side apply only: the 1.5 run covers both


@pytest.fixture
def csa_app(control_plane, namespace, tmp_path) -> App:
    return App(control_plane, namespace, tmp_path)


def test_the_operator_and_crds_are_the_next_version(control_plane):
    assert control_plane.kuberay == control_plane.versions["KUBERAY_NEXT_VERSION"]
    assert control_plane.kuberay in str(control_plane.crd_source)
    crd = control_plane.kubectl_json("get", "crd", "rayclusters.ray.io")
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "upgradeStrategy" in props  # a 1.6 field: the 1.5 CRD does not know it


def _write_native(app: App, obj: dict, **spec: object) -> None:
    """The cluster with the operator's own Recreate (and the extra ``spec`` fields), and
    raygitops told to keep it."""
    obj = raycluster(image=obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"])
    obj["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    obj["spec"].update(spec)
    app.write(obj)
    config = app.dir / "raygitops.yaml"
    config.write_text(config.read_text() + "keepUpgradeStrategy: true\n")


def test_opted_in_and_native_recreate_replace_the_pods_once(csa_app: App):
    """A cluster that opts in to raygitops and keeps the operator's own Recreate: one commit
    that changes the image and headServiceAnnotations (which only the operator's hash sees)
    replaces the pods exactly once: the hook's resume writes the whole spec, so the head pod
    the operator creates next is stamped with its hash of the final spec and the apply leaves
    it nothing to recreate for (issue #39: it recreated a second time); the sync is still
    gated by the hook."""
    app = csa_app
    _write_native(app, raycluster())
    objs, _, plan = app.render()
    assert rendered(objs)["spec"]["upgradeStrategy"] == {"type": "Recreate"}
    app.apply(objs)
    first = app.wait_pods()
    head = next(p for p in first if p["metadata"]["labels"]["ray.io/node-type"] == "head")
    assert NATIVE_HASH in head["metadata"]["annotations"]  # the operator armed its own Recreate

    _write_native(app, raycluster(image="rayproject/ray:2.42.0"), headServiceAnnotations={"example.com/lb": "internal"})
    objs, _, plan = app.render()
    res = app.presync(plan)
    assert json.loads(res.stdout)["summary"]["recreated"] == 1, res.stderr
    mark = app.plane.operator_log_mark()
    app.apply(objs)  # the sync the hook gated
    new = app.wait_pods(hashes=desired_hashes(rendered(objs)))
    seen = {p["metadata"]["uid"] for p in new}
    # the operator reconciles the applied spec; a second wave would come now: none may
    app.plane.wait_operator_reconciled("demo", app.ns, mark, timeout=30)
    time.sleep(10)
    assert {p["metadata"]["uid"] for p in app.pods() if not p["metadata"].get("deletionTimestamp")} == seen
    assert len(app.events("RecreateStarted")) == 1
    assert not [e for e in app.plane.kubectl_json("get", "events", "-n", app.ns)["items"]
                if e["reason"] == "DeletedPod" and "upgradeStrategy" in (e.get("message") or "")]
