"""Render of a Helm chart app and a kustomization app (raygitops.sources.generators), with the
real helm (v4.3.2) and kustomize of tests/e2e/build.sh, as the image carries them.

The kind is Argo CD's (a kustomization file wins over Chart.yaml); helm template gets the
Application's name and destination, the values files and values of the plugin parameters,
the chart's own charts/ and nothing from the network; kustomize build reads only the tree
render may read (the app, or under Argo CD the checkout), never a remote base.  Untrusted
input stays confined: symlinks, values files and bases outside are refused, the tools run
without a shell, with a clean environment and bounded time and output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ship_support  # noqa: E402

from raygitops.errors import RaygitopsError  # noqa: E402
from raygitops.sources import generators  # noqa: E402
from raygitops.model.hooknames import hook_names  # noqa: E402
from test_render import write  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def tool(name: str) -> str:
    found = ship_support.e2e_binary(name)
    if found is None:
        if os.environ.get("RAYGITOPS_REQUIRE_E2E") == "1":
            pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: no {name} (tests/e2e/build.sh builds it)")
        pytest.skip(f"no {name} (tests/e2e/build.sh builds it)")
    return found


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding helm and kustomize, to put on PATH (as the image's /usr/local/bin)."""
    bin_dir = tmp_path_factory.mktemp("tools")
    for name in ("helm", "kustomize"):
        os.symlink(tool(name), bin_dir / name)
    return bin_dir


def render(*args: str, cwd: Path | None = None, tools_dir: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    path = os.environ["PATH"] if tools_dir is None else f"{tools_dir}{os.pathsep}{os.environ['PATH']}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOCD_", "KUBE_"))}
    return subprocess.run([sys.executable, "-m", "raygitops", "render", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**clean, "PATH": path, **env})


def docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


CHART = {
    "Chart.yaml": """\
        apiVersion: v2
        name: team-ray
        version: 0.3.0
        dependencies:
          - name: extras
            version: 0.1.0
            repository: https://charts.example.invalid
        """,
    "values.yaml": "image: rayproject/ray:2.41.0\nworkers: 1\n",
    "values-prod.yaml": "workers: 3\n",
    "raygitops.yaml": "hook: {image: registry.example.com/raygitops:0.1.0}\n",
    "templates/raycluster.yaml": """\
        apiVersion: ray.io/v1
        kind: RayCluster
        metadata:
          name: {{ .Release.Name }}
          annotations:
            raygitops.dev/upgrade-strategy: Recreate
            example.com/kube: "{{ .Capabilities.KubeVersion.Version }}"
            example.com/namespace: {{ .Release.Namespace }}
        spec:
          headGroupSpec:
            rayStartParams: {}
            template:
              spec:
                containers: [{name: ray-head, image: {{ .Values.image }}}]
          workerGroupSpecs:
            - groupName: w
              replicas: {{ .Values.workers }}
              rayStartParams: {}
              template:
                spec:
                  containers: [{name: ray-worker, image: {{ .Values.image }}}]
        """,
    "charts/extras/Chart.yaml": "apiVersion: v2\nname: extras\nversion: 0.1.0\n",
    "charts/extras/templates/cm.yaml": """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: {{ .Release.Name }}-extras}
        data: {from: subchart}
        """,
}
ARGOCD = {"ARGOCD_APP_NAME": "ray-team", "ARGOCD_APP_NAMESPACE": "ray-team-ns", "KUBE_VERSION": "1.34.4",
          "KUBE_API_VERSIONS": "v1,ray.io/v1,batch/v1"}


# ----------------------------------------------------------------------------- the kind


def test_the_kind_is_argo_cds(tmp_path: Path) -> None:
    assert generators.app_kind(write(tmp_path / "a", {"Chart.yaml": "x"}))[0] == generators.HELM
    for name in generators.KUSTOMIZATION_FILES:
        assert generators.app_kind(write(tmp_path / name.replace(".", "-"), {name: "x"}))[0] == generators.KUSTOMIZE
    # both: kustomize, as Argo CD's discovery decides (the kustomization is read last)
    assert generators.app_kind(write(tmp_path / "both", {"Chart.yaml": "x", "kustomization.yaml": "x"}))[0] \
        == generators.KUSTOMIZE
    assert generators.app_kind(write(tmp_path / "plain", {"c.yaml": "x"})) is None
    assert generators.app_kind(REPO / "examples" / "plain") is None


# ----------------------------------------------------------------------------- Helm


def test_a_chart_renders_with_argo_cds_release_namespace_and_parameters(tmp_path: Path, tools: Path) -> None:
    app = write(tmp_path / "chart", CHART)
    params = [{"name": "values-files", "array": ["values-prod.yaml"]},
              {"name": "values", "map": {"image": "rayproject/ray:2.42.0"}}]
    res = render(".", cwd=app, tools_dir=tools, ARGOCD_APP_PARAMETERS=json.dumps(params), **ARGOCD)
    assert res.returncode == 0, res.stderr
    objs = {(d["kind"], d["metadata"]["name"]): d for d in docs(res.stdout)}
    cluster = objs[("RayCluster", "ray-team")]  # release name: the Application's name
    meta = cluster["metadata"]
    assert meta["namespace"] == "ray-team-ns" and meta["annotations"]["example.com/namespace"] == "ray-team-ns"
    assert meta["annotations"]["example.com/kube"] == "v1.34.4"
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 3  # values-files parameter
    assert cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == "rayproject/ray:2.42.0"
    assert "raygitops.dev/template-hashes" in meta["annotations"]
    assert objs[("ConfigMap", "ray-team-extras")]["data"] == {"from": "subchart"}  # from charts/, no download
    job = objs[("Job", hook_names(ARGOCD["ARGOCD_APP_NAME"]).presync)]  # named for the Application
    assert job["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PreSync"
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/raygitops:0.1.0"


def test_a_dependency_missing_from_charts_is_helms_error_not_a_download(tmp_path: Path, tools: Path) -> None:
    files = {k: v for k, v in CHART.items() if not k.startswith("charts/")}
    app = write(tmp_path / "chart", files)
    res = render(str(app), tools_dir=tools)
    assert (res.returncode, res.stdout) == (1, ""), res.stdout
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"raygitops: {app}/Chart.yaml: helm template failed: ") and "extras" in line, line


def test_an_error_in_a_rendered_template_names_it(tmp_path: Path, tools: Path) -> None:
    files = dict(CHART, **{"templates/raycluster.yaml": CHART["templates/raycluster.yaml"].replace(
        "- groupName: w", "- groupName: w\n              minReplica: 0")})
    res = render(str(write(tmp_path / "chart", files)), tools_dir=tools)
    assert res.returncode == 1, res.stderr
    assert res.stderr.startswith(f"raygitops: {tmp_path}/chart/templates/raycluster.yaml (rendered):17: "
                                 "spec.workerGroupSpecs[0].minReplica: unknown field"), res.stderr


@pytest.mark.parametrize("what", ["symlink", "values-file", "values-parameter"])
def test_a_chart_cannot_read_outside_the_app(tmp_path: Path, tools: Path, what: str) -> None:
    (tmp_path / "secret.txt").write_text("s3cr3t\n")
    app = write(tmp_path / "chart", CHART)
    env = {}
    if what == "symlink":  # Helm follows symlinks in a chart: .Files.Get would read it
        os.symlink(tmp_path / "secret.txt", app / "files.txt")
    elif what == "values-file":
        (app / "raygitops.yaml").write_text("values: [../secret.txt]\n")
    else:
        env["ARGOCD_APP_PARAMETERS"] = json.dumps([{"name": "values-files", "array": ["../secret.txt"]}])
    res = render(str(app), tools_dir=tools, **env)
    assert (res.returncode, res.stdout) == (1, "") and "s3cr3t" not in res.stderr, res.stderr
    assert "leads outside the app directory" in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr


def test_without_helm_a_chart_is_a_one_line_error(tmp_path: Path) -> None:
    app = write(tmp_path / "chart", CHART)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(app)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PATH": str(empty)})
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (f"raygitops: {app}/Chart.yaml: a Helm chart app, but helm is not installed (the "
                          "raygitops image carries it; elsewhere: helm template ... | raygitops render -)\n")


# ----------------------------------------------------------------------------- kustomize


def overlay_repo(tmp_path: Path) -> Path:
    """examples/kustomize as a repository holds it, with a raygitops.yaml for the plugin."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "examples" / "kustomize", repo / "apps" / "kustomize")
    return repo


def test_an_overlay_renders_under_argo_cd_with_its_base(tmp_path: Path, tools: Path) -> None:
    """Issue 37: `kustomization.yaml:1: Kustomization has no metadata.name`; now the overlay
    as kustomize builds it (base from ../../base: inside the checkout Argo CD handed over)."""
    repo = overlay_repo(tmp_path)
    overlay = repo / "apps" / "kustomize" / "overlays" / "prod"
    res = render(".", cwd=overlay, tools_dir=tools, ARGOCD_APP_SOURCE_PATH="apps/kustomize/overlays/prod",
                 ARGOCD_APP_NAME="prod", ARGOCD_APP_NAMESPACE="elsewhere")
    assert res.returncode == 0, res.stderr
    objs = docs(res.stdout)
    (cluster,) = [d for d in objs if d["kind"] == "RayCluster"]
    assert cluster["metadata"]["name"] == "prod-demo" and cluster["metadata"]["namespace"] == "ray-prod"
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 4  # the overlay's patch
    assert "raygitops.dev/template-hashes" in cluster["metadata"]["annotations"]
    assert {d["metadata"]["namespace"] for d in objs if d["kind"] == "Job"} == {"ray-prod"}
    # the same as the documented pipe
    built = subprocess.run([tool("kustomize"), "build", str(overlay)], capture_output=True, text=True, check=True)
    piped = subprocess.run([sys.executable, "-m", "raygitops", "render", "-"], input=built.stdout,
                           capture_output=True, text=True, env={**os.environ, "ARGOCD_APP_NAME": "prod"})
    assert piped.stdout == res.stdout


def test_outside_argo_cd_an_overlay_reads_only_its_directory(tmp_path: Path, tools: Path) -> None:
    overlay = overlay_repo(tmp_path) / "apps" / "kustomize" / "overlays" / "prod"
    res = render(str(overlay), tools_dir=tools)
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr.startswith(f"raygitops: {overlay}/../../base: path leads outside the app directory"), res.stderr


def test_the_kustomize_example_from_a_checkout_says_how_to_render_it() -> None:
    """The repository's own example, as a newcomer tries it: the overlay's base is outside
    its directory, which render reads alone outside Argo CD. The error gives the pipe that
    works (checked before any tool runs: no kustomize needed here)."""
    overlay = "examples/kustomize/overlays/prod"
    res = render(overlay, cwd=REPO)
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (f"raygitops: {overlay}/../../base: path leads outside the app directory (outside Argo CD, "
                          f"build the overlay first: kustomize build {overlay} | raygitops render -)\n")
    readme = (REPO / "examples" / "kustomize" / "README.md").read_text()
    assert f"kustomize build {overlay} | raygitops render -" in readme


@pytest.mark.parametrize("resource", ["https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.8.1",
                                      "github.com/kubernetes-sigs/kustomize/examples/helloWorld?ref=v5.8.1",
                                      "git@github.com:org/repo.git//base", "ssh://git@example.com/r.git"])
def test_a_remote_base_is_refused_before_kustomize_runs(tmp_path: Path, tools: Path, resource: str) -> None:
    app = write(tmp_path / "app", {"kustomization.yaml": f"resources:\n  - raycluster.yaml\n  - {resource}\n",
                                   "raycluster.yaml": (REPO / "examples/kustomize/base/raycluster.yaml").read_text()})
    res = render(str(app), tools_dir=tools)
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr.startswith(f"raygitops: {app}/kustomization.yaml:1: resources: ") \
        and "a remote resource" in res.stderr, res.stderr


@pytest.mark.parametrize("kustomization,message", [
    ("resources: [missing]\n", "resources: missing: no such file or directory"),
    ("resources: [raycluster.yaml]\nhelmCharts: [{name: x, repo: https://charts.example.invalid}]\n", "helmCharts: "),
    ("resources: [raycluster.yaml]\nconfigMapGenerator: [{name: c, files: [k=../../secret.txt]}]\n",
     "path leads outside"),
    ("resources: [raycluster.yaml]\npatches: [{path: linked.yaml}]\n", "path leads outside"),
])
def test_what_kustomize_may_not_read(tmp_path: Path, tools: Path, kustomization: str, message: str) -> None:
    (tmp_path / "secret.txt").write_text("s3cr3t\n")
    app = write(tmp_path / "a" / "app", {"kustomization.yaml": kustomization,
                                         "raycluster.yaml": (REPO / "examples/kustomize/base/raycluster.yaml").read_text()})
    os.symlink(tmp_path / "secret.txt", app / "linked.yaml")
    res = render(str(app), tools_dir=tools)
    assert (res.returncode, res.stdout) == (1, "") and "s3cr3t" not in res.stderr, res.stderr
    assert message in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr


def test_values_for_a_kustomization_are_refused(tmp_path: Path, tools: Path) -> None:
    overlay = overlay_repo(tmp_path) / "apps" / "kustomize" / "base"
    (overlay / "raygitops.yaml").write_text("values: [v.yaml]\n")
    res = render(str(overlay), tools_dir=tools)
    assert res.returncode == 1 and "a kustomization takes none" in res.stderr, res.stderr


def test_without_kustomize_a_kustomization_is_a_one_line_error(tmp_path: Path) -> None:
    base = REPO / "examples" / "kustomize" / "base"
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(base)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PATH": str(tmp_path)})
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (f"raygitops: {base}/kustomization.yaml: a kustomization app, but kustomize is not "
                          "installed (the raygitops image carries it; elsewhere: kustomize build ... | raygitops render -)\n")


# ----------------------------------------------------------------------------- the subprocess


def test_a_tool_runs_without_a_shell_in_a_clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
    out = generators.run_tool(["/usr/bin/env"], tmp_path, tmp_path, {"ONLY": "this"}, "app")
    assert sorted(line.split("=")[0] for line in out.splitlines()) == ["HOME", "ONLY", "PATH"]
    assert generators.run_tool(["/bin/echo", "$(id)", ";", "x"], tmp_path, tmp_path, {}, "app") == "$(id) ; x\n"


def test_a_tool_is_bounded_in_time_and_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generators, "TOOL_SECONDS", 1)
    with pytest.raises(RaygitopsError, match="sleep took longer than 1 s"):
        generators.run_tool(["/bin/sleep", "30"], tmp_path, tmp_path, {}, "app")
    with pytest.raises(RaygitopsError, match="yes wrote more than 32 MiB"):
        generators.run_tool(["/usr/bin/yes"], tmp_path, tmp_path, {}, "app")
    with pytest.raises(RaygitopsError, match="^app: false failed: exit 1$"):
        generators.run_tool(["/bin/false"], tmp_path, tmp_path, {}, "app")
