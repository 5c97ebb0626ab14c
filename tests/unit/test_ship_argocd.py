"""argocd/: the kustomize component (sidecar + plugin ConfigMap + health check) and the example
Application, rendered and checked offline.

The component is applied with `kubectl kustomize` to an overlay over (a) a minimal fixture of
Argo CD's argocd-repo-server Deployment and argocd-cm, and (b) Argo CD's real install.yaml from
its Go module in GOMODCACHE (downloaded at test time, never copied into the repository) when
obtainable. The Application is checked against the Application CRD's OpenAPI schema from the
same module (field names and types); tests/e2e/test_ship_manifests.py validates both on a real
API server with a server-side dry-run.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ship_support  # noqa: E402

pytestmark = pytest.mark.packaging  # a wheel, a virtualenv or a built tool: not in tests/fast.sh

REPO = Path(__file__).resolve().parents[2]
ARGOCD = REPO / "argocd"
HEALTH_KEY = "resource.customizations.health.ray.io_RayCluster"
JOB_HEALTH_KEY = "resource.customizations.health.batch_Job"
CMP_DIR = "/home/argocd/cmp-server"

# Modelled on manifests/base/repo-server/argocd-repo-server-deployment.yaml (v3.6.1), trimmed.
FIXTURE_REPO_SERVER: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "argocd-repo-server", "labels": {"app.kubernetes.io/name": "argocd-repo-server"}},
    "spec": {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "argocd-repo-server"}},
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "argocd-repo-server"}},
            "spec": {
                "serviceAccountName": "argocd-repo-server",
                "automountServiceAccountToken": False,
                "initContainers": [{
                    "name": "copyutil", "image": "quay.io/argoproj/argocd:latest",
                    "command": ["/bin/cp", "-n", "/usr/local/bin/argocd", "/var/run/argocd/argocd-cmp-server"],
                    "volumeMounts": [{"name": "var-files", "mountPath": "/var/run/argocd"}],
                }],
                "containers": [{
                    "name": "argocd-repo-server", "image": "quay.io/argoproj/argocd:latest",
                    "args": ["/usr/local/bin/argocd-repo-server"],
                    "volumeMounts": [
                        {"name": "tmp", "mountPath": "/tmp"},
                        {"name": "plugins", "mountPath": "/home/argocd/cmp-server/plugins"},
                    ],
                }],
                "volumes": [
                    {"name": "tmp", "emptyDir": {}},
                    {"name": "var-files", "emptyDir": {}},
                    {"name": "plugins", "emptyDir": {}},
                ],
            },
        },
    },
}
FIXTURE_ARGOCD_CM: dict[str, Any] = {
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "argocd-cm", "labels": {"app.kubernetes.io/name": "argocd-cm"}},
    "data": {"timeout.reconciliation": "180s"},
}


@pytest.fixture(scope="module")
def kubectl() -> str:
    found = ship_support.kubectl_binary()
    if not found:
        pytest.skip("no kubectl (tests/e2e/build.sh builds one): kustomize rendering not checked")
    return found


@pytest.fixture(scope="module")
def argocd_module() -> Path:
    found = ship_support.argocd_module_dir()
    if found is None:
        pytest.skip(f"{ship_support.ARGOCD_MODULE}@{ship_support.ARGOCD_VERSION} not obtainable from the Go module proxy")
    return found


def build(kubectl: str, overlay: Path) -> list[dict]:
    res = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def write_overlay(overlay: Path, base_files: dict[str, str], with_component: bool = True) -> Path:
    overlay.mkdir(parents=True, exist_ok=True)
    for name, text in base_files.items():
        (overlay / name).write_text(text)
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namespace": "argocd", "resources": sorted(base_files),
    }
    if with_component:  # kustomize wants a relative path to a component
        kustomization["components"] = [os.path.relpath(ARGOCD, overlay)]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return overlay


def by_key(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def check_patched(docs: list[dict], base_docs: list[dict]) -> None:
    objects = by_key(docs)
    cmps = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("raygitops-cmp-")]
    assert len(cmps) == 1, "one hash-suffixed ConfigMap: a new plugin.yaml rolls the repo-server"
    cmp = cmps[0]
    assert cmp["data"] == {"plugin.yaml": (ARGOCD / "plugin.yaml").read_text()}
    assert cmp["metadata"]["namespace"] == "argocd"

    deploy = objects[("Deployment", "argocd-repo-server")]
    spec = deploy["spec"]["template"]["spec"]
    base_spec = by_key(base_docs)[("Deployment", "argocd-repo-server")]["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in spec["containers"]}
    assert set(containers) == {c["name"] for c in base_spec["containers"]} | {"raygitops"}
    for c in base_spec["containers"]:  # the stock containers are untouched
        assert containers[c["name"]] == c
    assert spec["initContainers"] == base_spec["initContainers"]
    assert deploy["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"] \
        == "argocd-repo-server"

    sidecar = containers["raygitops"]
    assert sidecar["command"] == ["/var/run/argocd/argocd-cmp-server"]
    assert "args" not in sidecar
    sc = sidecar["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 999
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    assert mounts["/var/run/argocd"]["name"] == "var-files"
    assert mounts[f"{CMP_DIR}/plugins"]["name"] == "plugins"
    plugin_mount = mounts[f"{CMP_DIR}/config/plugin.yaml"]
    assert plugin_mount["subPath"] == "plugin.yaml"
    assert volumes[plugin_mount["name"]]["configMap"]["name"] == cmp["metadata"]["name"]
    tmp = mounts["/tmp"]
    assert "emptyDir" in volumes[tmp["name"]]
    repo_tmp = {m["mountPath"]: m["name"] for m in containers["argocd-repo-server"]["volumeMounts"]}.get("/tmp")
    assert tmp["name"] != repo_tmp, "the sidecar needs its own /tmp, never the repo-server's"
    for c in [*spec["containers"], *spec.get("initContainers", [])]:
        for m in c.get("volumeMounts", []):
            assert m["name"] in volumes, f"{c['name']} mounts unknown volume {m['name']}"
    # the stock volumes the sidecar shares are still emptyDirs
    assert "emptyDir" in volumes["var-files"] and "emptyDir" in volumes["plugins"]

    cm = objects[("ConfigMap", "argocd-cm")]
    base_cm = by_key(base_docs)[("ConfigMap", "argocd-cm")]
    assert cm["data"][HEALTH_KEY] == (ARGOCD / "health" / "raycluster.lua").read_text()
    assert cm["data"][JOB_HEALTH_KEY] == (ARGOCD / "health" / "job.lua").read_text()
    ours = {HEALTH_KEY, JOB_HEALTH_KEY}
    assert {k: v for k, v in cm["data"].items() if k not in ours} == (base_cm.get("data") or {})
    assert cm["metadata"]["labels"] == base_cm["metadata"]["labels"]

    # nothing else changes
    base = by_key(base_docs)
    for key, obj in objects.items():
        if key in base and key not in {("Deployment", "argocd-repo-server"), ("ConfigMap", "argocd-cm")}:
            assert obj == base[key], key
    assert set(objects) - set(base) == {("ConfigMap", cmp["metadata"]["name"])}


def test_component_on_minimal_fixture(kubectl: str, tmp_path: Path) -> None:
    files = {"repo-server.yaml": yaml.safe_dump(FIXTURE_REPO_SERVER), "argocd-cm.yaml": yaml.safe_dump(FIXTURE_ARGOCD_CM)}
    base = build(kubectl, write_overlay(tmp_path / "base", files, with_component=False))
    docs = build(kubectl, write_overlay(tmp_path / "overlay", files))
    check_patched(docs, base)


def test_component_on_argocd_install(kubectl: str, argocd_module: Path, tmp_path: Path) -> None:
    files = {"install.yaml": (argocd_module / "manifests" / "install.yaml").read_text()}
    base = build(kubectl, write_overlay(tmp_path / "base", files, with_component=False))
    docs = build(kubectl, write_overlay(tmp_path / "overlay", files))
    check_patched(docs, base)


def test_component_shape() -> None:
    component = yaml.safe_load((ARGOCD / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert "resources" not in component, "Argo CD's own manifests are the user's resource, not ours"
    assert {p["path"] for p in component["patches"]} == {"repo-server-sidecar.yaml", "argocd-cm-health.yaml"}
    assert component["configurations"] == ["hook-image.yaml"]
    # the comment shows the README's overlay (Argo CD's install of the tested version)
    _, readme_overlay, _ = ship_support.readme_install()
    comment = (ARGOCD / "kustomization.yaml").read_text().split("#   apiVersion:", 1)[1].split("\n# then", 1)[0]
    first, *rest = comment.splitlines()
    commented = "\n".join(["apiVersion:" + first, *(line[4:] for line in rest)])
    assert yaml.safe_load(commented) == yaml.safe_load(readme_overlay)


def test_the_sidecar_passes_its_own_image_to_render(tmp_path: Path) -> None:
    """One image name for the sidecar and the hook Jobs it renders: RAYGITOPS_HOOK_IMAGE on
    the sidecar equals its image, and render puts that image in the Job."""
    patch = yaml.safe_load((ARGOCD / "repo-server-sidecar.yaml").read_text())
    (sidecar,) = [c for c in patch["spec"]["template"]["spec"]["containers"] if c["name"] == "raygitops"]
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env["RAYGITOPS_HOOK_IMAGE"] == sidecar["image"]
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(REPO / "examples" / "plain")],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "RAYGITOPS_HOOK_IMAGE": "registry.example.com/team/raygitops:9.9.9"})
    assert res.returncode == 0, res.stderr
    (job,) = [d for d in yaml.safe_load_all(res.stdout) if d and d["kind"] == "Job"]
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/team/raygitops:9.9.9"
    bad = subprocess.run([sys.executable, "-m", "raygitops", "render", str(REPO / "examples" / "plain")],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "RAYGITOPS_HOOK_IMAGE": "Bad Image"})
    assert bad.returncode == 1 and bad.stderr.startswith("raygitops: RAYGITOPS_HOOK_IMAGE: "), bad.stderr


def sidecar(docs: list[dict]) -> dict:
    deploy = by_key(docs)[("Deployment", "argocd-repo-server")]
    (container,) = [c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "raygitops"]
    return container


@pytest.mark.parametrize("image,expected", [
    ({"newName": "registry.example.com/team/raygitops", "newTag": "0.1.1"}, "registry.example.com/team/raygitops:0.1.1"),
    ({"newName": "registry.example.com/team/raygitops", "digest": "sha256:" + "a" * 64},
     "registry.example.com/team/raygitops@sha256:" + "a" * 64),
    ({"newTag": "0.2.0"}, "raygitops:0.2.0"),
])
def test_images_moves_the_sidecar_and_the_hook_image_together(kubectl: str, tmp_path: Path, image: dict,
                                                             expected: str) -> None:
    """Issue 37: with kustomize's `images:` on the Component only the sidecar's image moved;
    RAYGITOPS_HOOK_IMAGE stayed raygitops:0.1.0, which no node can pull.  Now both, and no other
    env value (other containers' too) changes."""
    files = {"repo-server.yaml": yaml.safe_dump(FIXTURE_REPO_SERVER), "argocd-cm.yaml": yaml.safe_dump(FIXTURE_ARGOCD_CM)}
    overlay = write_overlay(tmp_path / "overlay", files)
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    kustomization["images"] = [{"name": "raygitops", **image}]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    container = sidecar(build(kubectl, overlay))
    env = {e["name"]: e["value"] for e in container["env"]}
    assert container["image"] == env["RAYGITOPS_HOOK_IMAGE"] == expected
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    plain = sidecar(build(kubectl, write_overlay(tmp_path / "plain", files)))
    assert plain["image"] == {e["name"]: e["value"] for e in plain["env"]}["RAYGITOPS_HOOK_IMAGE"] == "raygitops:0.1.0"


def test_readmes_install_overlay_builds_with_the_image_it_names(kubectl: str, argocd_module: Path,
                                                                tmp_path: Path) -> None:
    """The README's steps as written (beside a checkout; Argo CD's install.yaml of the named
    version from its module instead of GitHub): the component applied to Argo CD's install,
    the sidecar and the hook on the README's image. tests/e2e/test_ship_manifests.py sends
    the same to a real API server."""
    overlay, kustomization = ship_support.readme_overlay(tmp_path, argocd_module / "manifests" / "install.yaml")
    (image,) = kustomization["images"]
    docs = build(kubectl, overlay)
    base = build(kubectl, write_overlay(tmp_path / "base", {"install.yaml": (overlay / "install.yaml").read_text()},
                                        with_component=False))
    check_patched(docs, base)
    container = sidecar(docs)
    want = f"{image['newName']}:{image['newTag']}"
    assert container["image"] == {e["name"]: e["value"] for e in container["env"]}["RAYGITOPS_HOOK_IMAGE"] == want


def test_the_argo_helm_values_give_the_hook_the_sidecars_image(tmp_path: Path) -> None:
    """docs/argocd.md's argo-helm values, rendered by the real Helm through a chart that writes
    repoServer.extraContainers as argo-helm's does (toYaml): the YAML anchor gives
    RAYGITOPS_HOOK_IMAGE the sidecar's image, and changing that one value moves both."""
    helm = ship_support.e2e_binary("helm")
    if helm is None:
        pytest.skip("no helm (tests/e2e/build.sh builds it)")
    doc = (REPO / "docs" / "argocd.md").read_text().split("## Install with the argo-cd Helm chart")[1]
    values = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: argo-cd-like\nversion: 0.1.0\n")
    (chart / "templates" / "repo-server.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: argocd-repo-server}\nspec:\n  template:\n"
        "    spec:\n      containers:\n      {{- toYaml .Values.repoServer.extraContainers | nindent 8 }}\n")
    for image in ("registry.example.com/team/raygitops:0.1.0", "registry.example.com/other/raygitops:9.9.9"):
        (tmp_path / "values.yaml").write_text(values.replace("registry.example.com/team/raygitops:0.1.0", image))
        res = subprocess.run([helm, "template", "x", str(chart), "-f", str(tmp_path / "values.yaml")],
                             capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})
        assert res.returncode == 0, res.stderr
        (container,) = yaml.safe_load(res.stdout)["spec"]["template"]["spec"]["containers"]
        assert container["image"] == {e["name"]: e["value"] for e in container["env"]}["RAYGITOPS_HOOK_IMAGE"] == image


# ----------------------------------------------------------------------------- Application


APPLICATION = yaml.safe_load((ARGOCD / "application.yaml").read_text())


def test_application_shape() -> None:
    app = APPLICATION
    assert app["apiVersion"] == "argoproj.io/v1alpha1" and app["kind"] == "Application"
    src = app["spec"]["source"]
    assert (REPO / src["path"] / "raygitops.yaml").is_file(), "points at an example app"
    assert src["plugin"]["name"] == "raygitops-v1"
    plugin = yaml.safe_load((ARGOCD / "plugin.yaml").read_text())
    announced = {p["name"] for p in plugin["spec"]["parameters"]["static"]}
    assert {p["name"] for p in src["plugin"].get("parameters", [])} <= announced
    ignore = app["spec"]["ignoreDifferences"]
    assert {"group": "ray.io", "kind": "RayCluster", "jqPathExpressions": [".spec.workerGroupSpecs[].replicas"]} in ignore
    assert "RespectIgnoreDifferences=true" in app["spec"]["syncPolicy"]["syncOptions"]
    # client-side apply + RespectIgnoreDifferences never settles Synced (tests/e2e/test_argocd.py)
    assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]


def _check_schema(value: Any, schema: dict, path: str, errors: list[str]) -> None:
    """Unknown fields and basic types against a structural OpenAPI v3 schema."""
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int}
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)):
            errors.append(f"{path}: expected int or string")
        return
    if kind in types and not isinstance(value, types[kind]):
        errors.append(f"{path}: expected {kind}, got {type(value).__name__}")
        return
    if isinstance(value, dict):
        if "properties" not in schema and "additionalProperties" not in schema:
            return  # e.g. metadata: validated by the API server's own ObjectMeta schema
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                _check_schema(item, props[key], f"{path}.{key}", errors)
            elif isinstance(extra, dict):
                _check_schema(item, extra, f"{path}.{key}", errors)
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}.{key}: unknown field")
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}.{key}: required")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check_schema(item, schema["items"], f"{path}[{i}]", errors)


def test_application_against_crd_schema(argocd_module: Path) -> None:
    crd = yaml.safe_load((argocd_module / "manifests" / "crds" / "application-crd.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == APPLICATION["apiVersion"].split("/")[1])
    schema = version["schema"]["openAPIV3Schema"]
    body = APPLICATION
    errors: list[str] = []
    _check_schema(body, schema, "Application", errors)
    assert not errors, errors
    # the checker does catch a typo
    bad = copy.deepcopy(body)
    bad["spec"]["ignoreDifferences"][0]["jqPathExpression"] = ["x"]
    errors = []
    _check_schema(bad, schema, "Application", errors)
    assert any("jqPathExpression: unknown field" in e for e in errors), errors
