"""``raygitops render --helm`` and the Helm 4 post-renderer plugin (helm-plugin/plugin.yaml).

Helm hooks instead of Argo CD's; objects that name no namespace stay namespace-less (Helm puts
them in the release namespace, which it does not tell a post-renderer), the plan leaves the
namespace to the hook, and the hook takes its own pod's; under Helm (HELM_PLUGIN_NAME set),
whose stderr is dropped, errors also reach the terminal and a file. The real Helm runs these
in tests/e2e/test_helm.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from raygitops import __version__

REPO = Path(__file__).resolve().parents[2]
CLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: %s
  annotations: {raygitops.dev/upgrade-strategy: Recreate}
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers: [{name: ray-head, image: rayproject/ray:2.41.0}]
"""


def render(*args: str, stdin: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOCD_", "HELM_"))}
    return subprocess.run([sys.executable, "-m", "raygitops", "render", "-", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env={**clean, **(env or {})})


def docs(res: subprocess.CompletedProcess) -> list[dict]:
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def test_helm_leaves_namespaces_to_helm_and_makes_helm_hooks() -> None:
    out = docs(render("--helm", stdin=CLUSTER % "demo"))
    assert all("namespace" not in d["metadata"] for d in out), [d["metadata"] for d in out]
    hooks = out[1:]
    assert [d["kind"] for d in hooks] == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Job"]
    weights = [d["metadata"]["annotations"] for d in hooks]
    assert weights == [{"helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation",
                        "helm.sh/hook-weight": w} for w in ("-3", "-3", "-2", "-1", "0")]
    assert hooks[2]["subjects"] == [{"kind": "ServiceAccount", "name": "raygitops-presync"}]
    assert json.loads(hooks[3]["data"]["plan.json"])["namespace"] is None
    assert hooks[4]["metadata"]["name"] == "raygitops-presync"


def test_helm_with_a_namespace_pins_it_like_any_render() -> None:
    out = docs(render("--helm", "--namespace", "ray", stdin=CLUSTER % "demo"))
    # the preflight's ClusterRole and binding (cluster-scoped) are named after the namespace
    assert {d["metadata"].get("namespace") or d["kind"] for d in out} == {"ray", "ClusterRole", "ClusterRoleBinding"}
    assert out[3]["subjects"][0]["namespace"] == "ray"
    assert out[5]["subjects"] == [{"kind": "ServiceAccount", "name": "raygitops-presync", "namespace": "ray"}]
    assert out[4]["metadata"]["name"] == out[5]["roleRef"]["name"] == "raygitops-presync-ray"
    assert json.loads(out[6]["data"]["plan.json"])["namespace"] == "ray"


def test_without_helm_nothing_changes() -> None:
    out = docs(render(stdin=CLUSTER % "demo"))
    assert {d["metadata"].get("namespace") or d["kind"] for d in out} == {"default", "ClusterRole", "ClusterRoleBinding"}
    assert all(set(d["metadata"]["annotations"]) >= {"argocd.argoproj.io/hook"} for d in out[1:])


def test_helm_refuses_named_and_unnamed_namespaces_together() -> None:
    stream = CLUSTER % "a" + "---\n" + (CLUSTER % "b").replace("  name: b\n", "  name: b\n  namespace: ray\n")
    res = render("--helm", stdin=stream)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "--helm" in res.stderr and "(a)" in res.stderr, res.stderr


def test_helm_does_not_go_with_output_dir(tmp_path: Path) -> None:
    res = render("--helm", "--output-dir", str(tmp_path / "out"), stdin=CLUSTER % "demo")
    assert res.returncode == 2 and "--output-dir" in res.stderr and not (tmp_path / "out").exists()


def test_under_helm_an_error_is_kept_in_a_file_a_good_render_removes_it(tmp_path: Path) -> None:
    env = {"HELM_PLUGIN_NAME": "raygitops", "HELM_PLUGIN_DIR": str(REPO / "helm-plugin"),
           "XDG_CACHE_HOME": str(tmp_path)}
    error_file = tmp_path / "raygitops" / "helm-render-error.txt"
    bad = render("--helm", stdin=(CLUSTER % "demo").replace("Recreate}", "recreate}"), env=env)
    assert bad.returncode == 1 and bad.stdout == ""
    assert error_file.read_text() == bad.stderr, (error_file.read_text(), bad.stderr)
    assert bad.stderr.startswith("raygitops: <stdin>:5: ") and "Recreate" in bad.stderr
    docs(render("--helm", stdin=CLUSTER % "demo", env=env))
    assert not error_file.exists()
    # outside Helm: no file
    render("--helm", stdin="kind: [", env={"XDG_CACHE_HOME": str(tmp_path)})
    assert not error_file.exists()


def test_plugin_yaml_runs_render_for_helm() -> None:
    plugin = yaml.safe_load((REPO / "helm-plugin" / "plugin.yaml").read_text())
    assert plugin["apiVersion"] == "v1" and plugin["type"] == "postrenderer/v1" and plugin["runtime"] == "subprocess"
    assert plugin["name"] == "raygitops" and plugin["version"] == __version__
    (command,) = plugin["runtimeConfig"]["platformCommand"]
    assert [command["command"], *command["args"]] == ["raygitops", "render", "-", "--helm"]


def presync(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    rendered = docs(render("--helm", stdin=CLUSTER % "demo"))
    plan = tmp_path / "plan.json"
    plan.write_text(rendered[4]["data"]["plan.json"])
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBECONFIG")}
    return subprocess.run([sys.executable, "-m", "raygitops", "presync", "--plan", str(plan), *args,
                           "--kubeconfig", str(tmp_path / "missing")],
                          capture_output=True, text=True, timeout=60, env=env)


def test_presync_takes_a_plans_missing_namespace_from_the_flag(tmp_path: Path) -> None:
    bad = presync("--namespace", "Not_A_Namespace", tmp_path=tmp_path)
    assert bad.returncode == 1 and bad.stderr.startswith("raygitops: --namespace: "), bad.stderr
    # a good one gets past the plan to the credentials (missing here)
    good = presync("--namespace", "ray", tmp_path=tmp_path)
    assert good.returncode == 1 and "kubeconfig file not found" in good.stderr, good.stderr


def test_presync_outside_a_pod_asks_for_the_namespace(tmp_path: Path) -> None:
    res = presync(tmp_path=tmp_path)
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert "--helm" in res.stderr and "give --namespace" in res.stderr, res.stderr
