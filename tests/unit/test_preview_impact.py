"""Impact classes in the corner cases, aligned with what the PreSync hook does."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from raygitops.model.pods import PodCount
from raygitops.preview.impact import classify
from raygitops.preview.revisions import render_sides

BASE = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "c", "namespace": "ns"},
    "spec": {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "h", "image": "ray:1"}]}}},
        "workerGroupSpecs": [
            {"groupName": g, "replicas": 2, "minReplicas": 0, "maxReplicas": 4,
             "rayStartParams": {}, "template": {"spec": {"containers": [
                 {"name": "w", "image": "ray:1"}]}}}
            for g in ("a", "b")
        ],
    },
}


def impact_of(tmp_path: Path, base: dict, head: dict):
    for side, doc in (("base", base), ("head", head)):
        (tmp_path / side).mkdir(parents=True)
        (tmp_path / side / "c.yaml").write_text(yaml.safe_dump(doc))
    b, h = render_sides(str(tmp_path / "base"), str(tmp_path / "head"))
    (impact,) = classify(b.result, h.result).clusters
    return impact


def opted(doc: dict, strategy: str = "Recreate") -> dict:
    doc = copy.deepcopy(doc)
    doc["metadata"]["annotations"] = {"raygitops.dev/upgrade-strategy": strategy}
    return doc


def test_removed_group_of_opted_in_cluster_is_recreated(tmp_path: Path) -> None:
    base = opted(BASE)
    head = copy.deepcopy(base)
    del head["spec"]["workerGroupSpecs"][1]
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "recreate"  # the hook sees pods of a group no longer desired
    assert [(g.group, g.change) for g in impact.groups] == [("worker:b", "removed")]
    assert impact.pods == PodCount(5, 5)  # head + a (recreated) + b (deleted)


def test_removed_group_not_opted_in_is_stale(tmp_path: Path) -> None:
    """The operator leaves a removed group's pods running (docs/presync.md): nothing removes
    them when the cluster is not opted in, as the hook and status say too."""
    head = copy.deepcopy(BASE)
    del head["spec"]["workerGroupSpecs"][1]
    impact = impact_of(tmp_path, BASE, head)
    assert impact.klass == "stale"
    assert "removed" in impact.reason and not impact.pods.is_zero


def test_removed_group_without_pods_is_in_place(tmp_path: Path) -> None:
    base = opted(BASE)
    base["spec"]["workerGroupSpecs"][1]["replicas"] = 0
    base["spec"]["workerGroupSpecs"][1]["minReplicas"] = 0
    head = copy.deepcopy(base)
    del head["spec"]["workerGroupSpecs"][1]
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "in-place" and "no pods" in impact.reason


def test_added_group_is_in_place(tmp_path: Path) -> None:
    base = opted(BASE)
    head = copy.deepcopy(base)
    new = copy.deepcopy(head["spec"]["workerGroupSpecs"][0])
    new["groupName"] = "c"
    head["spec"]["workerGroupSpecs"].append(new)
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "in-place"
    assert [(g.group, g.change) for g in impact.groups] == [("worker:c", "added")]
    assert impact.changes[0].path == "/spec/workerGroupSpecs/2"


def test_suspended_at_head_is_never_recreated(tmp_path: Path) -> None:
    base = opted(BASE)
    head = copy.deepcopy(base)
    head["spec"]["suspend"] = True
    head["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "ray:2"
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "in-place"
    assert any("suspend" in n for n in impact.notes)
    assert [g.group for g in impact.hashed_groups] == ["head"]


def test_resume_is_noted(tmp_path: Path) -> None:
    base = copy.deepcopy(BASE)
    base["spec"]["suspend"] = True
    impact = impact_of(tmp_path, base, BASE)
    assert impact.klass == "in-place"
    assert any("true → false" in n for n in impact.notes)


def test_cluster_level_change_hits_every_group(tmp_path: Path) -> None:
    base = opted(BASE)
    head = copy.deepcopy(base)
    head["spec"]["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "recreate"
    assert {g.group for g in impact.hashed_groups} == {"head", "worker:a", "worker:b"}
    (change,) = impact.changes
    assert change.group is None and change.pod_shaping


def test_newly_opted_in_is_noted_not_recreated(tmp_path: Path) -> None:
    impact = impact_of(tmp_path, BASE, opted(BASE))
    assert impact.klass == "in-place"
    assert impact.changes == []  # the opt-in annotation is reported as a note
    assert impact.notes[0].startswith("upgrade strategy None → Recreate: newly opted in: if the running pods still "
                                      "carry an older template"), impact.notes


def test_a_change_from_one_opt_in_to_the_other_is_a_strategy_change(tmp_path: Path) -> None:
    """Recreate → ReplaceGroups was "newly opted in" of a cluster that was opted in."""
    impact = impact_of(tmp_path, opted(BASE), opted(BASE, "ReplaceGroups"))
    assert impact.klass == "in-place"
    assert impact.notes == ["upgrade strategy Recreate → ReplaceGroups: a strategy change, from this sync on the hook "
                            "replaces only the pods of changed worker groups, in batches (a head change still recreates "
                            "the whole cluster)"]
    back = impact_of(tmp_path / "back", opted(BASE, "ReplaceGroups"), opted(BASE))
    assert back.notes == ["upgrade strategy ReplaceGroups → Recreate: a strategy change, from this sync on the hook "
                          "recreates the whole cluster when a template changes"]
    out = impact_of(tmp_path / "out", opted(BASE), opted(BASE, "None"))
    assert out.notes == ["upgrade strategy Recreate → None: opted out, from this sync on the PreSync hook leaves this "
                         "cluster's pods alone"]


def test_an_added_worker_group_counts_its_pods_and_shows_without_raygitops_stamps(tmp_path: Path) -> None:
    """The table said PODS - while the detail said 2 pods, and the group's value carried the
    map render made for its hash stamp."""
    base = opted(BASE)
    head = copy.deepcopy(base)
    group = copy.deepcopy(head["spec"]["workerGroupSpecs"][0])
    group.update(groupName="gpu", replicas=2, minReplicas=2, maxReplicas=2)
    head["spec"]["workerGroupSpecs"].append(group)
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "in-place" and impact.pods == PodCount(2, 2)
    (change,) = impact.changes
    assert change.op == "add" and change.new == group and "metadata" not in change.new["template"]


def test_spec_upgrade_strategy_opt_in_counts(tmp_path: Path) -> None:
    base = copy.deepcopy(BASE)
    base["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    head = copy.deepcopy(base)
    head["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "ray:2"
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "recreate"
    assert impact.pods == PodCount(5, 5)


def test_owned_cluster_is_stale_even_when_opted_in(tmp_path: Path) -> None:
    base = opted(BASE)
    base["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayService",
                                            "name": "svc", "uid": "1"}]
    head = copy.deepcopy(base)
    head["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "ray:2"
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "stale"
    assert "RayService/svc" in impact.reason
    assert impact.pods == PodCount(1, 1)
    assert any("skips it despite the Recreate opt-in" in n for n in impact.notes)


def test_autoscaling_pods_are_a_range(tmp_path: Path) -> None:
    base = opted(BASE)
    base["spec"]["enableInTreeAutoscaling"] = True
    head = copy.deepcopy(base)
    head["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "ray:2"
    impact = impact_of(tmp_path, base, head)
    assert impact.klass == "recreate"
    assert impact.pods == PodCount(1, 9)
    assert str(impact.pods) == "1–9"
