"""Run the raygitops container image with podman, the way a kubelet would run a pod of it.

The image comes from ``tests/image/build.sh`` (no registry: a locally bootstrapped Debian
base). :func:`pod_argv` turns a rendered pod spec (the hook Job's template) into one
``podman run``: the container's command and args, its env, the pod's user and group, a
read-only root filesystem when the spec asks for one, dropped capabilities, every
ConfigMap and Secret volume as a read-only directory of its keys, and the ServiceAccount files a
kubelet projects (token, ca.crt, namespace) with ``KUBERNETES_SERVICE_HOST/PORT``: the
process inside sees what it would see in a cluster (in-cluster credentials, host network
standing in for the Service IP).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[2]
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ImageUnavailable(Exception):
    """podman is missing or the image could not be built (the reason is the message)."""


def podman_env() -> dict[str, str]:
    """The environment tests/image/build.sh runs podman with (its containers.conf)."""
    cache = Path(os.environ.get("RAYGITOPS_IMAGE_CACHE", Path.home() / ".cache" / "raygitops-image"))
    return dict(os.environ, CONTAINERS_CONF=str(cache / "containers.conf"))


def build_image() -> str:
    """Build (or reuse, from podman's layer cache) the image; its reference. When the suite
    built it already (tests/run.sh, before its two lanes), ``RAYGITOPS_IMAGE_BUILT`` names it."""
    if os.environ.get("RAYGITOPS_IMAGE_BUILT"):
        return os.environ["RAYGITOPS_IMAGE_BUILT"]
    if os.geteuid() != 0 and not shutil.which("podman"):
        raise ImageUnavailable("podman is not installed (tests/image/build.sh installs it as root)")
    res = subprocess.run(["bash", str(REPO / "tests" / "image" / "build.sh")], capture_output=True, text=True,
                         cwd=REPO, timeout=1800)
    if res.returncode != 0:
        raise ImageUnavailable(f"tests/image/build.sh failed:\n{res.stdout}\n{res.stderr}")
    return res.stdout.strip().splitlines()[-1]


def podman(*args: str, input: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], input=input, capture_output=True, text=True, env=podman_env(),
                          timeout=timeout)


def write_service_account(directory: Path, token: str, ca_file: str, namespace: str) -> Path:
    """The files a kubelet projects for a pod's ServiceAccount, readable by any uid."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(Path(ca_file).read_bytes())
    (directory / "namespace").write_text(namespace)
    for path in [directory, *directory.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return directory


def pod_argv(pod_spec: dict[str, Any], image: str, *, config_maps: dict[str, dict[str, str]],
             service_account_dir: Path, server: str, work: Path,
             secrets: dict[str, dict[str, bytes]] | None = None) -> list[str]:
    """``podman run`` arguments for the pod's single container (see the module docstring)."""
    (container,) = pod_spec["containers"]
    pod_sc, sc = pod_spec.get("securityContext") or {}, container.get("securityContext") or {}
    url = urlsplit(server)
    argv = ["run", "--rm", "--network=host", "--security-opt=no-new-privileges",
            f"--user={pod_sc.get('runAsUser', 0)}:{pod_sc.get('runAsGroup', 0)}",
            f"--env=KUBERNETES_SERVICE_HOST={url.hostname}", f"--env=KUBERNETES_SERVICE_PORT={url.port}",
            f"--volume={service_account_dir}:{SA_DIR}:ro"]
    argv += [f"--cap-drop={cap}" for cap in (sc.get("capabilities") or {}).get("drop", [])]
    if sc.get("readOnlyRootFilesystem"):
        argv.append("--read-only")
    argv += [f"--env={e['name']}={e['value']}" for e in container.get("env", [])]
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        if mount["mountPath"] == SA_DIR:  # the API server's kube-api-access volume: mounted above
            continue
        volume = volumes[mount["name"]]  # the hook mounts a ConfigMap, and a Secret when pods read some
        files: dict[str, str | bytes] = (config_maps[volume["configMap"]["name"]] if "configMap" in volume
                                         else (secrets or {})[volume["secret"]["secretName"]])
        directory = work / "volumes" / mount["name"]
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o755)
        for key, value in files.items():
            (directory / key).write_bytes(value if isinstance(value, bytes) else value.encode())
            (directory / key).chmod(0o644)  # the kubelet's default mode for both
        argv.append(f"--volume={directory}:{mount['mountPath']}:ro")
    argv += [f"--entrypoint={container['command'][0]}", image, *container["command"][1:], *container.get("args", [])]
    return argv
