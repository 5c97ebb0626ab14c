"""CRD default stripping: a defaulted live spec hashes like the manifest that was applied."""

from __future__ import annotations

import copy

import pytest
import yaml

from raygitops.model.hashing import hash_cluster
from raygitops.model.crddefaults import all_default_paths, strip_defaults

from test_presync_fakes import cluster_spec, with_crd_defaults

from sharedpaths import raycluster_crd


def _crd_defaults(path) -> list[tuple[str, object]]:
    crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    out = []

    def walk(node, where):
        if "default" in node:
            out.append((where, node["default"]))
        for key, child in (node.get("properties") or {}).items():
            walk(child, f"{where}.{key}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], where + "[]")

    walk(schema, "")
    return out


@pytest.mark.parametrize("version", ["v1.1.1", "v1.2.2", "v1.3.2", "v1.4.2", "v1.5.0", "v1.6.2", "v1.7.0"])
def test_table_covers_every_crd_default(version):
    """Every KubeRay raygitops serves: an operator upgrade brings its CRD's defaults into the
    live spec at once, and a default the table lacks would look like drift."""
    crd, looked = raycluster_crd(version)
    if crd is None:
        pytest.skip(f"CRD not found: {' or '.join(map(str, looked))}")
    table = {(p, repr(d)) for p, d in all_default_paths()}
    missing = [(p, d) for p, d in _crd_defaults(crd) if (p, repr(d)) not in table]
    assert missing == []


def test_defaulted_live_spec_hashes_like_the_manifest():
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"key": "t"}}})
    live = with_crd_defaults(spec)
    assert live != spec
    assert hash_cluster(live) != hash_cluster(spec)  # why stripping is needed
    assert hash_cluster(strip_defaults(live)) == hash_cluster(strip_defaults(spec))


def test_explicit_default_in_manifest_equals_omitted():
    spec = cluster_spec()
    explicit = copy.deepcopy(spec)
    explicit["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"
    explicit["workerGroupSpecs"][0]["numOfHosts"] = 1
    assert hash_cluster(strip_defaults(explicit)) == hash_cluster(strip_defaults(spec))


def test_non_default_values_are_kept():
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "UDP"
    spec["workerGroupSpecs"][0]["numOfHosts"] = 2
    spec["headGroupSpec"]["template"]["spec"]["volumes"] = [
        {"name": "cfg", "configMap": {"name": "settings"}},
        {"name": "empty", "configMap": {"name": ""}},
    ]
    stripped = strip_defaults(spec)
    assert stripped["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] == "UDP"
    assert stripped["workerGroupSpecs"][0]["numOfHosts"] == 2
    vols = stripped["headGroupSpec"]["template"]["spec"]["volumes"]
    assert vols[0]["configMap"] == {"name": "settings"}
    assert vols[1]["configMap"] == {}
    assert hash_cluster(stripped) != hash_cluster(strip_defaults(cluster_spec()))


def test_bool_default_never_strips_an_int():
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "F", "valueFrom": {"fileKeyRef": {"optional": 0, "path": "p", "volumeName": "v", "key": "k"}}})
    stripped = strip_defaults(spec)
    ref = stripped["headGroupSpec"]["template"]["spec"]["containers"][0]["env"][-1]["valueFrom"]["fileKeyRef"]
    assert ref["optional"] == 0


def test_input_not_mutated_and_malformed_tolerated():
    spec = with_crd_defaults(cluster_spec())
    before = copy.deepcopy(spec)
    strip_defaults(spec)
    assert spec == before
    assert strip_defaults({"headGroupSpec": "x", "workerGroupSpecs": [1, None]}) == {
        "headGroupSpec": "x", "workerGroupSpecs": [1, None]}
    assert strip_defaults(None) is None


def test_cluster_level_defaults_autoscaler_and_gcs():
    spec = cluster_spec()
    spec["autoscalerOptions"] = {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"key": "k", "name": ""}}}]}
    spec["gcsFaultToleranceOptions"] = {"redisPassword": {"valueFrom": {"secretKeyRef": {"key": "k", "name": ""}}}}
    stripped = strip_defaults(spec)
    assert stripped["autoscalerOptions"]["env"][0]["valueFrom"]["secretKeyRef"] == {"key": "k"}
    assert stripped["gcsFaultToleranceOptions"]["redisPassword"]["valueFrom"]["secretKeyRef"] == {"key": "k"}


def test_the_defaults_a_newer_crd_adds_are_no_drift():
    """Upgrading KubeRay to 1.7 defaults every worker group's ``priority`` (0) in the live
    spec at once: hashed like the manifest without it, so pods made before raygitops are not
    recreated by the upgrade; another priority is a change."""
    spec = cluster_spec()
    live = copy.deepcopy(spec)
    live["workerGroupSpecs"][0]["priority"] = 0
    assert hash_cluster(strip_defaults(live)) == hash_cluster(strip_defaults(spec))
    live["workerGroupSpecs"][0]["priority"] = 5
    assert hash_cluster(strip_defaults(live)) != hash_cluster(strip_defaults(spec))
