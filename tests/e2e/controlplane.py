"""A real, local Kubernetes control plane with the KubeRay operator, for e2e tests.

Binaries come from ``tests/e2e/build.sh`` (built from the Go module proxy into
``${RAYGITOPS_E2E_CACHE:-~/.cache/raygitops-e2e}/<E2E_VERSIONS_KEY>/bin``; versions in
``tests/e2e/versions.env``). Nothing is mocked: etcd, kube-apiserver (TLS, client-cert
auth, RBAC, ServiceAccount admission, TokenRequest), kube-controller-manager (garbage
collection, namespace deletion, ServiceAccounts), kube-scheduler and kwok (fake nodes, so
pods become Running/Ready) when built, and the KubeRay operator with its CRDs. Every
component listens on free loopback ports and lives in a temp dir; all run in their own
process groups and are stopped at the end of the session.

Fixtures (tests/e2e/conftest.py)
--------------------------------
``control_plane`` (session) -> :class:`ControlPlane`; ``namespace`` (function) -> a fresh,
unique namespace name (created, default ServiceAccount present; deleted afterwards).
All tests under tests/e2e carry ``pytest.mark.e2e``. Without binaries every e2e test is
skipped with one reason; with ``RAYGITOPS_REQUIRE_E2E=1`` they fail instead.

ControlPlane API
----------------
``.kubeconfig``      path of an admin kubeconfig (client cert CN=admin, O=system:masters;
                     certs embedded; server cert SANs 127.0.0.1 and localhost), usable by
                     kubectl and by the ``kubernetes`` Python client (``config.load_kube_config``).
``.server``          ``https://127.0.0.1:<port>``
``.bin_dir``         directory of the built binaries (kubectl, etcd, ...)
``.env``             os.environ + KUBECONFIG + PATH starting with bin_dir (for subprocesses,
                     e.g. running ``raygitops presync``)
``.versions``        dict of versions.env
``.kubectl(*args, input=None, check=True, timeout=60)`` -> CompletedProcess (text); raises
                     KubectlError (a CalledProcessError whose str() shows stderr) if check
``.kubectl_json(*args)``  -> parsed ``-o json`` output
``.apply(obj_or_yaml, namespace=None)``  server-side apply of a dict / list / YAML text
``.get(kind, name, namespace)`` -> dict or None
``.wait_for(predicate, timeout=60, interval=0.5, message="")`` -> the predicate's truthy
                     value; raises TimeoutError (with message and last value) otherwise
``.create_namespace(name)`` / ``.delete_namespace(name, wait=False)``
``.create_service_account(name, namespace)``; ``.create_token(sa, namespace, duration="1h")``
``.has(component)``  whether e.g. "kwok" / "kube-scheduler" runs
``.stop_operator(kill=False)`` / ``.start_operator(kubeconfig=None)`` / ``.restart_operator(kubeconfig=None)``
                     / ``.operator_running``: the operator's API requests go to the admin
                     kubeconfig, or through a fault proxy's (``kubeconfig``, kept across restarts)
``.switch_operator(version, crds=None)``  run another KubeRay in place (an operator upgrade or
                     downgrade: its CRDs, or those of version ``crds``, replace the installed
                     ones; RayClusters and pods stay)
``.operator_log_mark()`` + ``.wait_operator_reconciled(name, namespace, since=mark)``: proof
                     that the operator has seen a change (KubeRay 1.5 leaves
                     status.observedGeneration stale)
``.logs(component=None, tail=60)`` -> str (tail of one or all component logs)
``.pki.dir``         ca.crt (trust it to reach ``.server``), admin.crt/key, sa.key/pub
``.workdir``         temp dir (``logs/``, certs, etcd data); kept with RAYGITOPS_E2E_KEEP=1
``.startup_timings`` seconds since start at which each phase was ready
``.node_flaps()``    kwok nodes whose Ready condition changed since start-up (the e2e
                     conftest fails any test during which a node flapped)
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import yaml

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]
VERSIONS_FILE = E2E_DIR / "versions.env"

REQUIRED = ("etcd", "kube-apiserver", "kubectl", "ray-operator", "kube-controller-manager")
OPTIONAL = ("kube-scheduler", "kwok")
KWOK_NODES = 3
TEMPLATE_HASH = "raygitops.dev/template-hash"  # on each pod, from its group's template
NODE_LEASE_SECONDS = 40
TERMINATE_AFTER = "e2e.raygitops.dev/terminate-after"  # a pod's shutdown time ("2s"): kwok deletes it then
# the rendered hook objects that give its ServiceAccount its rights (the ClusterRole: the
# preflight's reads of nodes, PriorityClasses and RuntimeClasses)
HOOK_RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
POD_CIDR = "10.244.0.0/16"  # kwok's pod IPs: no machine's (guard_pod_network)
# kwok's head pods run no Ray: a recreate has no running job to ask for (docs/presync.md
# "Running jobs"), so the e2e apps say so; only tests/e2e/test_running_jobs.py runs a real head
KWOK_RUNNING_JOBS = "proceed"


class KubectlError(subprocess.CalledProcessError):
    """A failed kubectl call; str() includes its stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstderr: {(self.stderr or '').strip()}"


class ComponentExited(RuntimeError):
    """A component process died; wait_for() stops polling at once."""


class Unavailable(Exception):
    """The control plane cannot run here (missing Go or binaries); the message says why."""


# ----------------------------------------------------------------------------- locating


def load_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """The variables of versions.env, evaluated by bash exactly as build.sh sees them."""
    names = [
        line.split("=", 1)[0]
        for line in path.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    ]
    script = 'source "$0"; for n in "$@"; do printf "%s\\0" "${!n}"; done'
    out = subprocess.run(
        ["bash", "-c", script, str(path), *names], check=True, capture_output=True, text=True
    ).stdout
    return dict(zip(names, out.split("\0")))


def cache_dir(versions: dict[str, str] | None = None) -> Path:
    versions = versions or load_versions()
    base = os.environ.get("RAYGITOPS_E2E_CACHE") or Path.home() / ".cache" / "raygitops-e2e"
    return Path(base) / versions["E2E_VERSIONS_KEY"]


def locate_binaries(required: Iterable[str] = REQUIRED) -> Path:
    """The bin dir holding every `required` binary, else raise Unavailable."""
    bin_dir = cache_dir() / "bin"
    missing = [b for b in required if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        go = shutil.which("go") or (
            "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None
        )
        hint = "run `bash tests/e2e/build.sh`" if go else "no Go toolchain to build them"
        raise Unavailable(f"e2e control plane binaries missing in {bin_dir} ({', '.join(missing)}): {hint}")
    return bin_dir


def shared_dir() -> Path | None:
    """/work/shared style reference material: $RAYGITOPS_SHARED or <repo>/../shared."""
    path = Path(os.environ.get("RAYGITOPS_SHARED") or REPO_ROOT.parent / "shared")
    return path if path.is_dir() else None


def kuberay_crd_dir(version: str) -> Path:
    """CRDs of the operator module (GOMODCACHE), else the shared fallback copy."""
    gomodcache = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if os.access(go, os.X_OK):
        res = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True)
        gomodcache = res.stdout.strip() or gomodcache
    candidates = [
        Path(gomodcache) / f"github.com/ray-project/kuberay/ray-operator@{version}/config/crd/bases",
    ]
    shared = shared_dir()
    if shared:
        candidates.append(shared / "crds" / f"kuberay-{version}")
    for c in candidates:
        if c.is_dir() and list(c.glob("*.yaml")):
            return c
    raise Unavailable(f"KubeRay {version} CRDs not found in {', '.join(map(str, candidates))}")


# ----------------------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.5, message: str = "") -> Any:
    """Poll predicate until it returns something truthy; return that, or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
        except ComponentExited:
            raise
        except Exception as exc:  # keep polling through transient errors, report the last one
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {message or predicate}; last: {last!r}")
        time.sleep(interval)


class PKI:
    """CA, apiserver serving cert, admin client cert and the ServiceAccount signing key,
    generated with the `cryptography` package."""

    def __init__(self, directory: Path):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        valid = dict(not_valid_before=now - datetime.timedelta(hours=1), not_valid_after=now + datetime.timedelta(days=2))

        def name(cn: str, org: str | None = None) -> x509.Name:
            attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
            if org:
                attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
            return x509.Name(attrs)

        def write(stem: str, key, cert=None) -> None:
            (directory / f"{stem}.key").write_bytes(
                key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            )
            if cert is not None:
                (directory / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = name("raygitops-e2e-ca")
        ca_cert = (
            x509.CertificateBuilder(subject_name=ca_name, issuer_name=ca_name, public_key=ca_key.public_key(),
                                    serial_number=x509.random_serial_number(), **valid)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        write("ca", ca_key, ca_cert)

        def leaf(stem: str, subject: x509.Name, usage, sans=None) -> None:
            key = ec.generate_private_key(ec.SECP256R1())
            builder = (
                x509.CertificateBuilder(subject_name=subject, issuer_name=ca_name, public_key=key.public_key(),
                                        serial_number=x509.random_serial_number(), **valid)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            )
            if sans:
                builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
            write(stem, key, builder.sign(ca_key, hashes.SHA256()))

        leaf("apiserver", name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, [
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("10.0.0.1")),  # the `kubernetes` Service
            x509.DNSName("localhost"), x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc"), x509.DNSName("kubernetes.default.svc.cluster.local"),
        ])
        leaf("admin", name("admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH)

        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        write("sa", sa_key)
        (directory / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )

    def path(self, name: str) -> str:
        return str(self.dir / name)

    def b64(self, name: str) -> str:
        return base64.b64encode((self.dir / name).read_bytes()).decode()


def guard_pod_network(cidr: str = POD_CIDR) -> None:
    """Make kwok's pod IPs fail fast on this machine: an ``unreachable`` route for the range
    (idempotent; as root, where ``ip`` exists). The API server's proxy (the hook or status
    asking a Ray head) then gets "no route to host" at once instead of sending packets for an
    address no machine here has out through the default route. A test that runs a real Ray
    head routes that head's one address more specifically (tests/e2e/rayhead.py)."""
    if os.geteuid() == 0 and shutil.which("ip"):
        subprocess.run(["ip", "route", "replace", "unreachable", cidr], check=False, capture_output=True)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if pytest dies without cleaning up (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Component:
    """One process in its own process group, output to <workdir>/logs/<name>.log."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None):
        self.name, self.argv, self.env = name, argv, env
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.log_offset = 0

    def start(self) -> None:
        log = open(self.log_path, "ab")
        self.log_offset = log.tell()  # where this run's output begins
        log.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(self.argv)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=self.env, start_new_session=True,
                                     # the signal fires when the forking *thread* exits: main thread only
                                     preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None)
        log.close()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ComponentExited(f"{self.name} exited with {self.proc.returncode}:\n{self.tail(30)}")

    def stop(self, timeout: float = 10, kill: bool = False) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` s; with ``kill``, SIGKILL at once."""
        if self.proc is None:
            return
        signals = ((signal.SIGKILL, 5),) if kill else ((signal.SIGTERM, timeout), (signal.SIGKILL, 5))
        for sig, wait in signals:
            try:
                os.killpg(self.proc.pid, sig)  # the whole group: no orphans
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc = None

    def output(self) -> str:
        """Everything the current (latest) run has logged so far."""
        with open(self.log_path, "rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


# ----------------------------------------------------------------------------- control plane


def operator_binary(version: str, versions: dict[str, str]) -> str:
    """bin/ray-operator is KUBERAY_VERSION; any other version is bin/ray-operator-<version>."""
    return "ray-operator" if version == versions["KUBERAY_VERSION"] else f"ray-operator-{version}"


class ControlPlane:
    def __init__(self, bin_dir: Path | None = None, workdir: Path | None = None, kuberay: str | None = None,
                 run_job_pods: bool = False):
        """``kuberay``: the operator version to run (KUBERAY_VERSION by default, or
        KUBERAY_NEXT_VERSION); the CRDs installed are that version's. ``run_job_pods``: kwok
        leaves Job-owned pods Pending instead of faking them Complete, so a runner
        (tests/e2e/jobrunner.py) can run them for real."""
        self.versions = load_versions()
        self.run_job_pods = run_job_pods
        self.kuberay = kuberay or self.versions["KUBERAY_VERSION"]
        self.operator_binary = operator_binary(self.kuberay, self.versions)
        self.bin_dir = bin_dir or locate_binaries((*REQUIRED, self.operator_binary))
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="raygitops-e2e-"))
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = str(self.workdir / "admin.kubeconfig")
        self.operator_kubeconfig = self.kubeconfig  # where the operator's API requests go
        self.components: dict[str, Component] = {}
        self.server = ""
        # kubectl's discovery cache is keyed by host:port, new every session: keep it here
        self.env = dict(os.environ, KUBECONFIG=self.kubeconfig, KUBECACHEDIR=str(self.workdir / "kube-cache"),
                        PATH=f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    # --- lifecycle

    def start(self) -> "ControlPlane":
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        t0 = time.monotonic()
        self.startup_timings: dict[str, float] = {}

        def phase(name: str) -> None:
            self.startup_timings[name] = round(time.monotonic() - t0, 1)

        self.pki = PKI(self.workdir / "pki")
        self._start_etcd()
        phase("etcd")
        self._start_apiserver()
        self._write_kubeconfig()
        phase("kube-apiserver")
        # scheduler and kwok need no CRDs: they warm up while the CRDs install
        if self._built("kube-scheduler"):
            self._run("kube-scheduler", ["--kubeconfig", self.kubeconfig, "--leader-elect=false", "--secure-port=0"])
        if self._built("kwok"):
            self._start_kwok()
            phase("kwok nodes")
        self._install_crds()
        phase("CRDs")
        # after the CRDs: the garbage collector only maps owner kinds discovered at start-up
        # (it re-discovers every 30 s)
        self._run("kube-controller-manager", [  # --secure-port=0: no HTTPS endpoint of its own
            "--kubeconfig", self.kubeconfig, "--leader-elect=false", "--secure-port=0",
            f"--service-account-private-key-file={self.pki.path('sa.key')}",
            f"--root-ca-file={self.pki.path('ca.crt')}",
            "--use-service-account-credentials=false", "--controllers=*",
            "--concurrent-gc-syncs=5", "--concurrent-namespace-syncs=5",
        ])
        self.start_operator()
        phase("ray-operator")
        wait_for(lambda: self._serviceaccount_exists("default", "default"), timeout=60,
                 message="the default ServiceAccount (kube-controller-manager)")
        phase("ServiceAccounts")
        self.startup_seconds = time.monotonic() - t0
        (self.log_dir / "startup.log").write_text(json.dumps(self.startup_timings) + "\n")

    def stop(self) -> None:
        for name in reversed(list(self.components)):
            self.components[name].stop()

    def cleanup(self) -> None:
        self.stop()
        if self._own_workdir and not os.environ.get("RAYGITOPS_E2E_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _built(self, name: str) -> bool:
        return os.access(self.bin_dir / name, os.X_OK)

    def has(self, component: str) -> bool:
        c = self.components.get(component)
        return bool(c and c.running)

    def _run(self, name: str, args: list[str], env: dict[str, str] | None = None,
             binary: str | None = None) -> Component:
        comp = self.components.get(name)
        if comp is None:
            comp = self.components[name] = Component(name, [], self.log_dir, env)
        comp.argv, comp.env = [str(self.bin_dir / (binary or name)), *args], env  # a restart may change ports
        comp.start()
        return comp

    # Ports come from free_port() and may be taken by someone else (e.g. a concurrent test
    # session) before the component binds them: then it exits and we retry with new ports.
    # etcd speaks plain HTTP, so it is also checked to be *ours* (member name); the apiserver
    # is identified by its TLS certificate.
    START_ATTEMPTS = 3

    def _start_etcd(self) -> None:
        name = unique_name("etcd")
        for attempt in range(1, self.START_ATTEMPTS + 1):
            client, peer = free_port(), free_port()
            self.etcd_url = f"http://127.0.0.1:{client}"
            etcd = self._run("etcd", [
                f"--data-dir={self.workdir / f'etcd-{attempt}'}", f"--name={name}",
                f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster={name}=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync=true", "--log-level=warn",
            ])

            def ours_and_healthy() -> bool:
                etcd.check_alive()
                members = urllib.request.Request(f"{self.etcd_url}/v3/cluster/member/list", data=b"{}", method="POST")
                with urllib.request.urlopen(members, timeout=2) as r:
                    if [m.get("name") for m in json.load(r).get("members", [])] != [name]:
                        return False
                with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as r:
                    return json.load(r).get("health") == "true"

            try:
                wait_for(ours_and_healthy, timeout=30, interval=0.2, message=f"etcd {name} /health")
                etcd.check_alive()
                return
            except ComponentExited:
                if attempt == self.START_ATTEMPTS:
                    raise

    def _start_apiserver(self) -> None:
        p = self.pki.path
        ctx = ssl.create_default_context(cafile=p("ca.crt"))  # only our apiserver passes
        ctx.load_cert_chain(p("admin.crt"), p("admin.key"))
        for attempt in range(1, self.START_ATTEMPTS + 1):
            port = free_port()
            self.server = f"https://127.0.0.1:{port}"
            api = self._run("kube-apiserver", [
                f"--etcd-servers={self.etcd_url}",
                "--advertise-address=127.0.0.1", "--bind-address=127.0.0.1", f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={p('apiserver.crt')}", f"--tls-private-key-file={p('apiserver.key')}",
                f"--client-ca-file={p('ca.crt')}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={p('sa.pub')}", f"--service-account-signing-key-file={p('sa.key')}",
                "--endpoint-reconciler-type=none", "--profiling=false",
            ])

            def ready() -> bool:
                api.check_alive()
                with urllib.request.urlopen(f"{self.server}/readyz", context=ctx, timeout=5) as r:
                    return r.status == 200

            try:
                wait_for(ready, timeout=90, interval=0.5, message="kube-apiserver /readyz")
                return
            except ComponentExited:
                if attempt == self.START_ATTEMPTS:
                    raise

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": self.server,
                                                      "certificate-authority-data": self.pki.b64("ca.crt")}}],
            "users": [{"name": "admin", "user": {"client-certificate-data": self.pki.b64("admin.crt"),
                                                 "client-key-data": self.pki.b64("admin.key")}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin"}}],
        }
        Path(self.kubeconfig).write_text(yaml.safe_dump(config))
        os.chmod(self.kubeconfig, 0o600)

    def _install_crds(self) -> None:
        crd_dir = kuberay_crd_dir(self.kuberay)
        self.crd_source = crd_dir
        # `create`, not client-side `apply`: the CRDs exceed the last-applied annotation limit
        created = self.kubectl("create", "-f", str(crd_dir), "-o", "name", timeout=120).stdout.split()
        self._wait_established(created)

    def _wait_established(self, names: list[str]) -> None:
        def established() -> bool:  # polled (not `kubectl wait`): transient API errors are retried
            crds = self.kubectl_json("get", *names)
            return all(any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"].get("conditions", []))
                       for crd in crds.get("items", [crds]))

        wait_for(established, timeout=90, message="KubeRay CRDs Established")

    def _replace_crds(self, version: str) -> None:
        """Install ``version``'s CRDs over the installed ones, as an operator upgrade does: a
        whole-object replace (server-side apply would keep schema fields the old version's
        manager owns), a create for a kind the installed version lacks."""
        crd_dir = kuberay_crd_dir(version)
        installed = set(self.kubectl("get", "crd", "-o", "name").stdout.split())
        names = []
        for path in sorted(crd_dir.glob("*.yaml")):
            group, plural = path.stem.split("_", 1)  # kubebuilder's <group>_<plural>.yaml
            name = f"customresourcedefinition.apiextensions.k8s.io/{plural}.{group}"
            verb = "replace" if name in installed else "create"
            names += self.kubectl(verb, "-f", str(path), "-o", "name", timeout=120).stdout.split()
        self.crd_source = crd_dir
        self._wait_established(names)

    def _start_kwok(self) -> None:
        home = self.workdir / "kwok-home"  # kwok reads ~/.kwok/kwok.yaml: keep the user's out
        home.mkdir(exist_ok=True)
        # Node leases: without them kwok's heartbeat is a status update the node controller
        # misses about every 55 s, so every node (and every pod on it) flaps NotReady.
        guard_pod_network()
        args = ["--kubeconfig", self.kubeconfig, "--manage-all-nodes=true", f"--cidr={POD_CIDR}",
                "--node-ip=127.0.0.1", f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}"]
        args.append(f"--config={self._kwok_stages(home)}")
        self._run("kwok", args, env=dict(os.environ, HOME=str(home)))
        self.apply([{
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"kwok-node-{i}", "labels": {"type": "kwok", "kubernetes.io/hostname": f"kwok-node-{i}"},
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
        } for i in range(KWOK_NODES)])

        def nodes_ready() -> bool:
            self.components["kwok"].check_alive()
            nodes = self.kubectl_json("get", "nodes")["items"]
            return len(nodes) == KWOK_NODES and all(
                any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
                for n in nodes)

        wait_for(nodes_ready, timeout=60, message="kwok nodes Ready")
        self.nodes_ready_at = self._node_ready_transitions()

    def _kwok_stages(self, directory: Path) -> Path:
        """kwok's own default pod stages (copied from its module by build.sh), with pod-delete
        waiting for the duration a pod's annotation :data:`TERMINATE_AFTER` gives (``"2s"``: a
        pod that takes its time to shut down, as a real one does; none by default).  With
        ``run_job_pods``, pod-complete is dropped and pod-ready skips pods a Job controller
        created: those stay Pending for the Job runner.  Node stages stay kwok's defaults."""
        stages_dir = self.bin_dir.parent / "share" / "kwok-stages"
        names = ("pod-ready", "pod-delete") if self.run_job_pods else ("pod-ready", "pod-complete", "pod-delete")
        stages = {name: yaml.safe_load((stages_dir / f"{name}.yaml").read_text()) for name in names}
        if self.run_job_pods:
            stages["pod-ready"]["spec"]["selector"]["matchExpressions"].append(
                {"key": '.metadata.labels["batch.kubernetes.io/job-name"]', "operator": "DoesNotExist"})
        stages["pod-delete"]["spec"]["delay"] = {  # no annotation: no delay
            "durationMilliseconds": 0, "durationFrom": {"expressionFrom": f'.metadata.annotations["{TERMINATE_AFTER}"]'}}
        path = directory / "stages.yaml"
        path.write_text(yaml.safe_dump_all(stages.values()))
        return path

    def _node_ready_transitions(self) -> dict[str, str]:
        """node name -> lastTransitionTime of its Ready condition."""
        return {n["metadata"]["name"]: c.get("lastTransitionTime", "")
                for n in self.kubectl_json("get", "nodes")["items"]
                for c in n.get("status", {}).get("conditions", []) if c["type"] == "Ready"}

    def node_flaps(self) -> list[str]:
        """Nodes whose Ready condition changed since they first became Ready (a flap turns
        every pod on the node not Ready: a test that saw one proves nothing about readiness)."""
        if not self.has("kwok"):
            return []
        now = self._node_ready_transitions()
        return sorted(f"{name} (Ready changed at {now.get(name) or 'gone'})"
                      for name, since in self.nodes_ready_at.items() if now.get(name) != since)

    # --- operator

    def start_operator(self, kubeconfig: str | None = None) -> None:
        """Start the operator (no-op when it runs). ``kubeconfig``: where its API requests go
        from now on (a fault proxy's, tests/reliability/faultproxy.py); by default where they
        went last, at first the admin kubeconfig."""
        if kubeconfig is not None:
            self.operator_kubeconfig = kubeconfig
        if self.has("ray-operator"):
            return
        op = self._run("ray-operator", [
            f"-kubeconfig={self.operator_kubeconfig}", "-enable-leader-election=false",
            "-metrics-addr=0", "-health-probe-bind-address=0", "-log-stdout-encoder=console",
        ], env={k: v for k, v in self.env.items() if k != "ENABLE_WEBHOOKS"}, binary=self.operator_binary)
        # The manager logs "Starting workers" per controller once its caches have synced.
        wait_for(lambda: op.check_alive() or "Starting workers" in op.output(), timeout=60,
                 message="ray-operator controllers started")

    def stop_operator(self, kill: bool = False) -> None:
        """Stop the operator: SIGTERM (its graceful shutdown), or with ``kill`` SIGKILL at once."""
        if "ray-operator" in self.components:
            self.components["ray-operator"].stop(kill=kill)

    def restart_operator(self, kubeconfig: str | None = None) -> None:
        """Stop the operator and start it again (its API requests going to ``kubeconfig``
        from now on, when given)."""
        self.stop_operator()
        self.start_operator(kubeconfig)

    def switch_operator(self, version: str, crds: str | None = None) -> None:
        """Run KubeRay ``version`` in place of the current one: stop it, replace the CRDs with
        ``version``'s (RayClusters and their pods stay, as in a real operator upgrade or
        downgrade), start ``version``'s binary.  ``crds``: another version's CRDs instead (an
        operator upgraded without its CRDs, as a Helm upgrade leaves them)."""
        self.stop_operator()
        self._replace_crds(crds or version)
        self.kuberay, self.operator_binary = version, operator_binary(version, self.versions)
        self.start_operator()

    @property
    def operator_running(self) -> bool:
        return self.has("ray-operator")

    def operator_log_mark(self) -> int:
        """A position in the operator's log; pass it to wait_operator_reconciled."""
        return self.components["ray-operator"].log_path.stat().st_size

    def wait_operator_reconciled(self, name: str, namespace: str, since: int, timeout: float = 30) -> None:
        """Wait until the operator has logged a reconcile of RayCluster namespace/name after
        `since` (an operator_log_mark()). KubeRay 1.5 does not keep status.observedGeneration
        current (it only writes status when other fields change), so its log is the signal."""
        needle = f'"RayCluster": {{"name":"{name}","namespace":"{namespace}"}}'
        log = self.components["ray-operator"].log_path

        def reconciled() -> bool:
            with open(log, "rb") as f:
                f.seek(since)
                return needle in f.read().decode(errors="replace")

        wait_for(reconciled, timeout=timeout, message=f"ray-operator reconciling RayCluster {namespace}/{name}")

    # --- API helpers

    def kubectl_argv(self) -> list[str]:
        """kubectl for this plane (run it with ``self.env``)."""
        return [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.env['KUBECACHEDIR']}"]

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        argv = [*self.kubectl_argv(), *args]
        res = subprocess.run(argv, input=input, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and res.returncode != 0:
            raise KubectlError(res.returncode, argv, res.stdout, res.stderr)
        return res

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        ns = ["-n", namespace] if namespace else []
        res = self.kubectl("get", kind, name, *ns, "-o", "json", check=False)
        if res.returncode != 0:
            if "NotFound" in res.stderr:
                return None
            raise KubectlError(res.returncode, res.args, res.stdout, res.stderr)
        return json.loads(res.stdout)

    def apply(self, obj: dict | list | str, namespace: str | None = None) -> subprocess.CompletedProcess:
        """Server-side apply (field manager raygitops-e2e) of a dict, a list of dicts or YAML text."""
        if isinstance(obj, dict):
            text = json.dumps(obj)
        elif isinstance(obj, list):
            text = yaml.safe_dump_all(obj)
        else:
            text = obj
        ns = ["-n", namespace] if namespace else []
        return self.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=raygitops-e2e",
                            *ns, "-f", "-", input=text)

    def cluster_pods(self, namespace: str, cluster: str) -> list[dict]:
        """The RayCluster's pods that are not being deleted."""
        return [p for p in self.kubectl_json("get", "pods", "-n", namespace, "-l", f"ray.io/cluster={cluster}")["items"]
                if not p["metadata"].get("deletionTimestamp")]

    def wait_cluster_running(self, namespace: str, cluster: str, hashes: set[str], count: int,
                             timeout: float = 120) -> list[dict]:
        """Wait until the cluster has ``count`` Running pods whose template hashes are ``hashes``."""
        def ok() -> list[dict] | None:
            pods = self.cluster_pods(namespace, cluster)
            good = len(pods) == count and all(p.get("status", {}).get("phase") == "Running" for p in pods)
            return pods if good and {p["metadata"]["annotations"].get(TEMPLATE_HASH) for p in pods} == hashes else None
        return self.wait_for(ok, timeout=timeout, message=f"{count} Running pods of {cluster} with {hashes}")

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.5, message: str = "") -> Any:
        return wait_for(predicate, timeout=timeout, interval=interval, message=message)

    def _serviceaccount_exists(self, name: str, namespace: str) -> bool:
        return self.get("serviceaccount", name, namespace) is not None

    def create_namespace(self, name: str) -> str:
        """Create a namespace and wait until its default ServiceAccount exists (pods need it)."""
        self.kubectl("create", "namespace", name)
        wait_for(lambda: self._serviceaccount_exists("default", name), timeout=30,
                 message=f"ServiceAccount {name}/default")
        return name

    def delete_namespace(self, name: str, wait: bool = False) -> None:
        self.kubectl("delete", "namespace", name, f"--wait={str(wait).lower()}", "--ignore-not-found", timeout=120)

    def create_service_account(self, name: str, namespace: str) -> None:
        self.kubectl("create", "serviceaccount", name, "-n", namespace)

    def create_token(self, service_account: str, namespace: str, duration: str = "1h") -> str:
        """A bound token from the TokenRequest API (`kubectl create token`)."""
        return self.kubectl("create", "token", service_account, "-n", namespace, f"--duration={duration}").stdout.strip()

    def logs(self, component: str | None = None, tail: int = 60) -> str:
        names: Iterable[str] = [component] if component else self.components
        return "\n".join(f"----- {n} (tail {tail}) -----\n{self.components[n].tail(tail)}" for n in names)


def unique_name(prefix: str = "e2e") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[ControlPlane]:
    """A started control plane (``ControlPlane(**kwargs)``), cleaned up afterwards; when it
    cannot start, its components' log tails go to stderr first."""
    plane = ControlPlane(**kwargs)
    try:
        plane.start()
    except Exception:
        print(plane.logs(tail=80), file=sys.stderr)
        plane.cleanup()
        raise
    try:
        yield plane
    finally:
        plane.cleanup()
