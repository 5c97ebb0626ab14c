"""The Argo CD CMP contract of argocd/plugin.yaml, run the way the cmp-server runs it.

The generate command is executed exactly as plugin.yaml states it (command + args, no shell)
in a read-only COPY of each example app, as a non-root user, with the environment Argo CD
builds (ARGOCD_APP_*, KUBE_*, ARGOCD_ENV_*, ARGOCD_APP_PARAMETERS, PARAM_*). stdout must be a
manifest stream; errors exit non-zero with one line on stderr and nothing on stdout; an app
that renders nothing is an error. Discovery (fileName glob) must match each example app.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from raygitops.sources.settings import PARAMETERS, Settings, apply_parameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ship_support  # noqa: E402
from raygitops.model.hooknames import hook_names  # noqa: E402

pytestmark = pytest.mark.packaging  # a wheel, a virtualenv or a built tool: not in tests/fast.sh

REPO = Path(__file__).resolve().parents[2]
PLUGIN = yaml.safe_load((REPO / "argocd" / "plugin.yaml").read_text())
SPEC = PLUGIN["spec"]
COMMAND = [*SPEC["generate"]["command"], *SPEC["generate"].get("args", [])]
SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/env"}
ERROR_LINE = re.compile(r"^raygitops: \S.*$")


def example_apps() -> list[Path]:
    """Every directory under examples/ the plugin discovers (has a raygitops.y*ml)."""
    pattern = SPEC["discover"]["fileName"]
    apps = {Path(p).parent for p in glob.glob(str(REPO / "examples" / "**" / pattern), recursive=True)}
    return sorted(apps)


APPS = example_apps()


def app_id(app: Path) -> str:
    return app.relative_to(REPO / "examples").as_posix()


# ----------------------------------------------------------------------------- plugin.yaml shape


def test_plugin_yaml_shape() -> None:
    assert PLUGIN["kind"] == "ConfigManagementPlugin"
    assert PLUGIN["metadata"]["name"] == "raygitops"
    assert re.fullmatch(r"v\d+(\.\d+)*", SPEC["version"])
    assert set(SPEC) <= {"version", "init", "generate", "discover", "parameters", "preserveFileMode",
                         "provideGitCreds"}
    assert "init" not in SPEC, "nothing to initialise: init output is discarded anyway"
    # exec, not a shell pipeline: a failing stage could not hide behind a later one
    assert COMMAND[0] not in SHELLS and COMMAND[:2] == ["raygitops", "render"]
    assert not SPEC.get("provideGitCreds"), "render never needs Git credentials"


def test_application_uses_the_versioned_plugin_name() -> None:
    app = yaml.safe_load((REPO / "argocd" / "application.yaml").read_text())
    assert app["spec"]["source"]["plugin"]["name"] == f"{PLUGIN['metadata']['name']}-{SPEC['version']}"


def test_parameter_announcements_match_settings() -> None:
    static = {p["name"]: p for p in SPEC["parameters"]["static"]}
    assert set(static) == set(PARAMETERS) | {"values-files", "values"}
    assert static["values-files"]["collectionType"] == "array"
    assert static["values"]["collectionType"] == "map"
    for name, p in static.items():
        assert p.get("title") and p.get("tooltip"), name
        assert p.get("collectionType", "string") in ("string", "array", "map")
        assert p.get("itemType", "string") in ("string", "boolean", "number")
    # an announced default is the real default: Argo CD shows it, but never sends it
    defaults = [{"name": n, "string": p["string"]} for n, p in static.items() if "string" in p]
    assert defaults, "no defaults announced"
    settings = Settings()
    apply_parameters(settings, defaults)
    assert settings == Settings()
    # every announced string parameter is accepted by render (a version must look like one)
    examples = {"kuberay-version": "1.6.2", "running-jobs-wait-seconds": "600"}
    for name, p in static.items():
        if p.get("collectionType", "string") == "string" and "string" not in p:
            settings = Settings()
            apply_parameters(settings, [{"name": name, "string": examples.get(name, "x-example")}])


# ----------------------------------------------------------------------------- discovery


def test_there_are_example_apps() -> None:
    names = {app_id(a) for a in APPS}
    assert {"plain", "jinja", "flux/app"} <= names, names


@pytest.mark.parametrize("app", APPS, ids=app_id)
def test_discovery_matches_each_example_app(app: Path) -> None:
    # the cmp-server does filepath.Glob(filepath.Join(appPath, fileName))
    assert glob.glob(os.path.join(app, SPEC["discover"]["fileName"]))


@pytest.mark.parametrize("sub", ["kustomize", "kustomize/base", "kustomize/overlays/prod", "helm",
                                 "helm/chart", "flux", "flux/rendered", "flux/clusters"])
def test_discovery_leaves_stream_examples_alone(sub: str) -> None:
    """Those directories hold kustomize/Helm inputs or rendered output, not plugin apps."""
    assert not glob.glob(os.path.join(REPO / "examples" / sub, SPEC["discover"]["fileName"]))


def test_discovery_accepts_both_config_spellings(tmp_path: Path) -> None:
    from raygitops.sources.settings import CONFIG_NAMES

    for name in CONFIG_NAMES:
        app = tmp_path / name.replace(".", "_")
        app.mkdir()
        (app / name).write_text("{}\n")
        assert glob.glob(os.path.join(app, SPEC["discover"]["fileName"])), name


# ----------------------------------------------------------------------------- running generate


def _as_nobody() -> list[str]:
    prefix = ship_support.as_nobody_prefix()
    if prefix is None:
        pytest.skip("running as root and neither setpriv nor runuser is available to drop to a non-root user")
    return prefix


@pytest.fixture(scope="module")
def venv_bin() -> Path:
    """raygitops as the image installs it (wheel in a venv), runnable by a non-root user."""
    try:
        return ship_support.image_venv() / "bin"
    except ship_support.VenvUnavailable as err:
        pytest.skip(f"cannot install raygitops for a non-root user: {err}")


@pytest.fixture
def sandbox() -> Iterator[Path]:
    """A world-traversable temp dir (pytest's basetemp is 0700: nobody could not enter it)."""
    path = Path(tempfile.mkdtemp(prefix="raygitops-cmp-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for p in [path, *path.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(path)


def copy_app(src: Path, sandbox: Path, name: str = "app") -> Path:
    """Copy an app like the cmp-server receives it: files readable, nothing writable."""
    dest = sandbox / "repo" / name
    shutil.copytree(src, dest)
    make_read_only(sandbox / "repo")
    return dest


def make_read_only(root: Path) -> None:
    for p in sorted([root, *root.rglob("*")], key=lambda p: len(p.parts), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)


def argocd_env(bin_dir: Path, home: Path, app: Path, parameters: list[dict] | None = None,
               extra: dict | None = None) -> dict[str, str]:
    """The build environment the cmp-server gives generate (docs/user-guide/build-environment.md)."""
    path_dirs = [str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"]
    revision = "4f2c1e9a7b3d5f6e8a9b0c1d2e3f4a5b6c7d8e9f"
    env = {
        "PATH": os.pathsep.join(dict.fromkeys(path_dirs)),
        "HOME": str(home),
        "PYTHONDONTWRITEBYTECODE": "1",  # as in the sidecar: the image is read-only
        "ARGOCD_APP_NAME": "ray-demo",
        "ARGOCD_APP_NAMESPACE": "ray-team",
        "ARGOCD_APP_PROJECT_NAME": "default",
        "ARGOCD_APP_REVISION": revision,
        "ARGOCD_APP_REVISION_SHORT": revision[:7],
        "ARGOCD_APP_REVISION_SHORT_8": revision[:8],
        "ARGOCD_APP_SOURCE_PATH": app.name,
        "ARGOCD_APP_SOURCE_REPO_URL": "https://git.example.com/ray/apps.git",
        "ARGOCD_APP_SOURCE_TARGET_REVISION": "main",
        "KUBE_VERSION": "1.34.4",
        "KUBE_API_VERSIONS": "admissionregistration.k8s.io/v1,apps/v1,batch/v1,v1,"
                             "rbac.authorization.k8s.io/v1,ray.io/v1,ray.io/v1alpha1",
        "ARGOCD_ENV_TEAM": "ml-platform",
    }
    if parameters:
        env["ARGOCD_APP_PARAMETERS"] = json.dumps(parameters)
        for p in parameters:  # PARAM_<NAME>, PARAM_<NAME>_<i>, PARAM_<NAME>_<KEY>
            base = "PARAM_" + re.sub(r"[^A-Z0-9_]", "_", p["name"].upper())
            if "string" in p:
                env[base] = p["string"]
            for i, item in enumerate(p.get("array", [])):
                env[f"{base}_{i}"] = item
            for key, value in p.get("map", {}).items():
                env[f"{base}_{re.sub(r'[^A-Z0-9_]', '_', key.upper())}"] = value
    env.update(extra or {})
    return env


@pytest.fixture
def generate(venv_bin: Path, sandbox: Path):
    """Run plugin.yaml's generate command in an app copy, as the cmp-server would."""
    home = sandbox / "home"
    home.mkdir()
    home.chmod(0o777)

    def run(app: Path, parameters: list[dict] | None = None, extra: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*_as_nobody(), *COMMAND], cwd=app,
                              env=argocd_env(venv_bin, home, app, parameters, extra),
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    return run


def manifests(stdout: str) -> list[dict]:
    docs = [d for d in yaml.safe_load_all(stdout) if d is not None]
    for d in docs:
        assert isinstance(d, dict) and d.get("apiVersion") and d.get("kind"), d
        assert d.get("metadata", {}).get("name") or d.get("metadata", {}).get("generateName"), d
    return docs


def assert_error(res: subprocess.CompletedProcess, needle: str) -> None:
    assert res.returncode != 0
    assert res.stdout == "", "an error must never print partial output"
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and ERROR_LINE.match(lines[0]), res.stderr
    assert needle in res.stderr, res.stderr


def test_runs_as_non_root(venv_bin: Path) -> None:
    prefix = _as_nobody()
    res = subprocess.run([*prefix, "id", "-u"], capture_output=True, text=True, check=True)
    assert res.stdout.strip() != "0"
    # and the raygitops it runs is the installed wheel, not the editable source tree
    res = subprocess.run([*prefix, str(venv_bin / "python"), "-c", "import raygitops; print(raygitops.__file__)"],
                         capture_output=True, text=True, check=True, cwd="/")
    assert str(venv_bin.parent) in res.stdout


@pytest.mark.parametrize("app", APPS, ids=app_id)
def test_generate_renders_each_example_app(app: Path, sandbox: Path, generate) -> None:
    copy = copy_app(app, sandbox)
    res = generate(copy)
    assert res.returncode == 0, res.stderr
    docs = manifests(res.stdout)
    clusters = [d for d in docs if d["kind"] == "RayCluster"]
    assert clusters, "every example app renders a RayCluster"
    for rc in clusters:
        hashes = json.loads(rc["metadata"]["annotations"]["raygitops.dev/template-hashes"])
        assert hashes["head"].startswith("h3.")
    opted_in = [rc for rc in clusters
                if rc["metadata"].get("annotations", {}).get("raygitops.dev/upgrade-strategy") == "Recreate"]
    if opted_in:
        kinds = {d["kind"] for d in docs if d["metadata"].get("annotations", {}).get("argocd.argoproj.io/hook")}
        assert kinds == {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Job"}
    # objects that name no namespace get one: the app's setting or Argo CD's destination (the
    # preflight's ClusterRole and binding are cluster-scoped)
    for d in docs:
        assert d["metadata"].get("namespace") or d["kind"] in ("ClusterRole", "ClusterRoleBinding"), d
    # deterministic: the same input renders byte-identical output (Argo CD caches and diffs it)
    assert generate(copy).stdout == res.stdout


def test_generate_uses_argocd_destination_namespace(sandbox: Path, generate) -> None:
    copy = copy_app(REPO / "examples" / "jinja", sandbox)  # its raygitops.yaml names no namespace
    docs = manifests(generate(copy).stdout)
    hooks = [d for d in docs if d["kind"] == "Job"]
    assert hooks and all(d["metadata"]["namespace"] == "ray-team" for d in hooks)


def test_generate_puts_clusters_where_their_hook_looks(sandbox: Path, generate) -> None:
    """examples/plain says `namespace: ray`; the Application's destination may be another one."""
    copy = copy_app(REPO / "examples" / "plain", sandbox)
    res = generate(copy)
    assert res.returncode == 0, res.stderr
    docs = manifests(res.stdout)
    plans = {d["metadata"]["namespace"]: json.loads(d["data"]["plan.json"])
             for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == hook_names("ray-demo").plan}
    for rc in (d for d in docs if d["kind"] == "RayCluster"):
        applied_in = rc["metadata"].get("namespace") or "ray-team"  # ARGOCD_APP_NAMESPACE
        assert rc["metadata"]["name"] in [c["name"] for c in plans.get(applied_in, {}).get("clusters", [])], (
            f"RayCluster {rc['metadata']['name']} is applied in {applied_in}, its plan is in {sorted(plans)}")


def test_generate_with_parameters(sandbox: Path, generate) -> None:
    copy = copy_app(REPO / "examples" / "jinja", sandbox)
    params = [
        {"name": "values-files", "array": ["values-prod.yaml"]},
        {"name": "values", "map": {"cluster.logLevel": "warning"}},
        {"name": "namespace", "string": "ray-prod"},
        {"name": "hook-image", "string": "registry.example.com/raygitops:test"},
        {"name": "drain-grace-seconds", "string": "77"},
        {"name": "timeout-seconds", "string": "600"},
        {"name": "max-parallel", "string": "2"},
        {"name": "wait-ready", "string": "false"},
        {"name": "keep-upgrade-strategy", "string": "true"},
        {"name": "kuberay-version", "string": "v1.6.2"},
        {"name": "running-jobs", "string": "wait"},
        {"name": "running-jobs-wait-seconds", "string": "1800"},
        {"name": "preflight", "string": "true"},
        {"name": "preflight-unknown", "string": "proceed"},
    ]
    assert {p["name"] for p in params} == {p["name"] for p in SPEC["parameters"]["static"]}
    res = generate(copy, params)
    assert res.returncode == 0, res.stderr
    docs = manifests(res.stdout)
    rc = next(d for d in docs if d["kind"] == "RayCluster")
    assert rc["metadata"]["name"] == "ray-prod"
    assert {d["metadata"].get("namespace") for d in docs if not d["kind"].startswith("Cluster")} == {"ray-prod"}
    # the template saw Argo CD's build environment
    assert rc["metadata"]["annotations"]["example.com/git-revision"] == "4f2c1e9a7b3d5f6e8a9b0c1d2e3f4a5b6c7d8e9f"
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["image"] == "rayproject/ray:2.41.0-py311"
    assert {"name": "RAY_LOG_LEVEL", "value": "warning"} in head["env"]
    job = next(d for d in docs if d["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/raygitops:test"
    args = container["args"]
    assert args[args.index("--drain-grace") + 1] == "77"
    assert args[args.index("--timeout") + 1] == "600"
    assert args[args.index("--max-parallel") + 1] == "2"
    assert "--no-wait-ready" in args
    plan = json.loads(next(d for d in docs if d["kind"] == "ConfigMap" and "plan.json" in d.get("data", {}))["data"]["plan.json"])
    assert {c["runningJobs"]["waitSeconds"] for c in plan["clusters"]} == {1800}  # carried per cluster
    assert {c["preflight"]["unknown"] for c in plan["clusters"]} == {"proceed"}


def test_generate_error_exits_non_zero_with_one_line(sandbox: Path, generate) -> None:
    src = sandbox / "src"
    shutil.copytree(REPO / "examples" / "plain", src)
    (src / "broken.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n")
    copy = copy_app(src, sandbox, "broken")
    assert_error(generate(copy), "broken.yaml:")


def test_generate_unknown_parameter_is_an_error(sandbox: Path, generate) -> None:
    copy = copy_app(REPO / "examples" / "plain", sandbox)
    assert_error(generate(copy, [{"name": "no-such-parameter", "string": "1"}]), "no-such-parameter")


def test_generate_bad_parameter_value_is_an_error(sandbox: Path, generate) -> None:
    copy = copy_app(REPO / "examples" / "plain", sandbox)
    assert_error(generate(copy, [{"name": "max-parallel", "string": "zero"}]), "max-parallel")


def test_generate_template_error_names_file_and_line(sandbox: Path, generate) -> None:
    src = sandbox / "src"
    shutil.copytree(REPO / "examples" / "jinja", src)
    (src / "extra.yaml.j2").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ no_such_value }}\n")
    copy = copy_app(src, sandbox, "tmpl")
    assert_error(generate(copy), "extra.yaml.j2:4")


@pytest.mark.parametrize("files", [
    {"raygitops.yaml": "namespace: ray\n"},
    {"raygitops.yaml": "", "values.yaml": "a: 1\n", "README.md": "# nothing to render\n"},
    {"raygitops.yaml": "", "empty.yaml": "---\n# only a comment\n"},
], ids=["config-only", "values-only", "empty-manifest"])
def test_generate_nothing_is_an_error_not_an_empty_stream(sandbox: Path, files: dict[str, str], generate) -> None:
    src = sandbox / "src"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text)
    copy = copy_app(src, sandbox, "empty")
    assert glob.glob(os.path.join(copy, SPEC["discover"]["fileName"]))  # the plugin would take it
    res = generate(copy)
    assert res.returncode != 0 and res.stdout == ""
    assert "empty" in res.stderr or "no documents" in res.stderr, res.stderr


def test_generate_never_writes_into_the_app(sandbox: Path, generate) -> None:
    copy = copy_app(REPO / "examples" / "jinja", sandbox)
    before = sorted((p.relative_to(copy).as_posix(), p.stat().st_mode) for p in copy.rglob("*"))
    assert generate(copy).returncode == 0
    after = sorted((p.relative_to(copy).as_posix(), p.stat().st_mode) for p in copy.rglob("*"))
    assert before == after
    assert all(not (p.stat().st_mode & stat.S_IWUSR) for p in copy.rglob("*"))
