"""Drift decisions: pure, from plan + live RayCluster + live pods."""

from __future__ import annotations

import copy

from raygitops.model.names import HASH_ANNOTATION
from raygitops.model import pods, verdict
from raygitops.model import lock as locks
from raygitops.model import names

from test_presync_fakes import NS, FakeKube, cluster_spec, make_plan, stamped, with_crd_defaults


def _setup(live_spec, hash_override=None, **kw):
    kube = FakeKube()
    live = kube.add_cluster("demo", with_crd_defaults(stamped(live_spec)), pods=False, **kw)
    kube.create_pods(NS, "demo", hash_override)
    return live, kube.pods_of("demo")


def test_in_sync():
    live, pods = _setup(cluster_spec())
    d = verdict.decide(NS, make_plan(), live, pods)
    assert d.action == verdict.IN_SYNC and d.pods.min == 3 and not d.drift


def test_image_change_drifts_every_group_by_pod_hash():
    live, pods = _setup(cluster_spec())
    d = verdict.decide(NS, make_plan(spec=cluster_spec(image="rayproject/ray:2.42.0")), live, pods)
    assert d.action == verdict.RECREATE
    assert set(d.drift) == {"head", "worker:small"}
    assert all(g.how == "pod-hash" for g in d.drift.values())
    assert d.source["head"] == live["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"][HASH_ANNOTATION]


def test_replicas_only_change_is_no_drift():
    live, pods = _setup(cluster_spec(replicas=2))
    d = verdict.decide(NS, make_plan(spec=cluster_spec(replicas=5)), live, pods)
    assert d.action == verdict.IN_SYNC


def test_env_change_in_one_group_only():
    spec = cluster_spec(workers=("a", "b"))
    live, pods = _setup(spec)
    new = copy.deepcopy(spec)
    new["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["env"][0]["value"] = "debug"
    d = verdict.decide(NS, make_plan(spec=new), live, pods)
    assert set(d.drift) == {"worker:b"}


def test_pods_without_hash_fall_back_to_live_spec_with_defaults_stripped():
    # Adoption: pods made before raygitops carry no hash; the live spec was defaulted by the
    # API server.  Same spec → never drift (upgrading raygitops must not recreate pods).
    live, pods = _setup(cluster_spec(), hash_override="")
    assert all(HASH_ANNOTATION not in p["metadata"]["annotations"] for p in pods)
    d = verdict.decide(NS, make_plan(), live, pods)
    assert d.action == verdict.IN_SYNC, d.reason


def test_pods_without_hash_and_changed_spec_drift_by_spec_hash():
    live, pods = _setup(cluster_spec(), hash_override="")
    d = verdict.decide(NS, make_plan(spec=cluster_spec(image="new:1")), live, pods)
    assert d.action == verdict.RECREATE
    assert {g.how for g in d.drift.values()} == {"spec-hash"}


def test_other_scheme_hash_is_not_drift_by_itself():
    live, pods = _setup(cluster_spec(), hash_override="h2-0123456789abcdef0123")
    assert verdict.decide(NS, make_plan(), live, pods).action == verdict.IN_SYNC
    d = verdict.decide(NS, make_plan(spec=cluster_spec(env="debug")), live, pods)
    assert d.action == verdict.RECREATE and {g.how for g in d.drift.values()} == {"spec-hash"}


def test_live_spec_equal_but_pods_stale_is_drift():
    # Argo CD already applied the new spec (e.g. a hook that was not run): pods are stale.
    live, pods = _setup(cluster_spec(image="old:1"))
    new_spec = with_crd_defaults(stamped(cluster_spec(image="new:1")))
    live = dict(live, spec=new_spec)
    d = verdict.decide(NS, make_plan(spec=cluster_spec(image="new:1")), live, pods)
    assert d.action == verdict.RECREATE and {g.how for g in d.drift.values()} == {"pod-hash"}


def test_removed_group_pods_are_stale():
    live, pods = _setup(cluster_spec(workers=("a", "b")))
    d = verdict.decide(NS, make_plan(spec=cluster_spec(workers=("a",))), live, pods)
    assert d.action == verdict.RECREATE and d.drift["worker:b"].how == "removed-group"


def test_added_group_is_not_drift():
    live, pods = _setup(cluster_spec(workers=("a",)))
    assert verdict.decide(NS, make_plan(spec=cluster_spec(workers=("a", "b"))), live, pods).action == verdict.IN_SYNC


def test_terminating_and_non_ray_pods_ignored():
    live, pods = _setup(cluster_spec())
    stale = copy.deepcopy(pods[0])
    stale["metadata"]["annotations"][HASH_ANNOTATION] = "h1-0000000000000000"
    stale["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cleanup = copy.deepcopy(pods[0])
    cleanup["metadata"]["labels"]["ray.io/node-type"] = "redis-cleanup"
    cleanup["metadata"]["annotations"][HASH_ANNOTATION] = "h1-0000000000000000"
    assert verdict.decide(NS, make_plan(), live, pods + [stale, cleanup]).action == verdict.IN_SYNC


def test_no_pods_is_in_sync():
    live, _ = _setup(cluster_spec())
    d = verdict.decide(NS, make_plan(spec=cluster_spec(image="x")), live, [])
    assert d.action == verdict.IN_SYNC and "no pods" in d.reason


def test_skips_with_reasons():
    live, pods = _setup(cluster_spec(image="old"))
    new = cluster_spec(image="new")
    cases = [
        (make_plan(spec=new, strategy="None"), live, "not opted in"),
        (make_plan(spec=new, suspend=True), live, "suspend is true"),
        (make_plan(spec=new, owner="RayJob/j"), live, "owned by RayJob/j"),
        (make_plan(spec=new), None, "absent"),
    ]
    for plan, obj, why in cases:
        d = verdict.decide(NS, plan, obj, pods)
        assert d.action == verdict.SKIP and why in d.reason, (why, d.reason)


def test_live_owner_reference_and_origin_label_skip():
    for kw in ({"owner_kind": "RayService"}, {"owner_kind": "RayCronJob"},
               {"labels": {"ray.io/originated-from-crd": "RayJob"}},
               {"labels": {"ray.io/originated-from-crd": "RayCronJob"}}):
        live, pods = _setup(cluster_spec(image="old"), **kw)
        d = verdict.decide(NS, make_plan(spec=cluster_spec(image="new")), live, pods)
        assert d.action == verdict.SKIP and "owned by Ray" in d.reason


def test_suspended_outside_git_is_resumed():
    live, pods = _setup(cluster_spec(image="old"))
    live["spec"]["suspend"] = True
    d = verdict.decide(NS, make_plan(spec=cluster_spec(image="new")), live, pods)
    assert d.action == verdict.RECREATE and d.outside_git and "suspended outside Git" in d.reason
    # ... but a cluster Git wants suspended, or one that does not opt in, is left alone
    assert verdict.decide(NS, make_plan(spec=cluster_spec(image="new"), suspend=True), live, pods).action == verdict.SKIP
    assert verdict.decide(NS, make_plan(strategy="None"), live, pods).action == verdict.SKIP


def test_lock_present_means_finish_the_cycle():
    live, _ = _setup(cluster_spec(image="old"))
    lock = locks.new_lock("other/1/x", {"head": "h1-a"}, None, 0.0)
    live["metadata"]["annotations"][names.LOCK_ANNOTATION] = lock.at(locks.SUSPENDED, 0.0).to_annotation()
    live["spec"]["suspend"] = True
    d = verdict.decide(NS, make_plan(spec=cluster_spec(image="new")), live, [])
    assert d.action == verdict.RECREATE and "phase suspended" in d.reason
    # a cluster that does not opt in is never recreated, whatever it carries: the lock is dropped
    for plan in (make_plan(strategy="None"), make_plan(owner="RayJob/j")):
        d = verdict.decide(NS, plan, live, [])
        assert d.action == verdict.RELEASE and "deleting nothing" in d.reason, d.reason
    # but a desired-suspended cluster only loses the lock
    assert verdict.decide(NS, make_plan(suspend=True), live, []).action == verdict.RELEASE


def test_foreign_pods_never_drift_and_are_named():
    live, pod_list = _setup(cluster_spec())
    foreign = copy.deepcopy(pod_list[0])
    foreign["metadata"].update(name="made-by-hand", uid="u-foreign", ownerReferences=[])
    foreign["metadata"]["annotations"][HASH_ANNOTATION] = "h1-0000000000000000"
    other = copy.deepcopy(foreign)
    other["metadata"].update(name="other-owner", ownerReferences=[{"kind": "Job", "uid": "x", "controller": True}])
    d = verdict.decide(NS, make_plan(), live, pod_list + [foreign, other])
    assert d.action == verdict.IN_SYNC and d.pods.min == 3
    assert pods.foreign_pods(live, pod_list + [foreign, other]) == ["made-by-hand", "other-owner"]


def test_pods_by_cluster_and_group_key():
    kube = FakeKube()
    kube.add_cluster("a", stamped(cluster_spec()))
    kube.add_cluster("b", stamped(cluster_spec(workers=("x", "y"))))
    grouped = pods.by_cluster(list(kube.pods.values()))
    assert {k: len(v) for k, v in grouped.items()} == {"a": 3, "b": 5}
    assert {pods.group_key(p) for p in grouped["b"]} == {"head", "worker:x", "worker:y"}


def test_ready_checks():
    live, pod_list = _setup(cluster_spec())
    plan = make_plan()
    assert verdict.ready_for(plan, live, pod_list)[0]
    assert not verdict.ready_for(make_plan(spec=cluster_spec(image="n")), live, pod_list)[0]
    assert not verdict.ready_for(plan, live, [p for p in pod_list if pods.group_key(p) != "head"])[0]
    assert verdict.cluster_ready({"status": {"state": "ready"}})[0]
    assert verdict.cluster_ready({"status": {"conditions": [{"type": "RayClusterProvisioned", "status": "True"}]}})[0]
    assert not verdict.cluster_ready({"status": {"state": "suspended"}})[0]
    assert not verdict.cluster_ready({})[0]
