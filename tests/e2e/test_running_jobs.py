"""A recreate never kills a running Ray job unless told (docs/presync.md "Running jobs"), on the
real control plane with a real Ray head (tests/e2e/rayhead.py: Ray from requirements/ray.txt,
answering on the head pod's IP in a network namespace of its own) and real jobs submitted with
``ray job submit``. The hook runs as a process with the rendered Role's token only, asking the
head through the API server's service proxy. Under ReplaceGroups a real Ray worker node stands
for a worker pod (rayhead.RayWorker): Ray drains it on the pod's SIGTERM.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import controlplane
import rayhead
from rayhead import POLICY, WAIT_SECONDS, epoch, hook_lines, make_not_ready, with_dashboard
from controlplane import TERMINATE_AFTER
from test_presync_hook import LOCK, App, _token_kubeconfig, desired_hashes, raycluster, rendered

pytestmark = pytest.mark.e2e

OLD, NEW = "rayproject/ray:2.41.0", "rayproject/ray:2.42.0"


@pytest.fixture(scope="module")
def ray_head(control_plane):
    yield from rayhead.running(control_plane.log_dir)


class JobsApp:
    """One app whose head pod is served by the module's Ray head, and the hook's own token."""

    def __init__(self, control_plane, namespace: str, tmp: Path, head: rayhead.RayHead):
        self.app = App(control_plane, namespace, tmp)
        self.app.running_jobs = "wait"  # the default, written out: this head answers
        self.head, self.tmp, self.jobs = head, tmp, []

    def start(self, obj: dict[str, Any] | None = None, pods: int = 3, **annotations: str) -> set[str]:
        app = self.app
        app.sync(with_dashboard(obj or raycluster(image=OLD), **annotations))
        app.wait_pods(count=pods)
        self.head.serve_head(app.plane, app.ns)
        return app.uids()

    def change(self, obj: dict[str, Any] | None = None, **annotations: str) -> tuple[list[dict[str, Any]], Path, str]:
        """The image change in Git (or ``obj``); the manifests, the plan, and a kubeconfig of
        the hook's own ServiceAccount with the rendered Role and RoleBinding applied."""
        self.app.write(with_dashboard(obj or raycluster(image=NEW), **annotations))
        objs, hooks, plan = self.app.render()
        self.app.plane.apply([h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS],
                             namespace=self.app.ns)
        return objs, plan, _token_kubeconfig(self.app, self.tmp / "hook.kubeconfig", self.app.ns)

    def submit(self) -> str:
        ident = self.head.submit()
        self.jobs.append(ident)
        return ident

    def close(self) -> None:
        for ident in self.jobs:
            self.head.finish(ident, wait=False)


@pytest.fixture
def jobs_app(control_plane, namespace, tmp_path, ray_head):
    app = JobsApp(control_plane, namespace, tmp_path, ray_head)
    yield app
    app.close()


def _untouched(app: App, uids: set[str]) -> None:
    live = app.cluster()
    assert LOCK not in live["metadata"]["annotations"] and live["spec"].get("suspend") is not True
    assert live["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == OLD
    assert app.uids() == uids


def test_the_hook_waits_for_a_running_job_and_recreates_after_it_ends(jobs_app: JobsApp):
    uids = jobs_app.start()
    job = jobs_app.submit()
    objs, plan, kubeconfig = jobs_app.change()
    code, status = jobs_app.app.status()  # Git has the change: drifted, and its head is asked live
    (cluster,) = status["clusters"]
    assert code == 3 and f"1 Ray job running: {job} (RUNNING for" in cluster["detail"], cluster
    assert "the next sync waits for them" in cluster["detail"], cluster
    assert [j["id"] for j in cluster["runningJobs"]["jobs"]] == [job], cluster
    proc = _spawn_with(jobs_app.app, plan, kubeconfig)
    seen: list[str] = []
    waiting = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            seen.append(line)
            if '"step": "jobs"' in line and "waiting" in line:
                waiting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert waiting.wait(90), "".join(seen)
    time.sleep(3)  # the hook keeps waiting, holding its lock, touching nothing else
    live = jobs_app.app.cluster()
    assert json.loads(live["metadata"]["annotations"][LOCK])["phase"] == "locked"
    assert live["spec"].get("suspend") is not True and jobs_app.app.uids() == uids
    ended = jobs_app.head.finish(job)
    out = proc.stdout.read()
    proc.wait(180)
    reader.join(10)
    report = json.loads(out)
    assert proc.returncode == 0 and report["summary"]["recreated"] == 1, "".join(seen)
    lines = hook_lines("".join(seen))
    wait_line = next(l for l in lines if l["step"] == "jobs" and l["msg"].startswith("waiting"))
    assert f"1 Ray job running: {job} (RUNNING for" in wait_line["msg"]
    suspend = next(l for l in lines if l["step"] == "suspend")
    assert epoch(suspend["ts"]) >= ended - 1  # nothing went before the job ended (1 s: clock resolution)
    assert jobs_app.app.events("WaitingForJobs")
    jobs_app.app.apply(objs)
    jobs_app.app.wait_pods(hashes=desired_hashes(rendered(objs)))


def _spawn_with(app: App, plan: Path, kubeconfig: str):
    import subprocess

    return subprocess.Popen(app.presync_argv(plan, kubeconfig=kubeconfig), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=app.hook_env(), start_new_session=True)


def test_with_a_short_bound_the_hook_fails_closed_and_the_job_runs_on(jobs_app: JobsApp):
    uids = jobs_app.start()
    job = jobs_app.submit()
    _, plan, kubeconfig = jobs_app.change(**{WAIT_SECONDS: "3"})
    res = jobs_app.app.presync(plan, kubeconfig=kubeconfig, check=False)
    assert res.returncode == 1, res.stderr
    (cluster,) = json.loads(res.stdout)["clusters"]
    assert cluster["outcome"] == "failed", cluster
    assert cluster["message"].startswith(f"1 Ray job running: {job} (RUNNING for"), cluster
    assert "the policy's bound of 3 s is up: not touched" in cluster["message"], cluster
    _untouched(jobs_app.app, uids)
    assert "raygitops.dev/last-recreate" not in jobs_app.app.cluster()["metadata"]["annotations"]
    assert jobs_app.head.status(job) == "RUNNING"
    assert jobs_app.app.events("RunningJobs")


def test_with_proceed_the_hook_recreates_at_once(jobs_app: JobsApp):
    uids = jobs_app.start(**{POLICY: "proceed"})
    job = jobs_app.submit()
    objs, plan, kubeconfig = jobs_app.change(**{POLICY: "proceed"})
    t0 = time.monotonic()
    res = jobs_app.app.presync(plan, kubeconfig=kubeconfig)
    assert json.loads(res.stdout)["summary"]["recreated"] == 1, res.stderr
    assert "policy proceed: running Ray jobs are not asked for" in res.stderr
    assert not any(l["step"] == "jobs" and "waiting" in l["msg"] for l in hook_lines(res.stderr))
    assert time.monotonic() - t0 < 60
    assert jobs_app.head.status(job) == "RUNNING"  # it was running all along: not waited for
    assert uids.isdisjoint(jobs_app.app.uids())


def test_a_head_that_is_not_ready_is_not_asked_and_the_hook_says_why(jobs_app: JobsApp):
    uids = jobs_app.start()
    job = jobs_app.submit()
    app = jobs_app.app
    head = rayhead.head_pod(app.plane, app.ns)
    make_not_ready(app.plane, head)
    objs, plan, kubeconfig = jobs_app.change()
    res = app.presync(plan, kubeconfig=kubeconfig)
    assert json.loads(res.stdout)["summary"]["recreated"] == 1, res.stderr
    said = next(l["msg"] for l in hook_lines(res.stderr) if l["step"] == "jobs")
    assert said == f"going on: head pod {head['metadata']['name']} is not Ready: no Ray job can be running there"
    assert jobs_app.head.status(job) == "RUNNING" and uids.isdisjoint(app.uids())


def _one_worker(image: str) -> dict[str, Any]:
    """Head + one worker (group ``small``) under ReplaceGroups, policy proceed; the worker's
    image is ``image``, its grace period 40 s, and kwok takes 20 s to end it once deleted."""
    obj = raycluster(image=OLD, replicas=1, strategy="ReplaceGroups")
    template = obj["spec"]["workerGroupSpecs"][0]["template"]
    template["spec"]["containers"][0]["image"] = image
    template["spec"]["terminationGracePeriodSeconds"] = 40
    template["metadata"] = {"annotations": {TERMINATE_AFTER: "20s"}}
    obj["metadata"]["annotations"][POLICY] = "proceed"
    return obj


def test_under_replace_groups_ray_drains_the_replaced_worker_and_its_task_ends(jobs_app: JobsApp):
    """A real Ray worker node stands for the worker pod and runs a task of 12 s, never retried
    (docs/presync.md "Draining a worker"): the hook replaces the pod (policy proceed: it does
    not wait for the job), deleting it with its own grace period; the pod's SIGTERM makes Ray
    drain the node, so the task ends and the job SUCCEEDS. A DELETE with grace 0 would be a
    SIGKILL: the node dies under the task and the job fails."""
    app, head = jobs_app.app, jobs_app.head
    worker = rayhead.RayWorker(head, "rgworker")
    try:
        worker.start()
        jobs_app.start(_one_worker(OLD), pods=2)
        (old,) = [p for p in app.pods() if p["metadata"]["labels"]["ray.io/group"] == "small"]
        worker.follow(app.plane, app.ns, old["metadata"]["uid"])
        job = head.submit_task("rgworker", 12)
        objs, plan, kubeconfig = jobs_app.change(_one_worker(NEW))
        t0 = time.monotonic()
        res = app.presync(plan, kubeconfig=kubeconfig)
        (cluster,) = json.loads(res.stdout)["clusters"]
        assert cluster["decision"] == "replace" and cluster["outcome"] == "replaced", cluster
        worker.wait(60)
        assert worker.grace == 40, worker.grace
        app.plane.wait_for(lambda: head.status(job) in ("SUCCEEDED", "FAILED"), timeout=60,
                           message=f"job {job} ended")
        log, ended = worker.log(), head.status(job)
        assert ended == "SUCCEEDED", f"job {ended}; the worker's log:\n{log[-3000:]}"
        assert "received SIGTERM. Draining" in log and "finished draining" in log, log[-3000:]
        assert worker.exited_after is not None and worker.exited_after < 40
        print(f"\nthe replaced worker drained by Ray in {worker.exited_after} s (its task's end), "
              f"the hook done in {time.monotonic() - t0:.1f} s")
    finally:
        worker.close()
