"""A real Argo CD (v3.6, built by tests/e2e/build.sh) on the e2e control plane.

Started the way the Argo CD manifests run it, minus the containers: ``redis-server`` (the
Debian package) on a loopback port; the Application and AppProject CRDs from Argo CD's
module; namespace ``argocd`` with ``argocd-cm`` holding the RayCluster health check that
ships in ``argocd/argocd-cm-health.yaml``, ``argocd-secret`` and the ``default`` project;
then the three processes of ``bin/argocd``:

- ``argocd-cmp-server`` loading ``argocd/plugin.yaml`` (the file the sidecar mounts),
  with the test's ``raygitops`` first on PATH (the sidecar's image in a cluster);
- ``argocd-repo-server``, talking to the cmp-server over its socket directory
  (``ARGOCD_PLUGINSOCKFILEPATH``, the ``plugins`` emptyDir in a cluster);
- ``argocd-application-controller``, managing the control plane it runs on as the
  in-cluster destination (``ARGOCD_FAKE_IN_CLUSTER`` + the admin kubeconfig).

Logs are ``argocd-*.log`` and ``redis.log`` beside the control plane's. Git repositories are
local (``file://``): :class:`GitRepo` writes and commits the app a test syncs.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import yaml

from controlplane import REPO_ROOT, Component, ControlPlane, free_port, wait_for

ARGOCD_DIR = REPO_ROOT / "argocd"
PLUGIN_NAME = "raygitops-v1"  # <metadata.name>-<spec.version> of argocd/plugin.yaml
IN_CLUSTER = "https://kubernetes.default.svc"


class GitRepo:
    """A local Git repository an Application reads from (``url`` is ``file://``)."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, GIT_AUTHOR_NAME="e2e", GIT_AUTHOR_EMAIL="e2e@example.com",
                        GIT_COMMITTER_NAME="e2e", GIT_COMMITTER_EMAIL="e2e@example.com",
                        GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
        self.git("init", "-q", "-b", "main")

    @property
    def url(self) -> str:
        return f"file://{self.path}"

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.path, env=self.env, check=True, capture_output=True,
                              text=True).stdout.strip()

    def commit(self, files: dict[str, str], message: str) -> str:
        """Write ``files`` (path relative to the repo -> text), commit them; the new SHA."""
        for rel, text in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


class ArgoCD:
    """Argo CD's redis, cmp-server, repo-server and application-controller on ``plane``."""

    NAMESPACE = "argocd"

    def __init__(self, plane: ControlPlane, raygitops_bin: Path):
        self.plane = plane
        self.raygitops_bin = raygitops_bin
        self.share = plane.bin_dir.parent / "share" / "argocd"
        self.workdir = plane.workdir / "argocd"
        self.components: dict[str, Component] = {}

    # --- lifecycle

    def start(self) -> "ArgoCD":
        try:
            self._install()
            self._start_processes()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for component in reversed(list(self.components.values())):
            component.stop()

    def logs(self, tail: int = 40) -> str:
        return "\n".join(f"--- {name} ---\n{c.tail(tail)}" for name, c in self.components.items())

    def _install(self) -> None:
        plane = self.plane
        crds = [str(self.share / f"{kind}-crd.yaml") for kind in ("application", "appproject")]
        plane.kubectl("create", "-f", crds[0], "-f", crds[1])
        plane.wait_for(lambda: plane.kubectl("get", "applications.argoproj.io", "-A", check=False).returncode == 0,
                       timeout=60, message="Argo CD CRDs served")
        plane.create_namespace(self.NAMESPACE)
        part_of = {"app.kubernetes.io/part-of": "argocd"}
        health = yaml.safe_load((ARGOCD_DIR / "argocd-cm-health.yaml").read_text())["data"]
        plane.apply([
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "argocd-cm", "namespace": self.NAMESPACE, "labels": part_of},
             "data": health},
            {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "argocd-secret", "namespace": self.NAMESPACE, "labels": part_of}},
            {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
             "metadata": {"name": "default", "namespace": self.NAMESPACE},
             "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
                      "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}},
        ])

    def _run(self, name: str, argv: list[str], env: dict[str, str]) -> Component:
        # registered with the control plane too: its logs in failure reports, stopped before it
        component = self.components[name] = self.plane.components[name] = Component(name, argv, self.plane.log_dir, env)
        component.start()
        return component

    def _start_processes(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = self.workdir / "home"
        sockets = self.workdir / "plugins"  # the emptyDir repo-server and the sidecar share
        config = self.workdir / "cmp-config"  # the sidecar's /home/argocd/cmp-server/config
        for d in (home, sockets, config):
            d.mkdir(exist_ok=True)
        shutil.copyfile(ARGOCD_DIR / "plugin.yaml", config / "plugin.yaml")
        argocd = str(self.plane.bin_dir / "argocd")
        base = {"HOME": str(home), "KUBECONFIG": self.plane.kubeconfig, "ARGOCD_FAKE_IN_CLUSTER": "true",
                "ARGOCD_PLUGINSOCKFILEPATH": str(sockets), "ARGOCD_GPG_ENABLED": "false",
                "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"}
        path = os.environ.get("PATH", "")

        self.redis_port = free_port()
        redis = self._run("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                    "--save", "", "--appendonly", "no", "--protected-mode", "no"], dict(base, PATH=path))
        wait_for(lambda: _listening(self.redis_port, redis), timeout=30, message="redis-server listening")
        redis_addr = f"127.0.0.1:{self.redis_port}"

        cmp = self._run("argocd-cmp-server", [argocd, "argocd-cmp-server", f"--config-dir-path={config}",
                                              "--loglevel=info"],
                        dict(base, PATH=f"{self.raygitops_bin}{os.pathsep}{path}"))
        wait_for(lambda: cmp.check_alive() or (sockets / f"{PLUGIN_NAME}.sock").exists(), timeout=60,
                 message="cmp-server socket")

        self.repo_port = free_port()
        repo = self._run("argocd-repo-server", [
            argocd, "argocd-repo-server", "--disable-tls", "--client-ca-path=", f"--port={self.repo_port}",
            f"--metrics-port={free_port()}", f"--redis={redis_addr}", "--loglevel=info",
        ], dict(base, PATH=f"{self.share / 'bin'}{os.pathsep}{path}"))
        wait_for(lambda: _listening(self.repo_port, repo), timeout=60, message="repo-server listening")

        self._run("argocd-application-controller", [
            argocd, "argocd-application-controller", f"--repo-server=127.0.0.1:{self.repo_port}",
            "--repo-server-plaintext", f"--redis={redis_addr}", f"--metrics-port={free_port()}",
            f"--namespace={self.NAMESPACE}", "--status-processors=4", "--operation-processors=2",
            "--persist-resource-health",  # each resource's health (and message) in the Application's status
            "--loglevel=info",
        ], dict(base, PATH=path))

    def check_alive(self) -> None:
        for component in self.components.values():
            component.check_alive()

    # --- Applications

    def application(self, name: str) -> dict[str, Any] | None:
        return self.plane.get("applications.argoproj.io", name, self.NAMESPACE)

    def apply_application(self, app: dict[str, Any]) -> None:
        app.setdefault("metadata", {})["namespace"] = self.NAMESPACE
        self.plane.apply(app)

    def refresh(self, name: str, hard: bool = False) -> None:
        """What the UI's Refresh does: Argo CD compares with Git again (a new commit is seen)."""
        self.plane.kubectl("annotate", "--overwrite", "-n", self.NAMESPACE, "applications.argoproj.io", name,
                           f"argocd.argoproj.io/refresh={'hard' if hard else 'normal'}")

    def sync(self, name: str, revision: str = "") -> None:
        """What `argocd app sync` does: set the Application's operation."""
        operation = {"initiatedBy": {"username": "e2e"},
                     "sync": {"revision": revision, "syncStrategy": {"hook": {}}}}
        self.plane.kubectl("patch", "-n", self.NAMESPACE, "applications.argoproj.io", name, "--type=merge",
                           "-p", yaml.safe_dump({"operation": operation}))

    def wait(self, name: str, predicate, timeout: float = 180, message: str = "") -> dict[str, Any]:
        """The Application once ``predicate(app)`` holds; a component exiting fails at once."""
        def check() -> dict[str, Any] | None:
            self.check_alive()
            app = self.application(name)
            return app if app and predicate(app) else None
        return wait_for(check, timeout=timeout, interval=1, message=message or f"Application {name}")


def _listening(port: int, component: Component) -> bool:
    component.check_alive()
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def status(app: dict[str, Any]) -> tuple[str, str, str]:
    """(sync status, health status, operation phase) of an Application."""
    st = app.get("status", {})
    return (st.get("sync", {}).get("status", ""), st.get("health", {}).get("status", ""),
            st.get("operationState", {}).get("phase", ""))
