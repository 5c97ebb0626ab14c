"""Pure parts of the preview: field changes, masking, pod-shaping paths, pod counts."""

from __future__ import annotations

import copy

import pytest

from raygitops.preview.changes import (
    ABSENT,
    MASK,
    field_changes,
    looks_secret,
    strip_raygitops_annotations,
)
from raygitops.model.pods import PodCount, group_pods, pods_of


def rc(**spec_extra) -> dict:
    spec = {
        "headGroupSpec": {"rayStartParams": {}, "template": {"metadata": {"annotations": {
            "raygitops.dev/template-hash": "h1-aaaa"}}, "spec": {"containers": [
                {"name": "ray-head", "image": "ray:1", "env": [{"name": "A", "value": "1"}]}]}}},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "rayStartParams": {},
                              "template": {"spec": {"containers": [{"name": "w",
                                                                    "image": "ray:1"}]}}}],
    }
    spec.update(spec_extra)
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "c", "annotations": {"raygitops.dev/template-hashes": "{}"}},
            "spec": spec}


@pytest.mark.parametrize("key,secret", [
    ("password", True), ("redis-password", True), ("apiKey", True), ("API_TOKEN", True),
    ("clientSecret", True), ("credentials", True), ("sshKey", True), ("private_key", True),
    ("key", False), ("secretKeyRef", False), ("secretName", False), ("tokenPath", False),
    ("image", False), ("name", False), ("monkey", True), ("keys", False),
])
def test_looks_secret(key: str, secret: bool) -> None:
    assert looks_secret(key) is secret


def test_strip_raygitops_annotations_keeps_others() -> None:
    obj = rc()
    obj["metadata"]["annotations"]["team"] = "x"
    stripped = strip_raygitops_annotations(obj)
    assert stripped["metadata"]["annotations"] == {"team": "x"}
    assert stripped["spec"]["headGroupSpec"]["template"]["metadata"] == {"annotations": {}}
    assert obj["metadata"]["annotations"]["raygitops.dev/template-hashes"] == "{}"  # untouched


def test_hash_annotations_are_not_changes() -> None:
    a, b = rc(), rc()
    b["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"][
        "raygitops.dev/template-hash"] = "h1-bbbb"
    b["metadata"]["annotations"]["raygitops.dev/template-hashes"] = '{"x":1}'
    assert field_changes(a, b) == []


def test_env_values_masked_by_name_only() -> None:
    """A reviewer sees RAY_LOG_LEVEL go from 1 to 2; never a secret-named variable's value."""
    a, b = rc(), rc()
    b["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "2"
    b["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] += [
        {"name": "DB_PASSWORD", "value": "s3cr3t"}, {"name": "API_KEY", "value": "k3y"},
        {"name": "TOKEN_FROM", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}]
    changes = field_changes(a, b)
    by_path = {c.path: c for c in changes}
    value = by_path["/spec/headGroupSpec/template/spec/containers/0/env/0/value"]
    assert (value.old, value.new, value.masked, value.pod_shaping) == ("1", "2", False, True)
    assert value.group == "head"
    env = "/spec/headGroupSpec/template/spec/containers/0/env/"
    assert by_path[env + "1"].new == {"name": "DB_PASSWORD", "value": MASK} and by_path[env + "1"].masked
    assert by_path[env + "2"].new == {"name": "API_KEY", "value": MASK}
    # a reference is shown as the reference it is
    assert by_path[env + "3"].new == {"name": "TOKEN_FROM", "valueFrom": {"secretKeyRef": {"name": "creds",
                                                                                            "key": "token"}}}
    assert not by_path[env + "3"].masked
    assert "s3cr3t" not in repr(changes) and "k3y" not in repr(changes)
    # the value of a secret-named variable changes: said, not shown
    c = rc()
    c["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "REDIS_PASSWORD", "value": "a"}]
    d = copy.deepcopy(c)
    d["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "b"
    (change,) = field_changes(c, d)
    assert (change.old, change.new, change.masked) == (MASK, MASK, True)


def test_app_patterns_add_and_remove_secret_names() -> None:
    from raygitops.preview.changes import Masking

    a, b = rc(), rc()
    b["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] += [
        {"name": "LICENSE_ID", "value": "L-1"}, {"name": "PUBLIC_KEY", "value": "pk"}]
    masking = Masking(mask=("license_*",), unmask=("PUBLIC_KEY",))
    by_name = {c.new["name"]: c for c in field_changes(a, b, masking=masking)}
    assert by_name["LICENSE_ID"].new["value"] == MASK and by_name["LICENSE_ID"].masked
    assert by_name["PUBLIC_KEY"].new["value"] == "pk" and not by_name["PUBLIC_KEY"].masked
    default = {c.new["name"]: c for c in field_changes(a, b)}
    assert default["LICENSE_ID"].new["value"] == "L-1" and default["PUBLIC_KEY"].new["value"] == MASK


def test_whole_container_added_masks_secret_env_inside() -> None:
    a, b = rc(), rc()
    b["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"].append(
        {"name": "side", "image": "x", "env": [{"name": "T_TOKEN", "value": "hidden"},
                                               {"name": "MODE", "value": "fast"}],
         "args": ["--password", "p"]})
    (change,) = field_changes(a, b)
    assert change.group == "worker:gpu"
    assert change.new["env"] == [{"name": "T_TOKEN", "value": MASK}, {"name": "MODE", "value": "fast"}]
    assert change.new["image"] == "x"
    assert "hidden" not in repr(change)


def test_a_whole_env_list_added_or_removed_is_shown_as_its_items() -> None:
    """A container that gets (or loses) its env list: ``new`` (``old``) is the list of env
    vars, as for any other list, not wrapped in an ``{"env": ...}`` mapping; secret values
    masked inside."""
    a, b = rc(), rc()
    worker = b["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    worker["env"] = [{"name": "MODE", "value": "fast"}, {"name": "HF_TOKEN", "value": "hidden"}]
    (added,) = field_changes(a, b)
    assert added.path == "/spec/workerGroupSpecs/0/template/spec/containers/0/env" and added.op == "add"
    assert added.new == [{"name": "MODE", "value": "fast"}, {"name": "HF_TOKEN", "value": MASK}] and added.masked
    (removed,) = field_changes(b, a)
    assert removed.op == "remove" and removed.old == added.new and removed.new is ABSENT
    assert "hidden" not in repr([added, removed])
    assert added.to_json()["new"] == added.new and removed.to_json()["old"] == added.new


def test_an_env_var_replaced_by_another_at_its_place_never_shows_the_secret() -> None:
    """TOKEN (secret) removed and MODE added at its index: jsonpatch writes a replace of the
    name and one of the value; the old value is TOKEN's, masked although the entry is called
    MODE by the time its value is replaced (and both ways round)."""
    a, b = rc(), rc()
    a["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"].append({"name": "TOKEN", "value": "s3cr3t"})
    b["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"].append({"name": "MODE", "value": "fast"})
    for base, head in ((a, b), (b, a)):
        changes = field_changes(base, head)
        assert "s3cr3t" not in repr(changes), changes
        value = next(c for c in changes if c.path.endswith("/env/1/value"))
        assert (value.old, value.new, value.masked) == (MASK, MASK, True)


def test_secret_named_fields_masked() -> None:
    a, b = rc(), rc()
    a["spec"]["headGroupSpec"]["rayStartParams"]["redis-password"] = "one"
    b["spec"]["headGroupSpec"]["rayStartParams"]["redis-password"] = "two"
    b["metadata"]["annotations"]["vault/token"] = "abc"
    changes = field_changes(a, b)
    assert {(c.path, c.old, c.new) for c in changes} == {
        ("/spec/headGroupSpec/rayStartParams/redis-password", MASK, MASK),
        ("/metadata/annotations/vault~1token", ABSENT, MASK),
    }


def test_secret_volume_reference_is_not_masked() -> None:
    a, b = rc(), rc()
    b["spec"]["headGroupSpec"]["template"]["spec"]["volumes"] = [
        {"name": "tls", "secret": {"secretName": "ray-tls"}}]
    (change,) = field_changes(a, b)
    assert change.new == [{"name": "tls", "secret": {"secretName": "ray-tls"}}]
    assert not change.masked


def test_replicas_not_pod_shaping_and_group_named() -> None:
    a, b = rc(), rc()
    b["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    (change,) = field_changes(a, b)
    assert (change.op, change.old, change.new, change.pod_shaping, change.group) == (
        "replace", 1, 3, False, "worker:gpu")


def test_list_ops_read_values_as_the_patch_goes() -> None:
    a, b = rc(), rc()
    containers = a["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    containers += [{"name": "x1", "image": "a"}, {"name": "x2", "image": "b"}]
    changes = field_changes(a, b)
    assert sorted(c.old["name"] for c in changes if c.op == "remove") == ["x1", "x2"]


def test_group_pods() -> None:
    assert group_pods({"replicas": 3, "numOfHosts": 4, "minReplicas": 0, "maxReplicas": 5},
                      False) == PodCount(12, 12)
    # KubeRay clamps replicas into [minReplicas, maxReplicas]
    assert group_pods({"replicas": 9, "minReplicas": 0, "maxReplicas": 5}, False) == PodCount(5, 5)
    assert group_pods({"replicas": 0, "minReplicas": 2, "maxReplicas": 5}, False) == PodCount(2, 2)
    assert group_pods({"minReplicas": 1, "maxReplicas": 10, "numOfHosts": 2},
                      True) == PodCount(2, 20)
    assert group_pods({"minReplicas": 1}, True) == PodCount(1, None)
    assert group_pods({"replicas": 3, "suspend": True}, False) == PodCount(0, 0)
    assert str(PodCount(1, None)) == "1+"
    assert str(PodCount(2, 20)) == "2–20"


def test_pods_of_cluster() -> None:
    spec = rc()["spec"]
    assert pods_of(spec) == PodCount(2, 2)
    assert pods_of(spec, ["head"]) == PodCount(1, 1)
    assert pods_of({**spec, "suspend": True}) == PodCount(0, 0)


def test_value_moved_out_of_a_secret_field_stays_masked() -> None:
    a, b = rc(), rc()
    a["metadata"]["annotations"]["example.com/token"] = "t0ps3cret-value"
    b["metadata"]["annotations"]["example.com/renamed"] = "t0ps3cret-value"
    changes = field_changes(a, b)
    assert changes, changes
    assert "t0ps3cret" not in repr(changes)
