"""A real Ray head (Ray from requirements/ray.txt, tests/venvs.sh venv_ray) that the control
plane's path to a RayCluster's head pod reaches, for the running-jobs tests.

kwok's pods run nothing; their IPs (10.244.0.0/16) are no machine's, and the control plane
routes that range to nowhere (controlplane.guard_pod_network). The head here runs in a network
namespace of its own: a veth pair joins it to this machine, and :meth:`RayHead.serve` gives
the namespace's end a head pod's IP (/32) with a route to it on this side (from a link-local
address of this side's end, the only address the namespace routes back to). The API server's
service proxy then dials that pod IP and reaches Ray's dashboard, bound to every address of
the namespace (``--dashboard-host=0.0.0.0``). Traffic stays on this machine, in the namespace
the test made; Ray's own ports (GCS, raylet, ...) never meet anyone else's.

One head per test module (Ray is heavy: about 1 GB of RSS across its processes, seconds of
CPU to start). It runs in the foreground (``ray start --block``), and is stopped by killing the
processes of its network namespace (``ip netns pids``): never ``ray stop``, which would stop
every Ray process of the machine. Jobs are submitted with the real ``ray job submit``; each
test's job runs until the test ends it (:meth:`RayHead.finish`).

Shared by the hook run as a process (test_running_jobs.py) and through the real Argo CD
(test_argocd.py): the cluster whose head declares the dashboard (:func:`with_dashboard`), its
head pod served (:meth:`RayHead.serve_head`) or made not Ready (:func:`make_not_ready`), and
the hook's JSON log read back (:func:`hook_lines`, :func:`epoch`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from controlplane import REPO_ROOT, ControlPlane, wait_for

DASHBOARD_PORT = 8265
POLICY = "raygitops.dev/running-jobs"
WAIT_SECONDS = "raygitops.dev/running-jobs-wait-seconds"


class RayUnavailable(Exception):
    """No Ray venv, no root, no ``ip``: the reason is the message."""


def ray_venv() -> Path:
    """The venv tests/venvs.sh makes from requirements/ray.txt (made now when missing)."""
    res = subprocess.run(["bash", "-c", "source tests/venvs.sh && venv_ray"], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=900)
    if res.returncode != 0:
        raise RayUnavailable(f"tests/venvs.sh venv_ray failed: {res.stderr[-2000:]}")
    return Path(res.stdout.strip().splitlines()[-1])


class RayHead:
    def __init__(self, venv: Path, log_dir: Path):
        if os.geteuid() != 0 or not shutil.which("ip"):
            raise RayUnavailable("a Ray head in its own network namespace needs root and iproute2 (ip)")
        tag = uuid.uuid4().hex[:6]
        self.venv, self.log_dir = venv, log_dir
        self.netns, self.host_end, self.ns_end = f"rg-ray-{tag}", f"rgh{tag}", f"rgn{tag}"
        # this side's address on the veth (link-local, one per head): the API server's
        # connections to a served pod IP come from it, and the namespace routes only it back.
        # No default route in the namespace: Ray finds no address of its own there and keeps
        # to 127.0.0.1 (with one, it took a served pod IP for the node's and hung)
        self.host_ip = f"169.254.{int(tag[:2], 16)}.{int(tag[2:4], 16) or 1}"
        self.tmp = Path(f"/tmp/rgray-{tag}")  # short: Ray's unix sockets live under it
        self.served: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.launched_at = 0.0
        self.start_seconds: float | None = None  # from the launch until the dashboard answered

    # --- lifecycle

    def start(self, wait: bool = True) -> "RayHead":
        """Launch Ray; with ``wait``, also wait until it answers (else :meth:`ready` and
        :meth:`submit` do: a test can let Ray start while it makes its cluster)."""
        try:
            self._network()
            self._ray()
            if wait:
                self.ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

    def _network(self) -> None:
        self._ip("netns", "add", self.netns)
        self._ip("link", "add", self.host_end, "type", "veth", "peer", "name", self.ns_end, "netns", self.netns)
        self._ip("addr", "add", f"{self.host_ip}/32", "dev", self.host_end)
        self._ip("link", "set", self.host_end, "up")
        self._ip("-n", self.netns, "link", "set", "lo", "up")
        self._ip("-n", self.netns, "link", "set", self.ns_end, "up")
        self._ip("-n", self.netns, "route", "add", f"{self.host_ip}/32", "dev", self.ns_end)

    def _env(self) -> dict[str, str]:
        return dict(os.environ, PATH=f"{self.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                    RAY_USAGE_STATS_ENABLED="0", VIRTUAL_ENV=str(self.venv))

    def in_netns(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.netns, *argv], capture_output=True, text=True,
                              env=self._env(), timeout=timeout)

    def _ray(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / "ray-head.log", "ab")
        self.launched_at = time.monotonic()
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, str(self.venv / "bin" / "ray"), "start", "--head", "--block",
             "--node-ip-address=127.0.0.1", "--port=6379", "--dashboard-host=0.0.0.0",
             f"--dashboard-port={DASHBOARD_PORT}", "--num-cpus=1", "--disable-usage-stats",
             f"--temp-dir={self.tmp}", "--include-dashboard=true"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env(), start_new_session=True)
        log.close()

    def ready(self) -> "RayHead":
        """Wait (once) until Ray's dashboard answers."""
        if self.start_seconds is not None:
            return self

        def answers() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited {self.proc.returncode}: see {self.log_dir / 'ray-head.log'}")
            return self._get("/api/version") is not None

        wait_for(answers, timeout=180, interval=1, message="Ray's dashboard (GET /api/version)")
        self.start_seconds = round(time.monotonic() - self.launched_at, 1)
        return self

    def stop(self) -> None:
        """Kill the processes of the head's network namespace (and only those), then remove
        the namespace, its veth pair and the routes to the addresses it served."""
        pids = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        for ip in self.served:
            subprocess.run(["ip", "route", "del", f"{ip}/32", "dev", self.host_end], capture_output=True)
        subprocess.run(["ip", "link", "del", self.host_end], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- what the tests do

    def serve(self, ip: str) -> None:
        """Answer on a head pod's IP: the API server's proxy to that pod reaches this head."""
        if ip in self.served:
            return
        self._ip("-n", self.netns, "addr", "add", f"{ip}/32", "dev", self.ns_end)
        self._ip("route", "replace", f"{ip}/32", "dev", self.host_end, "src", self.host_ip)
        self.served.append(ip)

    def serve_head(self, plane: ControlPlane, namespace: str, cluster: str = "demo") -> dict[str, Any]:
        """Serve the cluster's (one, current) head pod and wait until the API server's service
        proxy reaches this head through KubeRay's head Service (a new head pod has a new IP
        and the Service's endpoints follow it); the head pod."""
        pod = head_pod(plane, namespace, cluster)
        self.serve(pod["status"]["podIP"])
        path = f"/api/v1/namespaces/{namespace}/services/{cluster}-head-svc:dashboard/proxy/api/version"
        plane.wait_for(lambda: plane.kubectl("get", "--raw", path, check=False).returncode == 0,
                       timeout=60, message="the head's dashboard through the service proxy")
        return pod

    def _get(self, path: str) -> object | None:
        code = ("import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
                f"'http://127.0.0.1:{DASHBOARD_PORT}{path}', timeout=5).read().decode())")
        res = self.in_netns(str(self.venv / "bin" / "python"), "-c", code, timeout=30)
        return json.loads(res.stdout) if res.returncode == 0 and res.stdout else None

    def submit(self) -> str:
        """A real ``ray job submit``: a job that runs until :meth:`finish`; its submission id,
        once Ray reports it RUNNING."""
        ident = f"raysubmit_e2e_{uuid.uuid4().hex[:8]}"
        marker = self.tmp / f"{ident}.done"
        self._submit(ident, f"import os, time; [time.sleep(0.2) for _ in iter(lambda: os.path.exists({str(marker)!r}), True)]")
        wait_for(lambda: self.status(ident) == "RUNNING", timeout=120, interval=0.5, message=f"job {ident} RUNNING")
        return ident

    def submit_task(self, resource: str, seconds: float) -> str:
        """A job whose one task needs ``resource`` (a :class:`RayWorker`'s) and sleeps
        ``seconds``, never retried: the job SUCCEEDS only if the task ran to its end on that
        node. Its submission id, once the task runs."""
        ident = f"raysubmit_e2e_{uuid.uuid4().hex[:8]}"
        started = self.tmp / f"{ident}.started"
        self._submit(ident, "\n".join([
            "import pathlib, time, ray",
            "ray.init()",
            f"@ray.remote(resources={{{resource!r}: 1}}, num_cpus=1, max_retries=0)",
            "def work():",
            f"    pathlib.Path({str(started)!r}).write_text('')",
            f"    time.sleep({seconds})",
            "    return 'done'",
            "print(ray.get(work.remote()))"]))
        wait_for(started.exists, timeout=120, interval=0.3, message=f"the task of job {ident} running")
        return ident

    def _submit(self, ident: str, code: str) -> None:
        self.ready()
        res = self.in_netns(str(self.venv / "bin" / "ray"), "job", "submit", "--address",
                            f"http://127.0.0.1:{DASHBOARD_PORT}", "--submission-id", ident, "--no-wait", "--",
                            "python", "-c", code)
        if res.returncode != 0:
            raise RuntimeError(f"ray job submit failed: {res.stdout}\n{res.stderr}")

    def status(self, ident: str) -> str | None:
        doc = self._get(f"/api/jobs/{ident}")
        return doc.get("status") if isinstance(doc, dict) else None

    def finish(self, ident: str, wait: bool = True) -> float:
        """End the job (its entrypoint returns); the time.time() Ray reports it SUCCEEDED."""
        (self.tmp / f"{ident}.done").write_text("")
        if wait:
            wait_for(lambda: self.status(ident) == "SUCCEEDED", timeout=60, interval=0.3,
                     message=f"job {ident} SUCCEEDED")
        return time.time()


class RayWorker:
    """A Ray worker node joined to a head (in the head's network namespace, on ports of its
    own) that stands for one worker pod: :meth:`follow` acts as the pod's kubelet would once
    the pod is deleted, SIGTERM to ``ray start --block`` (Ray's own drain: it marks its node
    draining and waits until the node is idle, ``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S``),
    SIGKILL once the DELETE's grace period is over, at once for grace 0."""

    def __init__(self, head: RayHead, resource: str):
        self.head, self.resource = head, resource
        self.tmp = Path(f"{head.tmp}w")
        self.proc: subprocess.Popen | None = None
        self.grace: int | None = None  # the DELETE's grace, once seen
        self.exited_after: float | None = None  # seconds from the signal to the process's end
        self._thread: threading.Thread | None = None

    def start(self) -> "RayWorker":
        self.head.ready()
        self.tmp.mkdir(parents=True, exist_ok=True)
        log = open(self.head.log_dir / "ray-worker.log", "ab")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.head.netns, str(self.head.venv / "bin" / "ray"), "start", "--block",
             "--address=127.0.0.1:6379", "--node-ip-address=127.0.0.1", "--num-cpus=1",
             f"--resources={json.dumps({self.resource: 1})}", "--disable-usage-stats", f"--temp-dir={self.tmp}",
             "--dashboard-agent-listen-port=52366", "--min-worker-port=20002", "--max-worker-port=29999"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.head._env(),
            start_new_session=True)
        log.close()

        def joined() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start (worker) exited {self.proc.returncode}: see ray-worker.log")
            nodes = self.head._get("/nodes?view=summary")
            return bool(nodes) and sum(1 for n in nodes["data"]["summary"] if n["raylet"]["state"] == "ALIVE") >= 2

        wait_for(joined, timeout=120, interval=1, message="the Ray worker node joined the head")
        return self

    def log(self) -> str:
        return (self.head.log_dir / "ray-worker.log").read_text(errors="replace")

    def follow(self, plane: ControlPlane, namespace: str, uid: str) -> None:
        """From now on, the pod ``uid``'s deletion ends this node as its kubelet would."""

        def run() -> None:
            pod: dict[str, Any] | None = None
            while pod is None:
                items = plane.kubectl_json("get", "pods", "-n", namespace)["items"]
                pod = next((p for p in items if p["metadata"]["uid"] == uid
                            and p["metadata"].get("deletionTimestamp")), None)
                if pod is None and not any(p["metadata"]["uid"] == uid for p in items):
                    self.grace = 0  # gone at once: a DELETE with grace 0, the containers killed
                    break
                time.sleep(0.2)
            if pod is not None:
                self.grace = pod["metadata"].get("deletionGracePeriodSeconds", 30)
            self.stop(self.grace)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self, grace: float) -> None:
        assert self.proc is not None
        started = time.monotonic()
        if grace > 0:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.exited_after = round(time.monotonic() - started, 1)

    def wait(self, timeout: float) -> None:
        """Until :meth:`follow`'s pod was deleted and the node ended."""
        assert self._thread is not None
        self._thread.join(timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)


def with_dashboard(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    """The cluster's head declares the dashboard port, so KubeRay's head Service has it."""
    obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"].append(
        {"containerPort": DASHBOARD_PORT, "name": "dashboard"})
    obj["metadata"]["annotations"].update(annotations)
    return obj


def head_pod(plane: ControlPlane, namespace: str, cluster: str = "demo") -> dict[str, Any]:
    """The cluster's head pod (not being deleted), once it has an IP."""
    def found() -> dict[str, Any] | None:
        heads = [p for p in plane.cluster_pods(namespace, cluster) if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
        return heads[0] if len(heads) == 1 and heads[0].get("status", {}).get("podIP") else None
    return plane.wait_for(found, timeout=60, message=f"the head pod of {cluster} with an IP")


def make_not_ready(plane: ControlPlane, pod: dict[str, Any]) -> None:
    """The pod's Ready condition False, as a failing readiness probe would make it (kwok set
    the pod Ready once, and leaves it now)."""
    plane.kubectl("patch", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"], "--subresource=status",
                  "--type=json", "-p", json.dumps([{"op": "replace", "path": "/status/conditions",
                                                    "value": [{"type": "Ready", "status": "False"}]}]))


def hook_lines(text: str) -> list[dict[str, Any]]:
    """The hook's JSON log lines (``--log-format json``) in ``text``: its stderr, or its pod's log."""
    return [line for line in (json.loads(raw) for raw in text.splitlines() if raw.startswith("{")) if "step" in line]


def epoch(ts: str) -> float:
    """A log line's ``ts`` as time.time()."""
    return datetime.strptime(ts.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def running(log_dir: Path, wait: bool = True):
    """A fixture's body: a started head (without ``wait``, one still starting), stopped
    afterwards. Without what it needs it skips, or fails with RAYGITOPS_REQUIRE_E2E=1 (CI)."""
    import pytest

    try:
        head = RayHead(ray_venv(), log_dir).start(wait)
    except RayUnavailable as exc:
        if os.environ.get("RAYGITOPS_REQUIRE_E2E") == "1":
            pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: {exc}", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield head
    finally:
        head.stop()
