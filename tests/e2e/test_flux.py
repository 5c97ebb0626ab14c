"""Real Flux end to end: ``examples/flux`` as its README says to install it, on kustomize-controller v1.9.

The README's "Install" steps are read from the README and run: the image named in
``app/raygitops.yaml``, the README's render and commit commands, ``kubectl apply`` of
``clusters/ray-demo.yaml`` (its Namespace, GitRepository and Kustomizations), on a namespace
that does not exist yet. Changed: what a user changes (the image: the one the tests built; the
Git URL) and what the test machine needs (the namespace's and Kustomizations' names, unique;
the Kustomizations' source an ExternalArtifact, tests/e2e/flux.py: no source-controller here).
The hook Job's pod runs for real (tests/e2e/jobrunner.py: the raygitops image, no other, the
hook's own ServiceAccount token) and kube-controller-manager's Job controller decides the
Job's fate; every assertion is on Flux's own Kustomization status, the Job, or the
RayCluster's pods.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
from demoapp import DemoCluster
from flux import NAMESPACE, Flux, ready
from jobrunner import JobRunner
from stalestatus import StaleReady
from test_presync_hook import desired_hashes

pytestmark = pytest.mark.e2e
EXAMPLE = controlplane.REPO_ROOT / "examples" / "flux"
NEW = "rayproject/ray:2.42.0"


@pytest.fixture(scope="module")
def control_plane(control_plane_jobs: controlplane.ControlPlane) -> controlplane.ControlPlane:
    return control_plane_jobs


@pytest.fixture(scope="module")
def flux(control_plane: controlplane.ControlPlane, runner: JobRunner) -> Flux:
    try:
        controlplane.locate_binaries(("kustomize-controller",))
    except controlplane.Unavailable as exc:
        if os.environ.get("RAYGITOPS_REQUIRE_E2E") == "1":
            pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: {exc}", pytrace=False)
        pytest.skip(str(exc))
    f = Flux(control_plane).start()
    yield f
    f.stop()


README_IMAGE = "registry.example.com/team/raygitops:0.1.0"


def readme_install() -> tuple[dict, list[str], list[str]]:
    """examples/flux/README.md's "Install": step 1's hook settings, step 2's and step 3's
    commands (each line of their shell blocks)."""
    section = (EXAMPLE / "README.md").read_text().split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(yaml|sh)\n(.*?)```", section, re.S)
    assert [kind for kind, _ in blocks] == ["yaml", "sh", "sh"], blocks

    def lines(text: str) -> list[str]:
        return [line.split("#")[0].strip() for line in textwrap.dedent(text).splitlines() if line.strip()]

    return yaml.safe_load(textwrap.dedent(blocks[0][1])), lines(blocks[1][1]), lines(blocks[2][1])


class FluxApp(DemoCluster):
    """The example app in a repository, installed by the README's steps into one namespace:
    edit it, render it, publish a revision."""

    def __init__(self, flux: Flux, runner: JobRunner, namespace: str, tmp: Path):
        super().__init__(flux.plane, runner, namespace)
        self.flux, self.tmp = flux, tmp
        self.tree = tmp / "repo"  # what Git holds: a checkout with examples/flux/app
        self.app = self.tree / "examples" / "flux" / "app"
        shutil.copytree(EXAMPLE / "app", self.app)
        self.hook, self.render_commands, self.apply_commands = readme_install()
        shipped = yaml.safe_load((self.app / "raygitops.yaml").read_text())
        assert shipped["hook"]["image"] == self.hook["hook"]["image"] == README_IMAGE  # step 1 as the README shows it
        self.revisions = 0
        self.presync, self.main = f"{namespace}-presync", namespace

    def _config(self, **hook: Any) -> None:
        """raygitops.yaml with the user's image (step 1) and the test's namespace."""
        config = yaml.safe_load((EXAMPLE / "app" / "raygitops.yaml").read_text())
        config["namespace"] = self.ns
        config["hook"].update(image=self.runner.image, runningJobs=controlplane.KWOK_RUNNING_JOBS, **hook)
        (self.app / "raygitops.yaml").write_text(yaml.safe_dump(config))

    def write(self, image: str = "rayproject/ray:2.41.0", node_selector: dict[str, str] | None = None,
              timeout_seconds: int = 180) -> None:
        self._config(timeoutSeconds=timeout_seconds, drainGraceSeconds=5)
        cluster = yaml.safe_load((EXAMPLE / "app" / "raycluster.yaml").read_text())
        for group in [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]:
            pod = group["template"]["spec"]
            pod["containers"][0]["image"] = image
            for c in pod["containers"]:  # small pods: many tests share the fake nodes
                c["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
        if node_selector:
            cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = node_selector
            # a pool a node autoscaler may make: the preflight cannot tell, this cluster's policy goes on
            cluster["metadata"].setdefault("annotations", {})["raygitops.dev/preflight-unknown"] = "proceed"
        (self.app / "raycluster.yaml").write_text(yaml.safe_dump(cluster))

    def commit(self, **kw: Any) -> str:
        """Edit, then the README's step 2 (render, commit and push); the revision."""
        self.write(**kw)
        return self._publish()

    def _publish(self) -> str:
        revision = ""
        for command in self.render_commands:
            argv = shlex.split(command)
            if argv[:2] == ["raygitops", "render"]:
                res = subprocess.run([sys.executable, "-m", "raygitops", *argv[1:]], cwd=self.tree,
                                     capture_output=True, text=True)
                assert res.returncode == 0 and res.stderr == "", res.stderr
            else:  # git add + commit + push: the revision Flux's source gets
                assert argv[:2] == ["git", "add"] and "git push" in command, command
                self.revisions += 1
                revision = self.flux.publish(self.ns, self.tree, f"main@sha1:{self.revisions:040x}")
        assert revision, self.render_commands
        return revision

    def kustomizations(self) -> list[dict[str, Any]]:
        """clusters/ray-demo.yaml as step 3 applies it: the Namespace, the GitRepository
        (the user's URL; no source-controller here) and the Kustomizations, their source
        swapped for this app's artifact."""
        (command,) = self.apply_commands
        assert command == "kubectl apply -f examples/flux/clusters/ray-demo.yaml", command
        shipped_namespace = yaml.safe_load((EXAMPLE / "app" / "raygitops.yaml").read_text())["namespace"]
        names = {"ray-demo-presync": self.presync, "ray-demo": self.main}
        out = []
        for doc in yaml.safe_load_all((EXAMPLE / "clusters" / "ray-demo.yaml").read_text()):
            if doc["kind"] == "Namespace":
                assert doc["metadata"]["name"] == shipped_namespace
                doc["metadata"]["name"] = self.ns
            elif doc["kind"] == "GitRepository":
                doc["metadata"]["name"] = f"{self.ns}-source"
                doc["spec"]["url"] = f"{self.flux.url}/{self.ns}.git"  # the user's repository (inert here)
            else:
                doc["metadata"]["name"] = names[doc["metadata"]["name"]]
                doc["spec"]["sourceRef"] = {"kind": "ExternalArtifact", "name": self.ns}
                for dep in doc["spec"].get("dependsOn", []):
                    dep["name"] = names[dep["name"]]
            out.append(doc)
        assert [d["kind"] for d in out] == ["Namespace", "GitRepository", "Kustomization", "Kustomization"]
        return out

    def deploy(self) -> None:
        self.plane.apply(self.kustomizations())

    def applied(self, name: str, revision: str, timeout: float = 240) -> dict[str, Any]:
        return self.flux.wait(name, lambda k: (k.get("status") or {}).get("lastAppliedRevision") == revision
                              and ready(k).get("status") == "True", timeout=timeout,
                              message=f"{name} Ready at {revision}")

    def failed(self, name: str, revision: str, timeout: float = 240) -> dict[str, Any]:
        return self.flux.wait(name, lambda k: ready(k).get("status") == "False"
                              and (k.get("status") or {}).get("lastAttemptedRevision") == revision
                              and ready(k).get("reason") != "Progressing", timeout=timeout,
                              message=f"{name} failed at {revision}")

    def jobs(self) -> list[dict[str, Any]]:
        return self.plane.kubectl_json("get", "jobs", "-n", self.ns)["items"]

    def start(self) -> str:
        """The README's "Install" on a namespace that does not exist: step 1 (the image), step
        2 (render, push), step 3 (apply ray-demo.yaml); the first reconcile goes green."""
        assert self.plane.get("namespace", self.ns) is None, "a fresh namespace"
        self._config()  # the app as shipped but for the image and the namespace
        revision = self._publish()
        self.deploy()
        self.applied(self.presync, revision)
        self.applied(self.main, revision)
        assert self.hook_runs() == [0] and "absent" in self.hook_report()["clusters"][0]["reason"], self.hook_report()
        (job,) = self.jobs()
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == self.runner.image
        self.running(desired_hashes(self.cluster()))
        return revision


@pytest.fixture
def app(flux: Flux, runner: JobRunner, tmp_path: Path) -> FluxApp:
    """The example on a namespace that does not exist yet (clusters/ray-demo.yaml creates it)."""
    a = FluxApp(flux, runner, controlplane.unique_name("e2e"), tmp_path)
    yield a
    for name in (a.presync, a.main):  # before the namespace goes: nothing left to reconcile
        a.plane.kubectl("delete", "kustomizations.kustomize.toolkit.fluxcd.io", name, "-n", NAMESPACE,
                        "--ignore-not-found", "--wait=false", check=False)
    a.plane.delete_namespace(a.ns, wait=False)


def test_image_change_recreates_before_flux_applies_the_raycluster(app: FluxApp):
    first = app.start()
    assert app.hook_runs() == [0]
    old = desired_hashes(app.cluster())
    t0 = time.monotonic()
    revision = app.commit(image=NEW)
    main = app.applied(app.main, revision)
    seconds = time.monotonic() - t0
    new = desired_hashes(app.cluster())
    assert new.isdisjoint(old) and revision != first
    pods = app.running(new)
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {NEW}
    assert app.hook_runs() == [0, 0] and app.hook_report()["summary"]["recreated"] == 1, app.hook_report()
    # prune: only the Job of this plan is left; it completed before ray-demo applied the revision
    (job,) = app.jobs()
    assert job["status"].get("succeeded") == 1, job["status"]
    assert job["status"]["completionTime"] <= ready(main)["lastTransitionTime"], (job["status"], ready(main))
    print(f"\nFlux: image change published -> ray-demo Ready with the pods recreated: {seconds:.1f} s")


def test_a_failed_recreate_blocks_flux_until_a_fixing_commit(app: FluxApp):
    """Issue #21 on the real Flux: workers pinned to a node pool that does not exist, with
    status.state forced to ``ready`` all along: the hook fails once (backoffLimit 0), the
    presync Kustomization fails, ray-demo keeps the last good revision, a reconcile does not
    turn it green; the fixing commit recreates and both go Ready."""
    good = app.start()
    t0 = time.monotonic()
    with StaleReady(app.plane, app.ns) as stale:
        bad = app.commit(image=NEW, node_selector={"pool": "does-not-exist"}, timeout_seconds=40)
        presync = app.failed(app.presync, bad)
        seconds = time.monotonic() - t0
        assert stale.writes > 10
    message = ready(presync)["message"]
    print(f"\nFlux: failing commit published -> presync Kustomization Ready=False: {seconds:.1f} s\n"
          f"  Ready: {ready(presync)['reason']}: {message}")
    (failed_job,) = [j for j in app.jobs() if j["status"].get("failed")]
    assert failed_job["metadata"]["name"] in message, message
    reason = failed_job["metadata"]["annotations"]["raygitops.dev/failure"]  # the hook's own words
    assert f"{app.ns}/demo:" in reason and "ready" in reason, reason
    print(f"  Job annotation raygitops.dev/failure: {reason}")
    assert app.hook_runs() == [0, 1], app.hook_runs()  # one pod: no retry may turn it green
    main = app.flux.kustomization(app.main)
    assert main["status"]["lastAppliedRevision"] == good  # ray-demo did not apply the bad revision
    live = app.cluster()
    assert not live["spec"].get("suspend") and live["metadata"]["annotations"][
        "raygitops.dev/last-recreate-outcome"] == "Failed"
    # Flux's Ready message names the failed Job only (its Job status reader has no room for
    # more); `raygitops status` on the same app says what failed
    res = subprocess.run([sys.executable, "-m", "raygitops", "status", str(app.app), "--kubeconfig",
                          app.plane.kubeconfig, "--output", "json"], capture_output=True, text=True, timeout=60)
    (demo,) = json.loads(res.stdout)["clusters"]
    assert res.returncode == 3 and demo["state"] == "failed", (res.stderr, demo)

    # a rerun of the same revision (flux reconcile) stays failed: the Job is the same failed Job
    app.flux.reconcile(app.presync)
    time.sleep(10)
    presync = app.failed(app.presync, bad, timeout=60)
    assert app.hook_runs() == [0, 1] and app.flux.kustomization(app.main)["status"]["lastAppliedRevision"] == good

    # the fixing commit: a new plan, a new Job; recreated, then ray-demo applies
    t0 = time.monotonic()
    fixed = app.commit(image=NEW)
    app.applied(app.presync, fixed)
    app.applied(app.main, fixed)
    print(f"Flux: fixing commit published -> both Kustomizations Ready: {time.monotonic() - t0:.1f} s")
    app.running(desired_hashes(app.cluster()))
    assert app.hook_runs() == [0, 1, 0] and app.hook_report()["summary"]["recreated"] == 1, app.hook_report()
    assert app.cluster()["metadata"]["annotations"]["raygitops.dev/last-recreate-outcome"] == "Completed"
