"""Real Argo CD end to end: the CMP renders, the PreSync Job runs, the health Lua decides.

Argo CD v3.6 (application-controller, repo-server, cmp-server; tests/e2e/argocd.py) syncs
Applications built from the shipped ``argocd/application.yaml`` with the shipped
``argocd/plugin.yaml`` and health check, from a local Git repository, onto a control plane
whose Job pods are run for real (tests/e2e/jobrunner.py: the raygitops image, the hook's own
ServiceAccount token). Every assertion is on Argo CD's own Application status, on the Job
pods' exit codes, or on the RayCluster's pods.
"""

from __future__ import annotations

import base64
import concurrent.futures
import copy
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch

import controlplane
import rayhead
from argocd import IN_CLUSTER, ArgoCD, GitRepo, status
from jobrunner import JobRunner
from stalestatus import StaleReady
from raygitops.model.hooknames import hook_names
from test_presync_hook import HASH, LOCK, desired_hashes, raycluster

pytestmark = pytest.mark.e2e

HOOK = {"drainGraceSeconds": 5, "timeoutSeconds": 180, "maxParallel": 2, "waitReady": True,
        "runningJobs": controlplane.KWOK_RUNNING_JOBS}
SYNC_TIMEOUT = 240


@pytest.fixture(scope="module")
def control_plane(control_plane_jobs: controlplane.ControlPlane) -> controlplane.ControlPlane:
    return control_plane_jobs


@pytest.fixture(scope="module")
def argocd(control_plane: controlplane.ControlPlane, runner: JobRunner) -> ArgoCD:
    """Argo CD with the raygitops sidecar as the README installs it, in the image the tests
    built (which the hook Jobs it renders name: the runner runs no other)."""
    instance = ArgoCD(control_plane, image=runner.image).start()
    yield instance
    instance.stop()


def application(name: str, repo: GitRepo, namespace: str, *, automated: bool = False,
                parameters: list[dict[str, Any]] | None = None, path: str = "app") -> dict[str, Any]:
    """The shipped argocd/application.yaml pointed at ``repo`` (the app in ``path``)."""
    app = yaml.safe_load((controlplane.REPO_ROOT / "argocd" / "application.yaml").read_text())
    app["metadata"]["name"] = name
    source = app["spec"]["source"]
    source.update(repoURL=repo.url, targetRevision="HEAD", path=path)
    if parameters is not None:
        source["plugin"]["parameters"] = parameters
    else:
        source["plugin"].pop("parameters", None)  # Argo CD then sends ARGOCD_APP_PARAMETERS=null
    app["spec"]["destination"] = {"server": IN_CLUSTER, "namespace": namespace}
    policy = app["spec"]["syncPolicy"]
    policy.pop("retry")  # one attempt: a test counts hook runs
    if not automated:
        policy.pop("automated")
    return app


def app_files(cluster: dict[str, Any], hook: dict[str, Any] | None = None) -> dict[str, str]:
    cluster = copy.deepcopy(cluster)
    for key in ("labels", "annotations"):  # Argo CD shows an empty map the API server drops as OutOfSync
        if not cluster["metadata"].get(key):
            cluster["metadata"].pop(key, None)
    return {"app/raygitops.yaml": yaml.safe_dump({"hook": hook or HOOK}),
            "app/raycluster.yaml": yaml.safe_dump(cluster)}


class Deployed:
    """One Application, its Git repository and namespace."""

    def __init__(self, argocd: ArgoCD, runner: JobRunner, namespace: str, tmp_path: Path, cluster: str = "demo",
                 **app_kw):
        self.argocd, self.runner, self.namespace = argocd, runner, namespace
        self.plane = argocd.plane
        self.name = namespace  # unique
        self.cluster_name = cluster
        self.repo = GitRepo(tmp_path / "repo")
        self.app_kw = app_kw

    def push(self, cluster: dict[str, Any], message: str, hook: dict[str, Any] | None = None,
             extra: dict[str, str] | None = None) -> str:
        return self.repo.commit({**app_files(cluster, hook), **(extra or {})}, message)

    def create(self) -> None:
        self.argocd.apply_application(application(self.name, self.repo, self.namespace, **self.app_kw))

    def sync(self, revision: str) -> dict[str, Any]:
        """Refresh, sync ``revision``, and return the Application once the operation ended."""
        return self.operation_after(self.begin_sync(revision))

    def begin_sync(self, revision: str) -> str:
        """Refresh, ask for a sync of ``revision``; when the previous operation started."""
        self.argocd.wait(self.name, lambda a: a.get("status", {}).get("sync", {}).get("revision") == revision
                         or self._refresh(), timeout=60, message=f"{self.name} sees {revision}")
        started = self._operation_started()
        self.argocd.sync(self.name, revision)
        return started

    def _refresh(self) -> bool:
        self.argocd.refresh(self.name)
        return False

    def _operation_started(self) -> str:
        app = self.argocd.application(self.name) or {}
        return app.get("status", {}).get("operationState", {}).get("startedAt", "")

    def operation_after(self, started: str) -> dict[str, Any]:
        return self.argocd.wait(
            self.name, lambda a: (a.get("status", {}).get("operationState", {}).get("startedAt", "") > started
                                  and status(a)[2] in ("Succeeded", "Failed", "Error")),
            timeout=SYNC_TIMEOUT, message=f"{self.name}: sync operation finished")

    def healthy(self, timeout: float = 120) -> dict[str, Any]:
        return self.argocd.wait(self.name, lambda a: status(a)[:2] == ("Synced", "Healthy"), timeout=timeout,
                                message=f"{self.name} Synced + Healthy")

    def cluster(self) -> dict[str, Any] | None:
        return self.plane.get("raycluster", self.cluster_name, self.namespace)

    def pods(self) -> list[dict[str, Any]]:
        return self.plane.kubectl_json("get", "pods", "-n", self.namespace, "-l",
                                       f"ray.io/cluster={self.cluster_name}")["items"]

    def hook_runs(self) -> dict[str, int | None]:
        return {k: v for k, v in self.runner.exit_codes().items() if k.startswith(f"{self.namespace}/")}

    def hook_log(self) -> str:
        return self.runner.last_log(self.namespace)

    def hook_report(self) -> dict[str, Any]:
        """The PresyncReport the last hook run printed (stdout; the pod's log also holds stderr)."""
        return self.runner.last_report(self.namespace)

    def start(self, cluster: dict[str, Any], extra: dict[str, str] | None = None,
              hook: dict[str, Any] | None = None) -> dict[str, Any]:
        """Create the Application, sync it once, wait until Synced + Healthy; the live cluster."""
        revision = self.push(cluster, "first", hook=hook, extra=extra)
        self.create()
        app = self.sync(revision)
        assert status(app)[2] == "Succeeded", operation(app)
        self.healthy()
        return self.cluster()


def operation(app: dict[str, Any]) -> str:
    return json.dumps(app.get("status", {}).get("operationState"), indent=1)


class Recorder:
    """Watches the cluster's pods (every ADDED / DELETED event, so no overlap can slip
    between two polls) and samples the Application's health while a sync runs."""

    def __init__(self, deployed: Deployed):
        self.deployed = deployed
        self.api = client.CoreV1Api(config.new_client_from_config(config_file=deployed.plane.kubeconfig))
        self.pod_events: list[tuple[str, str, str]] = []  # (type, uid, template hash)
        self.health: list[str] = []
        self._stop = threading.Event()
        self.watch_ended_early = False
        self._watch = watch.Watch()
        self._threads = [threading.Thread(target=self._pods, daemon=True),
                         threading.Thread(target=self._app, daemon=True)]

    def __enter__(self) -> "Recorder":
        listed = self.api.list_namespaced_pod(self.deployed.namespace, label_selector="ray.io/cluster=demo")
        self.pod_events += [("ADDED", p.metadata.uid, (p.metadata.annotations or {}).get(HASH, ""))
                            for p in listed.items]
        self._version = listed.metadata.resource_version
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._watch.stop()
        for t in self._threads:
            t.join(timeout=30)

    def _pods(self) -> None:
        try:
            for event in self._watch.stream(self.api.list_namespaced_pod, self.deployed.namespace,
                                            label_selector="ray.io/cluster=demo", resource_version=self._version,
                                            timeout_seconds=600):
                pod = event["object"]
                if event["type"] in ("ADDED", "DELETED"):
                    self.pod_events.append((event["type"], pod.metadata.uid,
                                            (pod.metadata.annotations or {}).get(HASH, "")))
                if self._stop.is_set():
                    return
        except Exception:  # closing the stream at __exit__ ends it with an error
            pass
        self.watch_ended_early = not self._stop.is_set()

    def events(self) -> list[tuple[str, str, str]]:
        """Every pod event seen; a watch that ended before the recording did proves nothing."""
        assert not self.watch_ended_early, "the pod watch ended early: events may be missing"
        return self.pod_events

    def _app(self) -> None:
        while not self._stop.wait(0.5):
            app = self.deployed.argocd.application(self.deployed.name) or {}
            self.health.append(status(app)[1])

    def overlaps(self, old: set[str], new: set[str]) -> list[set[str]]:
        """Moments at which a pod of an ``old`` hash and one of a ``new`` hash both existed."""
        live: dict[str, str] = {}
        seen = []
        for kind, uid, template_hash in self.events():
            if kind == "ADDED":
                live[uid] = template_hash
            else:
                live.pop(uid, None)
            hashes = set(live.values())
            if hashes & old and hashes & new:
                seen.append(hashes)
        return seen

    def deleted(self) -> set[str]:
        return {uid for kind, uid, _ in self.events() if kind == "DELETED"}


@pytest.fixture
def deployed(argocd: ArgoCD, runner: JobRunner, namespace: str, tmp_path: Path) -> Deployed:
    return Deployed(argocd, runner, namespace, tmp_path)


def test_first_sync_creates_the_cluster_and_the_hook_finds_nothing_to_do(deployed: Deployed):
    revision = deployed.push(raycluster(replicas=1), "first")
    deployed.create()
    app = deployed.sync(revision)
    assert status(app)[2] == "Succeeded", json.dumps(app["status"].get("operationState"), indent=1)
    deployed.healthy()
    cluster = deployed.cluster()
    assert cluster is not None
    pods = deployed.plane.wait_for(lambda: len(deployed.pods()) == 2 and deployed.pods(), timeout=60)
    assert {p["metadata"]["annotations"].get(HASH) for p in pods} == desired_hashes(cluster)
    assert list(deployed.hook_runs().values()) == [0], deployed.hook_runs()
    report = deployed.hook_report()
    assert report["summary"]["skipped"] == 1 and "absent" in report["clusters"][0]["reason"], report


def test_image_change_recreates_through_argocd(deployed: Deployed):
    # Pods that take 3 s to shut down, as real ones do: the recreate lasts long enough for the
    # health sampler (every 0.5 s) to see it. With pods that go at once, Argo CD showed
    # Progressing for under a second, and 2 of 6 runs saw none.
    before = deployed.start(raycluster(replicas=2, shutdown="3s"))
    old = desired_hashes(before)
    deployed.plane.wait_for(lambda: len(deployed.pods()) == 3, timeout=60, message="3 pods")
    revision = deployed.push(raycluster(replicas=2, image="rayproject/ray:2.42.0", shutdown="3s"), "new image")
    with Recorder(deployed) as recorder:
        t0 = time.monotonic()
        app = deployed.sync(revision)
        assert status(app)[2] == "Succeeded", operation(app)
        deployed.healthy(timeout=180)
        seconds = round(time.monotonic() - t0, 1)
    after = deployed.cluster()
    new = desired_hashes(after)
    assert new.isdisjoint(old)
    assert after["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == "rayproject/ray:2.42.0"
    pods = deployed.pods()
    assert len(pods) == 3 and {p["metadata"]["annotations"].get(HASH) for p in pods} == new
    assert not recorder.overlaps(old, new), recorder.pod_events
    assert len(recorder.deleted()) >= 3  # the three old pods, each once
    assert list(deployed.hook_runs().values()) == [0, 0], deployed.hook_runs()
    assert deployed.hook_report()["summary"]["recreated"] == 1, deployed.hook_report()
    # Argo CD applied the RayCluster in the Sync phase, after the PreSync hook succeeded
    results = {r["kind"]: r for r in app["status"]["operationState"]["syncResult"]["resources"]}
    assert (results["Job"]["syncPhase"], results["Job"]["hookPhase"]) == ("PreSync", "Succeeded"), results["Job"]
    assert results["RayCluster"]["syncPhase"] == "Sync" and results["RayCluster"]["status"] == "Synced"
    # health during the recreate: Progressing at worst, never Degraded
    assert "Degraded" not in recorder.health and "Progressing" in recorder.health, recorder.health
    print(f"\nArgo CD sync of an image change to Healthy: {seconds} s (3 pods recreated)")
    (deployed.plane.log_dir / "argocd-sync-seconds.txt").write_text(f"{seconds}\n")


def _reading_secret(password: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The demo cluster whose worker group reads Secret creds (an env secretKeyRef), and the
    Secret as an app file."""
    cluster = raycluster(replicas=1)
    worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    worker["env"].append({"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "type": "Opaque",
              "stringData": {"PASSWORD": password}}
    return cluster, {"app/creds.yaml": yaml.safe_dump(secret)}


def test_a_secret_change_reaches_new_pods_through_argocd(deployed: Deployed):
    """Only a Secret the workers read changes in Git. Argo CD applies the hook's own Secret
    (PreSync, wave -1) and the Job that mounts it; the hook writes the new value before it
    resumes the cluster, so every new pod starts with it; the hook's log names the Secret,
    never the value."""
    value = "argocd-e2e-value-never-printed"
    cluster, files = _reading_secret("old-" + value)
    deployed.start(cluster, extra=files)
    before = {p["metadata"]["uid"] for p in deployed.plane.wait_for(
        lambda: len(deployed.pods()) == 2 and deployed.pods(), timeout=60, message="2 pods")}
    stamp = "raygitops.dev/secret-hash"
    old = {p["metadata"]["annotations"].get(stamp) for p in deployed.pods() if p["metadata"]["labels"]["ray.io/group"] != "headgroup"}
    _, files = _reading_secret(value)
    revision = deployed.push(cluster, "new password", extra=files)
    app = deployed.sync(revision)
    assert status(app)[2] == "Succeeded", operation(app)
    deployed.healthy(timeout=180)
    results = {(r["kind"], r["name"]): r for r in app["status"]["operationState"]["syncResult"]["resources"]}
    hook_secret = results[("Secret", hook_names(deployed.name).plan_secrets)]
    assert (hook_secret["syncPhase"], hook_secret.get("hookType")) == ("PreSync", "PreSync"), hook_secret
    live = deployed.plane.get("secret", "creds", deployed.namespace)
    assert base64.b64decode(live["data"]["PASSWORD"]).decode() == value
    pods = deployed.pods()
    workers = [p for p in pods if p["metadata"]["labels"]["ray.io/group"] != "headgroup"]
    assert before.isdisjoint({p["metadata"]["uid"] for p in pods})  # Recreate: the whole cluster
    new = {p["metadata"]["annotations"].get(stamp) for p in workers}
    assert len(new) == 1 and None not in new and new != old, (old, new)
    report = deployed.hook_report()
    assert report["summary"]["recreated"] == 1, report
    assert report["clusters"][0]["drift"]["worker:small"]["how"] == "secret-hash", report
    log = deployed.hook_log()
    assert "Secret/creds" in log and value not in log and base64.b64encode(value.encode()).decode() not in log


def test_replica_change_deletes_no_pod(deployed: Deployed):
    deployed.start(raycluster(replicas=1))
    pods = deployed.plane.wait_for(lambda: len(deployed.pods()) == 2 and deployed.pods(), timeout=60, message="2 pods")
    revision = deployed.push(raycluster(replicas=2), "one more worker")
    with Recorder(deployed) as recorder:
        app = deployed.sync(revision)
        assert status(app)[2] == "Succeeded", operation(app)
        deployed.healthy()
    assert not recorder.deleted(), recorder.pod_events
    assert {p["metadata"]["uid"] for p in pods} <= {p["metadata"]["uid"] for p in deployed.pods()}
    assert deployed.hook_report()["summary"]["inSync"] == 1, deployed.hook_report()


def test_failed_hook_fails_the_sync_and_applies_nothing(deployed: Deployed):
    before = deployed.start(raycluster(replicas=1))
    # a pod the cluster does not own, carrying its label: KubeRay would delete it on suspend,
    # so the hook refuses to suspend the cluster and fails
    deployed.plane.apply({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "intruder", "namespace": deployed.namespace,
                                       "labels": {"ray.io/cluster": "demo"}},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    revision = deployed.push(raycluster(replicas=1, image="rayproject/ray:2.42.0"), "new image")
    t0 = time.monotonic()
    app = deployed.sync(revision)
    print(f"\nArgo CD sync with a hook that refuses, to Failed: {time.monotonic() - t0:.1f} s")
    state = app["status"]["operationState"]
    assert state["phase"] == "Failed", operation(app)
    job = next(r for r in state["syncResult"]["resources"] if r["kind"] == "Job")
    # the hook's own reason (written on its Job, shown by argocd/health/job.lua), then Kubernetes'
    assert job["hookPhase"] == "Failed", job
    assert f"{deployed.namespace}/demo:" in job["message"] and "intruder" in job["message"], job
    assert job["message"].endswith("(Job has reached the specified backoff limit)"), job
    assert list(deployed.hook_runs().values()) == [0, 1], deployed.hook_runs()
    assert "intruder" in deployed.hook_log()
    live = deployed.cluster()
    assert desired_hashes(live) == desired_hashes(before)  # Argo CD did not apply the new spec
    assert not live["spec"].get("suspend")
    assert status(deployed.argocd.application(deployed.name))[0] == "OutOfSync"


def test_automated_sync_settles_and_hook_jobs_do_not_collide(argocd: ArgoCD, runner: JobRunner, namespace: str,
                                                             tmp_path: Path):
    deployed = Deployed(argocd, runner, namespace, tmp_path, automated=True)
    deployed.push(raycluster(replicas=1), "first")
    deployed.create()
    deployed.healthy(timeout=180)
    for n, image in enumerate(["rayproject/ray:2.42.0", "rayproject/ray:2.43.0"], start=2):
        revision = deployed.push(raycluster(replicas=1, image=image), image)
        deployed.argocd.refresh(deployed.name)
        app = deployed.argocd.wait(
            deployed.name, lambda a: status(a) == ("Synced", "Healthy", "Succeeded")
            and a["status"]["sync"].get("revision") == revision, timeout=SYNC_TIMEOUT, message=f"automated sync of {image}")
        assert [p["spec"]["containers"][0]["image"] for p in deployed.pods()] == [image] * 2
        # one hook run per revision: the Job of the previous sync was replaced (BeforeHookCreation)
        assert list(deployed.hook_runs().values()) == [0] * n, deployed.hook_runs()
        started = app["status"]["operationState"]["startedAt"]
        # settled: no further sync, no further hook, still Synced (the hook's annotations and
        # the API server's defaults on the live object do not make it OutOfSync)
        time.sleep(20)
        app = deployed.argocd.application(deployed.name)
        assert status(app) == ("Synced", "Healthy", "Succeeded"), operation(app)
        assert app["status"]["operationState"]["startedAt"] == started, operation(app)
        assert len(deployed.hook_runs()) == n


def test_pods_that_cannot_start_fail_every_sync_until_fixed(deployed: Deployed):
    """Issue #21 on the real Argo CD: an unschedulable change fails the sync (the hook's
    reason shown, the app Degraded, nothing left suspended); syncing the same revision again
    fails again although status.state says ready meanwhile; the fixing commit goes green."""
    deployed.start(raycluster(replicas=1))
    stuck = raycluster(replicas=1, image="rayproject/ray:2.42.0")
    stuck["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] = {"no-such-node": "true"}
    # a node a node autoscaler may make: the preflight cannot tell, and this cluster's policy goes on
    stuck["metadata"].setdefault("annotations", {})["raygitops.dev/preflight-unknown"] = "proceed"
    revision = deployed.push(stuck, "head cannot be scheduled", hook=dict(HOOK, timeoutSeconds=40))
    t0 = time.monotonic()
    app = deployed.sync(revision)
    assert status(app)[2] == "Failed", operation(app)
    print(f"\nArgo CD sync with pods that cannot start, to Failed: {time.monotonic() - t0:.1f} s (hook timeout 40 s)")
    job = next(r for r in app["status"]["operationState"]["syncResult"]["resources"] if r["kind"] == "Job")
    assert f"{deployed.namespace}/demo:" in job["message"], job  # why, not only that the Job failed
    app = deployed.argocd.wait(deployed.name, lambda a: status(a)[1] == "Degraded", timeout=60,
                               message="Degraded")
    health = next(r for r in app["status"]["resources"] if r["kind"] == "RayCluster")["health"]
    assert health["status"] == "Degraded" and "recreate" in health.get("message", ""), health
    live = deployed.cluster()
    assert not live["spec"].get("suspend"), "the failed recreate left the cluster suspended"
    assert live["metadata"]["annotations"]["raygitops.dev/last-recreate-outcome"] == "Failed"

    # the same revision again (a rerun): the pods carry the new hash now, status.state says
    # ready all along, and the sync still fails, still Degraded
    with StaleReady(deployed.plane, deployed.namespace) as stale:
        t0 = time.monotonic()
        app = deployed.sync(revision)
        seconds = time.monotonic() - t0
        assert stale.writes > 10
        assert status(deployed.argocd.application(deployed.name))[1] != "Healthy"
    assert status(app)[2] == "Failed", operation(app)
    print(f"Argo CD re-sync of the same revision, status.state forced ready, to Failed: {seconds:.1f} s")
    job = next(r for r in app["status"]["operationState"]["syncResult"]["resources"] if r["kind"] == "Job")
    assert "ready" in job["message"], job
    assert list(deployed.hook_runs().values()) == [0, 1, 1], deployed.hook_runs()  # one pod per Job

    # the fixing commit: recreated, Synced + Healthy
    revision = deployed.push(raycluster(replicas=1, image="rayproject/ray:2.42.0"), "fix the nodeSelector")
    t0 = time.monotonic()
    app = deployed.sync(revision)
    assert status(app)[2] == "Succeeded", operation(app)
    deployed.healthy(timeout=180)
    print(f"Argo CD sync of the fixing commit to Synced + Healthy: {time.monotonic() - t0:.1f} s")
    assert deployed.cluster()["metadata"]["annotations"]["raygitops.dev/last-recreate-outcome"] == "Completed"
    assert deployed.hook_report()["summary"]["recreated"] == 1, deployed.hook_report()


def test_plugin_parameters_reach_the_render(argocd: ArgoCD, runner: JobRunner, namespace: str, tmp_path: Path):
    parameters = [{"name": "values-files", "array": ["values-prod.yaml"]},
                  {"name": "values", "map": {"cluster.image": "rayproject/ray:2.42.0"}},
                  {"name": "drain-grace-seconds", "string": "7"},
                  {"name": "wait-ready", "string": "true"}]
    deployed = Deployed(argocd, runner, namespace, tmp_path, parameters=parameters)
    example = controlplane.REPO_ROOT / "examples" / "jinja"
    shutil.copytree(example, deployed.repo.path / "app")
    revision = deployed.repo.commit({}, "the jinja example")
    deployed.create()
    app = deployed.sync(revision)
    assert status(app)[2] == "Succeeded", operation(app)
    prod = yaml.safe_load((example / "values-prod.yaml").read_text())["cluster"]["name"]
    live = deployed.plane.get("raycluster", prod, namespace)
    assert live is not None, f"values-prod.yaml's cluster {prod} was not created"
    assert live["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == "rayproject/ray:2.42.0"
    assert live["metadata"]["annotations"]["example.com/git-revision"] == revision  # Argo CD's build env
    job = deployed.plane.get("job", hook_names(deployed.name).presync, namespace)
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--drain-grace") + 1] == "7", args


# ----------------------------------------------------------------------------- charts and overlays


NEW_IMAGE = "rayproject/ray:2.42.0"


def _templated(name: str, image: str) -> str:
    """The demo cluster (one worker) as YAML with ``name`` and ``image`` written in (a chart's
    template or a kustomize base)."""
    cluster = raycluster(replicas=1)
    cluster["metadata"] = {"name": "NAME", "annotations": cluster["metadata"]["annotations"]}
    return yaml.safe_dump(cluster).replace("NAME", name).replace("rayproject/ray:2.41.0", image)


def chart_files(image: str) -> dict[str, str]:
    """A Helm chart app: the cluster named after the release, its image a value."""
    return {"chart/Chart.yaml": "apiVersion: v2\nname: ray-team\nversion: 0.1.0\n",
            "chart/values.yaml": yaml.safe_dump({"image": image}),
            "chart/raygitops.yaml": yaml.safe_dump({"hook": HOOK}),
            "chart/templates/raycluster.yaml": _templated("{{ .Release.Name }}", "{{ .Values.image }}")}


def overlay_files(namespace: str, image: str) -> dict[str, str]:
    """A kustomize overlay app over a base beside it (../../base): its namespace, a name
    prefix, the image as a JSON patch (kustomize knows no merge keys for a CRD's lists)."""
    patch = [{"op": "replace", "path": f"/spec/{group}/template/spec/containers/0/image", "value": image}
             for group in ("headGroupSpec", "workerGroupSpecs/0")]
    return {"kz/base/raycluster.yaml": _templated("demo", "rayproject/ray:2.41.0"),
            "kz/base/kustomization.yaml": yaml.safe_dump({"resources": ["raycluster.yaml"]}),
            "kz/overlays/prod/kustomization.yaml": yaml.safe_dump({
                "namespace": namespace, "namePrefix": "prod-", "resources": ["../../base"],
                "patches": [{"path": "image.yaml", "target": {"kind": "RayCluster", "name": "demo"}}]}),
            "kz/overlays/prod/image.yaml": yaml.safe_dump(patch),
            "kz/overlays/prod/raygitops.yaml": yaml.safe_dump({"hook": HOOK})}


def test_a_chart_and_an_overlay_sync_through_the_plugin_and_recreate_on_an_image_change(
        argocd: ArgoCD, runner: JobRunner, namespace: str, tmp_path: Path):
    """Issue 37: a Helm chart app and a kustomize overlay app, through the plugin as the
    README installs it (the sidecar in the image the tests built): Synced + Healthy, the chart
    released under the Application's name in its destination, the overlay built with its
    base; then a new image in each recreates its pods. The hook Jobs name the sidecar's own
    image (the runner runs no other). Both apps sync at once, to keep the suite short."""
    plane = argocd.plane
    second = plane.create_namespace(controlplane.unique_name("e2e"))
    try:
        chart = Deployed(argocd, runner, namespace, tmp_path / "chart", cluster=namespace, path="chart")
        overlay = Deployed(argocd, runner, second, tmp_path / "overlay", cluster="prod-demo", path="kz/overlays/prod")
        revisions = {chart: chart.repo.commit(chart_files("rayproject/ray:2.41.0"), "a chart"),
                     overlay: overlay.repo.commit(overlay_files(second, "rayproject/ray:2.41.0"), "an overlay")}
        t0 = time.monotonic()
        for app in revisions:
            app.create()
        started = {app: app.begin_sync(revision) for app, revision in revisions.items()}
        for app in revisions:
            result = app.operation_after(started[app])
            assert status(result)[2] == "Succeeded", operation(result)
            app.healthy()
            assert app.hook_report()["summary"]["skipped"] == 1, app.hook_report()  # the cluster was absent
            job = plane.get("job", hook_names(app.name).presync, app.namespace)
            assert job["spec"]["template"]["spec"]["containers"][0]["image"] == argocd.image
        first = time.monotonic() - t0
        # helm template: release = the Application's name, namespace = its destination
        assert chart.cluster()["metadata"]["namespace"] == namespace
        old = {app: desired_hashes(app.cluster()) for app in revisions}
        for app in revisions:
            plane.wait_for(lambda a=app: len(a.pods()) == 2, timeout=60, message=f"{app.name}: 2 pods")

        revisions = {chart: chart.repo.commit(chart_files(NEW_IMAGE), "new image in values.yaml"),
                     overlay: overlay.repo.commit(overlay_files(second, NEW_IMAGE), "new image in the overlay")}
        t0 = time.monotonic()
        started = {app: app.begin_sync(revision) for app, revision in revisions.items()}
        for app in revisions:
            result = app.operation_after(started[app])
            assert status(result)[2] == "Succeeded", operation(result)
            app.healthy(timeout=180)
            new = desired_hashes(app.cluster())
            assert new.isdisjoint(old[app])
            pods = plane.wait_for(lambda a=app: len(a.pods()) == 2 and a.pods(), timeout=60)
            assert {p["spec"]["containers"][0]["image"] for p in pods} == {NEW_IMAGE}
            assert {p["metadata"]["annotations"].get(HASH) for p in pods} == new
            assert app.hook_report()["summary"]["recreated"] == 1, app.hook_report()
            assert list(app.hook_runs().values()) == [0, 0], app.hook_runs()
        changed = time.monotonic() - t0
        print(f"\nArgo CD, a chart and an overlay at once: first sync {first:.1f} s, image change {changed:.1f} s")
    finally:
        plane.delete_namespace(second, wait=False)


# ----------------------------------------------------------------------------- running Ray jobs


@pytest.fixture
def ray_head(control_plane: controlplane.ControlPlane):
    """A real Ray head (tests/e2e/rayhead.py), for one test only (Ray holds about 1 GB while it
    runs), still starting when the test begins."""
    yield from rayhead.running(control_plane.log_dir, wait=False)


JOBS_HOOK = {k: v for k, v in HOOK.items() if k != "runningJobs"}  # the default policy (wait): this head answers


def test_running_ray_jobs_through_argocd(deployed: Deployed, ray_head: rayhead.RayHead):
    """Issue 41 through the real Argo CD. One Application whose head pod a real Ray head answers
    for (the hook Job, run in the image with the rendered Role's token, reaches it only through
    the API server's service proxy), one job from ``ray job submit``, and the four cases in
    sequence on it (one head, one job, to keep the suite short): the plugin parameter
    ``running-jobs: proceed`` recreates at once; a head that is not Ready is passed, saying why;
    ``running-jobs-wait-seconds: 3`` fails the sync naming the job, the cluster untouched, the
    job running on; the default waits, holding its lock, and the re-sync of that revision
    completes once the job has ended."""
    plane, namespace, head = deployed.plane, deployed.namespace, ray_head
    images = [f"rayproject/ray:2.4{n}.0" for n in range(2, 5)]
    seconds: dict[str, float] = {}

    def cluster(image: str) -> dict[str, Any]:
        return rayhead.with_dashboard(raycluster(replicas=1, image=image))

    def configure(*parameters: dict[str, str]) -> None:
        """The Application's plugin parameters (none: raygitops.yaml and the defaults decide)."""
        deployed.app_kw["parameters"] = list(parameters) or None
        deployed.create()

    def uids() -> set[str]:
        return {p["metadata"]["uid"] for p in deployed.pods()}

    def jobs_said() -> list[str]:
        """What the last hook run said in its jobs step (its pod's log)."""
        return [line["msg"] for line in rayhead.hook_lines(deployed.hook_log()) if line["step"] == "jobs"]

    def synced(revision: str, case: str) -> dict[str, Any]:
        t0 = time.monotonic()
        app = deployed.sync(revision)
        seconds[case] = round(time.monotonic() - t0, 1)
        return app

    def recreated(app: dict[str, Any], before: set[str], image: str) -> None:
        assert status(app)[2] == "Succeeded", operation(app)
        assert deployed.hook_report()["summary"]["recreated"] == 1, deployed.hook_report()
        deployed.healthy()
        assert before.isdisjoint(uids())
        assert {p["spec"]["containers"][0]["image"] for p in deployed.pods()} == {image}

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        submitted = pool.submit(head.submit)  # Ray starts and runs the job while Argo CD makes the cluster
        deployed.start(cluster("rayproject/ray:2.41.0"), hook=JOBS_HOOK)
        head.serve_head(plane, namespace)
        job = submitted.result()
    seconds["start"] = round(time.monotonic() - t0, 1)

    # proceed (the Argo CD parameter over raygitops.yaml): recreated at once, the head not asked
    configure({"name": "running-jobs", "string": "proceed"})
    before = uids()
    app = synced(deployed.push(cluster(images[0]), "proceed", hook=JOBS_HOOK), "proceed")
    recreated(app, before, images[0])
    assert jobs_said() == ["policy proceed: running Ray jobs are not asked for"], deployed.hook_log()
    assert head.status(job) == "RUNNING"  # it ran all along: not waited for

    # a head that is not Ready cannot be running jobs: passed, saying why (it runs one here)
    configure()
    pod = head.serve_head(plane, namespace)
    rayhead.make_not_ready(plane, pod)
    before = uids()
    app = synced(deployed.push(cluster(images[1]), "head not Ready", hook=JOBS_HOOK), "not Ready")
    recreated(app, before, images[1])
    assert jobs_said() == [f"going on: head pod {pod['metadata']['name']} is not Ready: no Ray job can be "
                           "running there"], deployed.hook_log()
    assert head.status(job) == "RUNNING"

    # a short bound: the sync fails naming the job, nothing touched, the job runs on
    head.serve_head(plane, namespace)
    configure({"name": "running-jobs-wait-seconds", "string": "3"})
    before, live = uids(), deployed.cluster()
    revision = deployed.push(cluster(images[2]), "short bound", hook=JOBS_HOOK)
    app = synced(revision, "fail closed")
    state = app["status"]["operationState"]
    assert state["phase"] == "Failed", operation(app)
    result = next(r for r in state["syncResult"]["resources"] if r["kind"] == "Job")
    assert result["hookPhase"] == "Failed", result
    # the hook's one-line reason (its Job's raygitops.dev/failure, shown by argocd/health/job.lua)
    assert f"{namespace}/demo: 1 Ray job running: {job} (RUNNING for" in result["message"], result
    assert "the policy's bound of 3 s is up: not touched" in result["message"], result
    assert list(deployed.hook_runs().values())[-1] == 1, deployed.hook_runs()
    assert deployed.hook_report()["apiRequestsByVerb"].get("proxy"), deployed.hook_report()  # asked the head
    after = deployed.cluster()
    assert (after["spec"], after["metadata"]["annotations"]) == (live["spec"], live["metadata"]["annotations"])
    assert uids() == before and head.status(job) == "RUNNING"
    assert status(deployed.argocd.application(deployed.name))[0] == "OutOfSync"

    # the default (wait), the same revision synced again: the hook waits, holding its lock and
    # touching nothing else, and the sync completes once the job has ended
    configure()
    runs = len(deployed.hook_runs())
    t0 = time.monotonic()
    started = deployed.begin_sync(revision)
    waiting = plane.wait_for(lambda: len(deployed.hook_runs()) == runs + 1
                             and [m for m in jobs_said() if m.startswith("waiting")], timeout=90,
                             message="the hook waiting for the job")
    assert f"1 Ray job running: {job} (RUNNING for" in waiting[0], waiting
    time.sleep(3)
    live = deployed.cluster()
    assert json.loads(live["metadata"]["annotations"][LOCK])["phase"] == "locked", live["metadata"]
    assert live["spec"].get("suspend") is not True and uids() == before
    assert status(deployed.argocd.application(deployed.name))[2] == "Running"
    ended = head.finish(job)
    app = deployed.operation_after(started)
    seconds["wait"] = round(time.monotonic() - t0, 1)
    recreated(app, before, images[2])
    suspend = next(line for line in rayhead.hook_lines(deployed.hook_log()) if line["step"] == "suspend")
    assert rayhead.epoch(suspend["ts"]) >= ended - 1  # nothing went before the job ended (1 s: clock resolution)
    print(f"\nArgo CD, running Ray jobs (s): {seconds}, Ray head started in {head.start_seconds} s")


# ----------------------------------------------------------------------------- many Applications (issue 49)
# An ApplicationSet (list generator) makes six Applications of the raygitops plugin, two of
# them in one namespace, each with an opted-in RayCluster: the real applicationset-controller
# makes them (each owned by the ApplicationSet, as its controller); one commit changes the
# image in all of them and all six sync at once. Asserted on Argo CD's own status and on the
# cluster: every app Synced + Healthy; every cluster recreated exactly once (one
# RecreateStarted, no old pod left); each app's sync result lists only its own hook objects,
# named for it; one app of the shared namespace syncing again makes its own hook objects anew
# and leaves the other's as they were. Measured: the time to all Healthy against one app
# alone, and the repo-server sidecar's peak memory and CPU while the six render.

APPS = 6
APPSET_IMAGES = ("rayproject/ray:2.41.0", "rayproject/ray:2.42.0", "rayproject/ray:2.43.0")
HOOK_KINDS = {"ServiceAccount": "serviceaccount", "Role": "role.rbac.authorization.k8s.io",
              "RoleBinding": "rolebinding.rbac.authorization.k8s.io", "ConfigMap": "configmap", "Job": "job.batch"}


class Team:
    """One element of the list generator: app ``<prefix>-<i>``, its path and namespace, its cluster."""

    def __init__(self, prefix: str, i: int, namespace: str):
        self.name, self.path, self.namespace, self.cluster = f"{prefix}-{i}", f"apps/t{i}", namespace, f"rc-{i}"

    def files(self, image: str) -> dict[str, str]:
        cluster = raycluster(self.cluster, image=image, replicas=1)
        for key in ("labels", "annotations"):
            if not cluster["metadata"].get(key):
                cluster["metadata"].pop(key, None)
        return {f"{self.path}/raygitops.yaml": yaml.safe_dump({"hook": HOOK}),
                f"{self.path}/raycluster.yaml": yaml.safe_dump(cluster)}


class SidecarSampler:
    """The sidecar container's memory and CPU (in CPUs: CPU seconds per second between two
    samples), sampled every half second while the renders run."""

    def __init__(self, argocd: ArgoCD):
        self.argocd, self.samples = argocd, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last: tuple[float, float] | None = None
        while not self._stop.wait(0.5):
            try:
                memory, cpu_seconds = self.argocd.sidecar_usage()
            except Exception:  # noqa: BLE001 - a sample lost is not a failure
                continue
            now = time.monotonic()
            cpus = (cpu_seconds - last[1]) / (now - last[0]) if last else 0.0
            last = (now, cpu_seconds)
            self.samples.append((memory, cpus))

    def __enter__(self) -> "SidecarSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def appset(name: str, repo: GitRepo, teams: list[Team]) -> dict[str, Any]:
    """The ApplicationSet: the shipped Application as its template (its metadata and spec: the
    CRD's schema has no apiVersion or kind there), one element per team."""
    app = application("{{.name}}", repo, "{{.namespace}}", path="{{.path}}")
    template = {"metadata": {"name": "{{.name}}"}, "spec": app["spec"]}
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
            "metadata": {"name": name, "namespace": ArgoCD.NAMESPACE},
            "spec": {"goTemplate": True, "goTemplateOptions": ["missingkey=error"],
                     "generators": [{"list": {"elements": [
                         {"name": t.name, "path": t.path, "namespace": t.namespace} for t in teams]}}],
                     "template": template}}


def made_by(argocd: ArgoCD, live_appset: dict[str, Any], teams: list[Team]) -> None:
    """The applicationset-controller made one Application per element, and no other: each owned
    by the ApplicationSet (its controller), with the element's path and namespace."""
    name, uid = live_appset["metadata"]["name"], live_appset["metadata"]["uid"]

    def owned() -> dict[str, dict] | None:
        argocd.check_alive()
        items = argocd.plane.kubectl_json("get", "applications.argoproj.io", "-n", ArgoCD.NAMESPACE)["items"]
        found = {a["metadata"]["name"]: a for a in items
                 if any(o["uid"] == uid for o in a["metadata"].get("ownerReferences", []))}
        return found if len(found) >= len(teams) else None

    apps = argocd.plane.wait_for(owned, timeout=120, message=f"the Applications of ApplicationSet {name}")
    assert sorted(apps) == sorted(t.name for t in teams), sorted(apps)
    for t in teams:
        meta, spec = apps[t.name]["metadata"], apps[t.name]["spec"]
        assert meta["ownerReferences"] == [{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
                                            "name": name, "uid": uid, "controller": True,
                                            "blockOwnerDeletion": True}], meta["ownerReferences"]
        assert (spec["source"]["path"], spec["destination"]["namespace"]) == (t.path, t.namespace), (t.name, spec)
        assert "parameters" not in spec["source"]["plugin"], spec["source"]  # ARGOCD_APP_PARAMETERS=null, as before


def wait_all(argocd: ArgoCD, teams: list[Team], predicate, message: str, timeout: float = 600) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for t in teams:
        out[t.name] = argocd.wait(t.name, predicate, timeout=timeout, message=f"{t.name}: {message}")
    return out


def sync_all(argocd: ArgoCD, teams: list[Team], revision: str) -> float:
    """Refresh every app until it sees ``revision``, ask each for a sync at once, wait until
    every one Synced + Healthy after its operation; the seconds from the requests to then."""
    for t in teams:
        argocd.wait(t.name, lambda a, t=t: a.get("status", {}).get("sync", {}).get("revision") == revision
                    or argocd.refresh(t.name), timeout=120, message=f"{t.name} sees {revision}")
    before = {t.name: (argocd.application(t.name) or {}).get("status", {}).get("operationState", {})
              .get("startedAt", "") for t in teams}
    start = time.monotonic()
    for t in teams:
        argocd.sync(t.name, revision)
    for t in teams:
        app = argocd.wait(t.name, lambda a, t=t: (a.get("status", {}).get("operationState", {}).get("startedAt", "")
                                                  > before[t.name] and status(a)[2] in ("Succeeded", "Failed", "Error")),
                          timeout=600, message=f"{t.name}: the sync ended")
        assert status(app)[2] == "Succeeded", operation(app)
    wait_all(argocd, teams, lambda a: status(a)[:2] == ("Synced", "Healthy"), "Synced + Healthy")
    return time.monotonic() - start


def test_an_applicationset_of_six_apps_two_in_one_namespace_syncs_an_image_change_at_once(
        argocd: ArgoCD, runner: JobRunner, tmp_path: Path):
    plane = argocd.plane
    prefix = controlplane.unique_name("team")
    shared = plane.create_namespace(controlplane.unique_name("e2e-shared"))
    own = [plane.create_namespace(controlplane.unique_name("e2e")) for _ in range(APPS - 2)]
    teams = [Team(prefix, i, ns) for i, ns in enumerate([shared, shared, *own])]
    repo = GitRepo(tmp_path / "repo")
    first = repo.commit({k: v for t in teams for k, v in t.files(APPSET_IMAGES[0]).items()}, "six apps")
    made_by(argocd, argocd.apply_applicationset(appset(prefix, repo, teams)), teams)
    sync_all(argocd, teams, first)

    def pods(t: Team) -> list[dict[str, Any]]:
        return plane.kubectl_json("get", "pods", "-n", t.namespace, "-l", f"ray.io/cluster={t.cluster}")["items"]

    def started(t: Team) -> int:
        items = plane.kubectl_json("get", "events", "-n", t.namespace)["items"]
        return sum(1 for e in items if e["reason"] == "RecreateStarted" and e["involvedObject"]["name"] == t.cluster)

    # one app alone: a new image in the last team only
    alone_revision = repo.commit(teams[-1].files(APPSET_IMAGES[1]), "one app's image")
    alone = sync_all(argocd, teams[-1:], alone_revision)

    # one commit: a new image in every app; all six sync at once
    old_uids = {t.name: {p["metadata"]["uid"] for p in pods(t)} for t in teams}
    recreates = {t.name: started(t) for t in teams}
    revision = repo.commit({k: v for t in teams for k, v in t.files(APPSET_IMAGES[2]).items()}, "a new image everywhere")
    with SidecarSampler(argocd) as sampler:
        together = sync_all(argocd, teams, revision)
    for t in teams:
        live = plane.wait_for(lambda t=t: (lambda ps: ps if len(ps) == 2 and all(
            c["image"] == APPSET_IMAGES[2] for p in ps for c in p["spec"]["containers"]) else None)(
            [p for p in pods(t) if not p["metadata"].get("deletionTimestamp")]),
            timeout=120, message=f"{t.name}: 2 pods of the new image")
        assert old_uids[t.name].isdisjoint({p["metadata"]["uid"] for p in live}), t.name
        assert started(t) == recreates[t.name] + 1, (t.name, started(t), recreates[t.name])  # exactly once

    # each app's hook objects are its own, and the other app of the shared namespace left them be
    apps = {t.name: argocd.application(t.name) for t in teams}
    for t in teams:
        names = hook_names(t.name)
        results = {(r["kind"], r["name"]) for r in apps[t.name]["status"]["operationState"]["syncResult"]["resources"]
                   if r.get("hookType")}
        reads = f"{names.presync}-{t.namespace}"  # the preflight's ClusterRole and binding, per app and namespace
        assert results == {("ServiceAccount", names.presync), ("Role", names.presync), ("RoleBinding", names.presync),
                           ("ClusterRole", reads), ("ClusterRoleBinding", reads),
                           ("ConfigMap", names.plan), ("Job", names.presync)}, (t.name, results)
    sharing = teams[:2]

    def hook_objects(t: Team) -> dict[str, tuple[str, str]]:
        """The app's live hook objects in the shared namespace: (uid, resourceVersion) by kind."""
        out = {}
        for kind, resource in HOOK_KINDS.items():
            name = hook_names(t.name).plan if kind == "ConfigMap" else hook_names(t.name).presync
            live = plane.get(resource, name, shared)
            assert live is not None, (t.name, kind, name)
            tracking = live["metadata"]["annotations"].get("argocd.argoproj.io/tracking-id", "")
            assert tracking.startswith(f"{t.name}:"), (kind, name, tracking)
            out[kind] = (live["metadata"]["uid"], live["metadata"]["resourceVersion"])
        return out

    for t, other in (sharing, sharing[::-1]):
        claim = plane.get("raycluster", t.cluster, shared)["metadata"]["annotations"]["raygitops.dev/claimed-by"]
        assert claim == t.name
        # one app of the shared namespace syncs again: its hook objects are made anew
        # (BeforeHookCreation), the other app's stay exactly as they were
        mine, others = hook_objects(t), hook_objects(other)
        sync_all(argocd, [t], revision)
        assert hook_objects(other) == others, other.name
        assert hook_objects(t)["Job"][0] != mine["Job"][0], t.name
    memory = max((m for m, _ in sampler.samples), default=0)
    cpu = max((c for _, c in sampler.samples), default=0.0)
    print(f"\nissue 49: one app alone {alone:.1f}s to Synced + Healthy; six at once {together:.1f}s; "
          f"the sidecar's peak {memory / 2**20:.0f} MiB, {cpu:.2f} CPUs ({len(sampler.samples)} samples)")
    assert sampler.samples, "no sample of the sidecar's usage"
