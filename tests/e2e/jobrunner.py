"""Run Job pods for real on a kwok control plane: the kubelet's part for the PreSync hook.

kwok fakes pods; its default stages even mark Job pods Complete without running anything,
so a hook "succeeds" having done nothing. A control plane started with
``run_job_pods=True`` leaves Job-owned pods Pending, and :class:`JobRunner` does what a
kubelet would do with each one, once:

1. asks the API server for a token of the pod's ServiceAccount, bound to the pod
   (TokenRequest), and lays out the projected files (token, ca.crt, namespace) — so the
   Role and RoleBinding the render emits are what the hook runs with, not admin rights;
2. mounts the pod's ConfigMap and Secret volumes as read-only directories of their keys;
3. reports the pod Running, runs its container in the raygitops image with podman
   (:mod:`imagerun`: the pod's user, read-only root, dropped capabilities, env, host
   network standing in for the Service IP), and on deletion of the pod (Job deleted,
   ``activeDeadlineSeconds``) stops it with the pod's grace period, as a kubelet does;
4. reports the exit code in the pod's status (phase Succeeded or Failed, the container's
   ``terminated`` state, the log tail as message under ``FallbackToLogsOnError``).

The Job controller then sets the Job's conditions and Argo CD decides from those. The node
holds one image, the one the tests built (no registry is reachable here): a pod naming any
other image (the unqualified default ``raygitops:0.1.0`` no registry serves, say) fails at
once with ``ErrImagePull`` in its message, where a kubelet would retry the pull until the
Job's deadline. Each pod's output is kept in ``<log_dir>/<namespace>_<pod>.log``.
"""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config

import imagerun

JOB_LABEL = "batch.kubernetes.io/job-name"
TOKEN_SECONDS = 3600
LOG_TAIL_BYTES = 2048  # what a kubelet keeps as the message of FallbackToLogsOnError


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class JobRunner:
    """Watches (polls) Job pods on one control plane and runs each one once, in its own thread."""

    def __init__(self, kubeconfig: str, server: str, ca_file: str, image: str, log_dir: Path):
        self.api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        self.server, self.ca_file, self.image = server, ca_file, image
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.runs: dict[str, int | None] = {}  # "ns/pod" -> exit code (None while running)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._poller = threading.Thread(target=self._poll, name="job-runner", daemon=True)

    def start(self) -> "JobRunner":
        self._poller.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in [self._poller, *self._threads]:
            thread.join(timeout=60)

    def exit_codes(self) -> dict[str, int | None]:
        with self._lock:
            return dict(self.runs)

    def runs_in(self, namespace: str) -> list[int | None]:
        """Exit codes of the Job pods of one namespace in the order they started (never by
        name: a pod's name carries a plan hash or a random suffix, which orders nothing)."""
        return [v for k, v in self.exit_codes().items() if k.startswith(f"{namespace}/")]

    def last_log(self, namespace: str) -> str:
        logs = sorted(self.log_dir.glob(f"{namespace}_*.log"), key=lambda p: p.stat().st_mtime)
        return logs[-1].read_text() if logs else ""

    def last_report(self, namespace: str) -> dict[str, Any]:
        """The PresyncReport the last hook run of the namespace printed (its stdout)."""
        return next(json.loads(line) for line in reversed(self.last_log(namespace).splitlines())
                    if '"PresyncReport"' in line)

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            try:
                pods = self.api.list_pod_for_all_namespaces(label_selector=JOB_LABEL, field_selector="status.phase=Pending")
            except Exception:  # the API server restarting must not kill the runner
                continue
            for pod in pods.items:
                key = f"{pod.metadata.namespace}/{pod.metadata.name}"
                if pod.spec.node_name and not pod.metadata.deletion_timestamp and key not in self.runs:
                    with self._lock:
                        self.runs[key] = None
                    thread = threading.Thread(target=self._run, args=(pod,), name=f"job-pod {key}", daemon=True)
                    self._threads.append(thread)
                    thread.start()

    # --- one pod

    def _run(self, pod: client.V1Pod) -> None:
        ns, name = pod.metadata.namespace, pod.metadata.name
        work = self.log_dir / f"{ns}_{name}"
        log = self.log_dir / f"{ns}_{name}.log"
        spec = client.ApiClient().sanitize_for_serialization(pod.spec)
        (container,) = pod.spec.containers
        if container.image != self.image:
            message = f"ErrImagePull: image {container.image} cannot be pulled (this node has only {self.image})"
            log.write_text(f"job runner: {message}\n")
            self._finish(pod, 128, message, started=_now())
            return
        try:
            argv = self._podman_argv(pod, spec, work)
        except Exception as exc:  # e.g. the ServiceAccount or a ConfigMap is missing
            log.write_text(f"job runner: cannot start the pod: {exc}\n")
            self._finish(pod, 128, f"cannot start: {exc}", started=_now())
            return
        started = _now()
        self._report_running(pod, started)
        with log.open("w") as out:
            proc = subprocess.Popen(["podman", *argv], stdout=out, stderr=subprocess.STDOUT,
                                    env=imagerun.podman_env())
            stopping = False
            while proc.poll() is None:
                if not stopping and self._deleted(pod):  # SIGTERM, SIGKILL after the grace period
                    stopping = True
                    grace = spec.get("terminationGracePeriodSeconds", 30)
                    subprocess.Popen(["podman", "stop", f"--time={grace}", self._container(pod)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=imagerun.podman_env())
                time.sleep(0.5)
        code = proc.returncode
        tail = log.read_bytes()[-LOG_TAIL_BYTES:].decode(errors="replace")
        self._finish(pod, code, tail, started=started)

    def _container(self, pod: client.V1Pod) -> str:
        return f"job-{pod.metadata.uid}"

    def _podman_argv(self, pod: client.V1Pod, spec: dict[str, Any], work: Path) -> list[str]:
        ns = pod.metadata.namespace
        token = self.api.create_namespaced_service_account_token(
            spec.get("serviceAccountName") or "default", ns,
            client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
                audiences=[], expiration_seconds=TOKEN_SECONDS,
                bound_object_ref=client.V1BoundObjectReference(kind="Pod", api_version="v1", name=pod.metadata.name,
                                                                uid=pod.metadata.uid)))).status.token
        config_maps = {v["configMap"]["name"]: self.api.read_namespaced_config_map(v["configMap"]["name"], ns).data or {}
                       for v in spec.get("volumes", []) if "configMap" in v}
        secrets = {v["secret"]["secretName"]: {k: base64.b64decode(b) for k, b in (
            self.api.read_namespaced_secret(v["secret"]["secretName"], ns).data or {}).items()}
            for v in spec.get("volumes", []) if "secret" in v}
        sa_dir = imagerun.write_service_account(work / "serviceaccount", token, self.ca_file, ns)
        argv = imagerun.pod_argv(spec, self.image, config_maps=config_maps, service_account_dir=sa_dir,
                                 server=self.server, work=work, secrets=secrets)
        return [argv[0], f"--name={self._container(pod)}", *argv[1:]]

    def _deleted(self, pod: client.V1Pod) -> bool:
        try:
            live = self.api.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
        except client.ApiException as exc:
            return exc.status == 404
        return live.metadata.uid != pod.metadata.uid or live.metadata.deletion_timestamp is not None

    def _patch_status(self, pod: client.V1Pod, status: dict[str, Any]) -> None:
        try:
            self.api.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {"status": status})
        except client.ApiException as exc:
            if exc.status != 404:  # a pod deleted meanwhile has no status to report
                raise

    def _report_running(self, pod: client.V1Pod, started: str) -> None:
        (container,) = pod.spec.containers
        self._patch_status(pod, {
            "phase": "Running", "startTime": started, "hostIP": "127.0.0.1",
            "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": started},
                           {"type": "Ready", "status": "True", "lastTransitionTime": started},
                           {"type": "ContainersReady", "status": "True", "lastTransitionTime": started}],
            "containerStatuses": [{"name": container.name, "image": container.image, "imageID": "", "ready": True,
                                   "restartCount": 0, "started": True,
                                   "state": {"running": {"startedAt": started}}}],
        })

    def _finish(self, pod: client.V1Pod, code: int, log_tail: str, *, started: str) -> None:
        (container,) = pod.spec.containers
        finished = _now()
        terminated: dict[str, Any] = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                      "startedAt": started, "finishedAt": finished}
        if code != 0 and container.termination_message_policy == "FallbackToLogsOnError":
            terminated["message"] = log_tail
        self._patch_status(pod, {
            "phase": "Succeeded" if code == 0 else "Failed",
            "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": finished},
                           {"type": "ContainersReady", "status": "False", "reason": "PodCompleted",
                            "lastTransitionTime": finished}],
            "containerStatuses": [{"name": container.name, "image": container.image, "imageID": "", "ready": False,
                                   "restartCount": 0, "started": False, "state": {"terminated": terminated}}],
        })
        with self._lock:
            self.runs[f"{pod.metadata.namespace}/{pod.metadata.name}"] = code
