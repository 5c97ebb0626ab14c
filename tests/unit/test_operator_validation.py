"""KubeRay's own RayCluster validation, ported per version (model/validation): every check
fires on the spec that breaks it and on no other, in the upstream order, citing the line of
the operator's code that holds it (checked against the operator's source in GOMODCACHE); render
and diff refuse such a cluster in one line. The real operators refuse the same specs:
tests/e2e/test_pod_oracle.py."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from raygitops.model import validation
from raygitops.model.validation import Head, checks, v1_1, v1_3, v1_4, v1_5, v1_6

PORTS = (v1_3.PORT, v1_4.PORT, v1_5.PORT, v1_6.PORT)


def base() -> dict[str, Any]:
    def group(name: str) -> dict[str, Any]:
        return {"groupName": name, "replicas": 1, "minReplicas": 0, "maxReplicas": 3, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "w", "image": "ray:1"}]}}}

    return {"spec": {"rayVersion": "2.52.0",
                     "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                         {"name": "h", "image": "ray:1", "env": []}]}}},
                     "workerGroupSpecs": [group("a"), group("b")]},
            "annotations": {}, "labels": {}}


def head(c):
    return c["spec"]["headGroupSpec"]


def worker(c):
    return c["spec"]["workerGroupSpecs"][1]  # the second: the first passes, the loop goes on


def env(c, name, value="x"):
    head(c)["template"]["spec"]["containers"][0]["env"].append({"name": name, "value": value})


def ft(c):
    c["spec"]["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}


def autoscaler(c, v2=False):
    c["spec"]["enableInTreeAutoscaling"] = True
    if v2:
        c["spec"]["autoscalerOptions"] = {"version": "v2"}


def token(c, version="2.52.0"):
    c["spec"]["authOptions"] = {"mode": "token"}
    c["spec"]["rayVersion"] = version


# check -> a cluster that breaks it (and nothing before it)
TRIGGERS: dict[Callable[..., Any], Callable[[dict[str, Any]], None]] = {
    checks.head_has_container: lambda c: head(c)["template"]["spec"].update(containers=[]),
    checks.worker_has_container: lambda c: worker(c)["template"]["spec"].update(containers=[]),
    checks.group_resources: lambda c: worker(c).update(rayStartParams={"num-cpus": "1"}, resources={"CPU": "1"}),
    checks.group_labels_in_params: lambda c: worker(c).update(rayStartParams={"labels": "a=b"}),
    checks.group_label_syntax: lambda c: worker(c).update(labels={"bad key!": "v", "ok": "bad value!"}),
    checks.replicas_not_negative_min: lambda c: worker(c).update(minReplicas=-1),
    checks.replicas_not_negative_max: lambda c: worker(c).update(minReplicas=0, maxReplicas=-1),
    checks.replicas_ordered: lambda c: worker(c).update(minReplicas=4, maxReplicas=3),
    checks.idle_timeout_not_negative: lambda c: worker(c).update(idleTimeoutSeconds=-1),
    checks.idle_timeout_needs_v2: lambda c: worker(c).update(idleTimeoutSeconds=60),
    checks.ft_annotation_and_options: lambda c: (ft(c), c["annotations"].update({"ray.io/ft-enabled": "true"})),
    checks.redis_address_without_ft: lambda c: env(c, "RAY_REDIS_ADDRESS"),
    checks.ft_redis_password_param: lambda c: (ft(c), head(c).update(rayStartParams={"redis-password": "p"})),
    checks.ft_redis_password_env: lambda c: (ft(c), env(c, "REDIS_PASSWORD")),
    checks.ft_redis_address_env: lambda c: (ft(c), env(c, "RAY_REDIS_ADDRESS")),
    checks.ft_storage_namespace_annotation: lambda c: (ft(c), c["annotations"].update(
        {"ray.io/external-storage-namespace": "n"})),
    checks.redis_username: lambda c: env(c, "REDIS_USERNAME"),
    checks.worker_suspend_gate: lambda c: worker(c).update(suspend=True),
    checks.v2_env_without_autoscaler: lambda c: env(c, "RAY_enable_autoscaler_v2", "true"),
    checks.worker_suspend_with_autoscaler: lambda c: (autoscaler(c), worker(c).update(suspend=True)),
    checks.worker_suspend_gate_1_3: lambda c: worker(c).update(suspend=True),
    checks.worker_suspend_with_autoscaler_1_3: lambda c: (autoscaler(c), worker(c).update(suspend=True)),
    checks.autoscaler_version_and_env: lambda c: (autoscaler(c), c["spec"].update(autoscalerOptions={"version": "v1"}),
                                                  env(c, "RAY_enable_autoscaler_v2", "false")),
    checks.v2_head_restart_policy: lambda c: (autoscaler(c, v2=True), head(c)["template"]["spec"].update(
        restartPolicy="Always")),
    checks.v2_worker_restart_policy: lambda c: (autoscaler(c, v2=True), worker(c)["template"]["spec"].update(
        restartPolicy="OnFailure")),
    checks.autoscaler_idle_timeout_not_negative: lambda c: c["spec"].update(autoscalerOptions={"idleTimeoutSeconds": -5}),
    checks.token_needs_ray_version: lambda c: (token(c), c["spec"].pop("rayVersion")),
    checks.token_ray_version_format: lambda c: token(c, "latest"),
    checks.token_min_ray_version: lambda c: token(c, "2.51.0"),
    checks.k8s_token_min_ray_version: lambda c: (token(c, "2.54.0"), c["spec"]["authOptions"].update(
        enableK8sTokenAuth=True)),
    checks.k8s_token_and_secret: lambda c: (token(c, "2.55.0"), c["spec"]["authOptions"].update(
        enableK8sTokenAuth=True, secretName="s")),
    checks.k8s_token_needs_token_mode: lambda c: c["spec"].update(authOptions={"enableK8sTokenAuth": True}),
    checks.upgrade_strategy_on_owned_cluster: lambda c: (c["spec"].update(upgradeStrategy={"type": "Recreate"}),
                                                         c["labels"].update({"ray.io/originated-from-crd": "RayService"})),
}


def _all_checks(port: validation.Port) -> list[validation.Check]:
    out = []
    for step in port.steps:
        out += list(step.checks) if isinstance(step, Head) else [step]
    return out


def _refusal(c: dict[str, Any], port: validation.Port) -> validation.Refusal | None:
    return validation.refusal(c["spec"], c["annotations"], c["labels"], port)


# the suspend checks depend on the RayJobDeletionPolicy gate: each is tested where it can fire
GATE = "RayJobDeletionPolicy"
GATED = {checks.worker_suspend_gate: lambda gates: gates - {GATE},
         checks.worker_suspend_gate_1_3: lambda gates: gates - {GATE},
         checks.worker_suspend_with_autoscaler_1_3: lambda gates: gates | {GATE},
         checks.worker_suspend_with_autoscaler: lambda gates: gates | {GATE}}


def _gated(port: validation.Port, check: validation.Check) -> validation.Port:
    """The port with the gates under which ``check`` can fire (by default one of the suspend
    checks never does: 1.5 has the gate off, 1.6 on)."""
    adjust = GATED.get(check.rule)
    return validation.Port(port.tag, frozenset(adjust(port.gates)), port.steps) if adjust else port


def test_the_base_passes() -> None:
    assert all(_refusal(base(), p) is None for p in PORTS)


@pytest.mark.parametrize("port", PORTS, ids=lambda p: p.tag)
def test_each_check_fires_on_its_own_spec(port: validation.Port) -> None:
    """Where a check of one group runs for the head and for each worker, the trigger's group
    picks which; the refusal names the check's own function and line."""
    for check in _all_checks(port):
        c = base()
        TRIGGERS[check.rule](c)
        found = _refusal(c, _gated(port, check))
        assert found is not None, (port.tag, check.rule.__name__)
        assert (found.function, found.line) == (check.function, check.line), (check.rule.__name__, found)


def test_version_differences() -> None:
    """1.5 refuses a suspended worker group (its RayJobDeletionPolicy gate is off), 1.6 does not;
    1.6 refuses a worker group's idleTimeoutSeconds without autoscaler v2, 1.5 does not."""
    suspended = base()
    worker(suspended).update(suspend=True)
    assert _refusal(suspended, v1_5.PORT) and _refusal(suspended, v1_6.PORT) is None
    idle = base()
    worker(idle).update(idleTimeoutSeconds=60)
    assert _refusal(idle, v1_5.PORT) is None
    assert "autoscaler v2 is not enabled" in _refusal(idle, v1_6.PORT).message
    autoscaler(idle, v2=True)
    assert _refusal(idle, v1_6.PORT) is None
    env_v2 = base()
    worker(env_v2).update(idleTimeoutSeconds=60)
    autoscaler(env_v2)
    env(env_v2, "RAY_enable_autoscaler_v2", "1")
    assert _refusal(env_v2, v1_6.PORT) is None


def test_the_message_and_where_it_comes_from() -> None:
    c = base()
    worker(c).update(idleTimeoutSeconds=60)
    text = str(_refusal(c, v1_6.PORT))
    assert text.startswith("KubeRay v1.6.2 refuses this RayCluster: worker group b: idleTimeoutSeconds is set")
    assert text.endswith("(validateWorkerGroupIdleTimeout, ray-operator/controllers/ray/utils/validation.go:750 at v1.6.2)")


def test_port_per_version() -> None:
    assert validation.port_for(None) is v1_6.PORT and validation.port_for("1.7.0") is v1_6.PORT
    assert validation.port_for("1.6") is v1_6.PORT and validation.port_for("1.5.2") is v1_5.PORT
    assert validation.port_for("1.4.2") is v1_4.PORT and validation.port_for("1.3") is v1_3.PORT
    assert validation.port_for("1.2.2") is v1_1.PORT and validation.port_for("1.1") is v1_1.PORT
    assert validation.port_for("1.0.0") is None


def test_1_1_and_1_2_refuse_nothing_the_schema_accepts() -> None:
    """Their operators have no ValidateRayClusterSpec: what 1.3 and later refuse they build."""
    c = base()
    TRIGGERS[checks.ft_annotation_and_options](c)
    assert _refusal(c, v1_3.PORT) is not None and _refusal(c, v1_1.PORT) is None


def test_older_lines_refuse_less() -> None:
    """Resources both in rayStartParams and resources, or autoscaler v2's env without the
    autoscaler: refused from 1.5, not by 1.4; 1.3 words the suspend refusal without the group."""
    both = base()
    TRIGGERS[checks.group_resources](both)
    assert _refusal(both, v1_5.PORT) is not None and _refusal(both, v1_4.PORT) is None
    v2_env = base()
    TRIGGERS[checks.v2_env_without_autoscaler](v2_env)
    assert _refusal(v2_env, v1_5.PORT) is not None and _refusal(v2_env, v1_4.PORT) is None
    suspended = base()
    worker(suspended).update(suspend=True)
    assert _refusal(suspended, v1_3.PORT).message.startswith("suspending worker groups is currently available")
    assert _refusal(suspended, v1_4.PORT).message.startswith("worker group b can be suspended only")


def _operator_source(tag: str) -> Path | None:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    cache = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
    if os.access(go, os.X_OK):
        cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip() or cache
    path = Path(cache) / f"github.com/ray-project/kuberay/ray-operator@{tag}/controllers/ray/utils/validation.go"
    return path if path.is_file() else None


_VERB = re.compile(r"%[-+# 0-9.]*[a-zA-Z]")


@pytest.mark.parametrize("port", PORTS, ids=lambda p: p.tag)
def test_the_cited_lines_hold_the_messages(port: validation.Port) -> None:
    """Each cited line of the tag's validation.go (the operator module the e2e build fetched)
    builds the message the check returns: its format string, verbs as wildcards, matches the
    start of the message."""
    source = _operator_source(port.tag)
    if source is None:
        pytest.skip(f"ray-operator@{port.tag} is not in GOMODCACHE (tests/e2e/build.sh fetches it)")
    lines = source.read_text().splitlines()
    for check in _all_checks(port):
        line = lines[check.line - 1]
        literal = re.search(r'(?:Errorf|Sprintf)\("((?:[^"\\]|\\.)*)"', line)
        assert literal, (check.line, line)
        pattern = "".join(".*?" if _VERB.fullmatch(part) else re.escape(part)
                          for part in re.split(f"({_VERB.pattern})", literal.group(1).replace('\\"', '"')))
        c = base()
        TRIGGERS[check.rule](c)
        message = _refusal(c, _gated(port, check)).message
        fmt_prefix = pattern.replace(re.escape("RAY_enable_autoscaler_v2"), ".*?")
        assert re.match(fmt_prefix, message), (check.line, literal.group(1), message)


def _app(tmp_path: Path, extra: str, version: str) -> Path:
    tmp_path.mkdir(parents=True)
    (tmp_path / "raygitops.yaml").write_text(f"kuberayVersion: '{version}'\n")
    (tmp_path / "c.yaml").write_text(f"""apiVersion: ray.io/v1
kind: RayCluster
metadata: {{name: c}}
spec:
  rayVersion: "2.52.0"
  headGroupSpec:
    rayStartParams: {{}}
    template: {{spec: {{containers: [{{name: h, image: "ray:1"}}]}}}}
  workerGroupSpecs:
  - groupName: a
    replicas: 1
    minReplicas: 0
    maxReplicas: 2
{extra}    template: {{spec: {{containers: [{{name: w, image: "ray:1"}}]}}}}
""")
    return tmp_path


def _raygitops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", *args], capture_output=True, text=True, timeout=60)


def test_render_refuses_in_one_line_what_the_target_operator_refuses(tmp_path: Path) -> None:
    app = _app(tmp_path / "a", "    idleTimeoutSeconds: 60\n", "1.6.2")
    res = _raygitops("render", str(app))
    assert res.returncode == 1 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    # at the worker group the rule is about
    assert line.startswith(f"raygitops: {app / 'c.yaml'}:10: KubeRay v1.6.2 refuses this RayCluster: worker group a: "
                           "idleTimeoutSeconds is set, but autoscaler v2 is not enabled"), line
    assert "validation.go:750 at v1.6.2)" in line
    assert _raygitops("render", str(_app(tmp_path / "b", "    idleTimeoutSeconds: 60\n", "1.5"))).returncode == 0


def test_diff_refuses_a_head_the_operator_refuses_not_a_base(tmp_path: Path) -> None:
    good = _app(tmp_path / "good", "", "1.6")
    bad = _app(tmp_path / "bad", "    idleTimeoutSeconds: 60\n", "1.6")
    res = _raygitops("diff", "--base", str(good), "--head", str(bad))
    assert res.returncode == 1 and "refuses this RayCluster" in res.stderr and res.stdout == ""
    # base is what runs today, whatever it holds: the preview still says what the fix does
    res = _raygitops("diff", "--base", str(bad), "--head", str(good), "--output", "json")
    assert res.returncode == 0, res.stderr


def test_copies_are_not_mutated() -> None:
    c = base()
    before = copy.deepcopy(c)
    _refusal(c, v1_6.PORT)
    assert c == before
