"""Config changes count, on both operators (KubeRay 1.5 and KUBERAY_NEXT_VERSION).

A ConfigMap (``envFrom``) or a Secret (an env ``secretKeyRef``) of the app read by a group
changes in Git while the pod templates do not: the group is stale by its config hash, the
hook writes the new content before any new pod can start and replaces (ReplaceGroups) or
recreates (Recreate) what reads it. The order is observed, not assumed: a watch records the
etcd revision at which each new pod was created, and every one comes after the revision of
the hook's write. The hook runs with the rendered ServiceAccount's token (its Role names the
ConfigMaps and Secrets it may write).
"""

from __future__ import annotations

import base64
import io
import shutil
import json
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
from test_presync_hook import LOCK, desired_hashes, rendered
from test_removed_groups import two_groups
from test_replace_groups import HookApp, uids_by_group

from raygitops.kube.credentials import load_credentials
from raygitops.kube.client import Kube

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
# main just before config hashes: its render stamps no config hash (the upgrade test)
BEFORE_CONFIG_HASHES = "dad1cc15a2d29ab9dffea7eb1ccc1e0285baaa3b"
# main just before Secrets were tracked: ConfigMap hashes only
BEFORE_SECRET_HASHES = "289a4b5b5b9411e3e39a2a3a5258d39709197844"
CONFIG = "raygitops.dev/config-hash"
SECRET = "raygitops.dev/secret-hash"
PASSWORD = "e2e-secret-value-never-printed"


@pytest.fixture
def app(plane, tmp_path):
    ns = plane.create_namespace(controlplane.unique_name("e2e-config"))
    yield ConfigApp(plane, ns, tmp_path)
    plane.delete_namespace(ns, wait=False)


class ConfigApp(HookApp):
    """A RayCluster, the ConfigMap ``settings`` its group ``big`` reads and, when given, the
    Secret ``creds`` (``password``)."""

    def write_with(self, cluster: dict[str, Any], data: dict[str, str], password: str | None = None) -> None:
        self.write(cluster)
        (self.dir / "settings.yaml").write_text(yaml.safe_dump(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": data}))
        if password is not None:
            (self.dir / "creds.yaml").write_text(yaml.safe_dump(
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "type": "Opaque",
                 "stringData": {"PASSWORD": password}}))

    def sync_with(self, cluster: dict[str, Any], data: dict[str, str], password: str | None = None) -> dict[str, Any]:
        self.write_with(cluster, data, password)
        objs, _, plan = self.render()
        report = json.loads(self.presync(plan).stdout)
        self.apply(objs)
        return report


def reading_config(strategy: str = "ReplaceGroups", group: str = "big", secret: bool = False) -> dict[str, Any]:
    """``group`` reads ConfigMap ``settings`` (envFrom) and, with ``secret``, Secret ``creds``
    (an env secretKeyRef)."""
    obj = two_groups(strategy=strategy)
    target = obj["spec"]["headGroupSpec"] if group == "head" else next(
        g for g in obj["spec"]["workerGroupSpecs"] if g["groupName"] == group)
    container = target["template"]["spec"]["containers"][0]
    container["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    if secret:
        container["env"] = [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}}]
    if strategy == "ReplaceGroups":
        obj["metadata"]["annotations"]["raygitops.dev/max-unavailable"] = "1"
    return obj


class PodsCreated:
    """The etcd revision at which each pod of the namespace was created (watch ADDED events)."""

    def __init__(self, plane, ns: str):
        self.kube = Kube(load_credentials(plane.kubeconfig, None))
        self.ns, self.added = ns, {}
        _, self.rv = self.kube.list_pods(ns, "ray.io/cluster")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        rv = self.rv
        while not self.stop.is_set():
            for kind, obj in self.kube.watch_pods(self.ns, "ray.io/cluster", rv, 2):
                rv = obj["metadata"].get("resourceVersion", rv)
                if kind == "ADDED":
                    self.added[obj["metadata"]["uid"]] = int(obj["metadata"]["resourceVersion"])

    def done(self) -> dict[str, int]:
        self.stop.set()
        self.thread.join(10)
        return self.added


def _demo(report: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in report["clusters"] if c["name"] == "demo")


def _hook_writes(app: ConfigApp, plane, resource: str, name: str):
    """Render; check the Role lets the hook read and patch ``resource`` ``name`` (and only by
    name); run the hook with pod creations watched. The objects, the plan, the hook's
    result, the object as the hook left it, the watch."""
    objs, hooks, plan = app.render()
    role = next(h for h in hooks if h["kind"] == "Role")
    assert {"apiGroups": [""], "resources": [resource], "resourceNames": [name],
            "verbs": ["get", "patch"]} in role["rules"]
    watch = PodsCreated(plane, app.ns)
    res = app.presync(plan)
    return objs, plan, res, plane.get(resource.rstrip("s"), name, app.ns), watch


@pytest.mark.parametrize("strategy,group", [("ReplaceGroups", "big"), ("Recreate", "head")])
def test_a_config_change_replaces_what_reads_it_after_the_new_content_is_live(app: ConfigApp, plane, strategy, group):
    cluster = reading_config(strategy, group)
    app.sync_with(cluster, {"MODE": "a"})
    before = uids_by_group(app.wait_pods(count=5))
    app.write_with(cluster, {"MODE": "b"})
    objs, plan, res, cm, watch = _hook_writes(app, plane, "configmaps", "settings")
    assert cm["data"] == {"MODE": "b"}  # live before the sync applies it
    written = int(cm["metadata"]["resourceVersion"])
    demo = _demo(json.loads(res.stdout))
    app.apply(objs)
    pods = app.wait_pods(count=5, hashes=desired_hashes(rendered(objs)))
    created = watch.done()
    after = uids_by_group(pods)
    new = {uid for uids in after.values() for uid in uids} - {uid for uids in before.values() for uid in uids}
    assert new and all(created[uid] > written for uid in new), (written, {u: created.get(u) for u in new})
    want = json.loads(rendered(objs)["metadata"]["annotations"]["raygitops.dev/template-hashes"])
    reader = "headgroup" if group == "head" else group
    assert all(p["metadata"]["annotations"].get(CONFIG) for p in pods
               if p["metadata"]["labels"]["ray.io/group"] == reader)
    if strategy == "ReplaceGroups":
        assert demo["decision"] == "replace" and demo["drift"]["worker:big"]["how"] == "config-hash", demo
        assert after["headgroup"] == before["headgroup"] and after["small"] == before["small"]
        assert after["big"].isdisjoint(before["big"])
    else:
        assert demo["decision"] == "recreate" and demo["drift"]["head"]["how"] == "config-hash", demo
        assert all(after[g].isdisjoint(before[g]) for g in before)
    assert want  # the template hashes did not move: only the config did
    assert json.loads(app.presync(plan).stdout)["summary"]["inSync"] == 1
    assert LOCK not in app.cluster()["metadata"]["annotations"]


def test_the_switch_turns_config_hashing_off(app: ConfigApp):
    cluster = reading_config()
    cluster["metadata"]["annotations"]["raygitops.dev/hash-config"] = "false"
    app.sync_with(cluster, {"MODE": "a"})
    app.wait_pods(count=5)
    report = app.sync_with(cluster, {"MODE": "b"})
    assert _demo(report)["decision"] == "in-sync", report
    assert not any(CONFIG in (p["metadata"].get("annotations") or {}) for p in app.pods())


def _render_with(commit: str, app_dir: Path, tmp: Path) -> list[dict[str, Any]]:
    """``raygitops render`` as of ``commit`` (its own source, from git), JSON objects."""
    src = tmp / f"raygitops-{commit[:8]}"
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "plugin"], capture_output=True, check=False)
    assert archive.returncode == 0, (f"commit {commit} is not in this clone (a shallow clone?): "
                                     f"{archive.stderr.decode()[:300]}")
    # extraction filters: Python 3.10.12 / 3.11.4 and later (requires-python allows older); git's
    # own archive of this repository holds no link or path outside it either way
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(src, **safe)
    # that release knew no hook.runningJobs (it asked no Ray head): the app without it
    old_app = tmp / f"app-{commit[:8]}"
    shutil.copytree(app_dir, old_app)
    config = yaml.safe_load((old_app / "raygitops.yaml").read_text())
    config.get("hook", {}).pop("runningJobs", None)
    (old_app / "raygitops.yaml").write_text(yaml.safe_dump(config))
    # that release's own spelling of the format flag (-o/--output came later)
    out = subprocess.run([sys.executable, "-m", "raygitops", "render", str(old_app), "--format", "json"],
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(src / "plugin"),
                                                                          "PATH": "/usr/bin:/bin"})
    doc = json.loads(out.stdout)
    return doc["items"] if isinstance(doc, dict) else doc


def test_upgrading_raygitops_recreates_nothing_by_itself(app: ConfigApp, tmp_path: Path):
    """Pods made from the previous release's render (no config hash), then this version's
    plan for the same inputs: in sync, nothing deleted."""
    cluster = reading_config()
    app.write_with(cluster, {"MODE": "a"})
    old = [o for o in _render_with(BEFORE_CONFIG_HASHES, app.dir, tmp_path)
           if "argocd.argoproj.io/hook" not in (o["metadata"].get("annotations") or {})]
    assert not any(CONFIG in json.dumps(o) for o in old)  # that release stamped none
    app.apply(old)
    before = uids_by_group(app.wait_pods(count=5))
    objs, _, plan = app.render()
    assert CONFIG in json.dumps(rendered(objs))  # this one does
    res = app.presync(plan)
    assert _demo(json.loads(res.stdout))["decision"] == "in-sync", res.stdout
    app.apply(objs)
    assert uids_by_group(app.wait_pods(count=5)) == before


def _never_printed(*texts: str) -> None:
    encoded = base64.b64encode(PASSWORD.encode()).decode()
    for text in texts:
        assert PASSWORD not in text and encoded not in text


def test_a_secret_change_replaces_what_reads_it_after_the_new_content_is_live(app: ConfigApp, plane):
    """Group big reads Secret creds; only its value changes in Git. The hook writes it (under
    the rendered Role: get/patch by name) before any new pod starts, replaces big only, and
    prints the Secret's name, never its value."""
    cluster = reading_config(secret=True)
    app.sync_with(cluster, {"MODE": "a"}, password="old-" + PASSWORD)
    before = uids_by_group(app.wait_pods(count=5))
    app.write_with(cluster, {"MODE": "a"}, password=PASSWORD)
    objs, plan, res, secret, watch = _hook_writes(app, plane, "secrets", "creds")
    assert base64.b64decode(secret["data"]["PASSWORD"]).decode() == PASSWORD  # live before the sync applies it
    written = int(secret["metadata"]["resourceVersion"])
    demo = _demo(json.loads(res.stdout))
    assert demo["decision"] == "replace" and demo["drift"]["worker:big"]["how"] == "secret-hash", demo
    assert "Secret/creds" in res.stderr
    _never_printed(res.stdout, res.stderr)
    app.apply(objs)
    pods = app.wait_pods(count=5, hashes=desired_hashes(rendered(objs)))
    created = watch.done()
    after = uids_by_group(pods)
    assert after["headgroup"] == before["headgroup"] and after["small"] == before["small"]
    assert after["big"].isdisjoint(before["big"])
    assert all(created[uid] > written for uid in after["big"]), (written, {u: created.get(u) for u in after["big"]})
    want = rendered(objs)["spec"]["workerGroupSpecs"][1]["template"]["metadata"]["annotations"][SECRET]
    assert {p["metadata"]["annotations"].get(SECRET) for p in pods if p["metadata"]["labels"]["ray.io/group"] == "big"} \
        == {want}
    assert json.loads(app.presync(plan).stdout)["summary"]["inSync"] == 1


def test_upgrading_to_secret_hashes_recreates_nothing_by_itself(app: ConfigApp, tmp_path: Path):
    """Pods made from the render of the release before Secrets were tracked (a ConfigMap
    hash, no Secret hash) and this version's plan for the same inputs: in sync."""
    cluster = reading_config(secret=True)
    app.write_with(cluster, {"MODE": "a"}, password=PASSWORD)
    old = [o for o in _render_with(BEFORE_SECRET_HASHES, app.dir, tmp_path)
           if "argocd.argoproj.io/hook" not in (o["metadata"].get("annotations") or {})]
    assert CONFIG in json.dumps(old) and SECRET not in json.dumps(old)  # that release hashed ConfigMaps only
    app.apply(old)
    before = uids_by_group(app.wait_pods(count=5))
    objs, _, plan = app.render()
    assert SECRET in json.dumps(rendered(objs))  # this one hashes the Secret too
    res = app.presync(plan)
    assert _demo(json.loads(res.stdout))["decision"] == "in-sync", res.stdout
    app.apply(objs)
    assert uids_by_group(app.wait_pods(count=5)) == before


def test_the_rendered_job_pod_replaces_and_writes_the_config_under_its_role(app: ConfigApp, plane, image: str,
                                                                             tmp_path: Path):
    """The hook as its Job runs it: the rendered Job's pod spec in the raygitops image, the
    in-cluster token of the rendered ServiceAccount (only its Role's rights), the plan
    ConfigMap and the hook's Secret mounted where the Job mounts them. Group big's
    ConfigMap, Secret and image change."""
    import imagerun
    from test_replace_groups import with_big_image

    cluster = reading_config(secret=True)
    app.sync_with(cluster, {"MODE": "a"}, password="old-" + PASSWORD)
    before = uids_by_group(app.wait_pods(count=5))
    app.write_with(with_big_image(cluster), {"MODE": "b"}, password=PASSWORD)
    objs, hooks, _ = app.render()
    plane.apply([h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS], namespace=app.ns)
    (job,) = [h for h in hooks if h["kind"] == "Job"]
    config_maps = {h["metadata"]["name"]: h["data"] for h in hooks if h["kind"] == "ConfigMap"}
    secrets = {h["metadata"]["name"]: {k: base64.b64decode(v) for k, v in h["data"].items()}
               for h in hooks if h["kind"] == "Secret"}
    pod = job["spec"]["template"]["spec"]
    token = plane.create_token(pod["serviceAccountName"], app.ns)
    sa_dir = imagerun.write_service_account(tmp_path / "sa", token, plane.pki.path("ca.crt"), app.ns)
    argv = imagerun.pod_argv(pod, image, config_maps=config_maps, service_account_dir=sa_dir,
                             server=plane.server, work=tmp_path, secrets=secrets)
    res = imagerun.podman(*argv, timeout=300)
    assert res.returncode == 0, f"hook in the image exited {res.returncode}\n{res.stderr}"
    demo = _demo(json.loads(res.stdout))
    assert demo["outcome"] == "replaced", demo
    assert plane.get("configmap", "settings", app.ns)["data"] == {"MODE": "b"}
    assert base64.b64decode(plane.get("secret", "creds", app.ns)["data"]["PASSWORD"]).decode() == PASSWORD
    _never_printed(res.stdout, res.stderr)
    app.apply(objs)
    after = uids_by_group(app.wait_pods(count=5, hashes=desired_hashes(rendered(objs))))
    assert after["headgroup"] == before["headgroup"] and after["small"] == before["small"]
    assert after["big"].isdisjoint(before["big"])
