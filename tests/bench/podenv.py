"""Run a process the way a kubelet runs the hook's container: the ServiceAccount files at the
kubelet's fixed path and ``KUBERNETES_SERVICE_HOST/PORT``, so the hook takes its in-pod path.

The path is fixed (/var/run/secrets/kubernetes.io/serviceaccount), so the process runs in a
private mount namespace (``unshare -m``, root only) with a tmpfs on /run (/var/run is /run)
holding copies of the files: nothing on the machine changes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
# the files a kubelet projects (token, ca.crt, namespace): the image tests write them too
from imagerun import write_service_account as service_account_files  # noqa: E402,F401

SA_DIR = "/run/secrets/kubernetes.io/serviceaccount"
_SCRIPT = ('mount -t tmpfs raygitops-bench /run && mkdir -p "$SA" && cp "$SRC"/token "$SRC"/ca.crt '
           '"$SRC"/namespace "$SA"/ && exec "$@"')


class PodEnvUnavailable(Exception):
    """Not root, or no unshare(1): the in-pod path cannot be set up here."""


def wrapper() -> list[str]:
    """argv prefix: the command after it runs with the ServiceAccount files in place."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise PodEnvUnavailable("the in-pod path needs root and unshare(1) for a private /run "
                                "(the ServiceAccount files live at the kubelet's fixed path)")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", _SCRIPT, "sh"]


def pod_env(files: Path, host: str, port: int | str) -> dict[str, str]:
    """The environment for :func:`wrapper`: copy ``files`` (token, ca.crt, namespace) into
    place; the API server at host:port as the Service address."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(SA=SA_DIR, SRC=str(files), KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=str(port))
    return env
