"""The invariant checks catch what they claim to (synthetic objects, no cluster)."""

from __future__ import annotations

import copy
import json

from reliability import invariants as inv
from reliability.fleet import raycluster


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
    after["metadata"].update(resourceVersion="9", generation=3, managedFields=[])
    after["status"] = {"state": "suspended"}
    assert inv.hook_only_changes([before], [after]) == []


def test_hook_only_changes_catches_everything_else() -> None:
    edits = {
        "label": lambda o: o["metadata"]["labels"].update(team="b"),
        "foreign annotation": lambda o: o["metadata"]["annotations"].pop("example.com/x"),
        "replicas": lambda o: o["spec"]["workerGroupSpecs"][0].update(replicas=5),
        "maxReplicas": lambda o: o["spec"]["workerGroupSpecs"][0].update(maxReplicas=9),
        "headServiceAnnotations": lambda o: o["spec"].update(headServiceAnnotations={}),
        "upgradeStrategy": lambda o: o["spec"].update(upgradeStrategy={"type": "None"}),
        "ownerReferences": lambda o: o["metadata"].update(ownerReferences=[{"kind": "RayJob"}]),
        "head serviceType": lambda o: o["spec"]["headGroupSpec"].update(serviceType="NodePort"),
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


def test_pods_on_target_and_deletions() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"ray.io/cluster": "c"},
                        "annotations": {inv.HASH: "h1-old"}}}
    assert inv.pods_on_target([pod], "ns/c", {"h1-new"})
    assert not inv.pods_on_target([pod], "ns/c", {"h1-old"})
    watch = inv.PodWatch("unused", [])
    watch.live["u1"] = pod
    watch._record_gone(["u1"])
    assert watch.wrongly_deleted(["ns/c"]) and not watch.wrongly_deleted(["ns/other"])
    assert watch.recreated_twice("ns/c", {"h1-old"}) and not watch.recreated_twice("ns/c", {"h1-new"})
    assert watch.deleted_uids("ns/c") == {"u1"}
