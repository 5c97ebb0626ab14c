"""In-cluster credentials read without the kubernetes package (the hook's start-up), and
the kubeconfig path through it."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from raygitops.errors import RaygitopsError
from raygitops.kube import credentials
from raygitops.kube.credentials import in_cluster_credentials, own_namespace

ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
# kubernetes reads a kubeconfig's proxy-url from release 37 (the lowest supported, 29, not)
READS_PROXY_URL = int(version("kubernetes").split(".")[0]) >= 37


def ca_file() -> str:
    """Any PEM bundle does: the CA is loaded, not used (this machine's is a real one)."""
    path = Path("/etc/ssl/certs/ca-certificates.crt")
    if not path.exists():
        pytest.skip("no system CA bundle to stand in for a ServiceAccount's ca.crt")
    return str(path)


def service_account(tmp_path: Path, token: str = "t1") -> Path:
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "ca.crt").write_bytes(Path(ca_file()).read_bytes())
    (tmp_path / "namespace").write_text("team-a")
    return tmp_path


def test_service_account_files_and_address(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    creds = in_cluster_credentials(str(sa), ENV)
    assert creds.host == "https://10.96.0.1:443" and creds.token() == "Bearer t1" and creds.verify
    assert creds.ssl_context is not None and creds.proxy is None
    assert in_cluster_credentials(str(sa), {"KUBERNETES_SERVICE_HOST": "fd00::1",
                                            "KUBERNETES_SERVICE_PORT": "6443"}).host == "https://[fd00::1]:6443"
    assert own_namespace(str(sa)) == "team-a"


def test_a_rotated_token_is_read_again_and_a_vanished_one_keeps_the_last(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    now = [100.0]
    creds = in_cluster_credentials(str(sa), ENV, clock=lambda: now[0])
    (sa / "token").write_text("t2")
    now[0] += credentials.TOKEN_REREAD_SECONDS - 1
    assert creds.token() == "Bearer t1"  # not yet
    now[0] += 1
    assert creds.token() == "Bearer t2"
    (sa / "token").unlink()
    now[0] += credentials.TOKEN_REREAD_SECONDS
    assert creds.token() == "Bearer t2"


@pytest.mark.parametrize("broken", ["no-port", "no-token", "empty-token", "bad-ca"])
def test_broken_service_account_is_a_one_line_error(tmp_path: Path, broken: str) -> None:
    sa = service_account(tmp_path)
    env = dict(ENV)
    if broken == "no-port":
        del env["KUBERNETES_SERVICE_PORT"]
    elif broken == "no-token":
        (sa / "token").unlink()
    elif broken == "empty-token":
        (sa / "token").write_text("\n")
    else:
        (sa / "ca.crt").write_text("not a certificate")
    with pytest.raises(RaygitopsError, match="cannot load Kubernetes credentials") as err:
        in_cluster_credentials(str(sa), env)
    assert "\n" not in str(err.value)


def test_in_cluster_path_never_imports_kubernetes(tmp_path: Path) -> None:
    """The hook Job's start-up: the kubernetes package is imported only for a kubeconfig."""
    sa = service_account(tmp_path)
    code = (f"import sys; from raygitops.kube.credentials import in_cluster_credentials; "
            f"in_cluster_credentials({str(sa)!r}, {ENV!r}); import raygitops.presync.command, "
            "raygitops.presync.run; print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_kubeconfig_path_keeps_the_kubernetes_loader(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://example.invalid:6443/", insecure-skip-tls-verify: true,
            proxy-url: "http://proxy.invalid:3128", tls-server-name: api.internal}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    creds = credentials.load_credentials(str(kubeconfig), None)
    assert (creds.host, creds.token(), creds.verify) == ("https://example.invalid:6443", "Bearer abc", False)
    assert creds.server_name == "api.internal"
    assert creds.proxy == ("http://proxy.invalid:3128" if READS_PROXY_URL else None)
    with pytest.raises(RaygitopsError, match="kubeconfig file not found") as err:
        credentials.load_credentials(str(tmp_path / "missing"), None)
    assert str(err.value).startswith(f"{tmp_path}/missing: ")
    (tmp_path / "empty").write_text("")
    with pytest.raises(RaygitopsError, match="cannot load Kubernetes credentials") as err:
        credentials.load_credentials(str(tmp_path / "empty"), None)
    assert str(err.value).startswith(f"{tmp_path}/empty: ")
