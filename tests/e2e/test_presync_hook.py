"""The PreSync hook against the real control plane, synced the way Argo CD does it.

A sync = render the app (``raygitops render``), run ``raygitops presync --plan <plan.json>``
as a PROCESS (the hook Job's command), then ``kubectl apply`` the non-hook manifests:
client-side (Argo CD's default) or ``--server-side --force-conflicts``.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
from controlplane import KWOK_RUNNING_JOBS, TERMINATE_AFTER

HASH = "raygitops.dev/template-hash"
LOCK = "raygitops.dev/recreate"
LAST = "raygitops.dev/last-recreate"
LEASE = "3"  # seconds: a killed hook's lock is taken over quickly

pytestmark = pytest.mark.e2e


def raycluster(name: str = "demo", image: str = "rayproject/ray:2.41.0", replicas: int = 2,
               strategy: str | None = "Recreate", suspend: bool | None = None,
               labels: dict[str, str] | None = None, node_name: str | None = None,
               shutdown: str | None = None) -> dict[str, Any]:
    """``shutdown``: how long its pods take to terminate once deleted (``"3s"``; kwok honours
    :data:`controlplane.TERMINATE_AFTER`), as real pods do; by default they go at once."""
    def pod(container: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{
            "name": container, "image": image,
            "ports": [{"containerPort": 6379, "name": "gcs"}],
            "env": [{"name": "RAY_LOG_LEVEL", "value": "info"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        }]}
        if node_name:
            spec["nodeName"] = node_name
        template: dict[str, Any] = {"spec": spec}
        if shutdown:
            template["metadata"] = {"annotations": {TERMINATE_AFTER: shutdown}}
        return template

    obj: dict[str, Any] = {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": {}},
        "spec": {
            "rayVersion": "2.41.0",
            "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": pod("ray-head")},
            "workerGroupSpecs": [{"groupName": "small", "replicas": replicas, "minReplicas": 0, "maxReplicas": 5,
                                  "rayStartParams": {}, "template": pod("ray-worker")}],
        },
    }
    if strategy:
        obj["metadata"]["annotations"]["raygitops.dev/upgrade-strategy"] = strategy
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    return obj


def secrets_file(plan: Path) -> Path:
    """Where :meth:`App.render` puts the hook Secret's secrets.json of ``plan``."""
    return plan.with_name(plan.stem + ".secrets.json")


class App:
    """An app directory in git terms: render it, sync it like Argo CD."""

    def __init__(self, plane, namespace: str, tmp: Path, server_side: bool = False):
        self.plane, self.ns, self.tmp, self.server_side = plane, namespace, tmp, server_side
        self.dir = tmp / "app"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.revision = 0
        self.wait_ready = plane.has("kwok")
        self.running_jobs = KWOK_RUNNING_JOBS
        # without a scheduler, bind pods to a kwok node ourselves
        self.node_name = "kwok-node-0" if plane.has("kwok") and not plane.has("kube-scheduler") else None
        self.app_name: str | None = None  # render --app-name: the hook objects named after it

    def write(self, *clusters: dict[str, Any]) -> None:
        for old in self.dir.glob("*.yaml"):
            old.unlink()
        (self.dir / "raygitops.yaml").write_text(yaml.safe_dump({
            "namespace": self.ns,
            "hook": {"drainGraceSeconds": 20, "timeoutSeconds": 120, "maxParallel": 4, "waitReady": self.wait_ready,
                     "runningJobs": self.running_jobs},
        }))
        for c in clusters:
            c = copy.deepcopy(c)
            if self.node_name:
                for g in [c["spec"]["headGroupSpec"], *c["spec"]["workerGroupSpecs"]]:
                    g["template"]["spec"]["nodeName"] = self.node_name
            (self.dir / f"{c['metadata']['name']}.yaml").write_text(yaml.safe_dump(c))

    def render(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Path]:
        self.revision += 1
        named = ["--app-name", self.app_name] if self.app_name else []
        res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(self.dir), "--output", "json", *named],
                             capture_output=True, text=True, check=True)
        doc = json.loads(res.stdout)
        objs = doc["items"] if isinstance(doc, dict) else doc
        hooks = [o for o in objs if "argocd.argoproj.io/hook" in (o["metadata"].get("annotations") or {})]
        rest = [o for o in objs if o not in hooks]
        plan = self.tmp / f"plan-{self.revision}.json"
        cms = [o for o in hooks if o["kind"] == "ConfigMap"]
        if cms:
            plan.write_text(cms[0]["data"]["plan.json"])
        for secret in (o for o in hooks if o["kind"] == "Secret"):  # the Secrets' content, when pods read some
            secrets_file(plan).write_bytes(base64.b64decode(secret["data"]["secrets.json"]))
        return rest, hooks, plan

    def presync(self, plan: Path, *extra: str, env: dict[str, str] | None = None, kubeconfig: str | None = None,
                check: bool = True, timeout: float = 240) -> subprocess.CompletedProcess:
        argv = self.presync_argv(plan, *extra, kubeconfig=kubeconfig)
        res = subprocess.run(argv, capture_output=True, text=True, env=self.hook_env(env), timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"presync exited {res.returncode}\nstdout:{res.stdout}\nstderr:{res.stderr}")
        return res

    def presync_argv(self, plan: Path, *extra: str, kubeconfig: str | None = None) -> list[str]:
        secrets = ["--secrets", str(secrets_file(plan))] if secrets_file(plan).exists() else []
        return [sys.executable, "-m", "raygitops", "presync", "--plan", str(plan), *secrets,
                "--kubeconfig", kubeconfig or self.plane.kubeconfig, "--log-format", "json",
                "--lease-seconds", LEASE, "--timeout", "120", "--drain-grace", "20",
                "--wait-ready" if self.wait_ready else "--no-wait-ready", *extra]

    def hook_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in self.plane.env.items() if k not in ("KUBERNETES_SERVICE_HOST", "RAYGITOPS_TEST_PAUSE_AT")}
        env.update(extra or {})
        return env

    def apply(self, objs: list[dict[str, Any]]) -> None:
        args = ["apply", "-n", self.ns, "-f", "-"]
        if self.server_side:
            args[1:1] = ["--server-side", "--force-conflicts", "--field-manager=argocd-controller"]
        self.plane.kubectl(*args, input=yaml.safe_dump_all(objs))

    def sync(self, *clusters: dict[str, Any]) -> dict[str, Any] | None:
        """Render, run the hook (when there is a plan), apply; the hook's JSON report."""
        self.write(*clusters)
        objs, _, plan = self.render()
        report = None
        if plan.exists():
            res = self.presync(plan)
            report = json.loads(res.stdout)
        self.apply(objs)
        return report

    def status(self, *extra: str) -> tuple[int, dict[str, Any]]:
        """``raygitops status`` of the app against the cluster: (exit code, JSON report)."""
        res = subprocess.run([sys.executable, "-m", "raygitops", "status", str(self.dir), "--kubeconfig",
                              self.plane.kubeconfig, "--output", "json", *extra],
                             capture_output=True, text=True, env=self.hook_env(), timeout=120)
        assert res.returncode in (0, 3), res.stderr
        return res.returncode, json.loads(res.stdout)

    # ------------------------------------------------------------------ observations

    def pods(self, cluster: str = "demo") -> list[dict[str, Any]]:
        return self.plane.kubectl_json("get", "pods", "-n", self.ns, "-l", f"ray.io/cluster={cluster}")["items"]

    def uids(self, cluster: str = "demo") -> set[str]:
        return {p["metadata"]["uid"] for p in self.pods(cluster)}

    def cluster(self, name: str = "demo") -> dict[str, Any]:
        return self.plane.get("raycluster", name, self.ns)

    def events(self, reason: str, name: str = "demo") -> list[dict[str, Any]]:
        items = self.plane.kubectl_json("get", "events", "-n", self.ns)["items"]
        return [e for e in items if e["reason"] == reason and e["involvedObject"]["name"] == name]

    def wait_pods(self, cluster: str = "demo", count: int = 3, hashes: set[str] | None = None,
                  timeout: float = 90) -> list[dict[str, Any]]:
        def ok():
            pods = [p for p in self.pods(cluster) if not p["metadata"].get("deletionTimestamp")]
            if len(pods) != count:
                return None
            if hashes is not None and {p["metadata"].get("annotations", {}).get(HASH) for p in pods} != hashes:
                return None
            if self.wait_ready and not all(p.get("status", {}).get("phase") == "Running" for p in pods):
                return None
            return pods
        return self.plane.wait_for(ok, timeout=timeout, message=f"{count} pods of {cluster} with {hashes}")


def desired_hashes(cluster: dict[str, Any]) -> set[str]:
    doc = json.loads(cluster["metadata"]["annotations"]["raygitops.dev/template-hashes"])
    return {doc["head"], *doc["workers"].values()}


def rendered(objs: list[dict[str, Any]], name: str = "demo") -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "RayCluster" and o["metadata"]["name"] == name)


@pytest.fixture(params=["client-side", "server-side"])
def app(request, control_plane, namespace, tmp_path) -> App:
    return App(control_plane, namespace, tmp_path, server_side=request.param == "server-side")


@pytest.fixture
def csa_app(control_plane, namespace, tmp_path) -> App:
    return App(control_plane, namespace, tmp_path)


def _start(app: App, *, image: str = "rayproject/ray:2.41.0", **kw) -> set[str]:
    """First sync (the cluster is absent: the hook skips it), wait for its pods."""
    report = app.sync(raycluster(image=image, **kw))
    assert report["summary"]["skipped"] == 1
    app.wait_pods(count=1 + kw.get("replicas", 2))
    return app.uids()


def test_image_change_recreates_exactly_once(app: App):
    old_uids = _start(app)
    report = app.sync(raycluster(image="rayproject/ray:2.42.0"))
    assert report["summary"]["recreated"] == 1 and not report["failed"], report
    objs, _, _ = app.render()
    want = desired_hashes(rendered(objs))
    pods = app.wait_pods(hashes=want)
    assert old_uids.isdisjoint({p["metadata"]["uid"] for p in pods})
    live = app.cluster()
    assert live["spec"].get("suspend") is not True
    assert LOCK not in live["metadata"]["annotations"]
    last = json.loads(live["metadata"]["annotations"][LAST])
    assert set([last["to"]["head"], *last["to"]["workers"].values()]) == want
    assert len(app.events("RecreateStarted")) == 1 and len(app.events("RecreateCompleted")) == 1
    for reason in ("PodsDrained", "Resumed"):
        assert len(app.events(reason)) == 1
    # every container runs the new image
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {"rayproject/ray:2.42.0"}
    # a second sync is a no-op
    uids = app.uids()
    report = app.sync(raycluster(image="rayproject/ray:2.42.0"))
    assert report["summary"] == {"recreated": 0, "inSync": 1, "skipped": 0, "failed": 0, "deferred": 0}
    assert report["apiRequests"] == 2
    time.sleep(2)
    assert app.uids() == uids and len(app.events("RecreateStarted")) == 1


def test_the_operator_is_prompted_along_suspend_and_resume(csa_app: App):
    """KubeRay takes a suspend (and a resume) in two reconciles, the first only a status
    write; it runs the second on its 2 s requeue unless an annotation changes.  The hook
    renews its lease when it sees the first, so the pods go (and come) at once."""
    _start(csa_app)
    csa_app.write(raycluster(image="rayproject/ray:2.42.0"))
    objs, _, plan = csa_app.render()
    lines = [json.loads(line) for line in csa_app.presync(plan).stderr.splitlines()]
    prompts = [line["operator"] for line in lines if line["step"] == "prompt"]
    assert "RayClusterSuspending" in prompts and prompts[-1] == "running", lines
    drained = next(line for line in lines if line["step"] == "drain" and "gone" in line["msg"])
    assert drained["seconds"] < 1.5, drained  # unprompted, the operator waits 2 s before deleting a pod
    csa_app.apply(objs)
    csa_app.wait_pods(hashes=desired_hashes(rendered(objs)))


def test_a_cluster_deleted_while_the_hook_watches_the_operator(csa_app: App):
    """The hook follows the operator's suspend with a watch on the cluster; deleted in the
    meantime, the cluster is reported deleted (nothing to recreate: the sync creates it from
    Git), and the run still ends, exit 0, well inside the prompt's own time."""
    app = csa_app
    _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    _, _, plan = app.render()
    proc = _spawn(app, plan, {"RAYGITOPS_TEST_PAUSE_AT": "suspended", "RAYGITOPS_TEST_PAUSE_SECONDS": "2"})
    try:
        app.plane.wait_for(lambda: app.cluster()["spec"].get("suspend") is True, timeout=60, interval=0.05,
                           message="suspended by the hook")
        app.plane.kubectl("delete", "raycluster", "demo", "-n", app.ns, "--wait=false")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["summary"]["skipped"] == 1 and not report["failed"], err
    assert report["clusters"][0]["message"] == "the RayCluster was deleted", report
    assert app.events("RecreateCompleted") == [] and app.events("Resumed") == []


@pytest.mark.parametrize("case", ["replicas-only", "no-opt-in", "rayjob-owner-reference", "rayjob-label",
                                  "desired-suspended"])
def test_no_pod_deleted(csa_app: App, case: str):
    app = csa_app
    base: dict[str, Any] = {}
    if case == "no-opt-in":
        base["strategy"] = None
    if case == "rayjob-label":
        base["labels"] = {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "j"}
    report = app.sync(raycluster(**base))
    app.wait_pods()
    if case == "rayjob-owner-reference":
        # a real (suspended, so idle) RayJob owns the cluster; the manifest does not say so
        app.plane.apply({"apiVersion": "ray.io/v1", "kind": "RayJob",
                         "metadata": {"name": "owner", "namespace": app.ns},
                         "spec": {"suspend": True, "entrypoint": "true",
                                  "rayClusterSpec": raycluster()["spec"]}})
        job = app.plane.get("rayjob", "owner", app.ns)
        ref = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "owner", "uid": job["metadata"]["uid"]}
        app.plane.kubectl("patch", "raycluster", "demo", "-n", app.ns, "--type=merge",
                          "-p", json.dumps({"metadata": {"ownerReferences": [ref]}}))
    uids = app.uids()
    assert len(uids) == 3
    change = dict(base, replicas=4) if case == "replicas-only" else dict(base, image="rayproject/ray:2.42.0")
    if case == "desired-suspended":
        change["suspend"] = True
    app.write(raycluster(**change))
    objs, _, plan = app.render()
    if not plan.exists():
        assert case == "no-opt-in"  # nothing opts in: render appends no hook at all
    else:
        res = app.presync(plan)
        report = json.loads(res.stdout)
        assert report["summary"]["recreated"] == 0 and not report["failed"], report
        expected = "inSync" if case == "replicas-only" else "skipped"
        assert report["summary"][expected] == 1, report
        if case.startswith("rayjob"):
            assert "owned by RayJob" in res.stderr
    assert app.uids() == uids  # the hook deleted nothing
    live = app.cluster()
    assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]
    if case != "desired-suspended":
        app.apply(objs)
        time.sleep(3)
        if case == "replicas-only":
            app.wait_pods(count=5)
            assert uids <= app.uids()
        else:
            assert app.uids() == uids
    assert app.events("RecreateStarted") == []


def _spawn(app: App, plan: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(app.presync_argv(plan), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=app.hook_env(env), start_new_session=True)


def _wait_paused(proc: subprocess.Popen, step: str, timeout: float = 90) -> str:
    """Read the hook's stderr (in a thread) until it says it pauses at ``step``."""
    lines: list[str] = []
    seen = threading.Event()

    def reader() -> None:
        for line in proc.stderr:
            lines.append(line)
            if "RAYGITOPS_TEST_PAUSE_AT" in line and f'"step": "{step}"' in line:
                seen.set()

    threading.Thread(target=reader, daemon=True).start()
    if not seen.wait(timeout):
        proc.kill()
        raise AssertionError(f"hook did not pause at {step}: rc={proc.poll()}\n{''.join(lines)}")
    return "".join(lines)


@pytest.mark.parametrize("step", ["locked", "suspended", "draining", "resumed"])
def test_killed_hook_is_finished_by_the_next_run(csa_app: App, step: str):
    app = csa_app
    _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    objs, _, plan = app.render()
    if step == "draining":
        # the operator is down, so no pod goes away: the drain is deterministically in
        # progress when we kill the hook (kwok <= 0.7 strips finalizers, so those cannot hold a pod)
        app.plane.stop_operator()
    proc = None
    try:
        proc = _spawn(app, plan, {"RAYGITOPS_TEST_PAUSE_AT": step})
        _wait_paused(proc, step)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        live = app.cluster()
        assert LOCK in live["metadata"]["annotations"]
        if step == "draining":
            assert live["spec"]["suspend"] is True and len(app.pods()) == 3
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        app.plane.start_operator()
    res = app.presync(plan)
    report = json.loads(res.stdout)
    assert report["summary"]["recreated"] == 1 and not report["failed"], res.stderr
    assert "takeover" in res.stderr
    app.apply(objs)
    want = desired_hashes(rendered(objs))
    app.wait_pods(hashes=want)
    live = app.cluster()
    assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]
    assert len(app.events("RecreateStarted")) == 1 and len(app.events("RecreateCompleted")) == 1
    # suspended exactly once (the takeover did not start a second cycle)
    assert len(app.events("Resumed")) == 1
    again = json.loads(app.presync(plan).stdout)
    assert again["summary"]["inSync"] == 1


def test_a_hook_killed_inside_its_recovery_never_reports_a_recreate_that_did_not_happen(csa_app: App):
    """SIGTERM mid-drain (the operator is down: no pod goes), so the recovery resumes the
    cluster as it was; SIGKILL right after that resume write, before its unlock. The lock it
    leaves says nothing of the desired spec was written (phase ``locked``): the next run, with
    ``--no-wait-ready``, takes it over and makes the cycle again; it reports the recreate once
    the old pods are gone, never while they still run."""
    app = csa_app
    old = _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    objs, _, plan = app.render()
    app.plane.stop_operator()
    proc = None
    try:
        proc = _spawn(app, plan, {"RAYGITOPS_TEST_PAUSE_AT": "recovering"})
        app.plane.wait_for(lambda: app.cluster()["spec"].get("suspend") is True, timeout=60, interval=0.1,
                           message="suspended by the hook")
        time.sleep(1)  # in the drain now
        proc.send_signal(signal.SIGTERM)
        log = _wait_paused(proc, "recovering")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert "resumed as it was" in log
        live = app.cluster()
        assert live["spec"]["suspend"] is False and json.loads(live["metadata"]["annotations"][LOCK])["phase"] == "locked"
        assert app.uids() == old  # the operator was down: the old pods still run
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        app.plane.start_operator()
    res = app.presync(plan, "--no-wait-ready")
    (demo,) = json.loads(res.stdout)["clusters"]
    assert demo["outcome"] == "recreated" and "takeover" in res.stderr, res.stderr
    assert old.isdisjoint(app.uids())  # reported recreated: not one old pod left
    app.apply(objs)
    app.wait_pods(hashes=desired_hashes(rendered(objs)))
    assert LOCK not in app.cluster()["metadata"]["annotations"]


def test_operator_down_stragglers_deleted_after_grace(csa_app: App):
    app = csa_app
    old_uids = _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    objs, _, plan = app.render()
    app.plane.stop_operator()
    try:
        res = app.presync(plan, "--drain-grace", "2", "--no-wait-ready")
        report = json.loads(res.stdout)
        assert report["summary"]["recreated"] == 1, res.stderr
        assert "drain grace over" in res.stderr
        live = app.cluster()
        assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]
        assert old_uids.isdisjoint(app.uids())
    finally:
        app.plane.start_operator()
    app.apply(objs)
    app.wait_pods(hashes=desired_hashes(rendered(objs)))


def test_two_hooks_at_once_make_one_cycle(csa_app: App):
    app = csa_app
    _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    objs, _, plan = app.render()
    procs = [_spawn(app, plan) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    reports = [json.loads(o[0]) for o in outs]
    assert sorted(r["summary"]["recreated"] for r in reports) == [0, 1], reports
    assert all(r["summary"]["recreated"] + r["summary"]["inSync"] == 1 for r in reports)
    app.apply(objs)
    app.wait_pods(hashes=desired_hashes(rendered(objs)))
    assert len(app.events("RecreateStarted")) == 1 and len(app.events("Resumed")) == 1


def _token_kubeconfig(app: App, path: Path, namespace: str, service_account: str = "raygitops-presync") -> str:
    admin = yaml.safe_load(Path(app.plane.kubeconfig).read_text())
    token = app.plane.create_token(service_account, namespace)
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "hook",
        "clusters": admin["clusters"],
        "users": [{"name": "hook", "user": {"token": token}}],
        "contexts": [{"name": "hook", "context": {"cluster": admin["clusters"][0]["name"], "user": "hook",
                                                  "namespace": namespace}}],
    }
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_rbac_rendered_role_is_enough_and_confined(csa_app: App, tmp_path: Path):
    app = csa_app
    _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    objs, hooks, plan = app.render()
    rbac = [h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS]
    assert len(rbac) == 5  # with the ClusterRole and its binding (the preflight reads nodes)
    app.plane.apply(rbac, namespace=app.ns)
    kubeconfig = _token_kubeconfig(app, tmp_path / "hook.kubeconfig", app.ns)
    res = app.presync(plan, kubeconfig=kubeconfig)
    report = json.loads(res.stdout)
    assert report["summary"]["recreated"] == 1 and not report["failed"], res.stderr
    assert "cannot record Event" not in res.stderr
    assert len(app.events("RecreateCompleted")) == 1
    app.apply(objs)
    app.wait_pods(hashes=desired_hashes(rendered(objs)))

    # the same token cannot touch another namespace
    other = app.plane.create_namespace(f"{app.ns}-other")
    try:
        app.plane.apply({**raycluster(name="demo"), "metadata": {**raycluster()["metadata"], "namespace": other}})
        doc = json.loads(plan.read_text())
        doc["namespace"] = other
        other_plan = tmp_path / "other-plan.json"
        other_plan.write_text(json.dumps(doc))
        res = app.presync(other_plan, kubeconfig=kubeconfig, check=False)
        assert res.returncode == 1
        assert "403" in res.stderr and "Forbidden" in res.stderr.replace("forbidden", "Forbidden")
        assert app.plane.get("raycluster", "demo", other)["spec"].get("suspend") is not True
    finally:
        app.plane.delete_namespace(other)


def test_dry_run_reports_without_changing(csa_app: App):
    app = csa_app
    uids = _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    _, _, plan = app.render()
    before = app.cluster()["metadata"]["resourceVersion"]
    res = app.presync(plan, "--dry-run")
    report = json.loads(res.stdout)
    assert report["dryRun"] and report["summary"]["wouldRecreate"] == 1
    assert report["clusters"][0]["decision"] == "recreate"
    assert set(report["clusters"][0]["drift"]) == {"head", "worker:small"}
    assert app.cluster()["metadata"]["resourceVersion"] == before and app.uids() == uids


def _adopted(image: str) -> dict[str, Any]:
    """A RayCluster as it was applied BEFORE raygitops: fields the CRD schema defaults are
    left out (ports[].protocol, numOfHosts, grpc probe service, ...)."""
    obj = raycluster(image=image, strategy="Recreate")
    for g in [obj["spec"]["headGroupSpec"], *obj["spec"]["workerGroupSpecs"]]:
        c = g["template"]["spec"]["containers"][0]
        c["readinessProbe"] = {"grpc": {"port": 8080}, "periodSeconds": 30}
        c["env"].append({"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k", "optional": True}}})
    return obj


@pytest.mark.parametrize("change", [False, True])
def test_adoption_pods_without_hash_use_the_defaulted_live_spec(csa_app: App, change: bool):
    """Pods made before raygitops carry no hash: the hook hashes the live spec, which the API
    server defaulted. The same spec must be in sync (adopting or upgrading raygitops never
    recreates pods); a real change drifts by spec-hash."""
    app = csa_app
    plain = _adopted("rayproject/ray:2.41.0")
    if app.node_name:
        for g in [plain["spec"]["headGroupSpec"], *plain["spec"]["workerGroupSpecs"]]:
            g["template"]["spec"]["nodeName"] = app.node_name
    app.plane.kubectl("apply", "-n", app.ns, "-f", "-", input=yaml.safe_dump(plain))
    app.wait_pods()
    live = app.cluster()
    port = live["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port.get("protocol") == "TCP"  # the API server did default it
    assert live["spec"]["workerGroupSpecs"][0].get("numOfHosts") == 1
    assert all(HASH not in (p["metadata"].get("annotations") or {}) for p in app.pods())
    uids = app.uids()
    app.write(_adopted("rayproject/ray:2.42.0" if change else "rayproject/ray:2.41.0"))
    objs, _, plan = app.render()
    report = json.loads(app.presync(plan).stdout)
    if change:
        assert report["summary"]["recreated"] == 1, report
        assert {g["how"] for g in report["clusters"][0]["drift"].values()} == {"spec-hash"}
        app.apply(objs)
        app.wait_pods(hashes=desired_hashes(rendered(objs)))
    else:
        assert report["summary"]["inSync"] == 1, report
        app.apply(objs)
        time.sleep(3)
        assert app.uids() == uids
