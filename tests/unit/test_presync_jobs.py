"""Running Ray jobs: the pure decision (model/jobs.py) and the cycle's jobs step against the
in-memory API server, in simulated time (a job that ends after minutes takes no real second).
The real Ray head answers in tests/e2e/test_running_jobs.py."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from raygitops.errors import RaygitopsError
from raygitops.model import jobs, names, strategy
from raygitops.model import lock as locks
from raygitops.model.plan import ClusterPlan, Plan
from raygitops.presync.logs import Log
from raygitops.presync.run import RunOptions, run

from test_presync_fakes import NS, FakeKube, cluster_spec, make_plan, ray_job, stamped, with_crd_defaults

OLD, NEW = cluster_spec(image="old:1"), cluster_spec(image="new:2")
NOW = 1_800_001_000.0


# ----------------------------------------------------------------------------- the decision


def _seen(*states: str) -> jobs.HeadJobs:
    return jobs.answered([ray_job(f"raysubmit_{i}", s, started=NOW - 600) for i, s in enumerate(states)])


def test_only_pending_and_running_jobs_count_and_their_age_is_said():
    seen = _seen("RUNNING", "SUCCEEDED", "PENDING", "FAILED", "STOPPED")
    assert [j.status for j in seen.jobs] == ["RUNNING", "PENDING"] and seen.running
    assert seen.jobs[0].describe(NOW) == "raysubmit_0 (RUNNING for 10 min 00 s: python train.py)"
    assert not _seen("SUCCEEDED").running
    assert jobs.answered({"not": "a list"}).state == jobs.UNKNOWN
    assert jobs.answered([{"status": "RUNNING", "job_id": "02000000", "entrypoint": "x"}]).jobs[0].id == "02000000"


@pytest.mark.parametrize("policy,seen,waited,room,action", [
    (jobs.Policy(jobs.PROCEED), _seen("RUNNING"), 0, 100, jobs.PROCEED),
    (jobs.Policy(), jobs.HeadJobs(jobs.NOT_READY, detail="head pod h is not Ready"), 0, 100, jobs.PROCEED),
    (jobs.Policy(), jobs.HeadJobs(jobs.NO_HEAD, detail="no head pod"), 0, 100, jobs.PROCEED),
    (jobs.Policy(), _seen("SUCCEEDED"), 0, 100, jobs.PROCEED),
    (jobs.Policy(), _seen("RUNNING"), 0, 100, jobs.WAIT),
    (jobs.Policy(), _seen("RUNNING"), 300, 0, jobs.FAIL),  # the budget is up
    (jobs.Policy(jobs.WAIT, 60), _seen("RUNNING"), 60, jobs.room(jobs.Policy(jobs.WAIT, 60), 60, 500), jobs.FAIL),
    (jobs.Policy(jobs.FAIL), _seen("RUNNING"), 0, 100, jobs.FAIL),
    (jobs.Policy(), jobs.unknown("503"), 0, 100, jobs.WAIT),  # unknown: asked again
    (jobs.Policy(), jobs.unknown("503"), 100, 0, jobs.FAIL),  # ... then fails closed
    (jobs.Policy(jobs.FAIL), jobs.unknown("503"), 0, 100, jobs.FAIL),
])
def test_decide(policy, seen, waited, room, action):
    decision = jobs.decide(policy, seen, NOW, waited, room)
    assert decision.action == action, decision
    if action == jobs.FAIL:
        assert "not touched" in decision.reason and ("raysubmit_0" in decision.reason or "unknown" in decision.reason)


def test_the_wait_is_bounded_by_the_policy_and_by_the_budget():
    assert jobs.room(jobs.Policy(), 10, 200) == 200
    assert jobs.room(jobs.Policy(jobs.WAIT, 60), 10, 200) == 50
    assert jobs.room(jobs.Policy(jobs.WAIT, 600), 10, 200) == 200
    reason = jobs.decide(jobs.Policy(jobs.WAIT, 60), _seen("RUNNING"), NOW, 61, -1).reason
    assert "waited 1 min 01 s, the policy's bound of 60 s is up" in reason
    assert "the hook's time budget is up" in jobs.decide(jobs.Policy(), _seen("RUNNING"), NOW, 30, 0).reason


def _rc(annotations: dict, ports: list | None = None, head_service: dict | None = None) -> dict:
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = ports
    if head_service is not None:
        spec["headGroupSpec"]["headService"] = head_service
    return {"kind": "RayCluster", "metadata": {"name": "demo", "annotations": annotations}, "spec": spec}


def test_the_policy_comes_from_the_annotation_over_the_app_default():
    recreate = {names.STRATEGY_ANNOTATION: "Recreate"}
    app = jobs.Policy(jobs.FAIL)
    assert strategy.jobs_policy(_rc(recreate), "Recreate", app) == app
    assert strategy.jobs_policy(_rc({**recreate, names.RUNNING_JOBS_ANNOTATION: "wait",
                                     names.RUNNING_JOBS_WAIT_ANNOTATION: "600"}), "Recreate", app) == jobs.Policy(jobs.WAIT, 600)
    for bad, message in [({names.RUNNING_JOBS_ANNOTATION: "Wait"}, "is not wait, fail or proceed"),
                         ({names.RUNNING_JOBS_WAIT_ANNOTATION: 600}, "not a string"),
                         ({names.RUNNING_JOBS_WAIT_ANNOTATION: "0"}, "from 1 to 86400"),
                         ({names.RUNNING_JOBS_ANNOTATION: "fail", names.RUNNING_JOBS_WAIT_ANNOTATION: "5"},
                          "applies only with raygitops.dev/running-jobs: wait")]:
        with pytest.raises(RaygitopsError, match=message):
            strategy.jobs_policy(_rc({**recreate, **bad}), "Recreate", jobs.Policy())
    with pytest.raises(RaygitopsError, match="applies only to clusters raygitops recreates"):
        strategy.jobs_policy(_rc({names.RUNNING_JOBS_ANNOTATION: "wait"}), "None", jobs.Policy())


@pytest.mark.parametrize("ports,port", [
    (None, "dashboard"),  # no ports declared: KubeRay's defaults, dashboard among them
    ([{"containerPort": 6379, "name": "gcs"}, {"containerPort": 8265, "name": "dash"}], "dash"),
    ([{"containerPort": 8265}], "8265-port"),  # KubeRay names an unnamed port so
    ([{"containerPort": 6379, "name": "gcs"}], None),  # the Service has no dashboard port
])
def test_the_head_service_and_its_dashboard_port_as_kuberay_makes_them(ports, port):
    spec = _rc({}, ports)["spec"]
    assert jobs.dashboard_port(spec) == port
    assert jobs.head_service("demo", spec) == "demo-head-svc"
    assert jobs.head_service("demo", _rc({}, head_service={"metadata": {"name": "mine"}})["spec"]) == "mine"


def test_the_plan_carries_a_policy_only_when_it_is_not_the_default():
    plan = make_plan()
    assert "runningJobs" not in plan.to_json() and "dashboard" not in plan.to_json()
    other = dataclasses.replace(plan, jobs_policy=jobs.Policy(jobs.WAIT, 600), dashboard=jobs.Dashboard("mine", None))
    again = ClusterPlan.from_json(json.loads(json.dumps(other.to_json())))
    assert again.jobs_policy == jobs.Policy(jobs.WAIT, 600) and again.dashboard == jobs.Dashboard("mine", None)
    assert plan.asks == jobs.Dashboard("demo-head-svc", "dashboard")
    assert dataclasses.replace(plan, jobs_policy=jobs.Policy(jobs.PROCEED)).asks is None
    assert dataclasses.replace(plan, owner="RayJob/j").asks is None


# ----------------------------------------------------------------------------- the cycle


def _run(kube: FakeKube, plan: ClusterPlan, **kw) -> tuple:
    out = io.StringIO()
    opts = dict(timeout=600, drain_grace=5, max_parallel=1, wait_ready=True, lease_seconds=9, clock=kube.clock)
    opts.update(kw)
    report = run(kube, [Plan(NS, [plan])], RunOptions(**opts), Log("json", out))
    return report, [json.loads(line) for line in out.getvalue().splitlines()]


def _drifted(kube: FakeKube, strategy_name: str = "Recreate") -> ClusterPlan:
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    return make_plan(spec=NEW, strategy=strategy_name)


def _suspended_at(kube: FakeKube) -> list[float]:
    return [t for t, body in kube.writes if (body.get("spec") or {}).get("suspend") is True]


def _track_writes(kube: FakeKube) -> None:
    """Record when each RayCluster write happened (simulated time) and what it was."""
    kube.writes = []
    real = kube.patch_cluster

    def patch(ns, name, body):
        kube.writes.append((kube.clock.monotonic(), body))
        return real(ns, name, body)

    kube.patch_cluster = patch


def test_the_cycle_waits_for_a_running_job_renewing_its_lease_and_recreates_after_it_ends():
    kube = FakeKube()
    plan = _drifted(kube)
    _track_writes(kube)
    start = kube.clock.monotonic()
    kube.ray_jobs = [ray_job(started=kube.clock.now() - 3600)]
    kube.clock.call_later(130, lambda: kube.ray_jobs.__setitem__(0, ray_job(status="SUCCEEDED")))
    report, lines = _run(kube, plan)
    assert report.counts()["recreated"] == 1 and not report.failed, lines
    assert _suspended_at(kube) and min(_suspended_at(kube)) >= start + 130  # nothing went before the job ended
    renewals = [t for t, body in kube.writes if t < start + 130 and "suspend" not in (body.get("spec") or {})]
    assert len(renewals) >= 130 // 3 - 2  # the lease (9 s) renewed every third of it while waiting
    waiting = [l for l in lines if l["step"] == "jobs" and l["msg"].startswith("waiting")]
    assert len(waiting) == 1 and "raysubmit_1 (RUNNING for 1 h 00 min: python train.py)" in waiting[0]["msg"]
    assert any(l["step"] == "jobs" and "no running or pending job" in l["msg"] for l in lines)
    assert kube.event_reasons("demo")[:2] == ["RecreateStarted", "WaitingForJobs"]
    assert {p for _, p, _ in kube.proxied} == {"demo-head-svc:dashboard"}
    assert 130 / 5 <= len(kube.proxied) <= 130 / 5 + 6  # polled every 5 s at most, after a quick start


def _untouched(kube: FakeKube, uids: set[str]) -> None:
    live = kube.clusters[(NS, "demo")]
    ann = live["metadata"]["annotations"]
    assert names.LOCK_ANNOTATION not in ann and names.LAST_ANNOTATION not in ann
    assert live["spec"].get("suspend") is not True and set(kube.pods) == uids
    assert live["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == "old:1"


@pytest.mark.parametrize("policy,waited", [(jobs.Policy(jobs.WAIT, 30), 30), (jobs.Policy(jobs.FAIL), 0)])
def test_a_job_still_running_fails_the_cluster_closed_touching_nothing(policy, waited):
    kube = FakeKube()
    plan = dataclasses.replace(_drifted(kube), jobs_policy=policy)
    uids = set(kube.pods)
    start = kube.clock.monotonic()
    kube.ray_jobs = [ray_job(started=kube.clock.now() - 90), ray_job("raysubmit_2", "PENDING", kube.clock.now())]
    report, lines = _run(kube, plan)
    assert report.failed and report.counts()["failed"] == 1
    message = report.outcomes[f"{NS}/demo"].message
    assert message.startswith(f"2 Ray jobs running: raysubmit_1 (RUNNING for {jobs.duration(90 + waited)}: python train.py), "
                              f"raysubmit_2 (PENDING for {jobs.duration(waited)}"), message
    assert "not touched" in message and "could not" not in message
    assert waited <= kube.clock.monotonic() - start < waited + 6
    _untouched(kube, uids)
    assert kube.event_reasons("demo")[-1] == "RunningJobs"
    assert "raysubmit_1" in report.failure_reason()


def test_without_a_bound_the_wait_ends_where_the_budget_still_fits_a_cycle():
    kube = FakeKube()
    plan = _drifted(kube)
    uids = set(kube.pods)
    kube.ray_jobs = [ray_job()]
    start = kube.clock.monotonic()
    report, _ = _run(kube, plan, timeout=300)
    assert "the hook's time budget is up" in report.outcomes[f"{NS}/demo"].message
    assert 300 - 30 - 6 <= kube.clock.monotonic() - start <= 300 - 30 + 1  # the budget keeps 30 s for the cycle
    _untouched(kube, uids)


def test_a_head_that_does_not_answer_is_unknown_and_fails_closed_after_the_wait():
    kube = FakeKube()
    plan = dataclasses.replace(_drifted(kube), jobs_policy=jobs.Policy(jobs.WAIT, 20))
    uids = set(kube.pods)
    kube.ray_jobs = None  # 503 from the proxy
    report, _ = _run(kube, plan)
    message = report.outcomes[f"{NS}/demo"].message
    assert message.startswith("running jobs unknown: asking demo-head-svc:dashboard failed:") and "503" in message
    _untouched(kube, uids)


def test_a_head_service_without_a_dashboard_port_fails_at_once_not_after_the_budget():
    """No dashboard port on the head Service: no answer can ever come, so the hook fails the
    cluster at once (render refuses such a cluster; a plan from elsewhere may still hold one)."""
    kube = FakeKube()
    plan = dataclasses.replace(_drifted(kube), dashboard=jobs.Dashboard("demo-head-svc", None))
    uids = set(kube.pods)
    kube.ray_jobs = [ray_job()]
    start = kube.clock.monotonic()
    report, _ = _run(kube, plan, timeout=900)
    message = report.outcomes[f"{NS}/demo"].message
    assert message.startswith("running jobs unknown: head service demo-head-svc exposes no dashboard port"), message
    assert "waiting cannot change that: not touched" in message
    assert kube.clock.monotonic() - start < 5 and kube.proxied == []
    _untouched(kube, uids)
    assert "the next sync fails" in jobs.outlook(jobs.Policy(), jobs.no_dashboard(plan.head_dashboard()), NOW)


def test_proceed_asks_nothing_and_recreates_at_once():
    kube = FakeKube()
    plan = dataclasses.replace(_drifted(kube), jobs_policy=jobs.Policy(jobs.PROCEED))
    kube.ray_jobs = [ray_job()]
    report, lines = _run(kube, plan)
    assert report.counts()["recreated"] == 1 and kube.proxied == []
    assert any("policy proceed" in l["msg"] for l in lines)


def test_a_head_that_is_not_ready_cannot_run_jobs_and_is_not_asked():
    kube = FakeKube()
    plan = _drifted(kube)
    head = next(p for p in kube.pods.values() if p["metadata"]["labels"]["ray.io/node-type"] == "head")
    head["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    kube.ray_jobs = [ray_job()]  # would hold the cycle if it were asked
    report, lines = _run(kube, plan)
    assert report.counts()["recreated"] == 1 and kube.proxied == []
    said = next(l["msg"] for l in lines if l["step"] == "jobs")
    assert said == f"going on: head pod {head['metadata']['name']} is not Ready: no Ray job can be running there"


def test_a_stop_request_while_waiting_ends_the_cycle_untouched():
    kube = FakeKube()
    plan = _drifted(kube)
    uids = set(kube.pods)
    kube.ray_jobs = [ray_job()]
    out = io.StringIO()
    opts = RunOptions(timeout=600, drain_grace=5, max_parallel=1, wait_ready=True, lease_seconds=9, clock=kube.clock)
    kube.clock.call_later(42, opts.stop.set)
    report = run(kube, [Plan(NS, [plan])], opts, Log("json", out))
    assert report.failed and "interrupted (SIGTERM/SIGINT) while waiting for Ray jobs" in report.outcomes[f"{NS}/demo"].message
    assert kube.clock.monotonic() < 1000 + 42 + 6
    _untouched(kube, uids)


def test_replace_groups_asks_before_it_writes_the_spec_or_deletes_a_pod():
    from test_presync_replace import plan_for, two_groups

    kube = FakeKube()
    kube.add_cluster("demo", with_crd_defaults(stamped(two_groups())))
    _track_writes(kube)
    deleted_at = []
    real_delete = kube.delete_pod

    def delete(*args, **kw):
        deleted_at.append(kube.clock.monotonic())
        return real_delete(*args, **kw)

    kube.delete_pod = delete
    start = kube.clock.monotonic()
    kube.ray_jobs = [ray_job()]
    kube.clock.call_later(40, lambda: kube.ray_jobs.clear())
    report, lines = _run(kube, plan_for(two_groups(big_image="rayproject/ray:2.42.0")), wait_ready=False)
    assert report.counts().get("replaced") == 1, lines
    spec_writes = [t for t, body in kube.writes if "workerGroupSpecs" in json.dumps(body)]
    assert spec_writes and min(spec_writes) >= start + 40  # the desired spec, too, only after the job ended
    assert deleted_at and min(deleted_at) >= start + 40
    assert locks.REPLACING in json.dumps([b for _, b in kube.writes])


# ----------------------------------------------------------------------------- status and diff


def test_status_asks_the_head_of_a_drifted_cluster_and_says_what_the_next_sync_does(tmp_path):
    from raygitops.render.pipeline import render_app
    from raygitops.status.live import statuses

    app = tmp_path / "app"
    app.mkdir()
    spec = cluster_spec(image="new:2")
    del spec["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"]  # KubeRay's default ports
    (app / "raygitops.yaml").write_text(f"namespace: {NS}\nhook: {{runningJobsWaitSeconds: 600}}\n")
    (app / "c.yaml").write_text(json.dumps({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                            "metadata": {"name": "demo", "annotations": {names.STRATEGY_ANNOTATION: "Recreate"}},
                                            "spec": spec}))
    result = render_app(str(app), cli_values=[], overrides={})
    kube = FakeKube()
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    kube.ray_jobs = [ray_job(started=1_000.0)]
    (status,) = statuses(kube, result)
    assert status.state == "drifted" and kube.proxied == [(NS, "demo-head-svc:dashboard", "api/jobs/")]
    assert "; 1 Ray job running: raysubmit_1 (RUNNING for " in status.detail
    assert status.detail.endswith("the next sync waits for them up to 600 s, then fails; preflight now: passes"), \
        status.detail
    assert status.to_json()["runningJobs"]["jobs"][0]["id"] == "raysubmit_1"
    kube.ray_jobs, kube.proxied = [], []
    (status,) = statuses(kube, result)
    assert status.detail.endswith("; running jobs: none (the head reports no running or pending job); "
                                  "preflight now: passes")


def test_the_preview_says_the_policy_and_that_the_hook_asks():
    assert jobs.outlook(jobs.Policy(jobs.WAIT, 300), jobs.NOT_ASKED_YET, NOW) == (
        "running jobs: the hook asks the head first (wait for running jobs up to 300 s, then fail)")
    assert jobs.outlook(jobs.Policy(jobs.PROCEED), jobs.NOT_ASKED_YET, NOW) == "running jobs: not asked for (policy proceed)"
