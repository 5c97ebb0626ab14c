"""The hook never harms a cluster: each guarantee of docs/presync.md ("Guarantees") on the real
control plane, with the hook run as a process the way the Job runs it.

Helpers (App, raycluster, ...) come from test_presync_hook.py.
"""

from __future__ import annotations

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

import controlplane

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "argocd" / "health"))
import evaluate as luahealth  # noqa: E402 - argocd/health/evaluate.py: the shipped Lua check, as Argo CD runs it

from test_presync_hook import LAST, LOCK, App, _start, _token_kubeconfig, desired_hashes, raycluster, rendered

pytestmark = pytest.mark.e2e
OLD, NEW = "rayproject/ray:2.41.0", "rayproject/ray:2.42.0"


@pytest.fixture
def app(control_plane, namespace, tmp_path) -> App:
    return App(control_plane, namespace, tmp_path)


def _report(res: subprocess.CompletedProcess) -> dict[str, Any]:
    return json.loads(res.stdout)


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["clusters"]}


def _dead_lock(phase: str) -> str:
    """The lock of an earlier raygitops run that died long ago."""
    return json.dumps({"target": {"head": "h1-00000000000000000000", "workers": {}}, "phase": phase,
                       "holder": "raygitops-presync-old/1/dead00", "renewedAt": "2020-01-01T00:00:00.000000Z",
                       "startedAt": "2020-01-01T00:00:00.000000Z", "leaseSeconds": 60, "from": None})


def _annotate(app: App, name: str, key: str, value: str) -> None:
    app.plane.kubectl("annotate", "--overwrite", "raycluster", name, "-n", app.ns, f"{key}={value}")


def _patch_spec(app: App, name: str, spec: dict[str, Any]) -> None:
    app.plane.kubectl("patch", "raycluster", name, "-n", app.ns, "--type=merge", "-p", json.dumps({"spec": spec}))


# ----------------------------------------------------------------------------- G1


def test_g1_render_refuses_hook_owned_annotations(tmp_path: Path):
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    obj = raycluster(strategy=None)
    obj["metadata"]["annotations"][LOCK] = _dead_lock("suspended")
    (app_dir / "demo.yaml").write_text(json.dumps(obj))
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(app_dir)], capture_output=True, text=True)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.count("\n") == 1, res.stderr
    assert f"{app_dir}/demo.yaml:1: RayCluster demo: metadata.annotations.{LOCK}:" in res.stderr


@pytest.mark.parametrize("suspended", [False, True])
def test_g1_a_cluster_that_does_not_opt_in_is_never_recreated(app: App, suspended: bool):
    """A raygitops lock on a cluster that does not opt in (left by an earlier run, or applied
    by hand): reported and dropped; a cluster raygitops had suspended is resumed as it is;
    no pod of it is deleted, whatever its drift."""
    app.sync(raycluster("demo"), raycluster("plain", strategy=None))
    app.wait_pods("demo")
    app.wait_pods("plain")
    _annotate(app, "plain", LOCK, _dead_lock("suspended"))
    if suspended:
        _patch_spec(app, "plain", {"suspend": True})
        app.plane.wait_for(lambda: not app.pods("plain"), timeout=60, message="plain suspended")
    uids = app.uids("plain")
    before = app.cluster("plain")["spec"]
    app.write(raycluster("demo"), raycluster("plain", strategy=None, image=NEW))
    objs, _, plan = app.render()
    res = app.presync(plan, "--no-wait-ready")
    report = _report(res)
    assert not report["failed"], res.stderr
    assert report["apiRequestsByVerb"].get("delete", 0) == 0, report
    plain = _by_name(report)["plain"]
    assert plain["decision"] == "release" and "raygitops lock" in plain["reason"], plain
    assert "raygitops-presync-old/1/dead00" in res.stderr
    live = app.cluster("plain")
    assert LOCK not in live["metadata"]["annotations"]
    assert live["spec"].get("suspend") is not True
    assert live["spec"]["headGroupSpec"] == before["headGroupSpec"]  # resumed as it was, not to the new spec
    if suspended:
        pods = app.wait_pods("plain")
        assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {OLD}
    else:
        assert app.uids("plain") == uids
    assert app.events("RecreateStarted", "plain") == []


# ----------------------------------------------------------------------------- G2


class PodWatch:
    """Every pod event of a namespace, from `kubectl get pods -w` running beside the test."""

    def __init__(self, app: App):
        self.events: list[tuple[str, dict[str, Any]]] = []
        argv = [str(app.plane.bin_dir / "kubectl"), f"--kubeconfig={app.plane.kubeconfig}", "get", "pods",
                "-n", app.ns, "-w", "--output-watch-events", "-o", "json"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env=app.plane.env)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        decoder, buf = json.JSONDecoder(), ""
        for line in self.proc.stdout:
            buf += line
            try:
                doc, end = decoder.raw_decode(buf.lstrip())
            except ValueError:
                continue
            buf = buf.lstrip()[end:]
            self.events.append((doc["type"], doc["object"]))

    def stop(self) -> None:
        time.sleep(1)  # let the last events arrive
        self.proc.terminate()
        self.proc.wait(10)
        self.thread.join(5)

    def deletion_grace(self, pod: str) -> Any:
        """deletionGracePeriodSeconds of the first event with a deletionTimestamp of the pod
        (its name or uid): the grace of the DELETE that started its deletion (kwok, as a
        kubelet does, finishes it later with grace 0 once the containers are stopped); None if
        it was never deleted."""
        for _, obj in self.events:
            if pod in (obj["metadata"]["name"], obj["metadata"]["uid"]) and obj["metadata"].get("deletionTimestamp"):
                return obj["metadata"].get("deletionGracePeriodSeconds")
        return None


def _foreign_pod(app: App, name: str = "intruder") -> None:
    """A pod a person made, carrying the cluster's label but owned by nobody."""
    app.plane.apply({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": app.ns, "labels": {"ray.io/cluster": "demo"}},
                     "spec": {"nodeName": "kwok-node-0", "containers": [{"name": "c", "image": "busybox"}]}})


def _graceful(obj: dict[str, Any], seconds: int) -> dict[str, Any]:
    for g in [obj["spec"]["headGroupSpec"], *obj["spec"]["workerGroupSpecs"]]:
        g["template"]["spec"]["terminationGracePeriodSeconds"] = seconds
    return obj


def test_g2_a_foreign_pod_with_the_cluster_label_blocks_the_suspend(app: App):
    """KubeRay deletes every pod labelled ray.io/cluster=<name> on suspend, foreign ones
    included: while one is there the hook refuses to suspend and says why."""
    _start(app)
    uids = app.uids()
    _foreign_pod(app)
    app.write(raycluster(image=NEW))
    _, _, plan = app.render()
    res = app.presync(plan, check=False)
    assert res.returncode == 1, res.stderr
    report = _report(res)
    demo = _by_name(report)["demo"]
    assert demo["outcome"] == "failed" and "intruder" in demo["message"], demo
    assert "intruder" in res.stderr
    live = app.cluster()
    assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]
    assert uids < app.uids() and len(app.uids()) == len(uids) + 1  # the cluster's own pods untouched too
    pod = app.plane.get("pod", "intruder", app.ns)
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")


def test_g2_the_drain_deletes_only_the_clusters_own_pods_with_their_grace_period(app: App):
    """Operator down: after --drain-grace the hook deletes the old pods itself, each with its
    own terminationGracePeriodSeconds; a foreign pod that turns up during the drain is named
    in the log, never deleted, and not waited for."""
    app.sync(_graceful(raycluster(), 7))
    app.wait_pods()
    old = {p["metadata"]["name"] for p in app.pods()}
    app.write(_graceful(raycluster(image=NEW), 7))
    objs, _, plan = app.render()
    app.plane.stop_operator()
    watch = PodWatch(app)
    proc = None
    try:
        argv = app.presync_argv(plan) + ["--drain-grace", "3", "--no-wait-ready"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=app.hook_env())
        app.plane.wait_for(lambda: app.cluster()["spec"].get("suspend") is True, timeout=30, interval=0.1,
                           message="suspended by the hook")
        _foreign_pod(app)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        app.plane.start_operator()
        watch.stop()
    assert proc.returncode == 0, err
    assert json.loads(out)["summary"]["recreated"] == 1
    assert "intruder" in err and "drain grace over" in err
    for name in old:
        assert watch.deletion_grace(name) == 7, (name, watch.deletion_grace(name))
    assert watch.deletion_grace("intruder") is None
    pod = app.plane.get("pod", "intruder", app.ns)
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    app.plane.kubectl("delete", "pod", "intruder", "-n", app.ns, "--wait=true")
    app.apply(objs)
    app.wait_pods(hashes=desired_hashes(rendered(objs)))


# ----------------------------------------------------------------------------- G3


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_g3_a_signal_mid_drain_resumes_unlocks_and_exits_nonzero(app: App, signum: int):
    """Operator down, so the drain is in progress when the signal comes: the hook starts no
    new step, resumes the cluster as it was (the drain had not finished), drops its lock and
    exits 1 well inside 30 s."""
    _start(app)
    before = app.cluster()["spec"]["headGroupSpec"]
    app.write(raycluster(image=NEW))
    _, _, plan = app.render()
    app.plane.stop_operator()
    proc = None
    try:
        proc = subprocess.Popen(app.presync_argv(plan), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=app.hook_env())
        app.plane.wait_for(lambda: app.cluster()["spec"].get("suspend") is True, timeout=30, interval=0.1,
                           message="suspended by the hook")
        time.sleep(1)  # in the drain now
        sent = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        app.plane.start_operator()
    assert proc.returncode == 1, err
    assert took < 25, took
    report = _report(subprocess.CompletedProcess([], 1, out, err))
    demo = _by_name(report)["demo"]
    assert report["interrupted"] and demo["outcome"] == "failed" and "interrupted" in demo["message"], demo
    assert "resumed as it was" in demo["message"]
    live = app.cluster()
    assert live["spec"].get("suspend") is False and LOCK not in live["metadata"]["annotations"]
    assert live["spec"]["headGroupSpec"]["template"] == before["template"]  # not half new
    pods = app.wait_pods()
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {OLD}
    assert len(app.events("RecreateFailed")) == 1


# ----------------------------------------------------------------------------- G4


def test_g4_a_cluster_suspended_outside_git_is_brought_back(app: App):
    """Kill the hook after its suspend and remove its lock by hand: the next run drains,
    resumes with the desired spec, and says so."""
    _start(app)
    app.write(raycluster(image=NEW))
    objs, _, plan = app.render()
    proc = subprocess.Popen(app.presync_argv(plan), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=app.hook_env({"RAYGITOPS_TEST_PAUSE_AT": "suspended"}), start_new_session=True)
    try:
        app.plane.wait_for(lambda: app.cluster()["spec"].get("suspend") is True, timeout=30, interval=0.1,
                           message="suspended by the hook")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
    app.plane.kubectl("annotate", "raycluster", "demo", "-n", app.ns, f"{LOCK}-")
    res = app.presync(plan)
    demo = _by_name(_report(res))["demo"]
    assert demo["outcome"] == "recreated" and "resumed a cluster suspended outside Git" in demo["message"], demo
    assert "suspended outside Git" in res.stderr
    pods = app.wait_pods(hashes=desired_hashes(rendered(objs)))
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {NEW}
    assert app.cluster()["spec"]["suspend"] is False


# ----------------------------------------------------------------------------- G5


def test_g5_a_forbidden_namespace_never_stops_the_others(app: App, tmp_path: Path):
    """The hook's token may not read the second namespace (403): that plan's cluster is
    failed with the reason, the drifted cluster of the first is recreated, exit 1 at the end."""
    _start(app)
    app.write(raycluster(image=NEW))
    objs, hooks, plan = app.render()
    app.plane.apply([h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS], namespace=app.ns)
    kubeconfig = _token_kubeconfig(app, tmp_path / "hook.kubeconfig", app.ns)
    doc = json.loads(plan.read_text())
    doc["namespace"] = f"{app.ns}-forbidden"
    other = tmp_path / "other-plan.json"
    other.write_text(json.dumps(doc))
    argv = app.presync_argv(other, kubeconfig=kubeconfig)  # the first --plan: the forbidden one
    res = subprocess.run(argv + ["--plan", str(plan)], capture_output=True, text=True, env=app.hook_env(), timeout=240)
    assert res.returncode == 1, res.stderr
    report = _report(res)
    assert report["summary"]["recreated"] == 1 and report["summary"]["failed"] == 1, report
    failed = next(c for c in report["clusters"] if c["namespace"] == doc["namespace"])
    assert "403" in failed["reason"] or "forbidden" in failed["reason"].lower(), failed
    app.apply(objs)
    app.wait_pods(hashes=desired_hashes(rendered(objs)))


# ----------------------------------------------------------------------------- G6


def test_g6_no_cycle_starts_without_the_time_to_finish_it(app: App):
    """--timeout 40, one cluster at a time, each cycle made to take 20 s or more: the first is
    recreated, the second would not fit in what is left and is deferred, untouched."""
    app.sync(raycluster("a"), raycluster("b"))
    app.wait_pods("a")
    app.wait_pods("b")
    uids = {n: app.uids(n) for n in ("a", "b")}
    app.write(raycluster("a", image=NEW), raycluster("b", image=NEW))
    _, _, plan = app.render()
    argv = app.presync_argv(plan)
    argv[argv.index("--timeout") + 1] = "40"
    res = subprocess.run(argv + ["--max-parallel", "1"], capture_output=True, text=True, timeout=120,
                         env=app.hook_env({"RAYGITOPS_TEST_PAUSE_AT": "suspended", "RAYGITOPS_TEST_PAUSE_SECONDS": "20"}))
    assert res.returncode == 1, res.stderr
    report = _report(res)
    assert report["summary"]["recreated"] == 1 and report["summary"]["deferred"] == 1, report
    deferred = next(c for c in report["clusters"] if c["outcome"] == "deferred")
    assert "the longest cycle" in deferred["message"], deferred
    live = app.cluster(deferred["name"])
    assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]
    assert app.uids(deferred["name"]) == uids[deferred["name"]]  # its old pods, untouched
    assert app.events("RecreateStarted", deferred["name"]) == []


# ----------------------------------------------------------------------------- G7


def test_g7_a_suspend_that_does_not_stick_fails_boundedly(app: App):
    """Another controller sets spec.suspend back to false whenever it sees it true: the hook
    suspends at most 3 times, then fails that cluster naming the cause; it never loops."""
    _start(app)
    app.write(raycluster(image=NEW))
    _, _, plan = app.render()
    stop = threading.Event()

    def other_controller() -> None:
        while not stop.is_set():
            live = app.cluster()
            if live["spec"].get("suspend") is True:
                _patch_spec(app, "demo", {"suspend": False})
            time.sleep(0.2)

    fighter = threading.Thread(target=other_controller, daemon=True)
    app.plane.stop_operator()  # the pods stay: the drain is still waiting when the suspend is undone
    fighter.start()
    try:
        res = app.presync(plan, check=False)
    finally:
        stop.set()
        fighter.join(10)
        app.plane.start_operator()
    assert res.returncode == 1, res.stderr
    report = _report(res)
    demo = _by_name(report)["demo"]
    assert demo["outcome"] == "failed" and "does not stick" in demo["message"], demo
    suspends = [l for l in res.stderr.splitlines() if "spec.suspend set to true" in l]
    assert len(suspends) == 3, res.stderr
    # lock, 3 suspends, lease renewals (every second with the tests' 3 s lease), resume, unlock
    assert report["apiRequestsByVerb"]["patch"] <= 15, report["apiRequestsByVerb"]
    live = app.cluster()
    assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]


# ----------------------------------------------------------------------------- #21: a failed recreate stays failed


def test_an_unschedulable_recreate_fails_every_run_until_fixed(app: App):
    """Workers pinned to a node pool that does not exist: --wait-ready times out and the hook
    fails; a second run (a Job retry, a resync) finds the pods carrying the new hash and
    still fails, whatever status.state says; the fixing commit recreates and passes."""
    _start(app)
    bad = raycluster(image=NEW)
    bad["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = {"pool": "does-not-exist"}
    # a pool a node autoscaler may make: the preflight cannot tell, and this cluster's policy goes on
    bad["metadata"].setdefault("annotations", {})["raygitops.dev/preflight-unknown"] = "proceed"
    app.write(bad)
    objs, _, plan = app.render()
    for attempt in (1, 2):
        argv = app.presync_argv(plan, "--wait-ready")
        argv[argv.index("--timeout") + 1] = "25"
        res = subprocess.run(argv, capture_output=True, text=True, env=app.hook_env(), timeout=120)
        assert res.returncode == 1, (attempt, res.stderr)
        demo = _by_name(_report(res))["demo"]
        assert demo["outcome"] == "failed" and "ready" in demo["message"], (attempt, demo)
        if attempt == 2:
            assert demo["decision"] == "verify" and "unverified" in demo["message"], demo
    live = app.cluster()
    assert json.loads(live["metadata"]["annotations"][LAST])["outcome"] == "Failed"
    assert live["metadata"]["annotations"]["raygitops.dev/last-recreate-outcome"] == "Failed"
    code, status = app.status()  # `raygitops status` says so too
    (demo,) = status["clusters"]
    assert code == 3 and demo["state"] == "failed" and demo["lastRecreate"]["outcome"] == "Failed", demo
    # Argo CD's health check never calls it Healthy meanwhile (whatever status.state says)
    app.plane.wait_for(lambda: luahealth.evaluate(app.cluster())["status"] == "Degraded", timeout=30,
                       message="Degraded after the failed recreate")
    app.apply(objs)  # Argo CD would not get here; the live state is the same either way
    app.write(raycluster(image=NEW))  # the fixing commit
    fixed, _, plan = app.render()
    res = app.presync(plan, "--wait-ready")
    assert _by_name(_report(res))["demo"]["outcome"] == "recreated", res.stderr
    assert json.loads(app.cluster()["metadata"]["annotations"][LAST])["outcome"] == "Completed"
    app.plane.wait_for(lambda: luahealth.evaluate(app.cluster())["status"] == "Healthy", timeout=30,
                       message="Healthy after the fixing recreate")
    app.apply(fixed)
    assert app.status()[0] == 0
