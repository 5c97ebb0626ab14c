"""The hook's guarantees (docs/presync.md) against the in-memory FakeKube: fast checks of the
logic.  Each one is proven on the real control plane in tests/e2e/test_presync_guarantees.py."""

from __future__ import annotations

import json
import threading

from raygitops.model.names import HASH_ANNOTATION
from raygitops.model.plan import Plan
from raygitops.presync import budget, cycle
from raygitops.model import pods, verdict
from raygitops.model import lock as locks
from raygitops.kube.client import ApiError
from raygitops.model import names

from test_presync_cycle import NEW, OLD, _run
from test_presync_fakes import NS, FakeClock, FakeKube, cluster_spec, make_plan, stamped


def _outcome(report, name="demo"):
    return report.outcomes[f"{NS}/{name}"]


# ----------------------------------------------------------------------------- G3 signals


def test_stop_mid_drain_resumes_as_it_was_and_fails():
    kube = FakeKube(delete_on_suspend=False)  # the operator never deletes: the drain waits
    kube.add_cluster("demo", stamped(OLD))
    stop = threading.Event()
    kube.clock.call_later(1.0, stop.set)  # SIGTERM a second into the drain
    began = kube.clock.monotonic()
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=60, stop=stop)
    assert kube.clock.monotonic() - began < 10
    assert report.failed and _outcome(report).result == cycle.FAILED
    assert "interrupted" in _outcome(report).message and "resumed as it was" in _outcome(report).message
    live = kube.clusters[(NS, "demo")]
    assert live["spec"]["suspend"] is False and names.LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert _hashes_of(live) != make_plan(spec=NEW).hashes.head  # old templates: no half-new cluster


def test_stop_before_a_cycle_starts_leaves_it_untouched():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    stop = threading.Event()
    stop.set()
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], stop=stop)
    assert report.failed and _outcome(report).result == cycle.DEFERRED and kube.patches == []


def _hashes_of(live):
    return live["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"][HASH_ANNOTATION]


# ----------------------------------------------------------------------------- G4


def test_cluster_suspended_outside_git_is_resumed_with_the_desired_spec():
    kube = FakeKube()
    kube.add_cluster("demo", dict(stamped(OLD), suspend=True), pods=False)
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert not report.failed and _outcome(report).result == cycle.RECREATED
    assert "resumed a cluster suspended outside Git" in _outcome(report).message
    live = kube.clusters[(NS, "demo")]
    assert live["spec"]["suspend"] is False and _hashes_of(live) == make_plan(spec=NEW).hashes.head


# ----------------------------------------------------------------------------- G5


def test_one_unhashable_cluster_never_stops_the_others():
    kube = FakeKube()
    broken = cluster_spec(workers=("small", "small"))  # two groups with one groupName
    kube.add_cluster("broken", broken, pods=False)
    kube.add_cluster("demo", stamped(OLD))
    kube.add_pod(NS, "broken", "worker", "small", {})
    report, _ = _run(kube, [Plan(NS, [make_plan("broken", spec=NEW), make_plan(spec=NEW)])])
    assert report.failed
    assert report.counts()["recreated"] == 1 and report.counts()["failed"] == 1
    bad = next(d for d in report.decisions if d.name == "broken")
    assert bad.action == verdict.FAIL and "cannot" in bad.reason


def test_a_forbidden_namespace_fails_its_clusters_only():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    real = kube.list_clusters

    def forbidden(namespace):
        if namespace == "locked-down":
            raise ApiError(403, "Forbidden", "rayclusters is forbidden")
        return real(namespace)

    kube.list_clusters = forbidden
    report, _ = _run(kube, [Plan("locked-down", [make_plan("x", spec=NEW)]), Plan(NS, [make_plan(spec=NEW)])])
    assert report.counts()["recreated"] == 1 and report.counts()["failed"] == 1 and report.failed
    assert "forbidden" in next(d for d in report.decisions if d.name == "x").reason


# ----------------------------------------------------------------------------- G6


def test_budget_floor_then_longest_cycle():
    clock = FakeClock()
    b = budget.Budget(clock.monotonic() + 40, 100, clock)
    assert b.estimate() == budget.FLOOR_SECONDS and b.shortfall() is None
    clock.advance(9.5)
    assert b.shortfall() is None  # 30.5 s left, 30 s needed
    clock.advance(1)
    assert "floor" in b.shortfall()
    b.record(50)
    b.record(20)
    assert b.estimate() == 50 * budget.MARGIN and "longest cycle" in b.shortfall()
    assert budget.Budget(clock.monotonic() + 4, 4, clock).estimate() == 2  # a short timeout still fits one cycle


def test_no_cycle_starts_without_the_time_to_finish_it():
    kube = FakeKube()
    for name in ("a", "b"):
        kube.add_cluster(name, stamped(OLD))
    slow = kube._operate

    def slow_operator(obj):  # each cycle takes about 3 s
        if obj["spec"].get("suspend") is True:
            kube.clock.advance(3)
        slow(obj)

    kube._operate = slow_operator
    report, _ = _run(kube, [Plan(NS, [make_plan("a", spec=NEW), make_plan("b", spec=NEW)])], timeout=6,
                     max_parallel=1)
    assert report.counts()["recreated"] == 1 and report.counts()["deferred"] == 1 and report.failed
    deferred = next(o for o in report.outcomes.values() if o.result == cycle.DEFERRED)
    assert "the longest cycle" in deferred.message
    live = kube.clusters[(NS, deferred.name)]
    assert live["spec"].get("suspend") is not True and not live["metadata"]["annotations"]
    assert _hashes_of(live) != make_plan(spec=NEW).hashes.head


# ----------------------------------------------------------------------------- G7


def test_a_suspend_that_does_not_stick_fails_boundedly():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    real = kube.patch_cluster

    def webhook(namespace, name, patch):  # a mutating webhook that forces suspend to false
        if (patch.get("spec") or {}).get("suspend") is True:
            patch = json.loads(json.dumps(patch))
            patch["spec"]["suspend"] = False
        return real(namespace, name, patch)

    kube.patch_cluster = webhook
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert report.failed and "does not stick" in _outcome(report).message
    assert kube.by_verb["patch"] <= cycle.MAX_SUSPEND_WRITES + 3  # lock, suspends, unlock
    assert len(kube.pods_of("demo")) == 3


# ----------------------------------------------------------------------------- #21 unverified


def _recreated_unverified(kube, outcome):
    plan = make_plan(spec=NEW)
    record = {"from": None, "to": plan.hashes.to_json(), "startedAt": "2026-01-01T00:00:00.000000Z",
              "finishedAt": "2026-01-01T00:01:00.000000Z", "outcome": outcome}
    kube.add_cluster("demo", stamped(NEW), annotations={names.LAST_ANNOTATION: locks.json_record(record)})
    return plan


def test_a_failed_recreate_stays_failed_until_ready():
    kube = FakeKube()
    plan = _recreated_unverified(kube, locks.FAILED)
    for pod in kube.pods_of("demo")[1:]:
        pod["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                             "reason": "Unschedulable"}]}
    report, _ = _run(kube, [Plan(NS, [plan])], timeout=2)
    assert report.decisions[0].action == verdict.VERIFY
    assert report.failed and "still unverified" in _outcome(report).message
    # the pods become ready: the next run says so and records it
    for pod in kube.pods_of("demo"):
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    report, _ = _run(kube, [Plan(NS, [plan])], timeout=2)
    assert not report.failed and "verified ready" in _outcome(report).message
    record = json.loads(kube.clusters[(NS, "demo")]["metadata"]["annotations"][names.LAST_ANNOTATION])
    assert record["outcome"] == locks.COMPLETED
    report, _ = _run(kube, [Plan(NS, [plan])])
    assert report.decisions[0].action == verdict.IN_SYNC and not report.outcomes


def test_without_wait_ready_it_says_readiness_was_not_checked():
    kube = FakeKube()
    plan = _recreated_unverified(kube, locks.UNVERIFIED)
    report, _ = _run(kube, [Plan(NS, [plan])], wait_ready=False)
    assert not report.failed and "readiness not checked" in _outcome(report).message
    kube2 = FakeKube()
    kube2.add_cluster("demo", stamped(OLD))
    report, _ = _run(kube2, [Plan(NS, [make_plan(spec=NEW)])], wait_ready=False)
    record = json.loads(kube2.clusters[(NS, "demo")]["metadata"]["annotations"][names.LAST_ANNOTATION])
    assert record["outcome"] == locks.UNVERIFIED and "readiness not checked" in _outcome(report).message


def test_ready_means_every_expected_pod_ready_not_a_stale_status():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(NEW))
    live = kube.clusters[(NS, "demo")]
    plan = make_plan(spec=NEW)
    pod_list = kube.pods_of("demo")
    assert verdict.ready_for(plan, live, pod_list)[0]
    assert not verdict.ready_for(plan, live, pod_list[:-1])[0]  # a worker missing
    pod_list[-1]["status"] = {"phase": "Pending"}
    ok, why = verdict.ready_for(plan, live, pod_list)
    assert not ok and "not Ready" in why  # whatever status.state says
    assert pods.pods_now({"workerGroupSpecs": [{"groupName": "g", "replicas": 5, "maxReplicas": 3,
                                                "numOfHosts": 2}]}) == pods.PodCount(7, 7)
    assert pods.pods_now({"enableInTreeAutoscaling": True,
                          "workerGroupSpecs": [{"groupName": "g", "replicas": 5, "minReplicas": 1}]}) == pods.PodCount(2, None)


def test_failure_reason_names_each_failed_or_deferred_cluster_in_one_line() -> None:
    from raygitops.presync import cycle
    from raygitops.presync.context import Outcome
    from raygitops.model import verdict
    from raygitops.presync.run import Report

    decisions = [verdict.Verdict("ns", "a", verdict.RECREATE, "drift"), verdict.Verdict("ns", "b", verdict.FAIL, "403\nForbidden"),
                 verdict.Verdict("ns", "c", verdict.RECREATE, "drift"), verdict.Verdict("ns", "d", verdict.IN_SYNC, "same")]
    outcomes = {"ns/a": Outcome("ns", "a", cycle.FAILED, "new pods not ready after 40 s"),
                "ns/c": Outcome("ns", "c", cycle.DEFERRED, "does not fit the time left")}
    report = Report(decisions=decisions, outcomes=outcomes)
    assert report.failed
    assert report.failure_reason() == ("ns/a: new pods not ready after 40 s; ns/b: 403 Forbidden; "
                                       "ns/c: does not fit the time left")
    report.interrupted = True
    assert report.failure_reason().endswith("; stopped by a signal")
    assert Report(decisions=decisions[3:]).failure_reason() == ""
