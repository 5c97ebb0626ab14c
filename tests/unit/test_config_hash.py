"""Config changes count (issue #22): references, the config hash render stamps, the plan and
Role it writes, the hook's drift by config hash, and what diff says. The real operators run it
in tests/e2e/test_config_hash.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raygitops import configrefs
from raygitops.plan import Plan
from raygitops.presync import drift

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


def test_group_config_hashes_the_apps_configmaps_and_names_the_rest():
    maps = {"settings": {"data": {"a": "1"}}, "files": {"binaryData": {"b": "AA=="}}}
    config = configrefs.group_config(TEMPLATE, maps)
    assert config.tracked == ["files", "settings"] and config.hash.startswith("c1-")
    assert config.untracked == ["ConfigMap/init", "ConfigMap/proj", "Secret/creds", "Secret/ps", "Secret/tls",
                                "Secret/token"]
    changed = configrefs.group_config(TEMPLATE, {**maps, "settings": {"data": {"a": "2"}}})
    assert changed.hash != config.hash
    same = configrefs.group_config(TEMPLATE, {**maps, "settings": {"data": {"a": "1"}, "metadata": {"labels": {}}}})
    assert same.hash == config.hash  # only data and binaryData reach a pod
    assert configrefs.group_config({"spec": {}}, maps).hash is None


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
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(root), "--format", "json"],
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
    assert big[configrefs.CONFIG_HASH_ANNOTATION].startswith("c1-") and configrefs.CONFIG_HASH_ANNOTATION not in head
    (entry,) = plan.clusters
    assert entry.config == {"worker:big": big[configrefs.CONFIG_HASH_ANNOTATION]} and entry.config_maps == ("settings",)
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
    assert configrefs.CONFIG_HASH_ANNOTATION not in json.dumps(cluster) and not plan.config_maps
    assert not any(r.get("resources") == ["configmaps"] for r in next(o for o in objs if o["kind"] == "Role")["rules"])
    _, res = _render(_app(tmp_path / "bad", extra=", raygitops.dev/hash-config: 'no'"))
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.strip() == (f"raygitops: {tmp_path}/bad/demo.yaml:1: annotation raygitops.dev/hash-config: "
                                  "'no' is not true or false")


def test_a_stale_config_hash_annotation_in_the_manifest_is_replaced(tmp_path: Path):
    root = _app(tmp_path / "a")
    text = (root / "demo.yaml").read_text().replace(
        "template: {spec: {containers: [{name: w,",
        "template: {metadata: {annotations: {raygitops.dev/config-hash: c1-0000000000000000}}, spec: {containers: [{name: w,")
    (root / "demo.yaml").write_text(text)
    objs, _ = _render(root)
    cluster, plan = _cluster_and_plan(objs)
    value = cluster["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"][configrefs.CONFIG_HASH_ANNOTATION]
    assert value == plan.clusters[0].config["worker:big"] != "c1-0000000000000000"


# ----------------------------------------------------------------------------- hook


def _live_with_config(config_hash: str | None):
    kube = FakeKube()
    live = kube.add_cluster("demo", with_crd_defaults(stamped(two_groups())))
    for pod in kube.pods_of("demo"):
        if pod["metadata"]["labels"]["ray.io/group"] == "big" and config_hash:
            pod["metadata"]["annotations"][configrefs.CONFIG_HASH_ANNOTATION] = config_hash
    return live, kube.pods_of("demo")


def test_a_group_whose_pods_carry_another_config_hash_drifts():
    plan = plan_for(two_groups())
    plan = type(plan)(**{**plan.__dict__, "config": {"worker:big": "c1-1111111111111111"}, "config_maps": ("settings",)})
    live, pods = _live_with_config("c1-0000000000000000")
    d = drift.decide(NS, plan, live, pods)
    assert d.action == drift.REPLACE_ACTION and d.drift["worker:big"].how == "config-hash", d.reason
    assert not drift.runs_desired(next(p for p in pods if p["metadata"]["labels"]["ray.io/group"] == "big"),
                                  plan, "worker:big")


def test_pods_without_a_config_hash_never_drift_by_it():
    """Pods stamped before config hashing: upgrading raygitops recreates nothing."""
    plan = plan_for(two_groups())
    plan = type(plan)(**{**plan.__dict__, "config": {"worker:big": "c1-1111111111111111"}, "config_maps": ("settings",)})
    live, pods = _live_with_config(None)
    assert drift.decide(NS, plan, live, pods).action == drift.IN_SYNC


# ----------------------------------------------------------------------------- diff


def test_diff_names_the_configmap_and_its_changed_keys_and_the_untracked(tmp_path: Path):
    _app(tmp_path / "base" / "app", "a")
    _app(tmp_path / "head" / "app", "b")
    res = subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(tmp_path / "base"),
                          "--head", str(tmp_path / "head"), "app", "--format", "json"], capture_output=True, text=True)
    report = json.loads(res.stdout)
    (cluster,) = report["clusters"]
    assert cluster["class"] == "replace", cluster
    assert cluster["reason"].endswith("(the config of big (ConfigMap/settings (keys MODE)) changed)"), cluster["reason"]
    assert cluster["groups"][0]["config"] == ["ConfigMap/settings (keys MODE)"]
    assert report["notes"] == ["not tracked: Secret/creds (read by pods but not rendered by the app, or a Secret: "
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
    assert configrefs.CONFIG_HASH_ANNOTATION not in json.dumps(cluster) and plan.clusters[0].config == {}
