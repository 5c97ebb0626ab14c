"""The container image, built from the repository's Dockerfile (tests/image/build.sh), run
with podman: both faces of it (the CMP sidecar's `render`, the hook Job's `presync`) behave
as the host install does, under the security context the manifests give them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import controlplane
import imagerun
from test_presync_hook import App, _start, desired_hashes, raycluster, rendered

REPO = imagerun.REPO
SIZE_LIMIT_MB = 380  # tripwire: 356 MB measured (2026-12-07: 273 MB before helm and kustomize, 83 MB)


def run_in_image(image: str, *args: str, app_dir: Path) -> subprocess.CompletedProcess:
    """`raygitops ARGS` as the sidecar runs it: uid 999, read-only root, no network."""
    return imagerun.podman("run", "--rm", "--user=999:999", "--read-only", "--network=none", "--cap-drop=ALL",
                           f"--volume={app_dir}:/app:ro", "--workdir=/app", image, *args)


@pytest.mark.parametrize("example", ["plain", "jinja"])
def test_render_in_the_image_is_byte_identical_to_the_host(image: str, example: str):
    app_dir = REPO / "examples" / example
    if not app_dir.is_dir():
        pytest.fail(f"examples/{example} is missing")
    host = subprocess.run([sys.executable, "-m", "raygitops", "render", "."], cwd=app_dir, capture_output=True,
                          text=True)
    inside = run_in_image(image, "render", ".", app_dir=app_dir)
    assert host.returncode == 0, host.stderr
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout == host.stdout and "kind: RayCluster" in inside.stdout


def test_the_image_renders_a_chart_and_an_overlay_as_the_host_does(image: str, tmp_path: Path):
    """The sidecar's render of a Helm chart and of a kustomize overlay (with its base, the
    checkout being /app as under Argo CD): the helm and kustomize the image carries, as uid
    999 on a read-only root without network, give the host's bytes (the host running the same
    binaries, tests/e2e/build.sh's)."""
    import controlplane

    tools = controlplane.cache_dir() / "bin"
    env = {"ARGOCD_APP_NAME": "demo", "ARGOCD_APP_NAMESPACE": "ray", "RAYGITOPS_HOOK_IMAGE": image}
    cases = {"helm/chart": {}, "kustomize/overlays/prod": {"ARGOCD_APP_SOURCE_PATH": "kustomize/overlays/prod"}}
    for app, extra in cases.items():
        host = subprocess.run([sys.executable, "-m", "raygitops", "render", "."], cwd=REPO / "examples" / app,
                              capture_output=True, text=True,
                              env={**os.environ, **env, **extra, "PATH": f"{tools}:/usr/bin:/bin"})
        assert host.returncode == 0 and host.stderr == "", host.stderr
        inside = imagerun.podman("run", "--rm", "--user=999:999", "--read-only", "--network=none", "--cap-drop=ALL",
                                 f"--volume={REPO / 'examples'}:/app:ro", f"--workdir=/app/{app}",
                                 *(f"--env={k}={v}" for k, v in {**env, **extra}.items()), image, "render", ".")
        assert inside.returncode == 0 and inside.stderr == "", inside.stderr
        assert inside.stdout == host.stdout and "kind: RayCluster" in inside.stdout, app
    versions = imagerun.podman("run", "--rm", "--user=999:999", "--read-only", "--network=none",
                               "--entrypoint=/bin/sh", image, "-c", "helm version --short; kustomize version")
    pinned = controlplane.load_versions()
    assert versions.stdout.split() == [pinned["HELM_VERSION"], pinned["KUSTOMIZE_VERSION"]], versions.stdout


def test_render_error_in_the_image_is_one_line(image: str, tmp_path: Path):
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "bad.yaml").write_text("kind: RayCluster\nmetadata: [unclosed\n")
    app_dir.chmod(0o755)
    (app_dir / "bad.yaml").chmod(0o644)
    res = run_in_image(image, "render", ".", app_dir=app_dir)
    assert res.returncode == 1 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "bad.yaml:" in res.stderr, res.stderr


def test_image_ships_the_plugin_definition_where_the_sidecar_mounts_it(image: str):
    sidecar = yaml.safe_load((REPO / "argocd" / "repo-server-sidecar.yaml").read_text())
    (container,) = [c for c in sidecar["spec"]["template"]["spec"]["containers"] if c["name"] == "raygitops"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "raygitops-cmp"]
    res = imagerun.podman("run", "--rm", "--read-only", "--network=none", "--entrypoint=cat", image,
                          mount["mountPath"])
    assert res.returncode == 0, res.stderr
    assert res.stdout == (REPO / "argocd" / "plugin.yaml").read_text()


def test_image_is_small_and_carries_no_installer(image: str):
    size = int(imagerun.podman("image", "inspect", "--format", "{{.Size}}", image).stdout)
    assert size < SIZE_LIMIT_MB * 1_000_000, f"image is {size / 1e6:.0f} MB (tripwire {SIZE_LIMIT_MB} MB)"
    probe = ("import importlib.util, shutil, sys; "
             "found = [m for m in ('pip', 'setuptools') if importlib.util.find_spec(m)] "
             "+ [t for t in ('gcc', 'cc', 'make') if shutil.which(t)]; "
             "import yaml; sys.exit(found or (None if yaml.__with_libyaml__ else 'no libyaml'))")
    res = imagerun.podman("run", "--rm", "--user=999:999", "--read-only", "--network=none",
                          "--entrypoint=python", image, "-c", probe)
    assert res.returncode == 0, res.stderr
    user = imagerun.podman("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()
    assert user == "999:999"


def test_presync_in_the_image_recreates_with_in_cluster_credentials(image: str, control_plane, namespace,
                                                                   tmp_path: Path):
    """The hook Job's pod, as rendered, run from the image: in-cluster ServiceAccount token,
    the plan ConfigMap mounted where the Job mounts it, uid 999, read-only root."""
    app = App(control_plane, namespace, tmp_path)
    old_uids = _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    objs, hooks, _ = app.render()
    rbac = [h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS]
    control_plane.apply(rbac, namespace=namespace)
    (job,) = [h for h in hooks if h["kind"] == "Job"]
    config_maps = {h["metadata"]["name"]: h["data"] for h in hooks if h["kind"] == "ConfigMap"}
    pod = job["spec"]["template"]["spec"]
    token = control_plane.create_token(pod["serviceAccountName"], namespace)
    sa_dir = imagerun.write_service_account(tmp_path / "sa", token, control_plane.pki.path("ca.crt"), namespace)
    argv = imagerun.pod_argv(pod, image, config_maps=config_maps, service_account_dir=sa_dir,
                             server=control_plane.server, work=tmp_path)
    assert "--read-only" in argv and "--user=999:999" in argv and not any("kubeconfig" in a for a in argv)
    res = imagerun.podman(*argv, timeout=300)
    assert res.returncode == 0, f"hook in the image exited {res.returncode}\n{res.stderr}"
    report = json.loads(res.stdout)
    assert report["summary"]["recreated"] == 1 and not report["failed"], report
    assert not (app.uids() & old_uids), "every old pod was replaced"
    app.apply(objs)
    app.wait_pods(hashes=desired_hashes(rendered(objs)))
