"""The hook's start-up: ``raygitops presync`` from process start to its first API request,
against ``python -c "import urllib3, yaml"`` as a process (target <= 2).

    python tests/bench/bench_hook_start.py [--quick] [--repeats N] [--write-docs]

Both credential paths are measured, interleaved with the floor:
1. in a pod (the hook Job): the ServiceAccount files and ``KUBERNETES_SERVICE_HOST/PORT``.
   The files must be at the kubelet's path, so subject and floor both run in a private
   mount namespace (``unshare -m`` as root, a tmpfs on /run); that wrapper alone (running
   ``true``) is timed in the same round and taken off both.
2. ``--kubeconfig`` (by hand, CI): the kubernetes package's loader, imported only here.
The first request is timestamped where it arrives: a TLS listener on 127.0.0.1 that answers
every request with an empty list, so the hook's dry run ends normally. Only the arrival
time is used; what the hook does with API answers is measured on the real API server by
``bench_presync.py``.
Exit status 1 when a figure misses (its tripwire in quick mode).
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from podenv import PodEnvUnavailable, pod_env, service_account_files, wrapper  # noqa: E402
from measure import (BenchmarkError, Figure, arguments, doc_table, interleaved, machine,  # noqa: E402
                     raygitops_command, report, write_doc_section)

REPO = Path(__file__).resolve().parents[2]


class FirstRequest:
    """A TLS listener that notes when the first request of a run arrives."""

    def __init__(self, cert: Path, key: Path) -> None:
        arrivals = self.arrivals = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                arrivals.append(time.perf_counter())
                body = json.dumps({"kind": "List", "items": [], "metadata": {"resourceVersion": "1"}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def seconds_to_first(self, argv: list[str], env: dict[str, str]) -> float:
        self.arrivals.clear()
        start = time.perf_counter()
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        if res.returncode != 0 or not self.arrivals:
            raise BenchmarkError(f"{' '.join(argv[-6:])}: exit {res.returncode}, "
                                 f"{len(self.arrivals)} requests: {res.stderr[-1500:]}")
        return self.arrivals[0] - start


def process(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, timeout=120)
    return time.perf_counter() - start


def certificate(work: Path) -> tuple[Path, Path]:
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def in_a_pod(work: Path, probe: FirstRequest, cert: Path, plan: Path, repeats: int) -> Figure:
    try:
        prefix = wrapper()
    except PodEnvUnavailable as err:
        raise BenchmarkError(str(err)) from None
    env = pod_env(service_account_files(work / "sa", "bench-token", cert, "bench"), "127.0.0.1", probe.port)
    hook = [*prefix, *raygitops_command(), "presync", "--plan", str(plan), "--dry-run"]
    floor = [*prefix, sys.executable, "-c", "import urllib3, yaml"]
    bare = [*prefix, "true"]
    subject, floors = [], []
    for i in range(1 + repeats):  # one warm-up round; the wrapper's own cost is taken off both
        overhead = process(bare, env)
        f, s = process(floor, env) - overhead, probe.seconds_to_first(hook, env) - overhead
        if i:
            subject.append(s)
            floors.append(f)
    return Figure("`raygitops presync` in a pod: start to first API request (process)", 2.0, subject, floors,
                  floor_name="`python -c 'import urllib3, yaml'` (the wrapper's cost off both)",
                  notes="the hook Job's path: ServiceAccount files read directly, the kubernetes package not imported")


def with_kubeconfig(work: Path, probe: FirstRequest, cert: Path, plan: Path, repeats: int) -> Figure:
    kubeconfig = work / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "bench",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{probe.port}",
                                               "certificate-authority": str(cert)}}],
        "users": [{"name": "u", "user": {"token": "bench-token"}}],
        "contexts": [{"name": "bench", "context": {"cluster": "c", "user": "u"}}]}))
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    hook = [*raygitops_command(), "presync", "--plan", str(plan), "--dry-run", "--kubeconfig", str(kubeconfig)]
    floor = [sys.executable, "-c", "import urllib3, yaml"]
    subject, floors = interleaved(lambda: probe.seconds_to_first(hook, env), lambda: process(floor, env), repeats)
    # Not the hook's path: a person or CI with a kubeconfig. The kubernetes package's loader
    # (contexts, exec plugins, proxies) costs ~0.2 s to import; held to a looser bound.
    return Figure("`raygitops presync --kubeconfig`: start to first API request (process)", 3.0, subject, floors,
                  floor_name="`python -c 'import urllib3, yaml'`",
                  notes="by hand or CI: the kubernetes package's kubeconfig loader is imported on this path only")


def main() -> int:
    args = arguments(__doc__, quick_repeats=5, full_repeats=15)
    repeats = args.repeats
    work = Path(tempfile.mkdtemp(prefix="raygitops-bench-"))
    try:
        cert, key = certificate(work)
        subprocess.run([*raygitops_command(), "render", str(REPO / "examples" / "plain"), "--plan-out", str(work / "plans")],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        (plan,) = (work / "plans").glob("*.json")
        probe = FirstRequest(cert, key)
        figures = [in_a_pod(work, probe, cert, plan, repeats), with_kubeconfig(work, probe, cert, plan, repeats)]
        ok = report(figures, args.quick)
        if args.write_docs and not args.quick:
            write_doc_section("bench_hook_start", f"Machine: {machine()}.\n\n{doc_table(figures)}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
