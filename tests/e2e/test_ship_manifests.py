"""What we ship validates against a real API server's OpenAPI (server-side dry-run):

- the argocd/ kustomize component applied over Argo CD's install.yaml (from its Go module in
  GOMODCACHE, read at test time): the patched argocd-repo-server Deployment, the plugin
  ConfigMap and argocd-cm;
- the example Application, against Argo CD's real Application CRD (installed for the test);
- every example app's render output (RayClusters against the KubeRay CRD, hook objects).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controlplane import ControlPlane

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))
import ship_support  # noqa: E402


@pytest.fixture(scope="module")
def argocd_module() -> Path:
    found = ship_support.argocd_module_dir()
    if found is None:
        pytest.skip(f"{ship_support.ARGOCD_MODULE}@{ship_support.ARGOCD_VERSION} not obtainable from the Go module proxy")
    return found


def dry_run(cp: ControlPlane, docs: list[dict], namespace: str) -> str:
    res = cp.kubectl("apply", "--dry-run=server", "--server-side", "--field-manager=raygitops-e2e",
                     "-n", namespace, "-f", "-", input=yaml.safe_dump_all(docs), check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_readmes_install_over_argocd_install(control_plane: ControlPlane, namespace: str, argocd_module: Path,
                                            tmp_path: Path) -> None:
    """The README's Argo CD install as a new user follows it: its overlay beside a checkout,
    built by kubectl's kustomize (what `kubectl apply -k` runs), sent to a real API server as
    a server-side dry run: the patched argocd-repo-server, the plugin ConfigMap and argocd-cm
    with the health check. Changed for the test only: Argo CD's install.yaml read from its Go
    module (v3.6.1, the README's URL; no GitHub here) and the namespace (the test's)."""
    overlay, kustomization = ship_support.readme_overlay(tmp_path, argocd_module / "manifests" / "install.yaml")
    text = (overlay / "kustomization.yaml").read_text()
    assert kustomization["namespace"] == "argocd"
    (overlay / "kustomization.yaml").write_text(text.replace("namespace: argocd", f"namespace: {namespace}", 1))
    built = control_plane.kubectl("kustomize", str(overlay), timeout=120).stdout
    docs = [d for d in yaml.safe_load_all(built) if d]
    ours = [d for d in docs if (d["kind"], d["metadata"]["name"]) in {("Deployment", "argocd-repo-server"),
                                                                      ("ConfigMap", "argocd-cm")}
            or d["metadata"]["name"].startswith("raygitops-cmp-")]
    assert len(ours) == 3
    (deploy,) = [d for d in ours if d["kind"] == "Deployment"]
    (sidecar,) = [c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "raygitops"]
    (image,) = kustomization["images"]
    assert sidecar["image"] == f"{image['newName']}:{image['newTag']}"
    assert {"name": "RAYGITOPS_HOOK_IMAGE", "value": sidecar["image"]} in sidecar["env"]
    (cm,) = [d for d in ours if d["metadata"]["name"] == "argocd-cm"]
    assert "resource.customizations.health.ray.io_RayCluster" in cm["data"]
    out = dry_run(control_plane, ours, namespace)
    assert "deployment.apps/argocd-repo-server serverside-applied (server dry run)" in out
    assert "configmap/argocd-cm serverside-applied (server dry run)" in out
    assert f"configmap/{[d for d in ours if d['metadata']['name'].startswith('raygitops-cmp-')][0]['metadata']['name']}" \
        " serverside-applied (server dry run)" in out
    # the API server does check the Deployment (so the pass above means something)
    deploy["spec"]["template"]["spec"]["containers"][0]["volumeMounts"].append({"name": "no-such-volume",
                                                                                "mountPath": "/x"})
    res = control_plane.kubectl("apply", "--dry-run=server", "--server-side", "-n", namespace, "-f", "-",
                                input=yaml.safe_dump(deploy), check=False, timeout=120)
    assert res.returncode != 0 and "no-such-volume" in res.stderr, res.stderr


def test_example_application_against_argocd_crd(control_plane: ControlPlane, namespace: str,
                                                argocd_module: Path) -> None:
    cp = control_plane
    crd_file = argocd_module / "manifests" / "crds" / "application-crd.yaml"
    crd = yaml.safe_load(crd_file.read_text())
    created = cp.get("crd", crd["metadata"]["name"]) is None
    if created:
        cp.kubectl("create", "-f", str(crd_file), timeout=60)
    try:
        # (kubectl wait fails outright while the new CRD has no conditions yet: poll instead)
        cp.wait_for(lambda: any(c["type"] == "Established" and c["status"] == "True"
                                for c in (cp.get("crd", crd["metadata"]["name"]) or {}).get("status", {})
                                .get("conditions") or []),
                    timeout=120, message="Application CRD Established")
        app = yaml.safe_load((REPO / "argocd" / "application.yaml").read_text())
        app["metadata"]["namespace"] = namespace
        dry_run(cp, [app], namespace)
        # the server does reject a wrong field (so the pass above means something)
        app["spec"]["ignoreDifferences"][0]["jqPathExpressions"] = "not-a-list"
        res = cp.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input=yaml.safe_dump(app),
                         check=False)
        assert res.returncode != 0 and "jqPathExpressions" in res.stderr, res.stderr
    finally:
        if created:
            cp.kubectl("delete", "crd", crd["metadata"]["name"], "--wait=false", check=False)


@pytest.mark.parametrize("app", ["plain", "jinja", "flux/app"])
def test_rendered_examples(control_plane: ControlPlane, namespace: str, app: str) -> None:
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(REPO / "examples" / app),
                          "--namespace", namespace], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    for d in docs:  # the apps' raygitops.yaml may name a namespace: validate in the test's one
        d["metadata"]["namespace"] = namespace
    for d in docs:
        if d["kind"] == "RoleBinding":
            for subject in d["subjects"]:
                subject["namespace"] = namespace
    out = dry_run(control_plane, docs, namespace)
    assert "job.batch/raygitops-presync" in out and "raycluster.ray.io/" in out


def _size_cases():
    """ConfigMaps and Secrets at the 1 MiB limit and one byte over it, counted the ways the
    API server might count: multi-byte text, binaryData, Secret data with stringData merged
    in, long keys (not counted)."""
    import base64

    from raygitops.model.sizes import MAX_DATA_BYTES as MAX

    for extra in (0, 1):
        yield {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"text-{extra}"},
               "data": {"k" * 200: "é" * (MAX // 2 - 5), "b": "x" * (10 + extra)}}
        yield {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"binary-{extra}"},
               "data": {"a": "x" * (MAX // 2)},
               "binaryData": {"b": base64.b64encode(b"\0" * (MAX // 2 + extra)).decode()}}
        yield {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"secret-{extra}"},
               "data": {"a": base64.b64encode(b"\1" * (MAX // 2)).decode(), "b": "eHh4"},
               "stringData": {"b": "y" * (MAX // 2 + extra)}}


def test_render_refuses_exactly_what_the_api_server_refuses_for_size(control_plane: ControlPlane,
                                                                     namespace: str) -> None:
    """model/sizes.py counts as the API server validates: each object at the limit is
    accepted by a server-side dry run and by render's check, one byte more refused by both."""
    from raygitops.model.sizes import size_problem

    verdicts = {}
    for obj in _size_cases():
        res = control_plane.kubectl("apply", "--dry-run=server", "--server-side", "-n", namespace, "-f", "-",
                                    input=yaml.safe_dump(obj), check=False, timeout=120)
        server = res.returncode == 0
        assert server or "1048576" in res.stderr, res.stderr
        verdicts[obj["metadata"]["name"]] = (server, size_problem("", obj["kind"], obj) is None)
    assert verdicts == {name: (name.endswith("-0"), name.endswith("-0")) for name in verdicts}, verdicts
