"""Real Helm 4 (v4.3.2, built by tests/e2e/build.sh) with raygitops as its post-renderer plugin.

The plugin is the repo's ``helm-plugin/``, installed with ``helm plugin install`` into a
throwaway Helm home (HELM_PLUGINS where ``helm plugin install`` puts it, as in Helm's default
layout). The chart is written here: one namespace-less RayCluster whose pod templates carry
labels from the chart (release, chart name and version). ``helm install`` / ``helm upgrade``
run against the real control plane; the hook Job's pod runs for real (tests/e2e/jobrunner.py:
the raygitops image, the hook's own ServiceAccount token) and Helm waits on it as on any hook
Job. Assertions are on Helm's exit code and output, the release, the Job and the pods.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
from demoapp import DemoCluster
from jobrunner import JobRunner
from test_presync_hook import desired_hashes

from raygitops.model import hashing

pytestmark = pytest.mark.e2e
PLUGIN = controlplane.REPO_ROOT / "helm-plugin"
OLD, NEW = "rayproject/ray:2.41.0", "rayproject/ray:2.42.0"

CHART_YAML = {"apiVersion": "v2", "name": "raydemo", "version": "0.3.0"}
HELPERS = """\
{{- define "raydemo.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}
"""
RAYCLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: {{ .Release.Name }}
  annotations:
    raygitops.dev/upgrade-strategy: {{ .Values.strategy }}
spec:
  rayVersion: "2.41.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      metadata:
        labels: {{- include "raydemo.labels" . | nindent 10 }}
      spec:
        containers:
          - name: ray-head
            image: {{ .Values.image }}
            resources: {requests: {cpu: 100m, memory: 128Mi}}
  workerGroupSpecs:
    - groupName: workers
      replicas: 2
      minReplicas: 0
      maxReplicas: 4
      rayStartParams: {}
      template:
        metadata:
          labels: {{- include "raydemo.labels" . | nindent 12 }}
        spec:
          {{- with .Values.nodeSelector }}
          nodeSelector: {{ toJson . }}
          {{- end }}
          containers:
            - name: ray-worker
              image: {{ .Values.image }}
              resources: {requests: {cpu: 100m, memory: 128Mi}}
"""


@pytest.fixture(scope="module")
def control_plane(control_plane_jobs: controlplane.ControlPlane) -> controlplane.ControlPlane:
    return control_plane_jobs


class Helm:
    """The helm binary with its own home (config, cache, data) and the raygitops plugin."""

    def __init__(self, binary: Path, home: Path, kubeconfig: str):
        self.binary, self.kubeconfig = str(binary), kubeconfig
        data = home / "data"
        self.env = {**os.environ, "HELM_CONFIG_HOME": str(home / "config"), "HELM_CACHE_HOME": str(home / "cache"),
                    "HELM_DATA_HOME": str(data), "HELM_PLUGINS": str(data / "plugins"),
                    "XDG_CACHE_HOME": str(home / "xdg-cache"), "KUBECONFIG": kubeconfig}
        self.error_file = home / "xdg-cache" / "raygitops" / "helm-render-error.txt"

    def __call__(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        res = subprocess.run([self.binary, *args], capture_output=True, text=True, env=self.env, timeout=timeout)
        if check:
            assert res.returncode == 0, f"helm {' '.join(args)}: {res.stderr}"
        return res


@pytest.fixture(scope="module")
def helm(control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        bin_dir = controlplane.locate_binaries(("helm",))
    except controlplane.Unavailable as exc:
        if os.environ.get("RAYGITOPS_REQUIRE_E2E") == "1":
            pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: {exc}", pytrace=False)
        pytest.skip(str(exc))
    h = Helm(bin_dir / "helm", tmp_path_factory.mktemp("helm-home"), control_plane.kubeconfig)
    version = h("version", "--template", "{{ .Version }}").stdout
    assert version == controlplane.load_versions()["HELM_VERSION"], version
    # the README's install command
    h("plugin", "install", str(PLUGIN))
    listed = h("plugin", "list").stdout
    assert "raygitops" in listed and "postrenderer/v1" in listed, listed
    return h


class Release(DemoCluster):
    """One release of the test chart in one namespace."""

    def __init__(self, helm: Helm, plane: controlplane.ControlPlane, runner: JobRunner, namespace: str, tmp: Path):
        super().__init__(plane, runner, namespace)
        self.helm = helm
        self.chart = tmp / "raydemo"
        (self.chart / "templates").mkdir(parents=True)
        (self.chart / "Chart.yaml").write_text(yaml.safe_dump(CHART_YAML))
        (self.chart / "templates" / "raycluster.yaml").write_text(RAYCLUSTER)
        (self.chart / "templates" / "_helpers.tpl").write_text(HELPERS)
        self.values = tmp / "values.yaml"

    def args(self, image: str, node_selector: dict[str, str] | None, hook_timeout: int) -> list[str]:
        self.values.write_text(yaml.safe_dump({"image": image, "strategy": "Recreate",
                                               "nodeSelector": node_selector or {}}))
        return ["demo", str(self.chart), "-n", self.ns, "-f", str(self.values),
                "--post-renderer", "raygitops",
                "--post-renderer-args", "--timeout", "--post-renderer-args", str(hook_timeout),
                "--post-renderer-args", "--drain-grace", "--post-renderer-args", "5",
                # the image the hook Job runs (docs/helm.md): the one the tests built, the node's only one
                "--post-renderer-args", "--hook-image", "--post-renderer-args", self.runner.image,
                "--post-renderer-args", "--running-jobs", "--post-renderer-args", controlplane.KWOK_RUNNING_JOBS]

    def upgrade(self, image: str = OLD, node_selector: dict[str, str] | None = None, hook_timeout: int = 180,
                check: bool = True) -> subprocess.CompletedProcess:
        """`helm upgrade --install` as the docs show it: Helm's own timeout above the hook's, and
        --force-conflicts (the hook's resume patch owns spec.workerGroupSpecs, an atomic list,
        as KubeRay's autoscaler does: Helm 4's server-side apply must take it back)."""
        return self.helm("upgrade", "--install", *self.args(image, node_selector, hook_timeout), "--timeout", "5m",
                         "--force-conflicts", check=check)

    def bump_chart(self, version: str) -> None:
        (self.chart / "Chart.yaml").write_text(yaml.safe_dump({**CHART_YAML, "version": version}))

    def status(self) -> dict[str, Any]:
        return json.loads(self.helm("status", "demo", "-n", self.ns, "-o", "json").stdout)


@pytest.fixture
def release(helm: Helm, control_plane: controlplane.ControlPlane, runner: JobRunner, namespace: str,
            tmp_path: Path) -> Release:
    r = Release(helm, control_plane, runner, namespace, tmp_path)
    yield r
    helm("uninstall", "demo", "-n", namespace, "--wait=false", check=False)


def test_template_leaves_the_namespace_to_helm_and_makes_helm_hooks(helm: Helm, release: Release):
    """`helm template` through the plugin: the objects of `raygitops render - --helm` run on
    Helm's own output (Helm prints hooks apart and adds `# Source` comments); nothing pinned
    to `default`; the hook objects are Helm hooks."""
    args = release.args(OLD, None, 180)
    plain = helm("template", *args[:6]).stdout
    through = helm("template", *args).stdout
    direct = subprocess.run(["raygitops", "render", "-", "--helm", *args[9::2]], input=plain,
                            capture_output=True, text=True, check=True).stdout

    def objects(stream: str) -> list[dict[str, Any]]:
        return sorted((d for d in yaml.safe_load_all(stream) if d), key=lambda d: (d["kind"], d["metadata"]["name"]))
    assert objects(through) == objects(direct)
    docs = [d for d in yaml.safe_load_all(through) if d]
    assert all("namespace" not in d["metadata"] for d in docs), [d["metadata"] for d in docs]
    hooks = [d for d in docs if d["kind"] != "RayCluster"]
    assert sorted(d["kind"] for d in hooks) == ["ConfigMap", "Job", "Role", "RoleBinding", "ServiceAccount"]
    assert {d["metadata"]["annotations"]["helm.sh/hook"] for d in hooks} == {"pre-install,pre-upgrade"}
    assert not any(k.startswith("argocd.argoproj.io/") for d in hooks for k in d["metadata"]["annotations"])
    (binding,) = [d for d in hooks if d["kind"] == "RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "raygitops-presync"}]
    plan = json.loads(next(d for d in hooks if d["kind"] == "ConfigMap")["data"]["plan.json"])
    assert plan["namespace"] is None and [c["name"] for c in plan["clusters"]] == ["demo"]


def test_upgrade_runs_the_hook_and_recreates_in_the_release_namespace(release: Release):
    """install, then an upgrade that changes the image: Helm runs the pre-upgrade hook Job (for
    real) before it applies the new RayCluster; the pods are recreated with the new image, and
    everything is in the release namespace."""
    t0 = time.monotonic()
    release.upgrade()
    installed = time.monotonic() - t0
    assert release.hook_runs() == [0]  # pre-install: nothing to recreate yet
    assert release.cluster()["metadata"]["namespace"] == release.ns
    old = desired_hashes(release.cluster())
    before = {p["metadata"]["uid"] for p in release.running(old)}
    t0 = time.monotonic()
    res = release.upgrade(image=NEW)
    upgraded = time.monotonic() - t0
    assert release.hook_runs() == [0, 0]
    report = release.hook_report()
    assert report["summary"]["recreated"] == 1, report
    new = desired_hashes(release.cluster())
    assert new.isdisjoint(old)
    pods = release.running(new)
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {NEW}
    assert before.isdisjoint(p["metadata"]["uid"] for p in pods)
    status = release.status()
    assert status["info"]["status"] == "deployed" and status["version"] == 2, res.stdout
    # the hook objects: in the release namespace, none in default
    job = release.plane.get("job", "raygitops-presync", release.ns)
    assert job["status"].get("succeeded") == 1, job["status"]
    default = release.plane.kubectl_json("get", "jobs,configmaps,serviceaccounts", "-n", "default",
                                         "-l", "app.kubernetes.io/managed-by=raygitops")["items"]
    assert default == []
    print(f"\nHelm 4: install {installed:.1f} s; upgrade with the image change, hook run and recreate: {upgraded:.1f} s")
    # a chart release: the pod templates' helm.sh/chart label changes, and nothing is recreated
    # (hash.ignore); the hook runs and says so
    release.bump_chart("0.3.1")
    release.upgrade(image=NEW)
    assert release.hook_runs() == [0, 0, 0] and release.hook_report()["summary"]["recreated"] == 0
    labels = release.cluster()["spec"]["headGroupSpec"]["template"]["metadata"]["labels"]
    assert labels["helm.sh/chart"] == "raydemo-0.3.1" and desired_hashes(release.cluster()) == new
    assert {p["metadata"]["uid"] for p in release.running(new)} == {p["metadata"]["uid"] for p in pods}
    assert release.status()["version"] == 3


def test_a_failed_hook_fails_the_upgrade_until_a_fixing_one(release: Release):
    """Pods that cannot start: the hook fails (backoffLimit 0), `helm upgrade` exits non-zero
    naming the hook Job, the release is failed; the fixing upgrade goes through."""
    release.upgrade()
    good = desired_hashes(release.cluster())
    release.running(good)
    t0 = time.monotonic()
    res = release.upgrade(image=NEW, node_selector={"pool": "does-not-exist"}, hook_timeout=40, check=False)
    seconds = time.monotonic() - t0
    assert res.returncode != 0, res.stdout
    assert "raygitops-presync" in res.stderr and "pre-upgrade" in res.stderr, res.stderr
    assert release.status()["info"]["status"] == "failed"
    assert release.hook_runs() == [0, 1]
    job = release.plane.get("job", "raygitops-presync", release.ns)
    reason = job["metadata"]["annotations"].get("raygitops.dev/failure", "")
    # the readiness timeout, or, where the release's RBAC lets the hook read nodes, the preflight
    # before anything was touched (docs/presync.md, "Preflight")
    assert "timed out" in reason or ("preflight failed" in reason and "pool=does-not-exist" in reason), \
        job["metadata"]["annotations"]
    print(f"\nHelm 4: failing upgrade -> helm exit {res.returncode} after {seconds:.1f} s\n  {res.stderr.strip()}\n"
          f"  Job annotation raygitops.dev/failure: {reason}")
    t0 = time.monotonic()
    release.upgrade(image=NEW)
    fixed = time.monotonic() - t0
    assert release.hook_runs() == [0, 1, 0]
    assert release.status()["info"]["status"] == "deployed"
    pods = release.running(desired_hashes(release.cluster()))
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {NEW}
    print(f"Helm 4: fixing upgrade deployed in {fixed:.1f} s")


def run_in_terminal(argv: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as its controlling terminal (stdout/stderr apart):
    what a user at a shell sees on the terminal besides the program's own output."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(argv, env=env, stdin=secondary, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True,
                            preexec_fn=lambda: __import__("fcntl").ioctl(0, __import__("termios").TIOCSCTTY, 0))
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(primary)
    return proc.returncode, seen.decode(errors="replace")


def test_a_render_error_reaches_the_helm_user(helm: Helm, release: Release):
    """Helm 4 drops a post-renderer's stderr: helm fails (nothing rendered), and raygitops'
    one-line error is on the user's terminal and in the error file; a good render removes it."""
    args = release.args(OLD, None, 180)
    release.values.write_text(yaml.safe_dump({"image": OLD, "strategy": "Recreat", "nodeSelector": {}}))
    res = helm("template", *args, check=False)
    assert res.returncode != 0 and res.stdout == ""
    assert 'plugin "raygitops" exited with error' in res.stderr, res.stderr
    line = helm.error_file.read_text().strip()
    assert line.startswith("raygitops: <stdin>:") and "Recreat" in line and "did you mean Recreate" in line, line
    code, terminal = run_in_terminal([helm.binary, "template", *args], helm.env)
    assert code != 0 and line in terminal, terminal
    print(f"\nHelm 4 render error, on the terminal: {line}")
    release.values.write_text(yaml.safe_dump({"image": OLD, "strategy": "Recreate", "nodeSelector": {}}))
    helm("template", *args)
    assert not helm.error_file.exists()


def test_the_example_chart_as_the_docs_show_it(helm: Helm):
    """docs/helm.md: `helm template demo examples/helm/chart -n ray --post-renderer raygitops`."""
    res = helm("template", "demo", str(controlplane.REPO_ROOT / "examples" / "helm" / "chart"), "-n", "ray",
               "--post-renderer", "raygitops")
    docs = {d["kind"]: d for d in yaml.safe_load_all(res.stdout) if d}
    assert sorted(docs) == ["ConfigMap", "Job", "RayCluster", "Role", "RoleBinding", "ServiceAccount"]
    assert all("namespace" not in d["metadata"] for d in docs.values())
    hashes = json.loads(docs["RayCluster"]["metadata"]["annotations"]["raygitops.dev/template-hashes"])
    assert set(hashes) == {"head", "workers"} and hashes["head"].startswith(f"{hashing.SCHEME}.")
