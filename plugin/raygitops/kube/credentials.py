"""Where the hook's API credentials come from.

In a pod (the hook Job) they are the three files a kubelet projects for the ServiceAccount
plus ``KUBERNETES_SERVICE_HOST/PORT``: read here directly, because importing the
``kubernetes`` package for them would be most of the hook's start-up (about 0.2 s of 0.3 s,
``tests/bench/bench_presync.py``).  Anywhere else a kubeconfig is loaded by the ``kubernetes``
package, which keeps what it is good at: contexts, merged ``KUBECONFIG`` files, exec
plugins and auth providers with token refresh, proxies, TLS server names.
"""

from __future__ import annotations

import inspect
import os
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from raygitops.errors import RaygitopsError

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# As the kubernetes package's in-cluster loader: a bound token is rotated by the kubelet
# (hourly), so it is re-read at most this often; the last good one stays when a re-read fails.
TOKEN_REREAD_SECONDS = 60.0


@dataclass
class Credentials:
    host: str
    ssl_context: ssl.SSLContext | None
    token: Any  # () -> str | None: the Authorization header's value
    verify: bool = True
    proxy: str | None = None  # kubeconfig proxy-url
    server_name: str | None = None  # kubeconfig tls-server-name: SNI and certificate check


def own_namespace(sa_dir: str = SERVICE_ACCOUNT_DIR) -> str:
    """The namespace of the pod this runs in (its ServiceAccount's, as a kubelet mounts it)."""
    path = os.path.join(sa_dir, "namespace")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as err:
        raise RaygitopsError(f"the plan leaves the namespace to the hook's own (rendered with --helm), "
                             f"which it cannot read ({err.strerror}: {path}): give --namespace") from None


def load_credentials(kubeconfig: str | None, context: str | None) -> Credentials:
    """In-cluster credentials in a pod (no --kubeconfig/--context), else a kubeconfig."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not kubeconfig and not context:
        return in_cluster_credentials()
    return kubeconfig_credentials(kubeconfig, context)


def in_cluster_credentials(sa_dir: str = SERVICE_ACCOUNT_DIR, env: Mapping[str, str] = os.environ,
                           clock: Callable[[], float] = time.monotonic) -> Credentials:
    """The pod's ServiceAccount: token (re-read as it rotates), CA, and the Service address."""
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise RaygitopsError("cannot load Kubernetes credentials: KUBERNETES_SERVICE_HOST and "
                             "KUBERNETES_SERVICE_PORT must both be set in a pod")
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    token_path, ca_path = os.path.join(sa_dir, "token"), os.path.join(sa_dir, "ca.crt")
    try:
        ctx = ssl.create_default_context(cafile=ca_path)
    except (OSError, ssl.SSLError) as err:
        raise RaygitopsError(f"cannot load Kubernetes credentials: {ca_path}: {err}") from None
    return Credentials(host=f"https://{host}:{port}", ssl_context=ctx, token=_token_reader(token_path, clock))


def _token_reader(path: str, clock: Callable[[], float]) -> Callable[[], str]:
    lock = threading.Lock()
    state: dict[str, Any] = {}

    def read() -> str:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
        if not token:
            raise OSError(f"{path} is empty")
        return token

    try:
        state.update(token=read(), at=clock())
    except OSError as err:
        raise RaygitopsError(f"cannot load Kubernetes credentials: {path}: {err}") from None

    def token() -> str:
        with lock:
            if clock() - state["at"] >= TOKEN_REREAD_SECONDS:
                try:
                    state["token"] = read()
                except OSError:
                    pass  # keep the last good token: the API server says when it is no longer valid
                state["at"] = clock()
            return f"Bearer {state['token']}"

    return token


def kubeconfig_credentials(kubeconfig: str | None, context: str | None) -> Credentials:
    """A kubeconfig (``--kubeconfig``, else ``$KUBECONFIG`` / ``~/.kube/config``) through the
    ``kubernetes`` package."""
    from kubernetes import client, config  # only this path pays for the import

    if kubeconfig is not None and not os.path.isfile(kubeconfig):
        raise RaygitopsError("kubeconfig file not found (--kubeconfig)", kubeconfig)
    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg,
                                persist_config=False)
    except Exception as err:  # noqa: BLE001 - any config problem is a user error
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise RaygitopsError(f"cannot load Kubernetes credentials: {err}".splitlines()[0], where) from None

    verify = bool(cfg.verify_ssl)
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if verify else ssl._create_unverified_context()  # noqa: S323
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)

    # kubernetes >= 30 files the loader's token under "BearerToken" with the alias
    # "authorization"; older releases (the lowest supported, 29) under "authorization" alone.
    if "alias" in inspect.signature(cfg.get_api_key_with_prefix).parameters:
        def token() -> str | None:
            # exec plugins and tokenFile: the loader's refresh hook runs here when it must
            return cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
    else:
        def token() -> str | None:
            return cfg.get_api_key_with_prefix("authorization")

    return Credentials(host=cfg.host.rstrip("/"), ssl_context=ctx, token=token, verify=verify,
                       proxy=getattr(cfg, "proxy", None) or None,
                       server_name=getattr(cfg, "tls_server_name", None) or None)
