"""A real Flux kustomize-controller (v1.9, built by tests/e2e/build.sh) on the e2e control plane.

Sources are ExternalArtifact objects (Flux's ``ExternalArtifact`` feature gate), so no
source-controller runs: :meth:`Flux.publish` packs a directory the way source-controller
packs a Git checkout (a ``.tar.gz`` with its SHA-256 digest), serves it from a loopback HTTP
server, and writes the artifact into the ExternalArtifact's status, as a source controller
would. kustomize-controller then fetches, verifies and applies it exactly as it applies a
GitRepository's artifact; everything after the fetch (kustomize build, patches, server-side
apply, prune, wait, dependsOn) is Flux's own code path. Logs: ``kustomize-controller.log``.
"""

from __future__ import annotations

import functools
import hashlib
import io
import tarfile
import threading
from datetime import datetime, timezone
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import yaml

from controlplane import Component, ControlPlane, free_port, wait_for

NAMESPACE = "flux-system"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # the controller's log says what it fetched
        pass


class Flux:
    """kustomize-controller watching every namespace, and the artifact server it fetches from."""

    def __init__(self, plane: ControlPlane):
        self.plane = plane
        self.share = plane.bin_dir.parent / "share" / "flux"
        self.artifacts = plane.workdir / "flux-artifacts"
        self.component: Component | None = None
        self._server: ThreadingHTTPServer | None = None
        self._published = 0

    def start(self) -> "Flux":
        try:
            self._install()
            self._serve()
            self._start_controller()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.component is not None:
            self.component.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _install(self) -> None:
        plane = self.plane
        crds = sorted(self.share.glob("*.yaml"))
        assert len(crds) >= 2, f"Flux CRDs missing in {self.share} (run tests/e2e/build.sh)"
        plane.kubectl("create", *[a for crd in crds for a in ("-f", str(crd))])
        plane.wait_for(lambda: all(plane.kubectl("get", kind, "-A", check=False).returncode == 0
                                   for kind in ("kustomizations.kustomize.toolkit.fluxcd.io",
                                                "externalartifacts.source.toolkit.fluxcd.io")),
                       timeout=60, message="Flux CRDs served")
        plane.create_namespace(NAMESPACE)

    def _serve(self) -> None:
        self.artifacts.mkdir(parents=True, exist_ok=True)
        handler = functools.partial(_QuietHandler, directory=str(self.artifacts))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _start_controller(self) -> None:
        env = {"KUBECONFIG": self.plane.kubeconfig, "RUNTIME_NAMESPACE": NAMESPACE}
        argv = [str(self.plane.bin_dir / "kustomize-controller"), "--watch-all-namespaces",
                f"--metrics-addr=127.0.0.1:{free_port()}", f"--health-addr=127.0.0.1:{free_port()}",
                "--feature-gates=ExternalArtifact=true", "--log-level=info",
                # a Kustomization waiting on its dependency is requeued at this interval
                # (default 30 s): shorter, so tests do not wait on it; said in the README
                "--requeue-dependency=5s"]
        # registered with the control plane too: its log in failure reports, stopped before it
        self.component = self.plane.components["kustomize-controller"] = Component(
            "kustomize-controller", argv, self.plane.log_dir, env)
        self.component.start()
        wait_for(lambda: self.component.check_alive() or "Starting workers" in self.component.output(),
                 timeout=60, message="kustomize-controller started")

    # --- sources

    @property
    def url(self) -> str:
        """The loopback HTTP server the artifacts are served from (a Git URL stands in it)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def publish(self, name: str, tree: Path, revision: str) -> str:
        """Pack ``tree`` as the artifact of ExternalArtifact ``name`` at ``revision`` (e.g.
        ``main@sha1:<sha>``); kustomize-controller picks it up at once (it watches them)."""
        self._published += 1
        data = _tarball(tree)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        filename = f"{name}-{self._published}.tar.gz"
        (self.artifacts / filename).write_bytes(data)
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.plane.apply({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
                          "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {}})
        status = {"status": {
            "artifact": {"path": filename, "url": f"{self.url}/{filename}", "revision": revision,
                         "digest": digest, "lastUpdateTime": now, "size": len(data)},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "observedGeneration": 1,
                            "message": f"stored artifact for revision '{revision}'", "lastTransitionTime": now}],
        }}
        self.plane.kubectl("patch", "externalartifact", name, "-n", NAMESPACE, "--subresource=status",
                           "--type=merge", "-p", yaml.safe_dump(status))
        return revision

    # --- Kustomizations

    def kustomization(self, name: str) -> dict[str, Any] | None:
        return self.plane.get("kustomizations.kustomize.toolkit.fluxcd.io", name, NAMESPACE)

    def wait(self, name: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 240,
             message: str = "") -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            self.component.check_alive()
            obj = self.kustomization(name)
            return obj if obj and predicate(obj) else None
        return wait_for(check, timeout=timeout, interval=1, message=message or f"Kustomization {name}")

    def reconcile(self, name: str) -> None:
        """What ``flux reconcile kustomization NAME`` does: ask for a reconcile now."""
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.plane.kubectl("annotate", "--overwrite", "-n", NAMESPACE, "kustomizations.kustomize.toolkit.fluxcd.io",
                           name, f"reconcile.fluxcd.io/requestedAt={now}")


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    """The Kustomization's Ready condition ({} when it has none yet)."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})


def _tarball(tree: Path) -> bytes:
    """A deterministic .tar.gz of ``tree`` (sorted, no owners, fixed times)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(tree.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(tree)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if path.is_file():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    return buf.getvalue()
