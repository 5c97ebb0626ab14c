"""KubeRay 1.6's native Recreate: the operator's hash rules, the regimes, diff's predictions
(docs/kuberay-1.6.md), the version setting and render's refusal of a field the target drops."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

import fidelity
from raygitops.model import convert, native
from raygitops.errors import RaygitopsError
from raygitops.render.pipeline import render_app
from raygitops.preview.impact import classify
from raygitops.preview.revisions import render_sides
from raygitops.model import names

# --------------------------------------------------------------------------- operator's hash


def spec() -> dict:
    return copy.deepcopy(fidelity.base_cluster("c")["spec"])


def changed(mutate) -> dict:
    doc = fidelity.base_cluster("c")
    mutate(doc)
    return doc["spec"]


@pytest.mark.parametrize("title", ["image", "env var", "pod-template labels", "pod-template annotations",
                                   "rayStartParams", "a new worker group", "a removed worker group",
                                   "head serviceType", "headServiceAnnotations"])
def test_operator_hash_sees(title: str) -> None:
    assert native.spec_hash_changes(spec(), changed(fidelity.MUTATIONS[title][1]))


@pytest.mark.parametrize("title", ["tolerations", "schedulingGates", "worker replicas",
                                   "a quantity written another way (`100m` → `0.1`)"])
def test_operator_hash_mutes(title: str) -> None:
    """Muted by the operator (or the same value): on the raw spec, no recreate."""
    assert not native.spec_hash_changes(spec(), changed(fidelity.MUTATIONS[title][1]))


def test_operator_hash_mutes_more() -> None:
    new = spec()
    new["upgradeStrategy"] = {"type": "Recreate"}
    group = new["workerGroupSpecs"][0]
    group.update(minReplicas=1, maxReplicas=9, scaleStrategy={"workersToDelete": ["w-1"]})
    new["headGroupSpec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    assert not native.spec_hash_changes(spec(), new)


def test_operator_hash_applies_crd_defaults_to_both_sides() -> None:
    new = spec()
    new["workerGroupSpecs"][0]["numOfHosts"] = 1  # the CRD default
    new["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"
    assert not native.spec_hash_changes(spec(), new)
    new["workerGroupSpecs"][0]["numOfHosts"] = 2
    assert native.spec_hash_changes(spec(), new)


def test_operator_hash_keeps_raygitops_annotations() -> None:
    """raygitops' h1 form ignores ``raygitops.dev/*``; the operator does not."""
    new = spec()
    new["headGroupSpec"]["template"]["metadata"] = {"annotations": {"raygitops.dev/template-hash": "h1-x"}}
    assert native.spec_hash_changes(spec(), new)


def test_operator_hash_input_does_not_mutate() -> None:
    before = spec()
    before["workerGroupSpecs"][0]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    kept = copy.deepcopy(before)
    native.hash_input(before)
    assert before == kept


@pytest.mark.parametrize("version,knows", [("1.5", False), ("1.5.0", False), ("0.9", False),
                                           ("1.6", True), ("1.6.2", True), ("1.10", True), ("2.0", True)])
def test_knows_upgrade_strategy(version: str, knows: bool) -> None:
    assert native.knows_upgrade_strategy(version) is knows


# --------------------------------------------------------------------------- the setting


@pytest.mark.parametrize("text,value", [("1.6", "1.6"), ("v1.6.2", "1.6.2"), (" 1.5.0 ", "1.5.0")])
def test_kuberay_version_accepted(text: str, value: str) -> None:
    assert convert.kuberay_version(text) == value


@pytest.mark.parametrize("bad", ["1", "1.6.2.1", "latest", "1.06", "", 1.6, None, "v"])
def test_kuberay_version_refused(bad) -> None:
    with pytest.raises(ValueError, match="expected a KubeRay version"):
        convert.kuberay_version(bad)


# --------------------------------------------------------------------------- render


def _app(tmp_path: Path, config: dict, doc: dict) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    # fidelity's clusters declare no dashboard port (kwok's heads run no Ray): nothing to ask
    config = {"hook": {"runningJobs": "proceed"}, **config}
    (tmp_path / "raygitops.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def _plan(result) -> dict | None:
    cm = next((o for o in result.objects if o["kind"] == "ConfigMap"), None)
    return json.loads(cm["data"]["plan.json"])["clusters"][0] if cm else None


@pytest.mark.parametrize("key", list(fidelity.REGIMES))
def test_regimes_render_to_their_plan(tmp_path: Path, key: str) -> None:
    regime = fidelity.REGIMES[key]
    result = render_app(str(_app(tmp_path, regime.config("ns"), regime.apply(fidelity.base_cluster("c")))), env={})
    plan = _plan(result)
    rendered = result.objects[0]
    assert ("upgradeStrategy" in rendered["spec"]) is regime.keep
    if not regime.annotation and not regime.field:
        assert plan is None  # nothing asks for a recreate: no hook
        return
    assert plan["strategy"] == (regime.annotation or regime.field)
    assert plan.get("nativeRecreate", False) is regime.keep


def test_a_kept_field_for_an_operator_without_it_is_refused(tmp_path: Path) -> None:
    doc = fidelity.REGIMES["native-1.6"].apply(fidelity.base_cluster("c"))
    app = _app(tmp_path, {"keepUpgradeStrategy": True, "kuberayVersion": "1.5"}, doc)
    with pytest.raises(RaygitopsError) as err:
        render_app(str(app), env={})
    assert "c.yaml:27" in str(err.value) and "KubeRay 1.5 does not know this field" in str(err.value)
    # the same from a flag, and accepted for 1.6 or with the field moved
    with pytest.raises(RaygitopsError, match="KubeRay 1.5.2 does not know"):
        render_app(str(app), env={}, overrides={"kuberay_version": "v1.5.2"})
    render_app(str(app), env={}, overrides={"kuberay_version": "1.6"})
    doc = fidelity.REGIMES["raygitops-1.5"].apply(fidelity.base_cluster("c"))
    doc["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    render_app(str(_app(tmp_path / "moved", {"kuberayVersion": "1.5"}, doc)), env={})


def test_native_only_needs_keep(tmp_path: Path) -> None:
    doc = fidelity.REGIMES["native-1.6"].apply(fidelity.base_cluster("c"))
    with pytest.raises(RaygitopsError, match="contradicts.*keepUpgradeStrategy: true"):
        render_app(str(_app(tmp_path, {}, doc)), env={})


# --------------------------------------------------------------------------- diff


def _predictions(tmp_path: Path, key: str) -> dict[str, str]:
    regime = fidelity.REGIMES[key]
    base, head = fidelity.sides(regime)
    for side, docs in (("base", base), ("head", head)):
        d = tmp_path / key / side
        d.mkdir(parents=True)
        (d / "raygitops.yaml").write_text(yaml.safe_dump(regime.config("ns")))
        for doc in docs:
            (d / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
    b, h = render_sides(str(tmp_path / key / "base"), str(tmp_path / key / "head"))
    return {c.name: c.klass for c in classify(b.result, h.result).clusters}


@pytest.mark.parametrize("key", list(fidelity.REGIMES))
def test_diff_predicts_the_documented_table(tmp_path: Path, key: str) -> None:
    """docs/kuberay-1.6.md's table, column by column; tests/e2e/test_fidelity.py shows the
    real operators do what it says."""
    documented = fidelity.documented()
    got = _predictions(tmp_path, key)
    assert {t: got[n] for t, (n, _) in fidelity.MUTATIONS.items()} == \
        {t: documented[(t, key)] for t in fidelity.MUTATIONS}


def test_native_recreate_is_explained_and_counted(tmp_path: Path) -> None:
    base, head = fidelity.sides(fidelity.REGIMES["native-1.6"])
    for side, docs in (("base", base[:1]), ("head", head[:1])):
        (tmp_path / side).mkdir()
        (tmp_path / side / "raygitops.yaml").write_text("keepUpgradeStrategy: true\n")
        (tmp_path / side / "c.yaml").write_text(yaml.safe_dump(docs[0]))
    b, h = render_sides(str(tmp_path / "base"), str(tmp_path / "head"))
    report = classify(b.result, h.result)
    (c,) = report.clusters
    assert c.klass == "native-recreate" and report.verdict == "recreate" and report.recreated == 1
    assert "after the sync" in c.reason and str(c.pods) == "3"
    assert any(names.NATIVE_HASH_ANNOTATION in n and "1.5" in n for n in c.notes)
