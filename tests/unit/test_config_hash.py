"""Config changes count (issue #22): references, the config hash render stamps, the plan and
Role it writes, the hook's drift by config hash, and what diff says. The real operators run it
in tests/e2e/test_config_hash.py."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raygitops.model import configrefs
from raygitops.render.hookresources import hook_resources
from raygitops.model.plan import Plan
from raygitops.presync.planfiles import load_secrets
from raygitops.sources.settings import Settings
from raygitops.presync import configlive
from raygitops.model import verdict
from raygitops.kube.client import ApiError, Conflict
from raygitops.model import names

from test_presync_fakes import NS, FakeKube, stamped, with_crd_defaults
from test_presync_replace import plan_for, two_groups

TEMPLATE = {"spec": {
    "initContainers": [{"name": "i", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "init", "key": "k"}}}]}],
    "containers": [{"name": "c",
                    "env": [{"name": "B", "valueFrom": {"secretKeyRef": {"name": "token", "key": "k"}}},
                            {"name": "C", "value": "plain"}, {"name": "D", "valueFrom": {"fieldRef": {}}}],
                    "envFrom": [{"configMapRef": {"name": "settings"}}, {"secretRef": {"name": "creds"}}]}],
    "volumes": [{"name": "v1", "configMap": {"name": "files"}}, {"name": "v2", "secret": {"secretName": "tls"}},
                {"name": "v3", "projected": {"sources": [{"configMap": {"name": "proj"}}, {"secret": {"name": "ps"}},
                                                         {"downwardAPI": {}}]}},
                {"name": "v4", "emptyDir": {}}, {"name": "v5", "configMap": {"name": "settings"}}]}}


def test_every_kind_of_reference_is_found_once():
    assert configrefs.references(TEMPLATE) == [
        ("ConfigMap", "files"), ("ConfigMap", "init"), ("ConfigMap", "proj"), ("ConfigMap", "settings"),
        ("Secret", "creds"), ("Secret", "ps"), ("Secret", "tls"), ("Secret", "token")]


@pytest.mark.parametrize("template", [None, [], {"spec": []}, {"spec": {"containers": "x", "volumes": [1, None]}},
                                      {"spec": {"containers": [{"env": [{"valueFrom": {"configMapKeyRef": {"name": 5}}}]}]}}])
def test_malformed_templates_have_no_references(template):
    assert configrefs.references(template) == []


def _maps(**objs: dict) -> dict:
    return {("ConfigMap", name): {"kind": "ConfigMap", **obj} for name, obj in objs.items()}


def test_group_config_hashes_the_apps_configmaps_and_names_the_rest():
    maps = _maps(settings={"data": {"a": "1"}}, files={"binaryData": {"b": "AA=="}})
    config = configrefs.group_config(configrefs.references(TEMPLATE), maps)
    assert config.tracked == [("ConfigMap", "files"), ("ConfigMap", "settings")]
    assert list(config.hashes) == ["ConfigMap"] and config.hashes["ConfigMap"].startswith("c1-")
    assert config.untracked == ["ConfigMap/init", "ConfigMap/proj", "Secret/creds", "Secret/ps", "Secret/tls",
                                "Secret/token"]
    changed = configrefs.group_config(configrefs.references(TEMPLATE), {**maps, **_maps(settings={"data": {"a": "2"}})})
    assert changed.hashes != config.hashes
    same = configrefs.group_config(configrefs.references(TEMPLATE), {**maps, **_maps(settings={"data": {"a": "1"}, "metadata": {"labels": {}}})})
    assert same.hashes == config.hashes  # only data and binaryData reach a pod
    assert configrefs.group_config(configrefs.references({"spec": {}}), maps).hashes == {}


def test_changed_keys():
    assert configrefs.changed_keys({"data": {"a": "1", "b": "2"}}, {"data": {"a": "1", "b": "3", "c": ""}}) == ["b", "c"]
    assert configrefs.changed_keys(None, {"binaryData": {"x": "AA=="}}) == ["x"]


# ----------------------------------------------------------------------------- render

CLUSTER = """apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: demo
  annotations: {raygitops.dev/upgrade-strategy: ReplaceGroups%s}
spec:
  headGroupSpec:
    rayStartParams: {}
    template: {spec: {containers: [{name: h, image: rayproject/ray:2.41.0, envFrom: [{secretRef: {name: creds}}]}]}}
  workerGroupSpecs:
  - groupName: big
    replicas: 2
    rayStartParams: {}
    template: {spec: {containers: [{name: w, image: rayproject/ray:2.41.0, envFrom: [{configMapRef: {name: settings}}]}]}}
"""


def _app(root: Path, mode: str = "a", extra: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "raygitops.yaml").write_text("namespace: ray\n")
    (root / "demo.yaml").write_text(CLUSTER % extra)
    (root / "settings.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "settings"}, "data": {"MODE": mode}}))
    return root


def _render(root: Path) -> tuple[list[dict], subprocess.CompletedProcess]:
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(root), "--output", "json"],
                         capture_output=True, text=True)
    if res.returncode:
        return [], res
    doc = json.loads(res.stdout)
    return (doc["items"] if isinstance(doc, dict) else doc), res


def _cluster_and_plan(objs: list[dict]) -> tuple[dict, Plan]:
    cluster = next(o for o in objs if o["kind"] == "RayCluster")
    plan = next(o for o in objs if o["kind"] == "ConfigMap" and "plan.json" in o.get("data", {}))
    return cluster, Plan.from_json(json.loads(plan["data"]["plan.json"]))


def test_render_stamps_the_reader_only_and_the_template_hashes_do_not_move(tmp_path: Path):
    objs, _ = _render(_app(tmp_path / "a"))
    cluster, plan = _cluster_and_plan(objs)
    big = cluster["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"]
    head = cluster["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"]
    assert big[names.CONFIG_HASH_ANNOTATION].startswith("c1-") and names.CONFIG_HASH_ANNOTATION not in head
    (entry,) = plan.clusters
    assert entry.config == {"worker:big": big[names.CONFIG_HASH_ANNOTATION]} and entry.config_maps == ("settings",)
    assert plan.config_maps == {"settings": {"data": {"MODE": "a"}}}
    role = next(o for o in objs if o["kind"] == "Role")
    assert {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"],
            "verbs": ["get", "patch"]} in role["rules"]
    changed, _ = _render(_app(tmp_path / "b", mode="b"))
    cluster_b, plan_b = _cluster_and_plan(changed)
    assert plan_b.clusters[0].hashes == entry.hashes  # h1 ignores raygitops.dev/* annotations
    assert plan_b.clusters[0].config != entry.config


def test_the_switch_and_its_bad_values(tmp_path: Path):
    objs, _ = _render(_app(tmp_path / "off", extra=", raygitops.dev/hash-config: 'false'"))
    cluster, plan = _cluster_and_plan(objs)
    assert names.CONFIG_HASH_ANNOTATION not in json.dumps(cluster) and not plan.config_maps
    # the hook writes no ConfigMap; its preflight only GETs the one the pods read, by name
    assert [r for r in next(o for o in objs if o["kind"] == "Role")["rules"] if r.get("resources") == ["configmaps"]] \
        == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get"]}]
    _, res = _render(_app(tmp_path / "bad", extra=", raygitops.dev/hash-config: 'no'"))
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.strip() == (f"raygitops: {tmp_path}/bad/demo.yaml:5: annotation raygitops.dev/hash-config: "
                                  "'no' is not true or false")


def test_a_stale_config_hash_annotation_in_the_manifest_is_replaced(tmp_path: Path):
    root = _app(tmp_path / "a")
    text = (root / "demo.yaml").read_text().replace(
        "template: {spec: {containers: [{name: w,",
        "template: {metadata: {annotations: {raygitops.dev/config-hash: c1-0000000000000000}}, spec: {containers: [{name: w,")
    (root / "demo.yaml").write_text(text)
    objs, _ = _render(root)
    cluster, plan = _cluster_and_plan(objs)
    value = cluster["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION]
    assert value == plan.clusters[0].config["worker:big"] != "c1-0000000000000000"


# ----------------------------------------------------------------------------- hook


def _live_with_config(config_hash: str | None):
    kube = FakeKube()
    live = kube.add_cluster("demo", with_crd_defaults(stamped(two_groups())))
    for pod in kube.pods_of("demo"):
        if pod["metadata"]["labels"]["ray.io/group"] == "big" and config_hash:
            pod["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION] = config_hash
    return live, kube.pods_of("demo")


def test_a_group_whose_pods_carry_another_config_hash_drifts():
    plan = plan_for(two_groups())
    plan = type(plan)(**{**plan.__dict__, "config": {"worker:big": "c1-1111111111111111"}, "config_maps": ("settings",)})
    live, pods = _live_with_config("c1-0000000000000000")
    d = verdict.decide(NS, plan, live, pods)
    assert d.action == verdict.REPLACE and d.drift["worker:big"].how == "config-hash", d.reason
    assert not verdict.runs_desired(next(p for p in pods if p["metadata"]["labels"]["ray.io/group"] == "big"),
                                  plan, "worker:big")


def test_pods_without_a_config_hash_never_drift_by_it():
    """Pods stamped before config hashing: upgrading raygitops recreates nothing."""
    plan = plan_for(two_groups())
    plan = type(plan)(**{**plan.__dict__, "config": {"worker:big": "c1-1111111111111111"}, "config_maps": ("settings",)})
    live, pods = _live_with_config(None)
    assert verdict.decide(NS, plan, live, pods).action == verdict.IN_SYNC


# ----------------------------------------------------------------------------- diff


def test_diff_names_the_configmap_and_its_changed_keys_and_the_untracked(tmp_path: Path):
    _app(tmp_path / "base" / "app", "a")
    _app(tmp_path / "head" / "app", "b")
    res = subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(tmp_path / "base"),
                          "--head", str(tmp_path / "head"), "app", "--output", "json"], capture_output=True, text=True)
    report = json.loads(res.stdout)
    (cluster,) = report["clusters"]
    assert cluster["class"] == "replace", cluster
    assert cluster["reason"].endswith("(the config of big (ConfigMap/settings (keys MODE)) changed)"), cluster["reason"]
    assert cluster["groups"][0]["config"] == ["ConfigMap/settings (keys MODE)"]
    assert report["notes"] == ["not tracked: Secret/creds (read by pods but not rendered by the app: "
                               "a change to it recreates nothing)"]
    assert "MODE" in res.stdout and '"b"' not in json.dumps(cluster)  # keys, never values


def test_a_cluster_that_keeps_kuberays_own_recreate_is_not_config_hashed(tmp_path: Path):
    """The operator's hash covers template annotations: a config hash added by an upgrade of
    raygitops would make KubeRay >= 1.6 restart the pods once, by itself."""
    root = _app(tmp_path / "native")
    (root / "raygitops.yaml").write_text("namespace: ray\nkeepUpgradeStrategy: true\nkuberayVersion: '1.6'\n")
    text = (root / "demo.yaml").read_text().replace("raygitops.dev/upgrade-strategy: ReplaceGroups",
                                                    "raygitops.dev/upgrade-strategy: Recreate")
    (root / "demo.yaml").write_text(text.replace("spec:\n  headGroupSpec:", "spec:\n  upgradeStrategy: {type: Recreate}\n  headGroupSpec:", 1))
    objs, res = _render(root)
    assert res.returncode == 0, res.stderr
    cluster, plan = _cluster_and_plan(objs)
    assert cluster["spec"]["upgradeStrategy"] == {"type": "Recreate"}
    assert names.CONFIG_HASH_ANNOTATION not in json.dumps(cluster) and plan.clusters[0].config == {}


# ----------------------------------------------------------------------------- Secrets

PASSWORD = "hunter2-do-not-print"


def test_a_secrets_content_is_what_the_api_server_stores():
    """``stringData`` is merged into ``data`` encoded, and wins a key in both; ``!!binary``
    YAML (bytes) is the same as its base64 text: one content, one digest."""
    b64 = "aHVudGVyMg=="  # "hunter2"
    forms = [{"kind": "Secret", "data": {"p": b64}},
             {"kind": "Secret", "stringData": {"p": "hunter2"}},
             {"kind": "Secret", "data": {"p": b"hunter2"}},
             {"kind": "Secret", "data": {"p": "b3RoZXI="}, "stringData": {"p": "hunter2"}, "type": "Opaque"}]
    assert {configrefs.digest(f) for f in forms} == {configrefs.digest(forms[0])}
    assert configrefs.content(forms[1]) == {"data": {"p": b64}}
    assert configrefs.payload(forms[3]) == {"data": {"p": b64}, "type": "Opaque"}
    assert configrefs.digest({"kind": "Secret", "data": {"p": "b3RoZXI="}}) != configrefs.digest(forms[0])


def test_secrets_hash_apart_from_configmaps():
    """A change to a Secret moves the group's s1 hash only; a group reading no Secret of the
    app has none (so a pod stamped before Secrets were tracked keeps its c1 hash valid)."""
    objs = {**_maps(settings={"data": {"a": "1"}}), ("Secret", "creds"): {"kind": "Secret", "data": {"p": "MQ=="}}}
    config = configrefs.group_config(configrefs.references(TEMPLATE), objs)
    assert config.hashes["ConfigMap"].startswith("c1-") and config.hashes["Secret"].startswith("s1-")
    changed = configrefs.group_config(configrefs.references(TEMPLATE), {**objs, ("Secret", "creds"): {"kind": "Secret", "data": {"p": "Mg=="}}})
    assert changed.hashes["ConfigMap"] == config.hashes["ConfigMap"] != config.hashes["Secret"] != changed.hashes["Secret"]
    without = configrefs.group_config(configrefs.references(TEMPLATE), _maps(settings={"data": {"a": "1"}}))
    assert without.hashes == {"ConfigMap": config.hashes["ConfigMap"]}


def _secret_app(root: Path, password: str = PASSWORD, mode: str = "a") -> Path:
    _app(root, mode)
    (root / "creds.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                                                     "type": "Opaque", "stringData": {"PASSWORD": password}}))
    return root


def test_render_stamps_the_secret_hash_and_carries_the_content_in_the_hooks_own_secret(tmp_path: Path):
    objs, res = _render(_secret_app(tmp_path / "a"))
    assert res.returncode == 0, res.stderr
    cluster, plan = _cluster_and_plan(objs)
    head = cluster["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"]
    big = cluster["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"]
    assert head[names.SECRET_HASH_ANNOTATION].startswith("s1-") and names.SECRET_HASH_ANNOTATION not in big
    (entry,) = plan.clusters
    assert entry.secret_config == {"head": head[names.SECRET_HASH_ANNOTATION]} and entry.secrets == ("creds",)
    plan_cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "raygitops-plan")
    assert PASSWORD not in json.dumps(plan_cm) and "aHVudGVy" not in json.dumps(plan_cm)  # names, never values
    (hook_secret,) = [o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == "raygitops-plan-secrets"]
    assert hook_secret["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PreSync"
    carried = json.loads(base64.b64decode(hook_secret["data"]["secrets.json"]))
    assert carried["secrets"] == {"creds": {"data": {"PASSWORD": base64.b64encode(PASSWORD.encode()).decode()},
                                            "type": "Opaque"}}
    role = next(o for o in objs if o["kind"] == "Role")
    assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["creds"],
            "verbs": ["get", "patch"]} in role["rules"]
    job = next(o for o in objs if o["kind"] == "Job")["spec"]["template"]["spec"]
    args = job["containers"][0]["args"]
    assert args[args.index("--secrets") + 1] == "/plan-secrets/secrets.json"
    assert {"name": "secrets", "secret": {"secretName": "raygitops-plan-secrets"}} in job["volumes"]
    kinds = [o["kind"] for o in objs]
    assert kinds.index("Secret", kinds.index("ConfigMap", kinds.index("RoleBinding"))) < kinds.index("Job")
    again, _ = _render(_secret_app(tmp_path / "b", password="changed"))
    _, plan_b = _cluster_and_plan(again)
    assert plan_b.clusters[0].secret_config != entry.secret_config and plan_b.clusters[0].config == entry.config
    assert plan_b.clusters[0].hashes == entry.hashes


def test_an_app_whose_pods_read_no_secret_of_it_gets_no_hook_secret(tmp_path: Path):
    objs, _ = _render(_app(tmp_path / "a"))
    assert not any(o["kind"] == "Secret" for o in objs)
    job = next(o for o in objs if o["kind"] == "Job")["spec"]["template"]["spec"]
    assert "--secrets" not in job["containers"][0]["args"] and len(job["volumes"]) == 1


def test_pods_without_a_secret_hash_never_drift_by_it_and_pods_with_another_do():
    plan = plan_for(two_groups())
    plan = dataclasses.replace(plan, secret_config={"worker:big": "s1-1111111111111111"}, secrets=("creds",))
    live, pods = _live_with_config("c1-0000000000000000")  # a c1 hash the plan does not ask for: not compared
    assert verdict.decide(NS, plan, live, pods).action == verdict.IN_SYNC
    for pod in pods:
        if pod["metadata"]["labels"]["ray.io/group"] == "big":
            pod["metadata"]["annotations"][names.SECRET_HASH_ANNOTATION] = "s1-0000000000000000"
    d = verdict.decide(NS, plan, live, pods)
    assert d.action == verdict.REPLACE and d.drift["worker:big"].how == "secret-hash", d.reason


def _plan_file(tmp_path: Path, objs: list[dict]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(next(o for o in objs if o["kind"] == "ConfigMap"
                         and o["metadata"]["name"] == "raygitops-plan")["data"]["plan.json"])
    return path


def _presync(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", "presync", "--kubeconfig", "/nonexistent", *args],
                          capture_output=True, text=True)


def test_the_hook_refuses_a_plan_naming_secrets_it_was_not_given(tmp_path: Path):
    """Fail closed, before any API call: without the content it could not make the Secret
    live, and new pods would start with the old one under the new hash."""
    objs, _ = _render(_secret_app(tmp_path / "app"))
    plan = _plan_file(tmp_path, objs)
    res = _presync("--plan", str(plan))
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.strip() == ("raygitops: the plan of namespace ray names Secret creds but no --secrets file "
                                  "carries its content: refusing (new pods would start with the old content)")
    hook_secret = next(o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == "raygitops-plan-secrets")
    secrets = tmp_path / "secrets.json"
    secrets.write_bytes(base64.b64decode(hook_secret["data"]["secrets.json"]))
    other = tmp_path / "other.json"
    other.write_text(secrets.read_text().replace('"namespace":"ray"', '"namespace":"elsewhere"'))
    res = _presync("--plan", str(plan), "--secrets", str(secrets), "--secrets", str(other))
    assert res.returncode == 1 and res.stderr.strip() == (
        f"raygitops: {other}: secrets file for namespace elsewhere: no --plan for it")
    (tmp_path / "bad.json").write_text('{"apiVersion": "raygitops.dev/v1", "kind": "PresyncSecrets", '
                                       '"secrets": {"creds": {"data": {"P": 1}}}}')
    res = _presync("--plan", str(plan), "--secrets", str(tmp_path / "bad.json"))
    assert res.returncode == 1 and "malformed secrets file: secrets['creds'] is not data string maps" in res.stderr
    res = _presync("--plan", str(plan), "--secrets", str(secrets))
    assert res.returncode == 1 and "kubeconfig file not found" in res.stderr  # past the check
    assert PASSWORD not in res.stderr + res.stdout


@pytest.mark.parametrize("fmt", ["json", "markdown", "text"])
def test_diff_names_the_secret_and_its_changed_keys_never_a_value(tmp_path: Path, fmt: str):
    _secret_app(tmp_path / "base" / "app", password="old-" + PASSWORD)
    _secret_app(tmp_path / "head" / "app", password=PASSWORD)
    res = subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(tmp_path / "base"),
                          "--head", str(tmp_path / "head"), "app", "--output", fmt], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "Secret/creds (keys PASSWORD)" in res.stdout
    encoded = [base64.b64encode(p.encode()).decode() for p in (PASSWORD, "old-" + PASSWORD)]
    assert not any(v in res.stdout + res.stderr for v in (PASSWORD, "old-" + PASSWORD, *encoded))
    assert "not tracked" not in res.stdout  # the Secret is rendered by the app now
    if fmt == "json":
        (cluster,) = json.loads(res.stdout)["clusters"]
        assert cluster["class"] == "recreate" and cluster["groups"][0]["config"] == ["Secret/creds (keys PASSWORD)"]


def test_plan_out_writes_the_secrets_file_beside_the_plan_for_a_run_by_hand(tmp_path: Path):
    root = _secret_app(tmp_path / "app")
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(root), "--plan-out", str(tmp_path / "plans")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    plan, secrets = tmp_path / "plans" / "ray.json", tmp_path / "plans" / "ray.secrets.json"
    assert PASSWORD not in plan.read_text() and secrets.stat().st_mode & 0o777 == 0o600
    assert json.loads(secrets.read_text())["secrets"]["creds"]["data"] == {
        "PASSWORD": base64.b64encode(PASSWORD.encode()).decode()}
    res = _presync("--plan", str(plan), "--secrets", str(secrets), "--dry-run")
    assert "kubeconfig file not found" in res.stderr and PASSWORD not in res.stderr


def test_a_large_secrets_file_is_gzipped_and_read_back_from_beside_the_flag(tmp_path: Path):
    """Above 512 KiB the hook's Secret carries ``secrets.json.gz`` (a Secret holds at most
    1 MiB); ``--secrets .../secrets.json`` reads the ``.gz`` beside it, as for the plan."""
    big = {"data": {f"k{i}": base64.b64encode(bytes([i % 251]) * 600).decode() for i in range(1000)}, "type": "Opaque"}
    plan = dataclasses.replace(Plan(namespace="ray"), secrets={"creds": big})
    (secret,) = [o for o in hook_resources(plan, Settings()) if o["kind"] == "Secret"]
    assert list(secret["data"]) == ["secrets.json.gz"]
    packed = base64.b64decode(secret["data"]["secrets.json.gz"])
    assert len(packed) < 512 * 1024 < len(gzip.decompress(packed))
    (tmp_path / "secrets.json.gz").write_bytes(packed)
    assert load_secrets(str(tmp_path / "secrets.json")) == ("ray", {"creds": big})


class _Objects:
    """The three calls configlive makes, on a dict; ``conflicts`` patches fail with 409 first."""

    def __init__(self, live: dict | None, conflicts: int = 0):
        self.live, self.conflicts, self.calls = live, conflicts, []

    def get_core(self, resource, namespace, name):
        return self.live

    def create_core(self, resource, namespace, body):
        self.calls.append(("create", resource, body))

    def patch_core(self, resource, namespace, name, patch):
        self.calls.append(("patch", resource, patch))
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict(409, "Conflict", "changed", "PATCH", resource)


def test_the_hook_writes_a_secret_with_its_type_and_nulls_a_key_git_removed():
    plan = dataclasses.replace(plan_for(two_groups()), secrets=("creds",))
    want = {"creds": {"data": {"a": "MQ=="}, "type": "kubernetes.io/basic-auth"}}
    kube = _Objects(None)
    assert configlive.make_live(kube, NS, plan, {"Secret": want}) == ["Secret/creds"]
    assert kube.calls == [("create", "secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                                                 **want["creds"]})]
    kube = _Objects({"kind": "Secret", "metadata": {"resourceVersion": "7"}, "data": {"a": "MA==", "gone": "eA=="}})
    configlive.make_live(kube, NS, plan, {"Secret": want})
    assert kube.calls == [("patch", "secrets", {"metadata": {"resourceVersion": "7"},
                                                "data": {"a": "MQ==", "gone": None}})]  # the type is never patched
    kube = _Objects({"kind": "Secret", "metadata": {"resourceVersion": "7"}, "data": {"a": "MQ=="}})
    assert configlive.make_live(kube, NS, plan, {"Secret": want}) == [] and kube.calls == []


def test_the_config_write_fails_closed_when_it_keeps_conflicting():
    """Ten conflicts in a row: an error (the cluster fails), not a silent skip that would let
    new pods start with the old content."""
    plan = dataclasses.replace(plan_for(two_groups()), config_maps=("settings",))
    live = {"kind": "ConfigMap", "metadata": {"resourceVersion": "1"}, "data": {"MODE": "a"}}
    kube = _Objects(live, conflicts=configlive.MAX_CONFLICTS - 1)
    assert configlive.make_live(kube, NS, plan, {"ConfigMap": {"settings": {"data": {"MODE": "b"}}}}) == [
        "ConfigMap/settings"]
    kube = _Objects(live, conflicts=configlive.MAX_CONFLICTS)
    with pytest.raises(ApiError, match="ConfigMap settings kept changing"):
        configlive.make_live(kube, NS, plan, {"ConfigMap": {"settings": {"data": {"MODE": "b"}}}})
    assert len(kube.calls) == configlive.MAX_CONFLICTS
