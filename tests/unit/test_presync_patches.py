"""Patch construction: the one resume patch, lock/suspend/unlock patches, merge diffs."""

from __future__ import annotations

import copy
import dataclasses

from raygitops.model.hashing import hash_cluster
from raygitops.model.names import HASH_ANNOTATION
from raygitops.model import lock as locks
from raygitops.presync import patches
from raygitops.model import names, native

from test_presync_fakes import cluster_spec, make_plan, merge_apply, stamped, with_crd_defaults


def _live(spec, rv="41"):
    return {"metadata": {"name": "demo", "resourceVersion": rv, "annotations": {"keep": "me"}}, "spec": spec}


LOCK = locks.new_lock("me", {"head": "h1-x"}, None, 0.0)


def test_merge_diff_round_trips():
    old = {"a": 1, "b": {"c": 2, "d": {"e": 3}}, "l": [1, 2], "gone": {"x": 1}}
    new = {"a": 1, "b": {"c": 5, "d": {}}, "l": [2], "added": True}
    patch = patches.merge_diff(old, new)
    assert patch == {"b": {"c": 5, "d": {"e": None}}, "l": [2], "gone": None, "added": True}
    assert merge_apply(old, patch) == new
    assert patches.merge_diff(old, old) == {}


def test_resume_patch_writes_desired_spec_and_unsuspends_in_one_write():
    live_spec = with_crd_defaults(stamped(cluster_spec(image="old:1", workers=("a", "b"), replicas=3)))
    live_spec["suspend"] = True
    live_spec["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["p1"]}
    live_spec["headGroupSpec"]["serviceType"] = "NodePort"
    live_spec["headServiceAnnotations"] = {"x": "y"}
    live_spec["enableInTreeAutoscaling"] = True  # pod-shaping, removed in the new spec
    desired = cluster_spec(image="new:2", workers=("b", "c"), replicas=1)
    plan = make_plan(spec=desired)
    live = _live(live_spec)
    patch = patches.resume_patch(live, plan, LOCK.at(locks.RESUMED, 1.0))

    assert patch["metadata"]["resourceVersion"] == "41"
    assert '"phase":"resumed"' in patch["metadata"]["annotations"][names.LOCK_ANNOTATION]
    assert patch["spec"]["suspend"] is False
    after = merge_apply(live, patch)["spec"]
    assert after["suspend"] is False
    assert "enableInTreeAutoscaling" not in after
    # the whole desired spec, not only what shapes pods: the sync's apply changes nothing more
    assert "headServiceAnnotations" not in after and "serviceType" not in after["headGroupSpec"]
    groups = [g["groupName"] for g in after["workerGroupSpecs"]]
    assert groups == ["b", "c"]  # a dropped, b kept in place, c added
    b, c = after["workerGroupSpecs"]
    assert b["replicas"] == 3 and b["maxReplicas"] == 4 and b["minReplicas"] == 1  # live scaling kept
    assert c["replicas"] == 1  # a new group: the desired scaling
    # every group stamped with its desired hash; the pod-shaping spec is the desired one
    assert after["headGroupSpec"]["template"]["metadata"]["annotations"][HASH_ANNOTATION] == plan.hashes.head
    assert b["template"]["metadata"]["annotations"][HASH_ANNOTATION] == plan.hashes.workers["b"]
    assert hash_cluster(after) == plan.hashes
    assert after["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == "new:2"
    # KubeRay 1.6's own hash of the resumed spec is its hash of the spec the sync applies next
    # (it leaves the scaling fields out): its native Recreate finds nothing more to do
    assert native.hash_input(after) == native.hash_input(_applied(desired))


def _applied(desired):
    """The spec once the sync applied the manifest after the hook: its ``suspend: false`` stays
    (the manifest does not name the field)."""
    spec = with_crd_defaults(stamped(desired))
    spec.setdefault("suspend", False)
    return spec


def test_resume_writes_what_only_the_operator_hashes():
    """The commit of issue #39: a new image and new headServiceAnnotations. The hook recreates
    for the image; its resume writes the annotations too, so that the head pod KubeRay 1.6
    creates next is stamped with the hash of the final spec."""
    live_spec = with_crd_defaults(stamped(cluster_spec(image="old:1")))
    live_spec["suspend"] = True
    desired = cluster_spec(image="new:2")
    desired["headServiceAnnotations"] = {"example.com/lb": "internal"}
    desired["headGroupSpec"]["serviceType"] = "NodePort"
    desired["workerGroupSpecs"][0]["idleTimeoutSeconds"] = 60
    desired["upgradeStrategy"] = {"type": "Recreate"}
    plan = make_plan(spec=desired)
    after = merge_apply(_live(live_spec), patches.resume_patch(_live(live_spec), plan, LOCK))["spec"]
    assert native.hash_input(after) == native.hash_input(_applied(desired))


def test_resume_on_same_spec_only_flips_suspend():
    live_spec = stamped(cluster_spec())
    live_spec["suspend"] = True
    patch = patches.resume_patch(_live(live_spec), make_plan(), LOCK)
    assert patch["spec"] == {"suspend": False}


def test_resume_writes_upgrade_strategy_and_keeps_managed_by():
    """upgradeStrategy is the desired one (the sync applies it next); managedBy is immutable:
    the live value stays whatever the plan says."""
    live_spec = stamped(cluster_spec())
    live_spec.update(upgradeStrategy={"type": "Recreate"}, managedBy="ray.io/kuberay-operator", suspend=True)
    desired = cluster_spec()
    desired.update(upgradeStrategy={"type": "None"})
    after = merge_apply(_live(live_spec), patches.resume_patch(_live(live_spec), make_plan(spec=desired), LOCK))["spec"]
    assert after["upgradeStrategy"] == {"type": "None"} and after["managedBy"] == "ray.io/kuberay-operator"


def test_resume_writes_the_annotations_the_pod_builder_reads():
    live = _live(stamped(cluster_spec()))
    live["metadata"]["annotations"]["ray.io/overwrite-container-cmd"] = "true"
    plan = dataclasses.replace(make_plan(), pod_annotations={"ray.io/ft-enabled": "true"})
    patch = patches.resume_patch(live, plan, LOCK)
    assert patch["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"
    assert patch["metadata"]["annotations"]["ray.io/overwrite-container-cmd"] is None
    assert merge_apply(live, patch)["metadata"]["annotations"]["keep"] == "me"


def test_lock_suspend_unlock_patches():
    live = _live(cluster_spec())
    p = patches.lock_patch(live, LOCK)
    assert p == {"metadata": {"resourceVersion": "41", "annotations": {names.LOCK_ANNOTATION: LOCK.to_annotation()}}}
    s = patches.suspend_patch(live, LOCK.at(locks.SUSPENDED, 0.0))
    assert s["spec"] == {"suspend": True} and '"phase":"suspended"' in s["metadata"]["annotations"][names.LOCK_ANNOTATION]
    u = patches.unlock_patch(live, '{"outcome":"Failed"}')
    assert u["metadata"]["annotations"] == {names.LOCK_ANNOTATION: None, names.LAST_ANNOTATION: '{"outcome":"Failed"}',
                                            names.OUTCOME_ANNOTATION: "Failed"}
    after = merge_apply(copy.deepcopy(live), u)
    assert after["metadata"]["annotations"]["keep"] == "me"
