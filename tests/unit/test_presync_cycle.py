"""The recreate cycle and a whole run, against the in-memory FakeKube (no cluster)."""

from __future__ import annotations

import io
import json
import threading
import time

import pytest

from raygitops.model.names import HASH_ANNOTATION
from raygitops.model.plan import Plan
from raygitops.clock import SYSTEM
from raygitops.presync import cycle, prompt
from raygitops.model import verdict
from raygitops.model import lock as locks
from raygitops.kube.client import ApiError, Conflict, Gone, NotFound, StreamBroken
from raygitops.presync.context import Context, Options
from raygitops.presync.logs import Log
from raygitops.presync.run import RunOptions, run
from raygitops.model import names

from test_presync_fakes import NS, FakeKube, cluster_spec, make_plan, stamped, with_crd_defaults

OLD, NEW = cluster_spec(image="old:1"), cluster_spec(image="new:2")


def _opts(**kw):
    base = dict(timeout=20, drain_grace=5, max_parallel=4, wait_ready=True, lease_seconds=60)
    base.update(kw)
    return RunOptions(**base)


def _run(kube, plans, **kw):
    out = io.StringIO()
    report = run(kube, plans, _opts(clock=kube.clock, **kw), Log("json", out))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return report, lines


def _hashes(kube, name="demo"):
    return {p["metadata"]["annotations"].get(HASH_ANNOTATION) for p in kube.pods_of(name)}


def test_full_cycle_recreates_once_and_records_state():
    kube = FakeKube()
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    plan = make_plan(spec=NEW)
    report, lines = _run(kube, [Plan(NS, [plan])])
    assert report.counts()["recreated"] == 1 and not report.failed
    live = kube.clusters[(NS, "demo")]
    ann = live["metadata"]["annotations"]
    assert names.LOCK_ANNOTATION not in ann
    last = json.loads(ann[names.LAST_ANNOTATION])
    assert last["to"] == plan.hashes.to_json() and last["from"]["head"] != plan.hashes.head
    assert live["spec"]["suspend"] is False
    assert _hashes(kube) == {plan.hashes.head, plan.hashes.workers["small"]}
    assert kube.event_reasons("demo") == ["RecreateStarted", "PodsDrained", "Resumed", "RecreateCompleted"]
    # exactly one suspend and one resume write
    suspends = [p for _, p in kube.patches if (p.get("spec") or {}).get("suspend") is True]
    resumes = [p for _, p in kube.patches if (p.get("spec") or {}).get("suspend") is False]
    assert len(suspends) == 1 and len(resumes) == 1
    assert "containers" in json.dumps(resumes[0])  # the templates ride in the same write
    assert all(l["cluster"] and l["step"] for l in lines)
    # second run: nothing to do, 2 requests
    kube.requests = 0
    report, _ = _run(kube, [Plan(NS, [plan])])
    assert report.counts()["inSync"] == 1 and kube.requests == 2


def test_no_drift_costs_two_requests_per_namespace_whatever_the_cluster_count():
    for n in (1, 40):
        kube = FakeKube()
        plans = []
        for ns in ("a", "b", "c"):
            for i in range(n):
                kube.add_cluster(f"c{i}", stamped(OLD), namespace=ns)
            plans.append(Plan(ns, [make_plan(f"c{i}", spec=OLD) for i in range(n)]))
        report, _ = _run(kube, plans)
        assert report.counts()["inSync"] == 3 * n
        assert kube.requests == 6


def test_dry_run_changes_nothing_and_reports():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    kube.add_cluster("other", stamped(OLD))
    before = {u: p["metadata"]["resourceVersion"] for u, p in kube.pods.items()}
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW), make_plan("other", spec=NEW, strategy="None")])],
                         dry_run=True)
    assert report.counts() == {"recreated": 0, "inSync": 0, "skipped": 1, "failed": 0, "deferred": 0,
                               "wouldRecreate": 1}
    assert kube.patches == [] and kube.events == []
    assert {u: p["metadata"]["resourceVersion"] for u, p in kube.pods.items()} == before
    doc = report.to_json()
    assert doc["dryRun"] and doc["clusters"][0]["decision"] == "recreate"
    assert any(l["step"] == "dry-run" for l in lines)


def test_skipped_clusters_keep_their_pods():
    kube = FakeKube()
    kube.add_cluster("job", stamped(OLD), owner_kind="RayJob")
    kube.add_cluster("opt-out", stamped(OLD))
    uids = set(kube.pods)
    plans = [Plan(NS, [make_plan("job", spec=NEW), make_plan("opt-out", spec=NEW, strategy="None"),
                       make_plan("absent", spec=NEW), make_plan("susp", spec=NEW, suspend=True)])]
    report, lines = _run(kube, plans)
    assert report.counts()["skipped"] == 4 and set(kube.pods) == uids and not kube.patches
    assert any(l["level"] == "warn" and "owned by RayJob" in l["msg"] for l in lines)


def test_drain_by_watch_when_the_operator_is_slow():
    kube = FakeKube(delete_on_suspend=False)
    kube.add_cluster("demo", stamped(OLD))
    real = kube._operate

    def operate(obj):  # after the suspend the operator deletes the pods one by one, 50 ms apart
        real(obj)
        if obj["spec"].get("suspend"):
            for i, pod in enumerate(kube.pods_of("demo"), 1):
                kube.clock.call_later(0.05 * i, kube.remove_pod, pod["metadata"]["uid"])

    kube._operate = operate
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert report.counts()["recreated"] == 1
    outcome = next(iter(report.outcomes.values()))
    assert outcome.drain_to_resume is not None and outcome.drain_to_resume < 0.5
    assert kube.by_verb.get("watch", 0) >= 1 and kube.by_verb.get("delete", 0) == 0


def test_watch_gone_relists():
    kube = FakeKube(delete_on_suspend=False)
    kube.add_cluster("demo", stamped(OLD))
    real = kube._operate

    def gone_then_deleted():
        for q in list(kube.watchers):  # the drain's watch
            q.put(("GONE", {}))
        kube.clock.call_later(0.1, lambda: [kube.remove_pod(p["metadata"]["uid"]) for p in kube.pods_of("demo")])

    def operate(obj):
        real(obj)
        if obj["spec"].get("suspend"):
            kube.clock.call_later(0.01, gone_then_deleted)

    kube._operate = operate
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert report.counts()["recreated"] == 1 and kube.by_verb["watch"] >= 2


def test_stragglers_deleted_after_grace():
    kube = FakeKube(delete_on_suspend=False)  # the operator never deletes pods
    kube.add_cluster("demo", stamped(OLD))
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=1)
    assert report.counts()["recreated"] == 1
    assert kube.by_verb["delete"] == 3 and kube.delete_graces == [None] * 3  # each pod's own grace period
    assert any("drain grace over" in l["msg"] for l in lines)


def test_stragglers_deleted_again_only_after_another_grace():
    kube = FakeKube(delete_on_suspend=False)
    kube.add_cluster("demo", stamped(OLD))
    real_delete, times = kube.delete_pod, []

    def slow_kubelet(ns, name, uid=None, grace_seconds=None):
        times.append(kube.clock.monotonic())
        if len(times) <= 3:  # accepted; the pods are still terminating
            kube._count("delete")
            return True
        return real_delete(ns, name, uid=uid, grace_seconds=grace_seconds)

    kube.delete_pod = slow_kubelet
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=1)
    assert report.counts()["recreated"] == 1 and len(times) == 6
    assert times[3] - times[2] >= 0.99


def test_foreign_pod_blocks_the_suspend():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    pod = kube.add_pod(NS, "demo", "worker", "small", {})
    pod["metadata"]["ownerReferences"] = []
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert report.failed and pod["metadata"]["name"] in report.outcomes[f"{NS}/demo"].message
    live = kube.clusters[(NS, "demo")]
    assert live["spec"].get("suspend") is not True and names.LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert len(kube.pods_of("demo")) == 4 and kube.deleted_pods == []


def test_drain_timeout_resumes_and_fails():
    kube = FakeKube(delete_on_suspend=True)
    kube.add_cluster("demo", stamped(OLD), pods=False)
    kube.add_pod(NS, "demo", "head", "headgroup", {HASH_ANNOTATION: "h1-0000000000000000"}, finalizers=["x/y"])
    # the finalizer keeps the pod; deleting it directly does nothing either
    kube.delete_pod = lambda *a, **k: False
    plan = make_plan(spec=NEW)
    report, lines = _run(kube, [Plan(NS, [plan])], timeout=3, drain_grace=1)
    assert report.failed and report.counts()["failed"] == 1
    live = kube.clusters[(NS, "demo")]
    assert live["spec"]["suspend"] is False  # never left suspended
    assert names.LOCK_ANNOTATION not in live["metadata"]["annotations"]
    # the drain never finished (an old pod is still there): resumed as it was, not half new
    assert live["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"][HASH_ANNOTATION] != plan.hashes.head
    assert "resumed as it was" in report.outcomes[f"{NS}/demo"].message
    assert "RecreateFailed" in kube.event_reasons("demo")
    assert json.loads(live["metadata"]["annotations"][names.LAST_ANNOTATION])["outcome"] == "Failed"


def _drain_list_fails(kube: FakeKube) -> None:
    """The drain's LIST of pods, after the suspend, gets a 500."""
    real_list = kube.list_pods
    calls = {"n": 0}

    def flaky_list(ns, selector):
        calls["n"] += 1
        if calls["n"] == 4:  # the drain's list, after the suspend (1: decide, 2: the jobs step, 3: before the suspend)
            raise ApiError(500, "InternalError", "boom")
        return real_list(ns, selector)

    kube.list_pods = flaky_list


def test_api_failure_after_suspend_still_resumes():
    kube = FakeKube(delete_on_suspend=False)
    kube.add_cluster("demo", stamped(OLD))
    _drain_list_fails(kube)
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert report.failed
    live = kube.clusters[(NS, "demo")]
    assert live["spec"]["suspend"] is False and names.LOCK_ANNOTATION not in live["metadata"]["annotations"]


def test_a_crd_without_spec_suspend_is_refused_before_any_pod_goes():
    """KubeRay before 1.1 has no RayCluster spec.suspend: the API server drops the hook's
    suspend write.  The hook says why at once (not after three writes as a suspend someone
    undid), deletes no pod, and leaves no lock."""
    kube = FakeKube()
    kube.crd_has_suspend = False
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    before = {p["metadata"]["uid"] for p in kube.pods_of("demo")}
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert report.failed and report.counts()["failed"] == 1
    assert "KubeRay older than 1.1" in report.outcomes[f"{NS}/demo"].message
    assert "KubeRay older than 1.1" in report.failure_reason() and "\n" not in report.failure_reason()
    suspends = [p for _, p in kube.patches if (p.get("spec") or {}).get("suspend") is True]
    assert len(suspends) == 1 and kube.deleted_pods == []
    assert {p["metadata"]["uid"] for p in kube.pods_of("demo")} == before
    live = kube.clusters[(NS, "demo")]
    assert names.LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert json.loads(live["metadata"]["annotations"][names.LAST_ANNOTATION])["outcome"] == "Failed"


def test_a_failed_cycle_is_recorded_even_when_the_unlock_answer_is_lost():
    """The recovery's unlock takes effect but its answer is lost (a reset connection, then a
    409 on the retry): the RecreateFailed Event is still recorded, once."""
    kube = FakeKube(delete_on_suspend=False)
    kube.add_cluster("demo", stamped(OLD))
    _drain_list_fails(kube)
    real_patch = kube.patch_cluster

    def lossy_patch(ns, name, patch):
        answer = real_patch(ns, name, patch)
        if "Failed" in ((patch.get("metadata") or {}).get("annotations") or {}).get(names.LAST_ANNOTATION, ""):
            raise Conflict(409, "Conflict", "the object has been modified")  # the retry of an unlock that took effect
        return answer

    kube.patch_cluster = lossy_patch
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert report.failed
    live = kube.clusters[(NS, "demo")]
    assert live["spec"]["suspend"] is False and names.LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert kube.event_reasons("demo").count("RecreateFailed") == 1


def _dead_lock(phase, target, age=120.0, lease=1):
    """A dead hook's lock; taken over once a reader has seen it unchanged for ``lease`` s."""
    return locks.new_lock("dead/1/x", target, {"head": "h1-old"}, time.time() - age,
                          lease).at(phase, time.time() - age)


@pytest.mark.parametrize("phase", [locks.LOCKED, locks.SUSPENDED, locks.RESUMED])
def test_dead_holder_is_taken_over_and_the_cycle_finished_once(phase):
    kube = FakeKube()
    plan = make_plan(spec=NEW)
    if phase == locks.RESUMED:  # it had already written the new spec
        kube.add_cluster("demo", stamped(NEW))
    else:
        kube.add_cluster("demo", stamped(OLD))
    live = kube.clusters[(NS, "demo")]
    live["metadata"]["annotations"][names.LOCK_ANNOTATION] = _dead_lock(phase, plan.hashes.to_json()).to_annotation()
    if phase == locks.SUSPENDED:
        kube.patch_cluster(NS, "demo", {"spec": {"suspend": True}})
    kube.patches.clear()
    report, lines = _run(kube, [Plan(NS, [plan])])
    assert report.counts()["recreated"] == 1, lines
    live = kube.clusters[(NS, "demo")]
    assert live["spec"].get("suspend") is not True and names.LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert _hashes(kube) == {plan.hashes.head, plan.hashes.workers["small"]}
    assert any(l["step"] == "takeover" for l in lines)
    suspends = [p for _, p in kube.patches if (p.get("spec") or {}).get("suspend") is True]
    assert len(suspends) == (1 if phase == locks.LOCKED else 0)


@pytest.mark.parametrize("writer_clock", [0.0, -3600.0, 3600.0])
def test_live_holder_is_waited_for_then_in_sync(writer_clock):
    """Whatever the writer's clock says (an hour behind or ahead of ours), a lock that is
    alive is waited for, never taken over."""
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    plan = make_plan(spec=NEW)
    pods = kube.pods_of("demo")
    decision = verdict.decide(NS, plan, kube.clusters[(NS, "demo")], pods)
    # another hook holds a fresh lock; it finishes while we wait
    other = locks.new_lock("other/2/y", plan.hashes.to_json(), None, time.time() + writer_clock)
    kube.clusters[(NS, "demo")]["metadata"]["annotations"][names.LOCK_ANNOTATION] = other.to_annotation()

    def other_hook():  # it finishes 1.5 s into our wait
        kube.patch_cluster(NS, "demo", {"spec": {"suspend": True}})
        from raygitops.presync.patches import resume_patch
        kube.patch_cluster(NS, "demo", resume_patch(kube.clusters[(NS, "demo")], plan, other))
        kube.patch_cluster(NS, "demo", {"metadata": {"annotations": {names.LOCK_ANNOTATION: None}}})

    kube.clock.call_later(1.5, other_hook)
    opts = Options(deadline=kube.clock.monotonic() + 20, drain_grace=5, wait_ready=True)
    outcome = cycle.run(Context(kube, Log("json", io.StringIO()), NS, plan, opts, "me/1/z", kube.clock), decision)
    assert outcome.result == cycle.IN_SYNC, outcome.message
    assert not any(names.LOCK_ANNOTATION in json.dumps(p) and "me/1/z" in json.dumps(p) for _, p in kube.patches)


def test_two_hooks_at_once_make_one_cycle():
    kube = FakeKube(delete_on_suspend=False, clock=SYSTEM)  # two hooks, each in a thread: real time
    kube.add_cluster("demo", stamped(OLD))
    plan = make_plan(spec=NEW)

    def slow_operator():
        deadline = time.time() + 15
        while time.time() < deadline:
            live = kube.clusters[(NS, "demo")]
            if live["spec"].get("suspend"):
                time.sleep(0.3)
                for pod in kube.pods_of("demo"):
                    kube.remove_pod(pod["metadata"]["uid"])
                return
            time.sleep(0.01)

    t = threading.Thread(target=slow_operator)
    t.start()
    results = []

    def hook():
        results.append(_run(kube, [Plan(NS, [plan])])[0])

    hooks = [threading.Thread(target=hook) for _ in range(2)]
    for h in hooks:
        h.start()
    for h in hooks:
        h.join()
    t.join()
    counts = [r.counts() for r in results]
    assert sorted(c["recreated"] + c["inSync"] for c in counts) == [1, 1]
    assert sum(c["recreated"] for c in counts) == 1, counts
    suspends = [p for _, p in kube.patches if (p.get("spec") or {}).get("suspend") is True]
    assert len(suspends) == 1
    assert kube.event_reasons("demo").count("RecreateStarted") == 1


def test_parallel_clusters_bounded():
    kube = FakeKube()
    names = [f"c{i}" for i in range(6)]
    for n in names:
        kube.add_cluster(n, stamped(OLD))
    report, _ = _run(kube, [Plan(NS, [make_plan(n, spec=NEW) for n in names])], max_parallel=3)
    assert report.counts()["recreated"] == 6


def test_wait_ready_timeout_fails_but_unlocks():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    real = kube._operate

    def never_ready(obj):
        real(obj)
        obj["status"] = {"state": "suspended"}

    kube._operate = never_ready
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], timeout=3)
    assert report.failed
    live = kube.clusters[(NS, "demo")]
    assert live["spec"]["suspend"] is False and names.LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert "RecreateFailed" in kube.event_reasons("demo")


def test_no_wait_ready_skips_waiting():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    kube._operate = lambda obj: [kube.remove_pod(p["metadata"]["uid"]) for p in kube.pods_of("demo")
                                 if obj["spec"].get("suspend")]
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], wait_ready=False)
    assert report.counts()["recreated"] == 1


def test_release_lock_on_desired_suspended_cluster():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD), pods=False)
    lk = _dead_lock(locks.SUSPENDED, {"head": "x"}, age=1)
    kube.clusters[(NS, "demo")]["metadata"]["annotations"][names.LOCK_ANNOTATION] = lk.to_annotation()
    kube.clusters[(NS, "demo")]["spec"]["suspend"] = True
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW, suspend=True)])])
    live = kube.clusters[(NS, "demo")]
    assert live["spec"]["suspend"] is True and names.LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert not report.failed


def _condition(kind: str, true: bool) -> dict[str, str]:
    return {"type": kind, "status": "True" if true else "False", "reason": kind}


def two_step_operator(kube: FakeKube) -> list[str]:
    """KubeRay 1.5's reconcile, run 20 ms after each write that its predicates pass (every
    write of the hook here, merged with one already queued, as in its work queue) and never
    on its own status writes: a suspend first sets
    RayClusterSuspending, the next deletes the pods, and the one their deletion brings sets
    RayClusterSuspended; a resume first sets
    RayClusterSuspended false, the next one creates the pods.  No requeue timer: without a
    further write nothing more happens.  Returns the log of its steps."""
    steps: list[str] = []
    queued: set[tuple[str, str]] = set()
    suspended_spec: list[bool] = []

    def reconcile(ns: str, name: str) -> None:
        with kube.lock:
            queued.discard((ns, name))
            obj = kube.clusters[(ns, name)]
            state = prompt.suspend_state(obj)
            suspend = obj["spec"].get("suspend") is True
            if state == prompt.SUSPENDING and kube.pods_of(name, ns):
                for pod in kube.pods_of(name, ns):
                    kube.remove_pod(pod["metadata"]["uid"])
                steps.append("pods deleted")
                queue(ns, name)  # the pods' deletion events bring the next reconcile
                return
            if state == prompt.SUSPENDING:
                suspending, suspended, step = False, True, "suspended"
            elif state == prompt.SUSPENDED and not suspend:
                suspending, suspended, step = False, False, "resuming"
            elif state == prompt.RUNNING and suspend:
                suspending, suspended, step = True, False, "suspending"
            elif state == prompt.RUNNING and not kube.pods_of(name, ns):
                kube.create_pods(ns, name)
                obj["status"]["state"] = "ready"
                kube._bump(obj)
                steps.append("pods created")
                return
            else:
                return
            obj["status"] = {"conditions": [_condition(prompt.SUSPENDING, suspending),
                                            _condition(prompt.SUSPENDED, suspended)]}
            kube._bump(obj)
            steps.append(step)

    def queue(ns: str, name: str) -> None:
        if (ns, name) not in queued:
            queued.add((ns, name))
            kube.clock.call_later(0.02, reconcile, ns, name)

    def operate(obj):
        meta, suspend = obj["metadata"], obj["spec"].get("suspend") is True
        if not suspend and suspended_spec:  # the resume write: where did it find the operator?
            steps.append(f"resume written while {prompt.suspend_state(obj) or 'running'}")
        suspended_spec[:] = [True] if suspend else []
        queue(meta["namespace"], meta["name"])

    kube._operate = operate
    return steps


def test_the_two_step_operator_is_prompted_through_suspend_and_resume():
    kube = FakeKube()
    live = kube.add_cluster("demo", stamped(OLD))
    live["status"] = {"conditions": [_condition(prompt.SUSPENDING, False), _condition(prompt.SUSPENDED, False)]}
    steps = two_step_operator(kube)
    start = time.monotonic()
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=30)
    assert report.counts()["recreated"] == 1, lines
    # every step came from a write of the hook, none from a drain-grace deletion or a timer
    assert steps == ["suspending", "pods deleted", "suspended", "resume written while RayClusterSuspended",
                     "resuming", "pods created"]
    assert kube.by_verb.get("delete", 0) == 0 and time.monotonic() - start < 5
    assert [l["operator"] for l in lines if l["step"] == "prompt"] == [prompt.SUSPENDING, "running"]
    lock_writes = [p for _, p in kube.patches if "spec" not in p]
    assert len(lock_writes) == 4  # the lock, a renewal after "suspending" and after "resuming", the unlock


def test_an_operator_without_suspend_conditions_is_not_polled():
    kube = FakeKube()
    kube.add_cluster("demo", stamped(OLD))
    report, _ = _run(kube, [Plan(NS, [make_plan(spec=NEW)])])
    assert report.counts()["recreated"] == 1
    assert len([p for _, p in kube.patches if "spec" not in p]) == 2  # the lock and the unlock, no renewal


def _two_step_cluster(kube: FakeKube) -> list[str]:
    live = kube.add_cluster("demo", stamped(OLD))
    live["status"] = {"conditions": [_condition(prompt.SUSPENDING, False), _condition(prompt.SUSPENDED, False)]}
    return two_step_operator(kube)


def _failing_watches(kube: FakeKube, failures: list[Exception | None]) -> None:
    """kube.watch_cluster raises the next of ``failures`` (None: a real stream) at its first read."""
    real = kube.watch_cluster

    def watch_cluster(*args):
        failure = failures.pop(0) if failures else None
        if failure is not None:
            kube._count("watch")
            raise failure
        yield from real(*args)

    kube.watch_cluster = watch_cluster


def test_the_prompt_reads_the_operator_from_a_watch_not_from_polls():
    kube = FakeKube()
    steps = _two_step_cluster(kube)
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=30)
    assert report.counts()["recreated"] == 1, lines
    assert steps[-1] == "pods created"
    # one watch per wait (suspend taken in, suspend done, resume taken in); the GETs are the
    # run's own (its first read, the one after the jobs step, the drain's lease checks), none
    # per status change
    assert kube.by_verb["watch"] >= 3 and kube.by_verb.get("get", 0) <= 4, kube.by_verb


@pytest.mark.parametrize("failure", [Gone(410, "Expired", "too old resource version"),
                                     StreamBroken(0, "StreamBroken", "watch stream dropped")])
def test_the_prompt_reads_again_after_a_410_or_a_dropped_watch(failure):
    kube = FakeKube()
    steps = _two_step_cluster(kube)
    _failing_watches(kube, [failure, failure])
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=30)
    assert report.counts()["recreated"] == 1, lines
    assert sum(l["step"] == "watch" and "reading the RayCluster again" in l["msg"] for l in lines) == 2
    # still prompted at every step: no drain-grace deletion, the resume after the suspend finished
    assert steps == ["suspending", "pods deleted", "suspended", "resume written while RayClusterSuspended",
                     "resuming", "pods created"]
    assert kube.by_verb.get("delete", 0) == 0


def test_a_watch_that_keeps_dropping_ends_the_prompting_not_the_cycle():
    kube = FakeKube()
    _two_step_cluster(kube)
    broken = StreamBroken(0, "StreamBroken", "watch stream dropped")
    _failing_watches(kube, [broken] * (prompt.MAX_WATCH_RESTARTS + 1))
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=1)
    assert report.counts()["recreated"] == 1, lines
    assert any(l["step"] == "prompt" and "cannot prompt" in l["msg"] for l in lines)
    assert sum(l["step"] == "watch" for l in lines) == prompt.MAX_WATCH_RESTARTS
    assert kube.by_verb.get("delete", 0) >= 1  # unprompted, this operator left the pods: the drain grace did


@pytest.mark.parametrize("when", ["seen-by-the-watch", "at-the-lease-renewal", "before-the-resume"])
def test_a_cluster_deleted_while_the_operator_is_prompted_is_reported_gone(when):
    """Deleted while the hook follows the operator: reported deleted, never a failure (and
    never a resume or a lock write on a cluster that is not there)."""
    kube = FakeKube()
    live = kube.add_cluster("demo", stamped(OLD))
    live["status"] = {"conditions": [_condition(prompt.SUSPENDING, False), _condition(prompt.SUSPENDED, False)]}
    patch = kube.patch_cluster

    def status(suspending: bool, suspended: bool) -> None:
        with kube.lock:
            obj = kube.clusters[(NS, "demo")]
            obj["status"] = {"conditions": [_condition(prompt.SUSPENDING, suspending),
                                            _condition(prompt.SUSPENDED, suspended)]}
            kube._bump(obj)

    def operate(obj):  # an operator stand-in: the status after a suspend, then the deletion
        if obj["spec"].get("suspend") is not True:
            return
        if when == "seen-by-the-watch":
            kube.clock.call_later(0.05, kube.clusters.pop, (NS, "demo"))
        else:  # suspending: the hook renews its lease, drains, and waits for "suspended"
            kube.clock.call_later(0.05, status, True, False)

    def patch_cluster(namespace, name, body):
        if when == "at-the-lease-renewal" and "spec" not in body and kube.clusters[(NS, "demo")]["spec"].get("suspend"):
            kube.clusters.pop((NS, "demo"))
            raise NotFound(404, "NotFound", "rayclusters.ray.io \"demo\" not found")
        return patch(namespace, name, body)

    def list_pods(namespace, selector):
        if when == "before-the-resume" and kube.clusters[(NS, "demo")]["spec"].get("suspend"):
            kube.clock.call_later(0.05, kube.clusters.pop, (NS, "demo"))
            return [], "1"  # the drain's read: no pod left; the wait before the resume sees it deleted
        return pods(namespace, selector)

    pods = kube.list_pods
    kube._operate, kube.patch_cluster, kube.list_pods = operate, patch_cluster, list_pods
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=30)
    assert report.counts()["skipped"] == 1 and not report.failed, lines
    assert [o.message for o in report.outcomes.values()] == ["the RayCluster was deleted"]
    assert not any(l["step"] == "resume" for l in lines), lines


def test_prompting_is_best_effort():
    kube = FakeKube()
    live = kube.add_cluster("demo", stamped(OLD))
    live["status"] = {"conditions": [_condition(prompt.SUSPENDING, False), _condition(prompt.SUSPENDED, False)]}
    real = kube.watch_cluster
    calls = {"n": 0}

    def watch_cluster(*args):
        calls["n"] += 1
        if calls["n"] == 1:  # the first watch of the prompt, right after the suspend
            raise ApiError(500, "InternalError", "etcd leader changed")
        return real(*args)

    kube.watch_cluster = watch_cluster
    two_step_operator(kube)
    report, lines = _run(kube, [Plan(NS, [make_plan(spec=NEW)])], drain_grace=1)
    assert report.counts()["recreated"] == 1, lines
    assert any(l["step"] == "prompt" and "cannot prompt" in l["msg"] for l in lines)
    # unprompted, this operator never deletes the pods: the drain grace did
    assert kube.by_verb.get("delete", 0) >= 1
