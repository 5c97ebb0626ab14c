"""The hook reads kubeconfigs as kubectl does: proxy-url, tls-server-name, exec plugins and
tokenFile credentials, against the real kube-apiserver (a dry run: read-only calls)."""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
from test_presync_hook import App, _start, raycluster

pytestmark = pytest.mark.e2e


@pytest.fixture
def hook(control_plane, namespace, tmp_path) -> tuple[App, Path, str]:
    """An app with a running cluster, the rendered RBAC applied, a plan and a hook token."""
    app = App(control_plane, namespace, tmp_path)
    _start(app)
    app.write(raycluster(image="rayproject/ray:2.42.0"))
    _, hooks, plan = app.render()
    app.plane.apply([h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS], namespace=app.ns)
    return app, plan, app.plane.create_token("raygitops-presync", app.ns)


def _kubeconfig(app: App, path: Path, user: dict[str, Any], **cluster: Any) -> str:
    admin = yaml.safe_load(Path(app.plane.kubeconfig).read_text())
    entry = dict(admin["clusters"][0]["cluster"], **cluster)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hook",
        "clusters": [{"name": "c", "cluster": entry}],
        "users": [{"name": "hook", "user": user}],
        "contexts": [{"name": "hook", "context": {"cluster": "c", "user": "hook", "namespace": app.ns}}],
    }))
    return str(path)


def _dry_run(app: App, plan: Path, kubeconfig: str):
    return app.presync(plan, "--dry-run", kubeconfig=kubeconfig, check=False, timeout=60)


def _would_recreate(res) -> bool:
    return res.returncode == 0 and json.loads(res.stdout)["summary"]["wouldRecreate"] == 1


def test_token_file_and_exec_plugin(hook, tmp_path: Path):
    app, plan, token = hook
    (tmp_path / "token").write_text(token)
    res = _dry_run(app, plan, _kubeconfig(app, tmp_path / "file.yaml", {"tokenFile": str(tmp_path / "token")}))
    assert _would_recreate(res), res.stderr
    credential = json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                             "status": {"token": token}})
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                          "args": ["-c", f"print({credential!r})"], "interactiveMode": "Never"}}
    res = _dry_run(app, plan, _kubeconfig(app, tmp_path / "exec.yaml", exec_user))
    assert _would_recreate(res), res.stderr
    # a wrong token is refused: the credentials above were really used
    res = _dry_run(app, plan, _kubeconfig(app, tmp_path / "bad.yaml", {"token": "not-a-token"}))
    assert res.returncode == 1 and "401" in res.stderr, res.stderr


def test_tls_server_name_is_what_the_certificate_is_checked_against(hook, tmp_path: Path):
    app, plan, token = hook
    res = _dry_run(app, plan, _kubeconfig(app, tmp_path / "ok.yaml", {"token": token}, **{"tls-server-name": "kubernetes"}))
    assert _would_recreate(res), res.stderr
    res = _dry_run(app, plan, _kubeconfig(app, tmp_path / "wrong.yaml", {"token": token},
                                          **{"tls-server-name": "not-in-the-certificate.example"}))
    assert res.returncode == 1 and "not-in-the-certificate.example" in res.stderr, res.stderr


class ConnectProxy:
    """An HTTP CONNECT proxy on loopback that counts the tunnels it opened."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.tunnels: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                return
            head += chunk
        method, target = head.split(b" ")[:2]
        if method != b"CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            return
        host, port = target.decode().rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)))
        self.tunnels.append(target.decode())
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        pair = {client: upstream, upstream: client}
        while True:
            ready, _, _ = select.select(list(pair), [], [], 30)
            if not ready:
                break
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                pair[sock].sendall(data)

    def close(self) -> None:
        self.server.close()


def test_proxy_url_tunnels_every_call(hook, tmp_path: Path):
    app, plan, token = hook
    proxy = ConnectProxy()
    try:
        res = _dry_run(app, plan, _kubeconfig(app, tmp_path / "proxy.yaml", {"token": token},
                                              **{"proxy-url": proxy.url}))
    finally:
        proxy.close()
    assert _would_recreate(res), res.stderr
    assert proxy.tunnels, "no call went through the proxy"
