"""The invariant checks catch what they claim to (synthetic objects, no cluster)."""

from __future__ import annotations

import copy
import json

from reliability import invariants as inv
from reliability.fleet import raycluster
from reliability.recorder import Change


def live(name: str = "c", **annotations: str) -> dict:
    obj = raycluster(name, "img:1")
    obj["metadata"].update(namespace="ns", resourceVersion="1", generation=1, managedFields=[{"x": 1}],
                           labels={"team": "a"})
    obj["metadata"]["annotations"].update({"example.com/x": "y", **annotations})
    obj["status"] = {"state": "ready"}
    obj["spec"]["headServiceAnnotations"] = {"a": "b"}
    return obj


def test_hook_only_changes_allows_what_the_hook_may_change() -> None:
    before = live()
    after = copy.deepcopy(before)
    after["spec"]["suspend"] = True
    after["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "img:2"
    after["spec"]["workerGroupSpecs"][0]["template"]["metadata"] = {"annotations": {inv.HASH: "h1-x"}}
    after["spec"]["workerGroupSpecs"].append({"groupName": "new", "replicas": 3, "template": {}})
    after["metadata"]["annotations"][inv.LOCK] = "{}"
    # the resume writes the whole desired spec, and the annotations the pod builder reads
    after["spec"].update(headServiceAnnotations={}, upgradeStrategy={"type": "None"})
    after["spec"]["headGroupSpec"].update(serviceType="NodePort")
    after["metadata"]["annotations"]["ray.io/ft-enabled"] = "true"
    after["metadata"].update(resourceVersion="9", generation=3, managedFields=[])
    after["status"] = {"state": "suspended"}
    assert inv.hook_only_changes([before], [after]) == []


def test_hook_only_changes_catches_everything_else() -> None:
    edits = {
        "label": lambda o: o["metadata"]["labels"].update(team="b"),
        "foreign annotation": lambda o: o["metadata"]["annotations"].pop("example.com/x"),
        "replicas": lambda o: o["spec"]["workerGroupSpecs"][0].update(replicas=5),
        "maxReplicas": lambda o: o["spec"]["workerGroupSpecs"][0].update(maxReplicas=9),
        "managedBy": lambda o: o["spec"].update(managedBy="kueue.x-k8s.io/multikueue"),
        "scaleStrategy": lambda o: o["spec"]["workerGroupSpecs"][0].update(scaleStrategy={"workersToDelete": ["p"]}),
        "ownerReferences": lambda o: o["metadata"].update(ownerReferences=[{"kind": "RayJob"}]),
    }
    for what, edit in edits.items():
        before = live()
        after = copy.deepcopy(before)
        edit(after)
        assert inv.hook_only_changes([before], [after]), what


def test_suspended_clusters() -> None:
    a, b, c = live("a"), live("b"), live("c", **{inv.LOCK: json.dumps({"phase": "suspended"})})
    for o in (a, b, c):
        o["spec"]["suspend"] = True
    assert len(inv.suspended_clusters([a, b, c], desired_suspended={"ns/b"})) == 2
    assert inv.suspended_clusters([c], allow_locked=True) == []
    assert inv.locks_left([a, c]) == [f"ns/c still locked: {json.dumps({'phase': 'suspended'})}"]


def _pod(name: str, group: str = "w", stamp: tuple = ("h1-old", None, None), cluster: str = "c",
         ready: bool = True, uid: str | None = None, rv: int = 1, owner: str = "cuid") -> dict:
    ann = {k: v for k, v in zip((inv.HASH, inv.CONFIG_HASH, inv.SECRET_HASH), stamp) if v}
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid or name, "resourceVersion": str(rv),
                         "labels": {"ray.io/cluster": cluster, "ray.io/group": group,
                                    "ray.io/node-type": "head" if group == "head" else "worker"},
                         "ownerReferences": [{"uid": owner, "controller": True}], "annotations": ann},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _change(kind: str, obj: dict, at: float = 1.0, exact: bool = True, resource: str = "pods") -> Change:
    return Change(resource, kind, obj, int(obj["metadata"].get("resourceVersion") or 0), at, exact)


def test_pods_on_target_and_deletions() -> None:
    old, new = ("h1-old", None, None), ("h1-new", None, None)
    pod = _pod("p", stamp=old)
    assert inv.pods_on_target([pod], "ns/c", {"w": new})
    assert not inv.pods_on_target([pod], "ns/c", {"w": old})
    changes = [_change("DELETED", pod)]
    assert inv.wrongly_deleted(changes, ["ns/c"]) and not inv.wrongly_deleted(changes, ["ns/other"])
    assert not inv.wrongly_deleted(changes, ["ns/c"], until=0.5)  # deleted after `until`
    assert {c.uid for c in inv.deletions(changes)} == {"p"}
    # a pod on the target that was there before the round is no second cycle; one made during it is
    spec_new = _cluster_on({"head": ("h1-h", None, None), "w": new}, rv=5)
    on_new = {"head": ("h1-h", None, None), "w": new}
    assert not inv.recreated_twice(changes, "ns/c", {"w": old})
    made = _pod("q", stamp=new, rv=7)
    twice = [_change("MODIFIED", spec_new, resource="rayclusters"), _change("ADDED", made), _change("DELETED", made)]
    assert inv.recreated_twice(twice, "ns/c", on_new)
    assert not inv.recreated_twice(twice, "ns/c", {"head": ("h1-h", None, None), "w": old})
    assert inv.recreated_twice(twice[1:], "ns/c", on_new, initial=[spec_new])  # the spec on target from the start


def _cluster_on(stamps: dict, rv: int) -> dict:
    """RayCluster ns/c whose templates carry ``stamps`` (group -> stamp), at revision ``rv``."""
    obj = live("c")
    obj["metadata"]["resourceVersion"] = str(rv)
    spec = obj["spec"]
    for group, tmpl in [("head", spec["headGroupSpec"]["template"])] + [
            (g["groupName"], g["template"]) for g in spec["workerGroupSpecs"]]:
        tmpl["metadata"] = {"annotations": {k: v for k, v in zip(
            (inv.HASH, inv.CONFIG_HASH, inv.SECRET_HASH), stamps[group]) if v}}
    return obj


def test_a_pod_the_old_spec_brings_back_is_no_second_cycle() -> None:
    """A failed attempt that resumed the old spec as it was brings back pods of the groups the
    commit left unchanged (their old template is their target): the next attempt's full cycle
    deletes them again, by design. Only pods made once the spec held the target count."""
    head_old, head_new, w = ("h1-old", None, None), ("h1-new", None, None), ("h1-w", None, None)
    target = {"head": head_new, "w": w}
    back = _pod("w-back", stamp=w, rv=3)  # made by the old spec, resumed as it was
    made = _pod("w-made", stamp=w, rv=9)  # made by the new spec
    changes = [_change("MODIFIED", _cluster_on({"head": head_old, "w": w}, rv=2), resource="rayclusters"),
               _change("ADDED", back), _change("DELETED", back),
               _change("MODIFIED", _cluster_on(target, rv=8), resource="rayclusters"),
               _change("ADDED", made)]
    assert inv.spec_on_target(changes, "ns/c", target)[0] == 8
    assert inv.recreated_twice(changes, "ns/c", target) == []
    (twice,) = inv.recreated_twice(changes + [_change("DELETED", made)], "ns/c", target)
    assert "w-made" in twice


def test_targets_and_stamps_carry_the_config_hashes() -> None:
    obj = raycluster("c", "img:1")
    obj["spec"]["headGroupSpec"]["template"]["metadata"] = {"annotations": {inv.HASH: "h1-a", inv.SECRET_HASH: "s1-x"}}
    obj["spec"]["workerGroupSpecs"][0]["template"]["metadata"] = {"annotations": {inv.HASH: "h1-b"}}
    assert inv.targets({"c": obj}, "ns") == {"ns/c": {"head": ("h1-a", None, "s1-x"), "w": ("h1-b", None, None)}}
    assert inv.stamp(_pod("p", "head", ("h1-a", None, "s1-x"))) == ("h1-a", None, "s1-x")


def test_false_successes_are_caught() -> None:
    cluster = live("c")
    cluster["metadata"]["uid"] = "cuid"
    target = {"ns/c": {"head": ("h1-h", None, None), "w": ("h1-new", None, None)}}
    fine = [_pod("h", "head", ("h1-h", None, None)), _pod("w1", stamp=("h1-new", None, None))]
    stale = fine + [_pod("w0", stamp=("h1-old", None, None))]
    report = {"clusters": [{"namespace": "ns", "name": "c", "decision": "recreate", "outcome": "recreated",
                            "message": "recreated; readiness not checked"}]}
    assert inv.false_successes(report, [cluster], fine, target, waited=False) == []
    (bad,) = inv.false_successes(report, [cluster], stale, target, waited=False)
    assert "w0" in bad and "reported recreated" in bad
    terminating = _pod("w0", stamp=("h1-old", None, None))
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    foreign = _pod("x", stamp=("h1-old", None, None), owner="someone-else")
    assert inv.false_successes(report, [cluster], fine + [foreign], target, waited=False) == []
    # an old pod still terminating: a recreate or replacement is not done (issue 46), in sync is
    (going,) = inv.false_successes(report, [cluster], fine + [terminating], target, waited=False)
    assert "w0" in going
    in_sync_going = {"clusters": [{"namespace": "ns", "name": "c", "decision": "in-sync", "reason": "..."}]}
    assert inv.false_successes(in_sync_going, [cluster], fine + [terminating], target, waited=False) == []
    removed = _pod("gone", group="removed", stamp=("h1-old", None, None))
    assert inv.false_successes(report, [cluster], fine + [removed], target, waited=False)  # a removed group's pod
    assert inv.false_successes(report, [cluster], fine + [_pod("w2", stamp=("h1-new", None, None), ready=False)],
                               target, waited=True)
    failed = {"clusters": [{"namespace": "ns", "name": "c", "decision": "recreate", "outcome": "failed"}]}
    in_sync = {"clusters": [{"namespace": "ns", "name": "c", "decision": "in-sync", "reason": "every pod ..."}]}
    assert inv.false_successes(failed, [cluster], stale, target, waited=True) == []
    assert inv.false_successes(in_sync, [cluster], stale, target, waited=True)


def test_leaks_find_a_value_and_its_base64() -> None:
    import base64

    texts = {"log": "wrote Secret/creds", "event": "x " + base64.b64encode(b"s3cret").decode(), "report": "s3cret!"}
    assert inv.leaks(["s3cret"], texts) == ["a Secret's value appears in event", "a Secret's value appears in report"]
    assert inv.leaks(["other"], texts) == []


def test_unavailability_follows_every_change() -> None:
    a, b, c = (_pod(n, "big") for n in "abc")
    start = [a, b, c]
    gone_a = dict(a, metadata=dict(a["metadata"], deletionTimestamp="t"))
    new_a = _pod("a2", "big", ready=False)
    ready_a = _pod("a2", "big")
    gone_b = dict(b, metadata=dict(b["metadata"], deletionTimestamp="t"))
    changes = [_change("MODIFIED", gone_a, 1), _change("DELETED", gone_a, 2), _change("ADDED", new_a, 3),
               _change("MODIFIED", gone_b, 4), _change("MODIFIED", ready_a, 5), _change("DELETED", gone_b, 6)]
    assert inv.unavailability(start, changes, "ns/c", {"big": 3}) == {"big": 2}  # at 4: a2 not Ready, b terminating
    assert inv.unavailability(start, changes, "ns/c", {"big": 3}, until=3.5) == {"big": 1}
    assert inv.unavailability(start, changes, "ns/other", {"big": 3}) == {"big": 3}


def test_pods_are_ordered_against_their_config_write() -> None:
    data = {"MODE": "b"}
    cm = {"metadata": {"name": "settings", "resourceVersion": "10"}, "data": {"MODE": "a"}}
    written = dict(cm, metadata={"name": "settings", "resourceVersion": "20"}, data=data)
    changes = [_change("MODIFIED", written, resource="configmaps")]
    assert inv.first_content([cm], changes, "configmaps", "settings", data) == 20
    assert inv.first_content([written], [], "configmaps", "settings", data) == 0
    assert inv.first_content([cm], [], "configmaps", "settings", data) is None
    new = ("h1-x", "c1-b", None)
    early, late = _pod("early", "big", new, rv=15), _pod("late", "big", new, rv=25)
    other = _pod("other", "small", ("h1-y", None, None), rv=5)
    listed, listed_early = _pod("listed", "big", new, rv=30), _pod("listed-early", "big", new, rv=18)
    pods = [_change("ADDED", p) for p in (early, late, other)] + [_change("ADDED", listed, exact=False)]
    bad, unordered = inv.created_before_config(pods, "ns/c", {"big": new}, 20)
    assert len(bad) == 1 and "early" in bad[0] and unordered == 1
    bad, _ = inv.created_before_config(pods + [_change("ADDED", listed_early, exact=False)], "ns/c", {"big": new}, 20)
    assert len(bad) == 2  # seen first in a list, but already at a revision before the write
    bad, _ = inv.created_before_config(pods, "ns/c", {"big": new}, None)  # never written: every one is early
    assert len(bad) == 3


def test_the_operators_scale_down_of_a_surplus_is_no_second_cycle() -> None:
    """A pod create whose answer the operator lost leaves one pod too many; KubeRay deletes a
    surplus worker at random, maybe a new one: not a second cycle. Deleting new pods while the
    group has only what its spec asks for is."""
    target = {"head": ("h1-h", None, None), "w": ("h1-new", None, None)}
    spec = _cluster_on(target, rv=5)
    replicas = spec["spec"]["workerGroupSpecs"][0]["replicas"]
    made = [_pod(f"w{i}", stamp=target["w"], rv=10 + i) for i in range(replicas + 1)]  # one too many
    changes = [_change("MODIFIED", spec, resource="rayclusters")] + [_change("ADDED", p) for p in made]
    gone = copy.deepcopy(made[0])
    gone["metadata"].update(resourceVersion="30", deletionTimestamp="2026-12-07T00:00:00Z")
    assert inv.recreated_twice(changes + [_change("MODIFIED", gone), _change("DELETED", gone)], "ns/c", target) == []
    second = copy.deepcopy(made[1])  # the surplus is gone: another deletion is a second cycle
    second["metadata"].update(resourceVersion="31")
    (twice,) = inv.recreated_twice(changes + [_change("DELETED", gone), _change("DELETED", second)], "ns/c", target)
    assert "w1" in twice
