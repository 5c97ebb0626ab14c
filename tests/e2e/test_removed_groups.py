"""A worker group removed from the spec, on both operators (KubeRay 1.5 and KUBERAY_NEXT_VERSION).

What the operator does by itself (the cluster not opted in): the removed group's pods are
left running; ray-project/kuberay #1739 (seen on v1.5.0 when issue #22 was filed). What
raygitops does today under ``Recreate``: the removal is drift, the full cycle deletes every
pod, and the operator makes pods for the groups the spec still has, none for the removed one.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import controlplane
import pytest
from test_presync_hook import App, desired_hashes, raycluster, rendered

pytestmark = pytest.mark.e2e
LEFT_ALONE_SECONDS = 30  # how long the removed group's pods are watched without raygitops


@pytest.fixture
def app(plane, tmp_path):
    ns = plane.create_namespace(controlplane.unique_name("e2e-groups"))
    yield App(plane, ns, tmp_path)
    plane.delete_namespace(ns, wait=False)


def two_groups(image: str = "rayproject/ray:2.41.0", strategy: str | None = "Recreate") -> dict[str, Any]:
    """Head + group ``small`` (2) + group ``big`` (2)."""
    obj = raycluster(image=image, strategy=strategy)
    big = copy.deepcopy(obj["spec"]["workerGroupSpecs"][0])
    big["groupName"] = "big"
    obj["spec"]["workerGroupSpecs"].append(big)
    return obj


def without_big(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["workerGroupSpecs"] = [g for g in obj["spec"]["workerGroupSpecs"] if g["groupName"] != "big"]
    return obj


def groups(pods: list[dict[str, Any]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for p in pods:
        if not p["metadata"].get("deletionTimestamp"):
            group = p["metadata"]["labels"].get("ray.io/group", "?")
            found[group] = found.get(group, 0) + 1
    return found


def test_removed_group_is_left_running_by_the_operator_and_removed_by_the_recreate(app: App, plane):
    # 1. not opted in: the operator alone
    app.sync(two_groups(strategy=None))
    app.wait_pods(count=5)
    report = app.sync(without_big(two_groups(strategy=None)))
    assert report is None or report["summary"]["recreated"] == 0
    time.sleep(LEFT_ALONE_SECONDS)
    left = groups(app.pods())
    assert left.get("big") == 2, (plane.kuberay, left)  # the operator leaves them running (kuberay #1739)

    # 2. opted in (Recreate): the hook's full cycle replaces every pod; none of `big` comes back
    old = app.uids()
    opted = without_big(two_groups())
    report = app.sync(opted)
    assert report["summary"]["recreated"] == 1 and not report["failed"], report
    objs, _, _ = app.render()
    pods = app.wait_pods(count=3, hashes=desired_hashes(rendered(objs)))
    assert groups(pods) == {"headgroup": 1, "small": 2}
    assert old.isdisjoint({p["metadata"]["uid"] for p in pods})
