"""The preflight on the real control plane (kube-scheduler, kube-controller-manager, kwok
nodes), under ``Recreate`` and ``ReplaceGroups``.

A cluster with a head and groups ``small`` and ``big`` runs; a change to group ``big`` that
cannot come up (it reads a Secret that does not exist, mounts a PVC that does not exist, or
requests more CPU than any node has) fails the hook, run with the rendered RBAC (Role,
ClusterRole) applied first as a sync applies it: exit 1, one line naming the cluster, the
group and what is wrong, the cluster untouched (never suspended, no lock left, the same pod
UIDs running). Then a good change (the object made, the request fixed) recreates as before.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import controlplane
from test_presync_hook import LOCK, desired_hashes, rendered
from test_removed_groups import two_groups
from test_replace_groups import HookApp, uids_by_group

pytestmark = pytest.mark.e2e

NEW = "rayproject/ray:2.42.0"
TOO_MANY_CPUS = "100000"  # more than any kwok node's allocatable


@pytest.fixture
def app(plane, tmp_path):
    ns = plane.create_namespace(controlplane.unique_name("e2e-preflight"))
    yield HookApp(plane, ns, tmp_path)
    plane.delete_namespace(ns, wait=False)
    plane.kubectl("delete", "clusterrole,clusterrolebinding", f"raygitops-presync-{ns}", "--ignore-not-found",
                  check=False)


def _big(obj: dict[str, Any]) -> dict[str, Any]:
    return next(g for g in obj["spec"]["workerGroupSpecs"] if g["groupName"] == "big")["template"]["spec"]


def broken(base: dict[str, Any], trouble: str) -> dict[str, Any]:
    """``base`` with group big's template changed so that its pods cannot come up."""
    obj = copy.deepcopy(base)
    spec = _big(obj)
    spec["containers"][0]["image"] = NEW
    if trouble == "missing-secret":
        spec["containers"][0].setdefault("env", []).append(
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "absent-token", "key": "token"}}})
    elif trouble == "missing-pvc":
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "absent-data"}}]
    else:
        spec["containers"][0]["resources"] = {"requests": {"cpu": TOO_MANY_CPUS}}
    return obj


WHAT = {"missing-secret": "Secret absent-token does not exist",
        "missing-pvc": "PersistentVolumeClaim absent-data does not exist",
        "too-big": f"its pod's requests (cpu: {TOO_MANY_CPUS}) fit none of the 3 nodes its constraints allow"}


def _run_hook(app: HookApp, obj: dict[str, Any], check: bool) -> tuple[Any, list[dict[str, Any]]]:
    """Render ``obj``, apply the hook's RBAC as rendered (a sync applies it first), run the hook
    with its ServiceAccount's token."""
    app.write(obj)
    objs, hooks, plan = app.render()
    app.plane.apply([h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS], namespace=app.ns)
    return app.presync(plan, check=check), objs


def _make_right(app: HookApp, trouble: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What fixes each trouble: the object made, or a request a node can hold."""
    if trouble == "missing-secret":
        app.plane.kubectl("create", "secret", "generic", "absent-token", "--from-literal=token=x", "-n", app.ns)
    elif trouble == "missing-pvc":
        app.plane.apply([
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{app.ns}"},
             "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                      "hostPath": {"path": "/tmp/raygitops-e2e-pv"},
                      "claimRef": {"namespace": app.ns, "name": "absent-data"}}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "absent-data", "namespace": app.ns},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": f"pv-{app.ns}",
                      "resources": {"requests": {"storage": "1Gi"}}}}])
    else:
        obj = copy.deepcopy(obj)
        _big(obj)["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    return obj


@pytest.mark.parametrize("strategy", ["Recreate", "ReplaceGroups"])
@pytest.mark.parametrize("trouble", ["missing-secret", "missing-pvc", "too-big"])
def test_a_change_that_cannot_come_up_fails_the_hook_and_leaves_the_cluster_running(app: HookApp, strategy: str,
                                                                                     trouble: str):
    base = two_groups(strategy=strategy)
    report = app.sync(base)
    assert report["summary"]["skipped"] == 1, report
    before = uids_by_group(app.wait_pods(count=5))
    generation = app.cluster()["metadata"]["generation"]

    res, _ = _run_hook(app, broken(base, trouble), check=False)
    report = json.loads(res.stdout)
    (demo,) = [c for c in report["clusters"] if c["name"] == "demo"]
    assert res.returncode == 1 and demo["outcome"] == "failed", res.stderr
    assert demo["message"].startswith("preflight failed, not touched: cluster demo, ") and WHAT[trouble] in \
        demo["message"] and "worker:big" in demo["message"] and "\n" not in demo["message"], demo["message"]
    if trouble == "too-big":
        assert "(node kwok-node-" in demo["message"], demo["message"]
    # untouched: never suspended, its spec as it was, no lock, the same pods running
    live = app.cluster()
    assert live["metadata"]["generation"] == generation and not live["spec"].get("suspend")
    assert LOCK not in (live["metadata"].get("annotations") or {})
    assert uids_by_group(app.wait_pods(count=5)) == before
    assert len(app.events("PreflightFailed")) == 1

    # raygitops status says the same, reading only
    _, status = app.status()
    (entry,) = [c for c in status["clusters"] if c["name"] == "demo"]
    assert entry["preflight"]["wouldFail"] is True and WHAT[trouble] in entry["detail"], entry

    # a good change goes through the preflight and recreates (or replaces)
    good = _make_right(app, trouble, broken(base, trouble))
    res, objs = _run_hook(app, good, check=True)
    report = json.loads(res.stdout)
    (demo,) = [c for c in report["clusters"] if c["name"] == "demo"]
    assert demo["outcome"] == ("replaced" if strategy == "ReplaceGroups" else "recreated") and not report["failed"], \
        res.stderr
    assert any("passed: checked" in line for line in res.stderr.splitlines()), res.stderr
    app.apply(objs)
    after = uids_by_group(app.wait_pods(count=5, hashes=desired_hashes(rendered(objs)), timeout=120))
    assert after["big"].isdisjoint(before["big"])
    if strategy == "ReplaceGroups":  # only big's pods were replaced
        assert after["headgroup"] == before["headgroup"] and after["small"] == before["small"]
