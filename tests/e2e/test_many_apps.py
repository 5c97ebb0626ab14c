"""Many apps, one namespace (issue 49), against the real control plane: the hooks run as the
rendered ServiceAccounts (their tokens), as processes, the way the hook Job runs them.

- The upgrade from fixed hook names: the first hook with per-app names removes the
  fixed-name objects Argo CD left (tracked as the app's), recreates nothing, deletes no pod.
- Two apps' hooks in one namespace at once: each recreates its own cluster exactly once,
  neither can write the other's cluster, their hook objects are apart.
- A cluster both apps' plans list: of two hooks at once exactly one passes, the other fails
  closed naming both apps.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import controlplane

from raygitops.model.hooknames import LEGACY, hook_names
from raygitops.model.names import CLAIM_ANNOTATION
from test_presync_hook import LAST, App, _start, _token_kubeconfig, raycluster

pytestmark = pytest.mark.e2e

OLD, NEW = "rayproject/ray:2.41.0", "rayproject/ray:2.42.0"
KINDS = {"ServiceAccount": "serviceaccount", "Role": "role.rbac.authorization.k8s.io",
         "RoleBinding": "rolebinding.rbac.authorization.k8s.io", "ConfigMap": "configmap", "Secret": "secret",
         "Job": "job.batch", "ClusterRole": "clusterrole.rbac.authorization.k8s.io",
         "ClusterRoleBinding": "clusterrolebinding.rbac.authorization.k8s.io"}  # the last two: the preflight's


def tracked(obj: dict[str, Any], app: str, namespace: str) -> dict[str, Any]:
    """``obj`` as Argo CD's annotation tracking leaves it on a resource of ``app``."""
    group = obj["apiVersion"].rpartition("/")[0]
    name = obj["metadata"]["name"]
    obj["metadata"].setdefault("annotations", {})["argocd.argoproj.io/tracking-id"] = \
        f"{app}:{group}/{obj['kind']}:{namespace}/{name}"
    return obj


def hook_rbac(app: App, hooks: list[dict[str, Any]]) -> str:
    """Apply the app's rendered ServiceAccount, Role and RoleBinding; a kubeconfig with the
    ServiceAccount's token (what the hook Job's pod gets)."""
    rbac = [h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS]
    app.plane.apply(rbac, namespace=app.ns)
    account = next(h["metadata"]["name"] for h in rbac if h["kind"] == "ServiceAccount")
    return _token_kubeconfig(app, app.tmp / f"{account}.kubeconfig", app.ns, account)


def named_app(plane, namespace: str, tmp: Path, name: str) -> App:
    app = App(plane, namespace, tmp / name)
    app.app_name = name
    return app


def at_once(*runs: tuple[App, Path, str]) -> list[Any]:
    """Run the hooks as processes at the same time; their JSON reports (or the process)."""
    out: list[Any] = [None] * len(runs)

    def one(i: int, app: App, plan: Path, kubeconfig: str) -> None:
        res = app.presync(plan, kubeconfig=kubeconfig, check=False)
        out[i] = (res.returncode, json.loads(res.stdout) if res.stdout.strip() else None, res.stderr)

    threads = [threading.Thread(target=one, args=(i, *run)) for i, run in enumerate(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_upgrade_from_fixed_names_recreates_nothing_and_leaves_no_orphan(control_plane, namespace, tmp_path):
    app = App(control_plane, namespace, tmp_path)
    uids = _start(app)
    # what Argo CD left of the syncs before the upgrade: the fixed-name hook objects, tracked
    # as the app's (the Job suspended: only its object matters here)
    _, hooks, _ = app.render()
    hooks = [h for h in hooks if "Cluster" not in h["kind"]]  # the fixed-name releases had no ClusterRole
    assert {h["metadata"]["name"] for h in hooks} == {LEGACY.presync, LEGACY.plan}
    left = [tracked(h, "team-a", namespace) for h in hooks]
    next(h for h in left if h["kind"] == "Job")["spec"]["suspend"] = True
    left.append(tracked({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": LEGACY.plan_secrets},
                         "data": {"secrets.json": "e30="}}, "team-a", namespace))
    control_plane.apply(left, namespace=namespace)
    assert all(control_plane.get(KINDS[h["kind"]], h["metadata"]["name"], namespace) for h in left)

    app.app_name = "team-a"  # the same commit, now rendered with per-app names
    app.write(raycluster())
    objs, hooks, plan = app.render()
    names = hook_names("team-a")
    assert {h["metadata"]["name"] for h in hooks} == {names.presync, names.plan, f"{names.presync}-{namespace}"}
    started = time.monotonic()
    res = app.presync(plan, kubeconfig=hook_rbac(app, hooks))
    report = json.loads(res.stdout)
    assert report["summary"]["inSync"] == 1 and not report["failed"], res.stderr
    assert "removed the fixed-name hook objects of app team-a" in res.stderr, res.stderr
    for h in left:  # every fixed-name object gone (the Job's in the background)
        control_plane.wait_for(lambda h=h: control_plane.get(KINDS[h["kind"]], h["metadata"]["name"], namespace)
                               is None, timeout=30, message=f"{h['kind']} {h['metadata']['name']} removed")
    app.apply(objs)
    time.sleep(2)
    assert app.uids() == uids  # no pod deleted
    live = app.cluster()
    assert live["metadata"]["annotations"][CLAIM_ANNOTATION] == "team-a" and LAST not in live["metadata"]["annotations"]
    print(f"upgrade hook run {time.monotonic() - started:.1f}s, {report['apiRequests']} API requests")


def test_two_apps_hooks_in_one_namespace_at_once_each_on_its_own(control_plane, namespace, tmp_path):
    a, b = (named_app(control_plane, namespace, tmp_path, n) for n in ("team-a", "team-b"))
    for app, cluster in ((a, "a1"), (b, "b1")):
        app.sync(raycluster(cluster, image=OLD))
        app.wait_pods(cluster)
    before = {"a1": a.uids("a1"), "b1": b.uids("b1")}
    runs = []
    for app, cluster in ((a, "a1"), (b, "b1")):
        app.write(raycluster(cluster, image=NEW))
        objs, hooks, plan = app.render()
        app.plane.apply([h for h in hooks if h["kind"] == "ConfigMap"], namespace=namespace)
        runs.append((app, plan, hook_rbac(app, hooks), objs, hooks))
    objects = {app.app_name: {(h["kind"], h["metadata"]["name"]) for h in hooks} for app, _, _, _, hooks in runs}
    assert not objects["team-a"] & objects["team-b"]
    versions = {k: control_plane.get(KINDS[k[0]], k[1], namespace)["metadata"]["resourceVersion"]
                for keys in objects.values() for k in keys if k[0] != "Job"}
    # neither hook's ServiceAccount may write the other's cluster
    for (app, *_), other in zip(runs, ("b1", "a1")):
        account = f"system:serviceaccount:{namespace}:{hook_names(app.app_name).presync}"
        for verb, allowed in (("patch", "no"), ("get", "no"), ("list", "yes")):
            res = control_plane.kubectl("auth", "can-i", verb, f"rayclusters.ray.io/{other}" if verb != "list"
                                        else "rayclusters.ray.io", "-n", namespace, "--as", account, check=False)
            assert res.stdout.strip() == allowed, (account, verb, other, res.stdout, res.stderr)

    results = at_once(*[(app, plan, kubeconfig) for app, plan, kubeconfig, _, _ in runs])
    for (code, report, stderr), (app, *_rest) in zip(results, runs):
        assert code == 0 and report["summary"]["recreated"] == 1 and not report["failed"], (app.app_name, stderr)
    for app, _, _, objs, _ in runs:
        app.apply(objs)
    for app, cluster in ((a, "a1"), (b, "b1")):
        pods = app.wait_pods(cluster)
        assert before[cluster].isdisjoint({p["metadata"]["uid"] for p in pods})
        assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {NEW}
        assert len(app.events("RecreateStarted", cluster)) == 1  # exactly once
        assert app.cluster(cluster)["metadata"]["annotations"][CLAIM_ANNOTATION] == app.app_name
    # each app's hook objects as its own render applied them: the other's run touched none
    assert {k: control_plane.get(KINDS[k[0]], k[1], namespace)["metadata"]["resourceVersion"]
            for k in versions} == versions


def test_a_cluster_two_apps_list_fails_closed_naming_both_even_at_once(control_plane, namespace, tmp_path):
    a, b = (named_app(control_plane, namespace, tmp_path, n) for n in ("team-a", "team-b"))
    report = a.sync(raycluster("shared", image=OLD))  # made by app team-a (not there yet: nothing claimed)
    assert report["summary"]["skipped"] == 1
    a.wait_pods("shared")
    uids = a.uids("shared")
    runs = []
    for app in (a, b):  # then both apps render it, with a new image: a commit that copied it
        app.write(raycluster("shared", image=NEW))
        _, hooks, plan = app.render()
        runs.append((app, plan, hook_rbac(app, hooks)))
    results = at_once(*runs)
    passed = [app.app_name for (code, _, _), (app, *_) in zip(results, runs) if code == 0]
    failed = [(app.app_name, report) for (code, report, _), (app, *_) in zip(results, runs) if code != 0]
    assert len(passed) == 1 and len(failed) == 1, results
    (loser, report), = failed
    reason = next(c["message"] if "message" in c else c["reason"] for c in report["clusters"])
    assert f"claimed by app {passed[0]}" in reason and f"plan of app {loser} lists it too" in reason, reason
    claim = a.cluster("shared")["metadata"]["annotations"][CLAIM_ANNOTATION]
    assert claim == passed[0]
    a.wait_pods("shared")
    assert uids.isdisjoint(a.uids("shared")) and len(a.events("RecreateStarted", "shared")) == 1
    # the loser's next run fails the same way, touching nothing
    res = dict(zip(("team-a", "team-b"), runs))[loser]
    again = json.loads(res[0].presync(res[1], kubeconfig=res[2], check=False).stdout)
    assert again["failed"] and again["summary"]["failed"] == 1
    assert len(a.events("RecreateStarted", "shared")) == 1
