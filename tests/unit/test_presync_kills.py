"""A hook killed between ANY two of its writes, then the next run (which takes the lock over
once its lease has passed): whatever the next run reports as done is true.

Every write the hook makes (a RayCluster patch, an Event, a pod DELETE) is counted; for each
``k`` the first run dies just before its ``k``-th write (SIGKILL: nothing after it runs, not
even the recovery), on the cycle's happy path, after a failure whose recovery resumes the
cluster as it was (the drain had not finished), after one whose recovery resumes it with the
desired spec, after a stop request mid-drain, and in a replacement (ReplaceGroups). The next
runs, with and without ``--wait-ready``: a cluster reported recreated, replaced or in sync
runs only pods of its desired templates at that moment; no run leaves a cluster suspended
when it succeeds; within two more runs every cluster is on its target, unlocked; and a
cycle is announced (Event ``RecreateStarted``) once per attempt, never again by a takeover.

The same on the real control plane, for the resumed-as-it-was gap: tests/e2e/test_presync_hook.py
(``test_a_hook_killed_inside_its_recovery_never_reports_a_recreate_that_did_not_happen``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import threading
from typing import Any, Callable

import pytest

from raygitops.kube.client import ApiError
from raygitops.model import pods, strategy
from raygitops.model.names import HASH_ANNOTATION, LOCK_ANNOTATION
from raygitops.model.plan import ClusterPlan, Plan
from raygitops.presync import cycle
from raygitops.presync.logs import Log
from raygitops.presync.run import RunOptions, run

from test_presync_fakes import NS, FakeKube, cluster_spec, make_plan, stamped, with_crd_defaults

OLD, NEW = cluster_spec(image="old:1"), cluster_spec(image="new:2")
WRITES = ("patch_cluster", "create_event", "delete_pod", "create_core", "patch_core")
SUCCESS = (cycle.RECREATED, cycle.REPLACED, cycle.IN_SYNC)


class Killed(BaseException):
    """SIGKILL: the hook dies here, before this write; nothing of it runs any more."""


@dataclasses.dataclass
class Scenario:
    """A cluster, the plan of the next sync, and what goes wrong in the first run."""

    name: str
    kube: Callable[[], FakeKube]
    plan: ClusterPlan
    trouble: Callable[[FakeKube, threading.Event], Callable[[], None]] | None = None  # returns its undo


def _two_groups(big_image: str) -> dict[str, Any]:
    spec = cluster_spec(workers=("small", "big"))
    spec["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = big_image
    return spec


def _cluster(spec: dict[str, Any], **kw: Any) -> Callable[[], FakeKube]:
    def make() -> FakeKube:
        kube = FakeKube(**kw)
        kube.add_cluster("demo", with_crd_defaults(stamped(spec)))
        return kube
    return make


def _drain_list_fails(kube: FakeKube, stop: threading.Event) -> Callable[[], None]:
    """The operator does not delete the pods and the drain's LIST gets a 500: the recovery
    resumes the cluster as it was (its old pods still run)."""
    real_list = kube.list_pods
    failed = {"done": False}

    def flaky(ns: str, selector: str):
        if not failed["done"] and kube.clusters[(NS, "demo")]["spec"].get("suspend") is True:  # the drain's
            failed["done"] = True
            raise ApiError(500, "InternalError", "boom")
        return real_list(ns, selector)

    kube.delete_on_suspend, kube.list_pods = False, flaky

    def undo() -> None:
        kube.delete_on_suspend, kube.list_pods = True, real_list
    return undo


def _resume_fails(kube: FakeKube, stop: threading.Event) -> Callable[[], None]:
    """The resume write gets a 500 once (not written): the drain had finished, so the
    recovery resumes the cluster with the desired spec."""
    real_patch = kube.patch_cluster
    failed = {"done": False}

    def flaky(ns: str, name: str, patch: dict[str, Any]):
        spec = patch.get("spec") or {}
        if not failed["done"] and spec.get("suspend") is False and "headGroupSpec" in spec:
            failed["done"] = True
            raise ApiError(500, "InternalError", "boom")
        return real_patch(ns, name, patch)

    kube.patch_cluster = flaky

    def undo() -> None:
        kube.patch_cluster = real_patch
    return undo


def _stopped_mid_drain(kube: FakeKube, stop: threading.Event) -> Callable[[], None]:
    """SIGTERM a second into a drain that cannot finish (the pods do not go, not even when
    deleted directly, as with a finalizer): the recovery resumes the cluster as it was."""
    real_delete = kube.delete_pod
    kube.delete_on_suspend, kube.delete_pod = False, lambda *a, **k: False
    kube.clock.call_later(1.0, stop.set)

    def undo() -> None:
        kube.delete_on_suspend, kube.delete_pod = True, real_delete
    return undo


SCENARIOS = [
    Scenario("recreate", _cluster(OLD), make_plan(spec=NEW)),
    Scenario("recreate, recovery resumes as it was", _cluster(OLD), make_plan(spec=NEW), _drain_list_fails),
    Scenario("recreate, recovery resumes with the desired spec", _cluster(OLD), make_plan(spec=NEW), _resume_fails),
    Scenario("recreate, stopped mid-drain", _cluster(OLD), make_plan(spec=NEW), _stopped_mid_drain),
    Scenario("replace", _cluster(_two_groups("old:1"), replaces_pods=True),
             dataclasses.replace(make_plan(spec=_two_groups("new:2"), strategy=strategy.REPLACE_GROUPS),
                                 max_unavailable="1")),
]


def _writes(kube: FakeKube, kill_at: int | None) -> dict[str, int]:
    """Count the hook's writes; the ``kill_at``-th raises :class:`Killed` before it happens."""
    count = {"n": 0}
    for name in WRITES:
        real = getattr(kube, name, None)
        if real is None:
            continue

        def write(*args: Any, _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            count["n"] += 1
            if count["n"] == kill_at:
                raise Killed()
            return _real(*args, **kwargs)

        setattr(kube, name, write)
    return count


@dataclasses.dataclass
class Said:
    """What a run reported of the cluster: its result (an outcome's, or the decision's when
    no cycle ran: ``in-sync``) and why."""

    result: str
    message: str


def _run(kube: FakeKube, plan: ClusterPlan, wait_ready: bool, stop: threading.Event | None = None) -> tuple[Said, str]:
    opts = RunOptions(timeout=60, drain_grace=5, max_parallel=1, wait_ready=wait_ready, lease_seconds=3,
                      clock=kube.clock, stop=stop or threading.Event())
    out = io.StringIO()
    report = run(kube, [Plan(NS, [plan])], opts, Log("json", out))
    (cluster,) = report.to_json()["clusters"]
    said = Said(cluster.get("outcome") or cluster["decision"], cluster.get("message") or cluster["reason"])
    return said, out.getvalue()


def _false_claims(kube: FakeKube, plan: ClusterPlan, outcome: Said) -> list[str]:
    """What is untrue in a run's report of the cluster (empty: all true)."""
    if outcome.result not in SUCCESS:
        return []
    live = kube.clusters[(NS, "demo")]
    desired = plan.hashes.groups()
    stale = sorted(p["metadata"]["name"] for p in pods.own_pods(live, kube.pods_of("demo"))
                   if p["metadata"]["annotations"].get(HASH_ANNOTATION) != desired.get(pods.group_key(p) or ""))
    bad = [f"reported {outcome.result} ({outcome.message}) while pods {stale} run an old template"] if stale else []
    if live["spec"].get("suspend") is True or LOCK_ANNOTATION in live["metadata"]["annotations"]:
        bad.append(f"reported {outcome.result} but left it suspended={live['spec'].get('suspend')}, "
                   f"lock={live['metadata']['annotations'].get(LOCK_ANNOTATION)}")
    return bad


def _first_run(scenario: Scenario, kill_at: int | None) -> tuple[FakeKube, int, bool]:
    """The first run, killed before its ``kill_at``-th write: (the API, writes made, killed)."""
    kube = scenario.kube()
    stop = threading.Event()
    undo = scenario.trouble(kube, stop) if scenario.trouble else (lambda: None)
    count = _writes(kube, kill_at)
    killed = False
    try:
        _run(kube, scenario.plan, wait_ready=True, stop=stop)
    except Killed:
        killed = True
    undo()
    for name in WRITES:  # the next runs are other processes: their writes are not counted
        kube.__dict__.pop(name, None)
    return kube, count["n"], killed


@pytest.mark.parametrize("wait_ready", [False, True], ids=["no-wait-ready", "wait-ready"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_run_after_a_kill_between_any_two_writes_reports_only_what_happened(scenario: Scenario, wait_ready: bool):
    _, total, _ = _first_run(scenario, None)
    assert total >= 4, total
    problems = []
    for k in range(1, total + 1):
        kube, _, killed = _first_run(scenario, k)
        assert killed, k
        kube.clock.advance(1.0)
        outcomes = []
        for attempt, wait in enumerate((wait_ready, True, True)):
            outcome, log = _run(kube, scenario.plan, wait)
            outcomes.append(outcome.result)
            problems += [f"killed before write {k}, run {attempt + 2}: {p}"
                         for p in _false_claims(kube, scenario.plan, outcome)]
            if outcome.result in SUCCESS:
                break
        live = kube.clusters[(NS, "demo")]
        if outcomes[-1] not in SUCCESS or LOCK_ANNOTATION in live["metadata"]["annotations"]:
            problems.append(f"killed before write {k}: not finished by {len(outcomes)} more runs: {outcomes}")
        reasons = kube.event_reasons("demo")
        if reasons.count("RecreateStarted") > 1 + reasons.count("RecreateFailed"):
            problems.append(f"killed before write {k}: a cycle announced twice (a takeover is no new start): {reasons}")
    assert not problems, "\n".join(problems)


def test_a_cluster_resumed_as_it_was_goes_back_to_a_lock_that_starts_the_cycle_again():
    """The recovery's resume as it was writes the lock in phase ``locked`` (nothing of the
    desired spec written): killed right after it, the next run takes the lock over, suspends
    and drains the old pods and resumes with the desired spec; it reports the recreate only
    then, with ``--no-wait-ready`` too."""
    scenario = SCENARIOS[1]
    _, total, _ = _first_run(scenario, None)
    kube, _, _ = _first_run(scenario, total - 1)  # before the Event and the unlock: after the resume
    live = kube.clusters[(NS, "demo")]
    lock = json.loads(live["metadata"]["annotations"][LOCK_ANNOTATION])
    assert live["spec"]["suspend"] is False and lock["phase"] == "locked", lock
    old_pods = {p["metadata"]["uid"] for p in kube.pods_of("demo")}
    outcome, log = _run(kube, scenario.plan, wait_ready=False)
    assert outcome.result == cycle.RECREATED, outcome
    assert "takeover" in log and old_pods.isdisjoint(p["metadata"]["uid"] for p in kube.pods_of("demo"))
    assert not _false_claims(kube, scenario.plan, outcome)


def test_a_deferred_takeover_that_resumed_a_suspended_cluster_records_the_failure():
    """The lock of a dead run that had only locked a cluster suspended outside Git, taken over
    with too little of the budget left for a cycle: the cluster is resumed as it was, so the
    deferral (which otherwise drops a lock that changed nothing, recording nothing) records
    the failure: a ``Failed`` record and Event, no lock left."""
    from raygitops.model import lock as locks
    from raygitops.model.names import LAST_ANNOTATION

    kube = FakeKube()
    kube.add_cluster("demo", with_crd_defaults(dict(stamped(OLD), suspend=True)), pods=False)
    plan = make_plan(spec=NEW)
    dead = locks.new_lock("dead/1/x", plan.hashes.to_json(), None, kube.clock.now(), 3)
    kube.clusters[(NS, "demo")]["metadata"]["annotations"][LOCK_ANNOTATION] = dead.to_annotation()
    opts = RunOptions(timeout=6, drain_grace=5, max_parallel=1, wait_ready=True, lease_seconds=3, clock=kube.clock)
    report = run(kube, [Plan(NS, [plan])], opts, Log("json", io.StringIO()))
    outcome = report.outcomes[f"{NS}/demo"]
    assert outcome.result == cycle.DEFERRED and "resumed as it was" in outcome.message, outcome
    live = kube.clusters[(NS, "demo")]
    assert live["spec"]["suspend"] is False and LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert json.loads(live["metadata"]["annotations"][LAST_ANNOTATION])["outcome"] == "Failed"
    assert kube.event_reasons("demo") == ["RecreateFailed"]
