"""A fleet of RayClusters synced the way Argo CD does it, for the hook campaigns and the soak.

One app in ``namespace`` holds a cluster for every path the hook has; a cluster in a
*foreign* namespace (not in the app) carries a planned cluster's name and opt-in.  A sync =
``raygitops render`` -> ``raygitops presync`` as a process (through the fault proxy) until it
exits 0 -> ``kubectl apply`` of the non-hook manifests.  What the app says is a
:class:`Revision` (each part's image, the ReplaceGroups cluster's groups, the config's
content); the campaigns change it from round to round.

==============  ===========================================================================
``drift-a/b``   Recreate; a new image each round it changes: recreated exactly once per
                target; its pods take 2 s to terminate (every drain follows them)
``replace``     ReplaceGroups, ``max-unavailable: "1"``, ``max-unavailable-by-group:
                big=2``: head, ``small`` (2, reads Secret ``creds``), ``big`` (3, reads
                ConfigMap ``settings``; its pods take 1 s to terminate), ``extra`` (1, added
                and removed); a changed group is replaced within its bound, the head and the
                other groups keep their pods; a head change falls back to the full cycle
``config``      Recreate; its head reads Secret ``creds``, its worker ConfigMap ``settings``:
                a change of either recreates it, every new pod starts after the hook wrote
                the new content
``stable``      Recreate; only a label changes (not pod-shaping): no pod deleted
``noopt``       not opted in; the image changes: no pod deleted (stale by design)
``jobowned``    opted in, but label ``ray.io/originated-from-crd: RayJob`` (the plan says
                who owns it): no pod deleted
``jobref``      opted in, owned by a (suspended) RayJob through a live ownerReference the
                app does not carry (only the live object says so): no pod deleted
``native``      KubeRay >= 1.6 only: ``spec.upgradeStrategy.type: Recreate`` and
                ``raygitops.dev/upgrade-strategy: None``: the hook leaves it alone, the
                operator recreates it after the apply
``foreign``     ``drift-a`` in another namespace, not in any plan: no pod deleted
==============  ===========================================================================

Observations read the API in-process (the ``kubernetes`` client), not through kubectl.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from controlplane import KWOK_RUNNING_JOBS, TERMINATE_AFTER
from reliability import invariants as inv

LEASE_SECONDS = "3"
# The drifting clusters' pods take this long to go once deleted (kwok, see controlplane.py):
# every drain follows them with its watch, as on a real cluster, so watch faults do hit.
DRIFTING_SHUTDOWN = "2s"
REPLACED_SHUTDOWN = "1s"  # group big of `replace`: a terminating pod is unavailable for a while
DRIFTING = ("drift-a", "drift-b")
UNTOUCHABLE = ("stable", "noopt", "jobowned", "jobref")
OUT_OF_BAND = {"example.com/owner": "team-x"}  # set on every live cluster; the hook must keep it
REPLICAS = {"small": 2, "big": 3, "extra": 1}  # worker groups of `replace`
BOUNDS = {"small": 1, "big": 2, "extra": 1}  # their max-unavailable (the annotations below)
RAYJOB = "owner-job"
NATIVE_FROM = "v1.6"  # KubeRay versions from which the fleet has the native-only cluster


@dataclass(frozen=True)
class Revision:
    """What the app says in one sync: an image version per part (a cluster, or one group of
    ``replace``: ``replace.head``, ``replace.small``, ...), whether ``replace`` has group
    ``extra``, the ConfigMap's and the Secret's content, ``stable``'s label."""

    images: tuple[tuple[str, int], ...]
    extra: bool = True
    settings: str = "mode-0"
    password: str = "soak-secret-0"
    label: int = 0

    PARTS = ("drift-a", "drift-b", "replace.head", "replace.small", "replace.big", "replace.extra", "config",
             "noopt", "jobowned", "jobref", "native")

    @classmethod
    def first(cls) -> "Revision":
        return cls(tuple((p, 0) for p in cls.PARTS))

    def image(self, part: str) -> str:
        return f"rayproject/ray:2.{40 + dict(self.images)[part]}.0"

    def bump(self, parts: Iterable[str]) -> "Revision":
        images = dict(self.images)
        for part in parts:
            images[part] += 1
        return dataclasses.replace(self, images=tuple(images.items()))

    def with_(self, **changes: Any) -> "Revision":
        return dataclasses.replace(self, **changes)

    @staticmethod
    def new_password(rng: Any) -> str:
        """A Secret value the campaign looks for wherever it must never appear."""
        return f"soak-secret-{rng.getrandbits(64):016x}"

    def to_json(self) -> dict[str, Any]:
        return {"images": dict(self.images), "extra": self.extra, "settings": self.settings,
                "password": self.password, "label": self.label}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Revision":
        return cls(tuple(doc["images"].items()), doc["extra"], doc["settings"], doc["password"], doc["label"])


def raycluster(name: str, image: str, opt_in: bool = True, labels: dict[str, str] | None = None,
               node_name: str | None = None, shutdown: str | None = None) -> dict[str, Any]:
    """Head + worker group ``w`` (1); ``shutdown``: how long its pods take to terminate once
    deleted (``"2s"``)."""
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {}), "annotations": {}}
    if opt_in:
        meta["annotations"]["raygitops.dev/upgrade-strategy"] = "Recreate"
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta,
        "spec": {
            "rayVersion": "2.41.0",
            "headGroupSpec": {"rayStartParams": {}, "template": _template("ray-head", image, node_name, shutdown)},
            "workerGroupSpecs": [_group("w", 1, image, node_name, shutdown)],
        },
    }


def _template(container: str, image: str, node_name: str | None, shutdown: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{
        "name": container, "image": image,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    }]}
    if node_name:
        spec["nodeName"] = node_name
    template: dict[str, Any] = {"spec": spec}
    if shutdown:
        template["metadata"] = {"annotations": {TERMINATE_AFTER: shutdown}}
    return template


def _group(name: str, replicas: int, image: str, node_name: str | None, shutdown: str | None = None) -> dict[str, Any]:
    return {"groupName": name, "replicas": replicas, "minReplicas": 0, "maxReplicas": 5, "rayStartParams": {},
            "template": _template("ray-worker", image, node_name, shutdown)}


def _reads_secret(template: dict[str, Any]) -> None:
    template["spec"]["containers"][0]["env"] = [
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}}]


def _reads_configmap(template: dict[str, Any]) -> None:
    template["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "settings"}}]


@dataclass
class HookRun:
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    killed: bool = False
    plan: str = ""

    @property
    def report(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None


@dataclass
class Rendered:
    """One render of the app: the manifests the sync applies, the hook's plan file (with the
    Secrets' content beside it), and every hook object."""

    objs: list[dict[str, Any]]
    hooks: list[dict[str, Any]]
    plan: Path | None
    secrets: Path | None

    def clusters(self) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in self.objs if o["kind"] == "RayCluster"}


@dataclass
class Fleet:
    plane: Any
    namespace: str
    foreign_namespace: str
    tmp: Path
    round: int = 0
    hook_timeout: int = 90
    drain_grace: int = 10
    runs: list[HookRun] = field(default_factory=list)
    revision: Revision = field(default_factory=Revision.first)

    def __post_init__(self) -> None:
        self.app = self.tmp / "app"
        self.app.mkdir(parents=True, exist_ok=True)
        self.wait_ready = self.plane.has("kwok")
        self.node_name = "kwok-node-0" if self.plane.has("kwok") and not self.plane.has("kube-scheduler") else None
        self.native = not self.plane.kuberay.startswith(("v1.5", "v1.4", "v1.3", "v1.2", "v1.1"))
        self.api = Api(self.plane.kubeconfig)
        self.planned = [*DRIFTING, "replace", "config", *UNTOUCHABLE] + (["native"] if self.native else [])

    # --- the app

    def clusters(self, rev: Revision) -> list[dict[str, Any]]:
        node = self.node_name
        out = [raycluster(n, rev.image(n), node_name=node, shutdown=DRIFTING_SHUTDOWN) for n in DRIFTING]
        replace = raycluster("replace", rev.image("replace.head"), node_name=node)
        ann = replace["metadata"]["annotations"]
        ann.update({"raygitops.dev/upgrade-strategy": "ReplaceGroups", "raygitops.dev/max-unavailable": "1",
                    "raygitops.dev/max-unavailable-by-group": "big=2"})
        groups = [_group("small", REPLICAS["small"], rev.image("replace.small"), node),
                  _group("big", REPLICAS["big"], rev.image("replace.big"), node, REPLACED_SHUTDOWN)]
        if rev.extra:
            groups.append(_group("extra", REPLICAS["extra"], rev.image("replace.extra"), node))
        _reads_secret(groups[0]["template"])
        _reads_configmap(groups[1]["template"])
        replace["spec"]["workerGroupSpecs"] = groups
        config = raycluster("config", rev.image("config"), node_name=node)
        _reads_secret(config["spec"]["headGroupSpec"]["template"])
        _reads_configmap(config["spec"]["workerGroupSpecs"][0]["template"])
        out += [replace, config,
                raycluster("stable", "rayproject/ray:2.40.0", node_name=node, labels={"round": str(rev.label)}),
                raycluster("noopt", rev.image("noopt"), opt_in=False, node_name=node),
                raycluster("jobowned", rev.image("jobowned"), node_name=node,
                           labels={"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "j"}),
                raycluster("jobref", rev.image("jobref"), node_name=node)]
        if self.native:
            native = raycluster("native", rev.image("native"), opt_in=False, node_name=node)
            native["metadata"]["annotations"]["raygitops.dev/upgrade-strategy"] = "None"
            native["spec"]["upgradeStrategy"] = {"type": "Recreate"}
            out.append(native)
        return out

    def config_objects(self, rev: Revision) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                 "data": {"MODE": rev.settings}},
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "type": "Opaque",
                 "stringData": {"PASSWORD": rev.password}}]

    def write(self, rev: Revision, only: set[str] | None = None, app: Path | None = None) -> Path:
        app = app or self.app
        app.mkdir(parents=True, exist_ok=True)
        for old in app.glob("*.yaml"):
            old.unlink()
        settings: dict[str, Any] = {
            "namespace": self.namespace, "kuberayVersion": self.plane.kuberay.lstrip("v"),
            "hook": {"drainGraceSeconds": self.drain_grace, "timeoutSeconds": self.hook_timeout,
                     "runningJobs": KWOK_RUNNING_JOBS,
                     "maxParallel": 4, "waitReady": self.wait_ready}}
        if self.native:
            settings["keepUpgradeStrategy"] = True
        (app / "raygitops.yaml").write_text(yaml.safe_dump(settings))
        for c in self.clusters(rev):
            if only is None or c["metadata"]["name"] in only:
                (app / f"{c['metadata']['name']}.yaml").write_text(yaml.safe_dump(c))
        (app / "settings-and-creds.yaml").write_text(yaml.safe_dump_all(self.config_objects(rev)))
        return app

    def render(self, app: Path | None = None, tag: str = "") -> Rendered:
        res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(app or self.app), "--output", "json"],
                             capture_output=True, text=True, check=True, timeout=120)
        objs = json.loads(res.stdout)["items"]
        hooks = [o for o in objs if "argocd.argoproj.io/hook" in (o["metadata"].get("annotations") or {})]
        rest = [o for o in objs if o not in hooks]
        cms = [o for o in hooks if o["kind"] == "ConfigMap"]
        if not cms:
            return Rendered(rest, hooks, None, None)
        plan = self.tmp / f"plan-{self.round}{tag}.json"
        plan.write_text(cms[0]["data"]["plan.json"])
        secrets = None
        for secret in (o for o in hooks if o["kind"] == "Secret"):  # the Secrets' content, when pods read some
            secrets = plan.with_suffix(".secrets.json")
            secrets.write_bytes(base64.b64decode(secret["data"]["secrets.json"]))
            secrets.chmod(0o600)
        return Rendered(rest, hooks, plan, secrets)

    def apply(self, objs: list[dict[str, Any]], namespace: str | None = None) -> None:
        self.plane.kubectl("apply", "-n", namespace or self.namespace, "-f", "-",
                           input=yaml.safe_dump_all(objs), timeout=120)

    def setup(self, rev: Revision | None = None) -> Rendered:
        """Create every cluster (the hook skips absent ones) at ``rev``, the RayJob that owns
        ``jobref`` (suspended: it makes no cluster of its own), the foreign cluster and the
        out-of-band annotation; wait for all pods."""
        self.revision = rev or self.revision
        self.apply([{"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": RAYJOB},
                     "spec": {"entrypoint": "python -c 'print(1)'", "suspend": True,
                              "rayClusterSpec": raycluster("unused", "rayproject/ray:2.40.0")["spec"]}}])
        job_uid = self.api.get_rayjob(self.namespace, RAYJOB)["metadata"]["uid"]
        self.write(self.revision)
        rendered = self.render()
        if rendered.plan is not None:
            self.hook([rendered.plan], self.plane.kubeconfig, secrets=[rendered.secrets])
        self.apply(rendered.objs)
        self.plane.kubectl("patch", "raycluster", "jobref", "-n", self.namespace, "--type=merge", "-p", json.dumps(
            {"metadata": {"ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": RAYJOB,
                                               "uid": job_uid}]}}))
        foreign = raycluster("drift-a", "rayproject/ray:2.40.0", node_name=self.node_name)
        self.apply([foreign], namespace=self.foreign_namespace)
        for ns in (self.namespace, self.foreign_namespace):
            self.plane.kubectl("annotate", "rayclusters", "--all", "-n", ns, "--overwrite",
                               *[f"{k}={v}" for k, v in OUT_OF_BAND.items()])
        self.wait_converged(rendered, timeout=180)
        return rendered

    # --- the hook

    def hook_argv(self, plan: Path, kubeconfig: str, secrets: Path | None = None,
                  wait_ready: bool | None = None) -> list[str]:
        wait = self.wait_ready if wait_ready is None else wait_ready and self.wait_ready
        return [sys.executable, "-m", "raygitops", "presync", "--plan", str(plan),
                *(["--secrets", str(secrets)] if secrets else []), "--kubeconfig", kubeconfig,
                "--log-format", "json", "--lease-seconds", LEASE_SECONDS, "--timeout", str(self.hook_timeout),
                "--drain-grace", str(self.drain_grace), "--wait-ready" if wait else "--no-wait-ready"]

    def hook_env(self) -> dict[str, str]:
        return {k: v for k, v in self.plane.env.items()
                if k not in ("KUBERNETES_SERVICE_HOST", "RAYGITOPS_TEST_PAUSE_AT", "RAYGITOPS_DEBUG")}

    def spawn(self, plan: Path, kubeconfig: str, secrets: Path | None = None,
              wait_ready: bool | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.hook_argv(plan, kubeconfig, secrets, wait_ready), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.hook_env(), start_new_session=True)

    def hook(self, plans: list[Path], kubeconfig: str, secrets: list[Path | None] | None = None,
             kill_after: float | None = None, wait_ready: bool | None = None) -> list[HookRun]:
        """One hook process per plan (with the Secrets' content of ``secrets``, in order), at
        once; the first SIGKILLed (whole group) after ``kill_after`` s when given."""
        start = time.monotonic()
        procs = [self.spawn(p, kubeconfig, s, wait_ready) for p, s in zip(plans, secrets or [None] * len(plans))]
        runs = []
        for i, (proc, plan) in enumerate(zip(procs, plans)):
            killed = False
            limit = kill_after if i == 0 and kill_after is not None else self.hook_timeout + 60
            try:
                out, err = proc.communicate(timeout=max(0.01, limit - (time.monotonic() - start)))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                killed = i == 0 and kill_after is not None
                if not killed:
                    err += f"\n[campaign] hook hung: killed after {time.monotonic() - start:.0f} s"
            runs.append(HookRun(None if killed or proc.returncode < 0 else proc.returncode, out, err,
                                time.monotonic() - start, killed, plan.name))
        self.runs.extend(runs)
        return runs

    # --- observations

    def live_clusters(self) -> list[dict[str, Any]]:
        return [c for ns in (self.namespace, self.foreign_namespace) for c in self.api.rayclusters(ns)]

    def live_pods(self) -> list[dict[str, Any]]:
        return [p for ns in (self.namespace, self.foreign_namespace) for p in self.api.pods(ns)]

    def expected_pods(self, rev: Revision) -> dict[str, int]:
        """namespace/name -> how many pods the cluster runs at ``rev``."""
        counts = {name: 2 for name in self.planned}
        counts["replace"] = 1 + REPLICAS["small"] + REPLICAS["big"] + (REPLICAS["extra"] if rev.extra else 0)
        out = {f"{self.namespace}/{n}": c for n, c in counts.items()}
        out[f"{self.foreign_namespace}/drift-a"] = 2
        return out

    def wait_converged(self, rendered: Rendered, targets: dict[str, dict[str, inv.Stamp]] | None = None,
                       timeout: float = 120) -> list[dict[str, Any]]:
        """Until every cluster runs as many pods as it should, Running (with kwok), and those
        of ``targets`` (cluster -> group -> stamp) their targets."""
        want = self.expected_pods(self.revision)
        waiting: list[str] = []

        def ok() -> list[dict[str, Any]] | None:
            pods = [p for p in self.live_pods() if not p["metadata"].get("deletionTimestamp")]
            waiting[:] = []
            for cluster, count in want.items():
                mine = [p for p in pods if inv.pod_cluster(p) == cluster]
                if len(mine) != count:
                    waiting.append(f"{cluster}: {len(mine)} of {count} pods")
                elif targets and cluster in targets and any(
                        targets[cluster].get(inv.pod_group(p)) != inv.stamp(p) for p in mine):
                    waiting.append(f"{cluster}: pods not on the target")
                elif self.wait_ready and not all((p.get("status") or {}).get("phase") == "Running" for p in mine):
                    waiting.append(f"{cluster}: pods not Running")
            return None if waiting else pods
        try:
            return self.plane.wait_for(ok, timeout=timeout, interval=0.5, message="the fleet's pods")
        except TimeoutError as err:
            raise TimeoutError(f"{err}: {'; '.join(waiting)}") from None

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.api.events(self.namespace) if reason is None or e.get("reason") == reason]

    def event_counts(self, reason: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.events(reason):
            name = f"{self.namespace}/{e['involvedObject']['name']}"
            counts[name] = counts.get(name, 0) + int(e.get("count") or 1)
        return counts


class Api:
    """The few reads the campaigns make, in-process (the ``kubernetes`` client, raw JSON)."""

    def __init__(self, kubeconfig: str):
        from kubernetes import client, config

        self._client = config.new_client_from_config(kubeconfig)
        self.core = client.CoreV1Api(self._client)
        self.custom = client.CustomObjectsApi(self._client)

    @staticmethod
    def _json(resp: Any) -> Any:
        return json.loads(resp.data)

    def rayclusters(self, namespace: str) -> list[dict[str, Any]]:
        return self._json(self.custom.list_namespaced_custom_object(
            "ray.io", "v1", namespace, "rayclusters", _preload_content=False))["items"]

    def get_rayjob(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(self.custom.get_namespaced_custom_object(
            "ray.io", "v1", namespace, "rayjobs", name, _preload_content=False))

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        return self._json(self.core.list_namespaced_pod(namespace, label_selector="ray.io/cluster",
                                                        _preload_content=False))["items"]

    def events(self, namespace: str) -> list[dict[str, Any]]:
        return self._json(self.core.list_namespaced_event(namespace, _preload_content=False))["items"]

    def core_object(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.rest import ApiException

        read = {"configmaps": self.core.read_namespaced_config_map, "secrets": self.core.read_namespaced_secret}
        try:
            return self._json(read[resource](name, namespace, _preload_content=False))
        except ApiException as err:
            if err.status == 404:
                return None
            raise

