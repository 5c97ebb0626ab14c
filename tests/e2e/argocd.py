"""A real Argo CD (v3.6, built by tests/e2e/build.sh) on the e2e control plane.

Started the way the Argo CD manifests run it, minus Kubernetes running the pods: ``redis-server``
(the Debian package) on a loopback port; the Application, ApplicationSet and AppProject CRDs
from Argo CD's module; namespace ``argocd`` with ``argocd-cm`` and ``argocd-secret`` and the
``default`` project; then the four processes of ``bin/argocd``:

- the raygitops sidecar, exactly as the README installs it: its overlay (the ``argocd/``
  Component over Argo CD's ``install.yaml`` of the tested version, the test's image under
  ``images:``) is built with kubectl's kustomize, and the ``raygitops`` container of the
  patched ``argocd-repo-server`` runs with podman as a kubelet would run it: in the raygitops
  image, its command ``/var/run/argocd/argocd-cmp-server`` (Argo CD's binary, what the
  ``copyutil`` init container copies into the ``var-files`` volume), its env (the
  ``RAYGITOPS_HOOK_IMAGE`` kustomize set), user, read-only root and dropped capabilities, the
  plugin ConfigMap the overlay generated mounted at its subPath, the shared ``plugins``
  socket directory, an empty ``/tmp``, and no network; ``argocd-cm`` is the overlay's too
  (the health checks);
- ``argocd-repo-server``, talking to the sidecar over that socket directory
  (``ARGOCD_PLUGINSOCKFILEPATH``, the ``plugins`` emptyDir in a cluster);
- ``argocd-application-controller``, managing the control plane it runs on as the
  in-cluster destination (``ARGOCD_FAKE_IN_CLUSTER`` + the admin kubeconfig);
- ``argocd-applicationset-controller``, making the Applications of the ApplicationSets in
  ``argocd`` (the same kubeconfig and namespace), with no metrics or health-probe port, its
  webhook server's address a free loopback port (it starts none here: it needs
  ``server.secretkey`` in ``argocd-secret``, and logs that it is missing), and the SCM and
  pull-request generators off (they would call GitHub & co.).

Logs are ``argocd-*.log`` and ``redis.log`` beside the control plane's. Git repositories are
local (``file://``): :class:`GitRepo` writes and commits the app a test syncs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

import imagerun
from controlplane import REPO_ROOT, Component, ControlPlane, free_port, wait_for

sys.path.insert(0, str(REPO_ROOT / "tests" / "unit"))
import ship_support  # noqa: E402

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
    """Argo CD's redis, cmp-server, repo-server, application-controller and
    applicationset-controller on ``plane``."""

    NAMESPACE = "argocd"

    def __init__(self, plane: ControlPlane, image: str):
        self.plane = plane
        self.image = image  # the raygitops image: the sidecar's (and, through it, the hooks')
        self.share = plane.bin_dir.parent / "share" / "argocd"
        self.workdir = plane.workdir / "argocd"
        self.components: dict[str, Component] = {}
        self.sidecar_name = f"raygitops-e2e-cmp-{os.getpid()}-{free_port()}"
        self.installed: list[dict[str, Any]] = []  # what the README's overlay makes

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
        # `podman run` stopped: its container too (a killed client would leave it running)
        imagerun.podman("rm", "--force", "--time=5", self.sidecar_name, timeout=60)

    def logs(self, tail: int = 40) -> str:
        return "\n".join(f"--- {name} ---\n{c.tail(tail)}" for name, c in self.components.items())

    def readme_install(self) -> list[dict[str, Any]]:
        """What the README's install overlay makes (kubectl's kustomize, as `kubectl apply -k`
        runs it), with the test's image under `images:` and Argo CD's install.yaml from its
        module (the version the README names; no GitHub here)."""
        module = ship_support.argocd_module_dir()
        assert module is not None, f"{ship_support.ARGOCD_MODULE}@{ship_support.ARGOCD_VERSION} not in GOMODCACHE"
        work = Path(tempfile.mkdtemp(prefix="readme-install-", dir=self.plane.workdir))
        overlay, kustomization = ship_support.readme_overlay(work, module / "manifests" / "install.yaml")
        name, _, tag = self.image.rpartition(":")
        (image,) = kustomization["images"]
        text = (overlay / "kustomization.yaml").read_text()
        (overlay / "kustomization.yaml").write_text(
            text.replace(f"newName: {image['newName']}", f"newName: {name}").replace(f"newTag: {image['newTag']}",
                                                                                    f"newTag: {tag}"))
        built = self.plane.kubectl("kustomize", str(overlay), timeout=120).stdout
        return [d for d in yaml.safe_load_all(built) if d]

    def _installed(self, kind: str, name: str) -> dict[str, Any]:
        (found,) = [d for d in self.installed if d["kind"] == kind and d["metadata"]["name"] == name]
        return found

    def sidecar(self) -> dict[str, Any]:
        """The `raygitops` container of the patched argocd-repo-server, and the Deployment's volumes."""
        spec = self._installed("Deployment", "argocd-repo-server")["spec"]["template"]["spec"]
        (container,) = [c for c in spec["containers"] if c["name"] == "raygitops"]
        return {"container": container, "volumes": {v["name"]: v for v in spec["volumes"]}}

    def _install(self) -> None:
        plane = self.plane
        self.installed = self.readme_install()
        kinds = ("application", "applicationset", "appproject")
        plane.kubectl("create", *(f for kind in kinds for f in ("-f", str(self.share / f"{kind}-crd.yaml"))))
        plane.wait_for(lambda: all(plane.kubectl("get", f"{kind}s.argoproj.io", "-A", check=False).returncode == 0
                                   for kind in kinds), timeout=60, message="Argo CD CRDs served")
        plane.create_namespace(self.NAMESPACE)
        part_of = {"app.kubernetes.io/part-of": "argocd"}
        argocd_cm = self._installed("ConfigMap", "argocd-cm")
        plane.apply([
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "argocd-cm", "namespace": self.NAMESPACE, "labels": part_of},
             "data": argocd_cm["data"]},  # Argo CD's own settings with the health checks patched in
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

    def _sidecar_argv(self, sockets: Path) -> list[str]:
        """`podman run` of the sidecar container as a kubelet would run it (module docstring)."""
        found = self.sidecar()
        container, volumes = found["container"], found["volumes"]
        sc = container.get("securityContext") or {}
        argv = ["run", "--rm", f"--name={self.sidecar_name}", "--network=none", "--security-opt=no-new-privileges",
                f"--user={sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}",
                *(f"--cap-drop={cap}" for cap in (sc.get("capabilities") or {}).get("drop", [])),
                *(["--read-only"] if sc.get("readOnlyRootFilesystem") else []),
                *(f"--env={e['name']}={e['value']}" for e in container.get("env", []))]
        (command,) = container["command"]
        for mount in container["volumeMounts"]:
            volume = volumes[mount["name"]]
            if mount["name"] == "var-files":  # copyutil's emptyDir: Argo CD's binary where the command names it
                assert "emptyDir" in volume and Path(command).parent == Path(mount["mountPath"])
                argv.append(f"--volume={self.plane.bin_dir / 'argocd'}:{command}:ro")
            elif mount["name"] == "plugins":  # the socket directory shared with the repo-server
                assert "emptyDir" in volume
                argv.append(f"--volume={sockets}:{mount['mountPath']}")
            elif "configMap" in volume:  # the plugin ConfigMap the overlay generated, at its subPath
                config_map = self._installed("ConfigMap", volume["configMap"]["name"])
                path = self.workdir / "cmp-config" / mount["subPath"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(config_map["data"][mount["subPath"]])
                path.chmod(0o644)
                argv.append(f"--volume={path}:{mount['mountPath']}:ro")
            else:  # the sidecar's own /tmp
                assert "emptyDir" in volume, mount
                argv.append(f"--tmpfs={mount['mountPath']}:rw,mode=1777")
        return [*argv, f"--entrypoint={command}", self.image, *container.get("args", [])]

    def _start_processes(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = self.workdir / "home"
        sockets = self.workdir / "plugins"  # the emptyDir repo-server and the sidecar share
        for d in (home, sockets):
            d.mkdir(exist_ok=True)
        sockets.chmod(0o777)  # the sidecar's uid 999 creates its socket there
        argocd = str(self.plane.bin_dir / "argocd")
        base = {"HOME": str(home), "KUBECONFIG": self.plane.kubeconfig, "ARGOCD_FAKE_IN_CLUSTER": "true",
                "ARGOCD_PLUGINSOCKFILEPATH": str(sockets), "ARGOCD_GPG_ENABLED": "false",
                "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"}
        path = os.environ.get("PATH", "")
        self.base_env = dict(base, PATH=path)

        self.redis_port = free_port()
        redis = self._run("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                    "--save", "", "--appendonly", "no", "--protected-mode", "no"], dict(base, PATH=path))
        wait_for(lambda: _listening(self.redis_port, redis), timeout=30, message="redis-server listening")
        redis_addr = f"127.0.0.1:{self.redis_port}"

        cmp = self._run("argocd-cmp-server", ["podman", *self._sidecar_argv(sockets)], imagerun.podman_env())
        wait_for(lambda: cmp.check_alive() or (sockets / f"{PLUGIN_NAME}.sock").exists(), timeout=120,
                 message="the sidecar's cmp-server socket")

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

        self._run("argocd-applicationset-controller", [
            argocd, "argocd-applicationset-controller", f"--namespace={self.NAMESPACE}",
            f"--argocd-repo-server=127.0.0.1:{self.repo_port}", "--repo-server-plaintext",
            "--metrics-addr=0", "--probe-addr=0",  # "0": no listener (controller-runtime)
            f"--webhook-addr=127.0.0.1:{free_port()}",  # default :7000 on every interface
            "--enable-scm-providers=false", "--loglevel=info",
        ], dict(base, PATH=path))

    def sidecar_usage(self) -> tuple[int, float]:
        """The sidecar container's memory in bytes now and the CPU seconds it used so far (podman stats)."""
        out = imagerun.podman("stats", "--no-stream", "--no-reset", "--format", "json", self.sidecar_name,
                              timeout=30).stdout
        (stats,) = json.loads(out)
        return _bytes(stats["mem_usage"].split("/")[0]), _seconds(stats["cpu_time"])

    def check_alive(self) -> None:
        for component in self.components.values():
            component.check_alive()

    # --- Applications

    def application(self, name: str) -> dict[str, Any] | None:
        return self.plane.get("applications.argoproj.io", name, self.NAMESPACE)

    def apply_application(self, app: dict[str, Any]) -> None:
        app.setdefault("metadata", {})["namespace"] = self.NAMESPACE
        self.plane.apply(app)

    def apply_applicationset(self, appset: dict[str, Any]) -> dict[str, Any]:
        """Apply an ApplicationSet (the applicationset-controller makes its Applications); the live one."""
        appset.setdefault("metadata", {})["namespace"] = self.NAMESPACE
        self.plane.apply(appset)
        live = self.plane.get("applicationsets.argoproj.io", appset["metadata"]["name"], self.NAMESPACE)
        assert live is not None, appset["metadata"]["name"]
        return live

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


def _bytes(text: str) -> int:
    """podman's ``45.2MB`` (``kB``, ``MB``, ``GB``: powers of 1000; ``B``)."""
    text = text.strip()
    number = text.rstrip("kKMGTiB")
    unit = text[len(number):].replace("i", "").upper()
    return int(float(number) * {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}[unit])


_DURATION = re.compile(r"([0-9.]+)(h|m|s|ms|us|µs|ns)")


def _seconds(text: str) -> float:
    """A Go duration (``1m2.5s``, ``50.6ms``) in seconds."""
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    return sum(float(n) * unit[u] for n, u in _DURATION.findall(text))


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
