"""The Argo CD RayCluster health check (argocd/health/raycluster.lua).

- the argocd-cm patch carries exactly the Lua file (it is generated from it);
- every case of health_test.yaml (Argo CD's resource_customizations format, objects modelled on
  KubeRay's status fields) gives the expected status and message, in a Lua 5.1 runtime
  stripped to the libraries Argo CD opens (lupa), and in gopher-lua itself (Argo CD's
  interpreter) when Go is available;
- the ordering rules between failure, recreate lock, suspend and readiness, on small objects.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
HEALTH = REPO / "argocd" / "health"
sys.path.insert(0, str(HEALTH))

import evaluate as luahealth  # noqa: E402

KEY = "resource.customizations.health.ray.io_RayCluster"
LUA = HEALTH / "raycluster.lua"
JOB_KEY = "resource.customizations.health.batch_Job"
JOB_LUA = HEALTH / "job.lua"
CASES = yaml.safe_load((HEALTH / "health_test.yaml").read_text())["tests"]


def cond(kind: str, status: str, reason: str = "", message: str = "") -> dict:
    return {"type": kind, "status": status, "reason": reason or kind, "message": message,
            "lastTransitionTime": "2026-11-30T10:00:00Z"}


def cluster(suspend: bool | None = None, status: dict | None = None, annotations: dict | None = None,
            generation: int = 1) -> dict:
    obj: dict = {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": "ns", "generation": generation, "annotations": annotations or {}},
        "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "i"}]}}}},
    }
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    if status is not None:
        obj["status"] = status
    return obj


READY = {"state": "ready", "observedGeneration": 1, "readyWorkerReplicas": 3, "desiredWorkerReplicas": 3,
         "conditions": [cond("RayClusterProvisioned", "True"), cond("HeadPodReady", "True")]}
LOCK = {"raygitops.dev/recreate": json.dumps({"target": {"head": "h1-0"}, "phase": "suspend",
                                               "holder": "x", "renewedAt": "2026-11-30T10:00:00Z"},
                                              separators=(",", ":"))}


# ----------------------------------------------------------------------------- the artefacts


def test_argocd_cm_patch_is_generated_from_the_lua_file() -> None:
    patch = yaml.safe_load((REPO / "argocd" / "argocd-cm-health.yaml").read_text())
    assert patch["apiVersion"] == "v1" and patch["kind"] == "ConfigMap"
    assert patch["metadata"] == {"name": "argocd-cm"}
    assert patch["data"] == {KEY: LUA.read_text(), JOB_KEY: JOB_LUA.read_text()}, "run python3 argocd/health/generate.py"
    res = subprocess.run([sys.executable, str(HEALTH / "generate.py"), "--check"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_the_check_needs_no_open_libs() -> None:
    """Argo CD opens no string/math library unless useOpenLibs is set: the patch must not need it."""
    patch = yaml.safe_load((REPO / "argocd" / "argocd-cm-health.yaml").read_text())
    assert not any(k.startswith("resource.customizations.useOpenLibs") for k in patch["data"])
    with pytest.raises(Exception):  # the emulation really removes the string library
        luahealth.evaluate(cluster(), script='return {status = ("x"):upper(), message = ""}')
    with pytest.raises(Exception):
        luahealth.evaluate(cluster(), script='return {status = string.upper("x"), message = ""}')


# ----------------------------------------------------------------------------- health_test.yaml


@pytest.mark.parametrize("case", CASES, ids=[c["inputPath"] for c in CASES])
def test_health_cases(case: dict) -> None:
    obj = yaml.safe_load((HEALTH / case["inputPath"]).read_text())
    assert luahealth.evaluate(obj) == case["healthStatus"]


def test_cases_cover_every_state() -> None:
    statuses = {c["healthStatus"]["status"] for c in CASES}
    assert statuses == {"Healthy", "Progressing", "Suspended", "Degraded"}
    names = {Path(c["inputPath"]).stem for c in CASES}
    assert {"ready", "provisioning", "suspending", "suspended", "recreate-in-progress", "failed",
            "replica-failure", "recreate-failed"} <= names


@pytest.fixture(scope="session")
def gopher_lua(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/unit/ship_golua built once: gopher-lua with Argo CD's library set."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        pytest.skip("no Go toolchain: gopher-lua cross-check not run (the lupa emulation still ran)")
    out = tmp_path_factory.mktemp("golua") / "shipgolua"
    res = subprocess.run([go, "build", "-o", str(out), "."], cwd=REPO / "tests" / "unit" / "ship_golua",
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0 and ("dial tcp" in res.stderr or "proxy" in res.stderr):
        pytest.skip(f"gopher-lua not downloadable: {res.stderr.strip().splitlines()[-1]}")
    assert res.returncode == 0, res.stderr
    return out


def run_gopher_lua(binary: Path, objects: list[dict], script: Path = LUA) -> list[dict]:
    res = subprocess.run([str(binary), str(script)], input=json.dumps(objects, default=str),
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(res.stdout)


@pytest.mark.packaging  # builds gopher-lua with Go
def test_health_cases_in_gopher_lua(gopher_lua: Path) -> None:
    objects = [yaml.safe_load((HEALTH / c["inputPath"]).read_text()) for c in CASES]
    got = run_gopher_lua(gopher_lua, objects)
    assert got == [c["healthStatus"] for c in CASES]


# ----------------------------------------------------------------------------- rules


def health(obj: dict) -> tuple[str, str]:
    h = luahealth.evaluate(obj)
    return h["status"], h["message"]


def test_ready() -> None:
    assert health(cluster(status=READY)) == ("Healthy", "RayCluster is ready: head pod ready, 3/3 workers ready")


def test_autoscaled_workers_still_healthy() -> None:
    status = dict(READY, readyWorkerReplicas=3, desiredWorkerReplicas=5)
    assert health(cluster(status=status))[0] == "Healthy"


def test_no_status_yet_is_progressing() -> None:
    assert health(cluster())[0] == "Progressing"
    assert health(cluster(status={}))[0] == "Progressing"


def test_operator_behind_is_progressing() -> None:
    status, message = health(cluster(status=READY, generation=2))
    assert status == "Progressing" and "generation 2" in message


def test_user_suspend() -> None:
    suspending = dict(READY, conditions=[*READY["conditions"], cond("RayClusterSuspending", "True")])
    assert health(cluster(suspend=True, status=suspending))[0] == "Progressing"
    assert health(cluster(suspend=True, status=READY))[0] == "Progressing"  # not reconciled yet
    suspended = {"state": "suspended", "observedGeneration": 1,
                 "conditions": [cond("RayClusterProvisioned", "False"), cond("RayClusterSuspended", "True")]}
    assert health(cluster(suspend=True, status=suspended)) == (
        "Suspended", "RayCluster is suspended (spec.suspend: true): all its pods are deleted")


def test_recreate_lock_wins_over_suspended() -> None:
    suspended = {"state": "suspended", "conditions": [cond("RayClusterSuspended", "True")]}
    status, message = health(cluster(suspend=True, status=suspended, annotations=LOCK))
    assert status == "Progressing"
    assert "raygitops" in message and '"phase":"suspend"' in message
    # also while the pods are still being deleted, and after the resume
    assert health(cluster(suspend=True, status=READY, annotations=LOCK))[0] == "Progressing"
    assert health(cluster(suspend=False, status=READY, annotations=LOCK))[0] == "Progressing"


def test_lock_of_another_tool_is_ignored() -> None:
    assert health(cluster(status=READY, annotations={"example.com/recreate": "x"}))[0] == "Healthy"


def test_resume_after_suspend_is_progressing() -> None:
    resuming = {"state": "suspended", "conditions": [cond("RayClusterSuspended", "False"),
                                                      cond("RayClusterProvisioned", "False")]}
    assert health(cluster(suspend=False, status=resuming))[0] == "Progressing"
    assert health(cluster(status={"state": "suspended"}))[0] == "Progressing"


@pytest.mark.parametrize("status, needle", [
    ({"state": "failed"}, "status.state is failed"),
    ({"state": "failed", "reason": "boom"}, "boom"),
    ({"conditions": [cond("ReplicaFailure", "True", "FailedCreateHeadPod", "quota")]}, "FailedCreateHeadPod: quota"),
    ({"conditions": [cond("ReplicaFailure", "True", "", "")]}, "ReplicaFailure"),
    ({"conditions": [cond("RayClusterProvisioned", "True"), cond("HeadPodReady", "False", "HeadPodNotReady", "x")]},
     "Head pod is not ready"),
])
def test_failures_are_degraded_and_say_which(status: dict, needle: str) -> None:
    got, message = health(cluster(status=status))
    assert got == "Degraded" and needle in message


def test_failure_wins_over_recreate_lock() -> None:
    """A pod the operator cannot create is reported even while raygitops holds its lock."""
    status = {"conditions": [cond("ReplicaFailure", "True", "FailedCreateWorkerPod", "invalid")]}
    assert health(cluster(status=status, annotations=LOCK))[0] == "Degraded"


def test_replica_failure_false_is_not_a_failure() -> None:
    status = copy.deepcopy(READY)
    status["conditions"].append(cond("ReplicaFailure", "False"))
    assert health(cluster(status=status))[0] == "Healthy"


def test_null_fields_are_tolerated() -> None:
    obj = cluster(status={"conditions": None, "state": None})
    obj["metadata"]["annotations"] = None
    assert health(obj)[0] == "Progressing"


# ----------------------------------------------------------------------------- batch/Job (job.lua)


def job(*conditions: tuple[str, str, str], failure: str | None = None) -> dict:
    obj: dict = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "raygitops-presync"},
                 "status": {"conditions": [{"type": t, "status": st, "message": m} for t, st, m in conditions]}}
    if failure is not None:
        obj["metadata"]["annotations"] = {"raygitops.dev/failure": failure}
    return obj


BACKOFF = "Job has reached the specified backoff limit"
# Argo CD's built-in rule (gitops-engine health_job.go) for any Job, and the hook's reason on a
# failed raygitops Job: (object, expected health)
JOB_CASES = [
    pytest.param(job(), {"status": "Progressing", "message": ""}, id="running"),
    pytest.param(job(("Complete", "True", "done")), {"status": "Healthy", "message": "done"}, id="complete"),
    pytest.param(job(("Failed", "True", BACKOFF)), {"status": "Degraded", "message": BACKOFF}, id="failed"),
    pytest.param(job(("Suspended", "True", "Job suspended")), {"status": "Suspended", "message": "Job suspended"},
                 id="suspended"),
    pytest.param(job(("Suspended", "False", "Job resumed")), {"status": "Healthy", "message": "Job resumed"},
                 id="resumed-counts-as-complete-like-argocd"),
    pytest.param(job(("Failed", "True", BACKOFF), failure="ns/demo: foreign pod ns/x carries the label"),
                 {"status": "Degraded", "message": f"ns/demo: foreign pod ns/x carries the label ({BACKOFF})"},
                 id="failed-with-reason"),
    pytest.param(job(("Complete", "True", "done"), failure="stale"), {"status": "Healthy", "message": "done"},
                 id="reason-ignored-unless-failed"),
    pytest.param(job(failure="early"), {"status": "Progressing", "message": ""}, id="reason-while-running"),
    pytest.param({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}, "status": None},
                 {"status": "Progressing", "message": ""}, id="no-status"),
]


@pytest.mark.parametrize("obj,expected", JOB_CASES)
def test_job_health(obj: dict, expected: dict) -> None:
    assert luahealth.evaluate(obj, script=JOB_LUA.read_text()) == expected


def test_job_health_in_gopher_lua(gopher_lua: Path) -> None:
    cases = [p.values for p in JOB_CASES]
    assert run_gopher_lua(gopher_lua, [obj for obj, _ in cases], JOB_LUA) == [want for _, want in cases]
