"""ReplaceGroups, the pure parts: the strategy and max-unavailable values, the decision
(replace or fall back to the full cycle), the lock phase, and which pods each turn deletes.
The real operators run it in tests/e2e/test_replace_groups.py."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from raygitops.model import strategy
from raygitops.errors import RaygitopsError
from raygitops.model.names import HASH_ANNOTATION
from raygitops.presync import cycle
from raygitops.presync.context import State
from raygitops.model import verdict
from raygitops.presync import replace
from raygitops.model import lock as locks
from raygitops.model import names

from test_presync_fakes import NS, FakeKube, cluster_spec, make_plan, stamped, with_crd_defaults

NEW = "rayproject/ray:2.42.0"


def two_groups(big_image: str = "rayproject/ray:2.41.0", head_image: str = "rayproject/ray:2.41.0",
               big: int = 4) -> dict:
    spec = cluster_spec(workers=("small", "big"))
    spec["workerGroupSpecs"][1]["replicas"] = big
    spec["workerGroupSpecs"][1]["maxReplicas"] = 10
    spec["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = big_image
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = head_image
    return spec


def plan_for(spec: dict, max_unavailable: str = "100%"):
    return dataclasses.replace(make_plan(spec=spec, strategy=strategy.REPLACE_GROUPS), max_unavailable=max_unavailable)


def live_cluster(spec: dict | None = None, kube: FakeKube | None = None):
    kube = kube or FakeKube()
    live = kube.add_cluster("demo", with_crd_defaults(stamped(spec or two_groups())))
    return kube, live


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("text,value", [("1", "1"), ("25%", "25%"), ("100%", "100%"), (" 3 ", "3"), ("007", "7")])
def test_max_unavailable_accepts_counts_and_percentages(text, value):
    assert strategy.parse_max_unavailable(text) == value


@pytest.mark.parametrize("text", ["0", "0%", "101%", "-1", "1.5", "x", "", "²", "25 %", 2, True, None])
def test_max_unavailable_refuses_the_rest(text):
    with pytest.raises(ValueError):
        strategy.parse_max_unavailable(text)


@pytest.mark.parametrize("value,pods,allowed", [("100%", 4, 4), ("25%", 4, 1), ("25%", 3, 1), ("50%", 5, 2),
                                                ("1%", 2, 1), ("2", 10, 2), ("5", 2, 5), ("100%", 0, 1)])
def test_max_unavailable_resolves_rounding_down_but_never_to_zero(value, pods, allowed):
    assert strategy.resolve_max_unavailable(value, pods) == allowed


def _obj(annotations: dict) -> dict:
    return {"kind": "RayCluster", "metadata": {"name": "c", "annotations": annotations}, "spec": {}}


def test_replace_groups_is_a_strategy_of_the_annotation_only():
    ann = {names.STRATEGY_ANNOTATION: "ReplaceGroups"}
    assert strategy.cluster_strategy(_obj(ann)) == "ReplaceGroups" and strategy.opted_in("ReplaceGroups")
    with pytest.raises(RaygitopsError, match="did you mean ReplaceGroups"):
        strategy.cluster_strategy(_obj({names.STRATEGY_ANNOTATION: "replacegroups"}))
    field = {"kind": "RayCluster", "metadata": {"name": "c"}, "spec": {"upgradeStrategy": {"type": "ReplaceGroups"}}}
    with pytest.raises(RaygitopsError, match="is not Recreate or None"):  # KubeRay's field knows no such value
        strategy.cluster_strategy(field)


def test_max_unavailable_annotation_needs_replace_groups():
    assert strategy.max_unavailable(_obj({}), "ReplaceGroups") == "100%"
    assert strategy.max_unavailable(_obj({names.MAX_UNAVAILABLE_ANNOTATION: "2"}), "ReplaceGroups") == "2"
    with pytest.raises(RaygitopsError, match="applies only with raygitops.dev/upgrade-strategy: ReplaceGroups"):
        strategy.max_unavailable(_obj({names.MAX_UNAVAILABLE_ANNOTATION: "2"}), "Recreate")
    assert strategy.max_unavailable(_obj({}), "Recreate") is None


def test_plan_round_trips_max_unavailable_and_refuses_a_bad_one():
    from raygitops.model.plan import ClusterPlan

    p = plan_for(two_groups(), "25%")
    assert ClusterPlan.from_json(p.to_json()) == p
    assert "maxUnavailable" not in make_plan().to_json()  # plans of other strategies keep their digest
    bad = dict(p.to_json(), maxUnavailable="0")
    with pytest.raises(ValueError, match="maxUnavailable"):
        ClusterPlan.from_json(bad)
    per_group = dataclasses.replace(p, max_unavailable_by_group={"big": "1"})
    assert ClusterPlan.from_json(per_group.to_json()) == per_group and per_group.limit_of("big") == "1"
    assert per_group.limit_of("small") == "25%" and "maxUnavailableByGroup" not in p.to_json()
    with pytest.raises(ValueError, match="maxUnavailableByGroup"):
        ClusterPlan.from_json(dict(per_group.to_json(), maxUnavailableByGroup={"big": "101%"}))


def test_max_unavailable_by_group_gives_worker_groups_bounds_of_their_own():
    by = names.MAX_UNAVAILABLE_BY_GROUP_ANNOTATION
    ann = {names.STRATEGY_ANNOTATION: "ReplaceGroups", by: " big = 1 , small=50%"}
    assert strategy.max_unavailable_by_group(_obj(ann), "ReplaceGroups", ["small", "big"]) == {"big": "1", "small": "50%"}
    assert strategy.max_unavailable_by_group(_obj({}), "ReplaceGroups", ["big"]) == {}
    assert strategy.max_unavailable_by_group(_obj({}), "Recreate", ["big"]) == {}


@pytest.mark.parametrize("value,message", [
    ("bgi=1", "'bgi' is not a worker group of this cluster (did you mean big?)"),
    ("gpu=1", "'gpu' is not a worker group of this cluster (its groups: small, big)"),
    ("big=1,big=2", "group big is given twice"),
    ("big=0", "group big: '0' is not a pod count"),
    ("big", "'big' is not <group>=<count or percentage>"),
    ("=1", "'=1' is not <group>=<count or percentage>"),
    ("", "'' is not <group>=<count or percentage>"),
    ("big=1,", "'' is not <group>=<count or percentage>"),
    (2, "is int 2, not a string"),
])
def test_max_unavailable_by_group_refuses_the_rest(value, message):
    ann = {names.STRATEGY_ANNOTATION: "ReplaceGroups", names.MAX_UNAVAILABLE_BY_GROUP_ANNOTATION: value}
    with pytest.raises(RaygitopsError) as err:
        strategy.max_unavailable_by_group(_obj(ann), "ReplaceGroups", ["small", "big"])
    assert str(err.value).startswith(f"annotation {names.MAX_UNAVAILABLE_BY_GROUP_ANNOTATION}: ")
    assert message in str(err.value), str(err.value)
    with pytest.raises(RaygitopsError, match="applies only with raygitops.dev/upgrade-strategy: ReplaceGroups"):
        strategy.max_unavailable_by_group(_obj(ann), "Recreate", ["small", "big"])


# ----------------------------------------------------------------------------- decision


def test_only_worker_groups_drifted_is_a_replacement():
    kube, live = live_cluster()
    d = verdict.decide(NS, plan_for(two_groups(big_image=NEW)), live, kube.pods_of("demo"))
    assert d.action == verdict.REPLACE and set(d.drift) == {"worker:big"}, d.reason
    assert d.reason.startswith("worker groups drifted, head kept: ")
    assert d.replaces and d.replaced_groups() == ("big",)


def test_a_head_change_falls_back_to_the_full_cycle():
    kube, live = live_cluster()
    d = verdict.decide(NS, plan_for(two_groups(big_image=NEW, head_image=NEW)), live, kube.pods_of("demo"))
    assert d.action == verdict.RECREATE


def test_a_cluster_level_change_falls_back_to_the_full_cycle():
    """A cluster-level field that reaches every group's pods (GCS fault tolerance) moves the
    head's hash too."""
    kube, live = live_cluster()
    spec = two_groups()
    spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    d = verdict.decide(NS, plan_for(spec), live, kube.pods_of("demo"))
    assert d.action == verdict.RECREATE and "head" in d.drift


def test_a_removed_group_alone_is_a_replacement():
    kube, live = live_cluster()
    spec = two_groups()
    spec["workerGroupSpecs"] = spec["workerGroupSpecs"][:1]
    d = verdict.decide(NS, plan_for(spec), live, kube.pods_of("demo"))
    assert d.action == verdict.REPLACE and d.drift["worker:big"].how == "removed-group"
    assert d.replaces and d.replaced_groups() == ()


def test_a_replacement_in_progress_is_continued_or_turned_into_a_full_cycle():
    kube, live = live_cluster()
    lock = cycle.replace_lock(locks.new_lock("other", {}, None, 0.0), ("big",), 0.0)
    live["metadata"]["annotations"][names.LOCK_ANNOTATION] = lock.to_annotation()
    d = verdict.decide(NS, plan_for(two_groups(big_image=NEW)), live, kube.pods_of("demo"))
    assert d.action == verdict.REPLACE and "in progress" in d.reason
    d = verdict.decide(NS, plan_for(two_groups(big_image=NEW, head_image=NEW)), live, kube.pods_of("demo"))
    assert d.action == verdict.RECREATE  # the head changed meanwhile: the full cycle
    d = verdict.decide(NS, make_plan(spec=two_groups(big_image=NEW)), live, kube.pods_of("demo"))
    assert d.action == verdict.RECREATE  # the strategy changed to Recreate


def test_next_step_of_a_replacing_lock():
    kube, live = live_cluster()
    lock = cycle.replace_lock(locks.new_lock("me", {}, None, 0.0), ("big",), 0.0)
    live["metadata"]["annotations"][names.LOCK_ANNOTATION] = lock.to_annotation()
    replacing = State(verdict.Verdict(NS, "demo", verdict.REPLACE, "drifted"), replace=True, groups=("big",))
    assert cycle.next_step(live, "me", replacing) == cycle.JOBS  # a run that took it over asks the head first
    replacing.jobs_cleared = True
    assert cycle.next_step(live, "me", replacing) == cycle.PREFLIGHT  # ... and checks the new pods can come up
    replacing.preflight_cleared = True
    assert cycle.next_step(live, "me", replacing) == cycle.REPLACE
    assert cycle.next_step(live, "me", dataclasses.replace(replacing, replaced=True)) == cycle.WAIT_READY
    assert cycle.next_step(live, "me", dataclasses.replace(replacing, replace=False)) == cycle.SUSPEND  # nothing suspended yet: start the cycle
    locked = locks.new_lock("me", {}, None, 0.0)  # our own lock, nothing written yet: the first turn writes the spec
    live["metadata"]["annotations"][names.LOCK_ANNOTATION] = locked.to_annotation()
    assert cycle.next_step(live, "me", replacing) == cycle.REPLACE
    assert cycle.next_step(live, "other", replacing, 0.0) == cycle.WAIT


def test_replacing_lock_round_trips_its_groups_and_a_takeover_adopts_the_new_target():
    lock = cycle.replace_lock(locks.new_lock("a", {"head": "h1-a"}, None, 10.0), ("big", "gpu"), 11.0)
    again = locks.parse(lock.to_annotation())
    assert again == lock and again.phase == locks.REPLACING and again.groups == ("big", "gpu")
    assert lock.taken_over("b", 12.0, {"head": "h1-b"}).target == {"head": "h1-b"}
    record = locks.last_recreate(lock, 20.0, locks.COMPLETED, "replaced 2 pods of group big; head kept")
    assert '"strategy":"ReplaceGroups"' in record and '"summary":"replaced 2 pods' in record


# ----------------------------------------------------------------------------- batches


def _pods(kube: FakeKube, live: dict, group: str, count: int, hash_: str, ready: bool = True) -> list[dict]:
    pods = [kube.add_pod(NS, "demo", "worker", group, {HASH_ANNOTATION: hash_}) for _ in range(count)]
    for p in pods:
        p["status"]["conditions"][0]["status"] = "True" if ready else "False"
    return pods


def _applied(plan, live: dict) -> dict:
    """The live cluster after the replacing write: the desired spec."""
    from raygitops.presync import patches

    live = copy.deepcopy(live)
    live["spec"] = patches.resume_spec(live["spec"], plan)
    return live


def _cluster_without_pods(spec: dict | None = None):
    kube = FakeKube()
    live = kube.add_cluster("demo", with_crd_defaults(stamped(spec or two_groups())), pods=False)
    kube.add_pod(NS, "demo", "head", "headgroup", {})
    return kube, live


def test_a_batch_deletes_at_most_max_unavailable_ready_stale_pods_and_never_the_head_or_other_groups():
    kube, live = _cluster_without_pods()
    plan = plan_for(two_groups(big_image=NEW), "2")
    _pods(kube, live, "small", 2, plan.hashes.workers["small"])
    old = _pods(kube, live, "big", 4, "h1-0000000000000000")
    batch = replace.next_batch(plan, _applied(plan, live), kube.pods_of("demo"), ["big"])
    assert len(batch.delete) == 2 and {p["metadata"]["uid"] for p in batch.delete} <= {p["metadata"]["uid"] for p in old}
    assert not batch.done and batch.groups[0].stale == 4


def test_each_group_is_held_to_its_own_bound():
    """big 1 at a time, small under the cluster's 100%: one batch deletes 1 of big's Ready
    stale pods and both of small's."""
    spec = two_groups(big_image=NEW)
    spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = NEW
    kube, live = _cluster_without_pods()
    plan = dataclasses.replace(plan_for(spec, "100%"), max_unavailable_by_group={"big": "1"})
    small = _pods(kube, live, "small", 2, "h1-0000000000000000")
    big = _pods(kube, live, "big", 4, "h1-0000000000000000")
    batch = replace.next_batch(plan, _applied(plan, live), kube.pods_of("demo"), ["big", "small"])
    deleted = {p["metadata"]["uid"] for p in batch.delete}
    assert len(deleted & {p["metadata"]["uid"] for p in big}) == 1
    assert {p["metadata"]["uid"] for p in small} <= deleted and len(deleted) == 3
    assert {g.name: g.max_unavailable for g in batch.groups} == {"big": 1, "small": 2}
    shape = verdict.replacement(plan, verdict.decide(NS, plan, live, kube.pods_of("demo")).drift)
    assert shape["maxUnavailable"] == "100%" and [(g["group"], g.get("maxUnavailable"), g["atATime"])
                                                  for g in shape["groups"]] == [("big", "1", 1), ("small", None, 2)]
    words = verdict.replacement_words(shape)
    assert words == "replaces 4 pods of group big (1 at a time); replaces 2 pods of group small (2 at a time); head untouched"


def test_a_batch_waits_while_replacements_are_not_ready():
    kube, live = _cluster_without_pods()
    plan = plan_for(two_groups(big_image=NEW), "2")
    new = plan.hashes.workers["big"]
    _pods(kube, live, "big", 2, "h1-0000000000000000")
    _pods(kube, live, "big", 2, new, ready=False)  # the two replacements, starting
    batch = replace.next_batch(plan, _applied(plan, live), kube.pods_of("demo"), ["big"])
    assert batch.delete == [] and batch.groups[0].unavailable == 2
    assert "group big: 0 of 4 Ready with the new template, 2 stale, 2 unavailable (at most 2)" in batch.describe()


def test_unready_stale_pods_go_first_and_cost_no_availability():
    kube, live = _cluster_without_pods()
    plan = plan_for(two_groups(big_image=NEW), "1")
    _pods(kube, live, "big", 3, "h1-0000000000000000")
    broken = _pods(kube, live, "big", 1, "h1-0000000000000000", ready=False)
    batch = replace.next_batch(plan, _applied(plan, live), kube.pods_of("demo"), ["big"])
    assert [p["metadata"]["uid"] for p in batch.delete] == [broken[0]["metadata"]["uid"]]


def test_terminating_pods_count_as_unavailable_and_are_not_deleted_twice():
    kube, live = _cluster_without_pods()
    plan = plan_for(two_groups(big_image=NEW), "1")
    pods = _pods(kube, live, "big", 4, "h1-0000000000000000")
    pods[0]["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    batch = replace.next_batch(plan, _applied(plan, live), kube.pods_of("demo"), ["big"])
    assert batch.delete == [] and batch.groups[0].unavailable == 1


def test_done_once_no_stale_pod_is_left_even_while_the_last_replacements_start():
    """Readiness of the last batch is the wait-ready step's (skipped with --no-wait-ready)."""
    kube, live = _cluster_without_pods()
    plan = plan_for(two_groups(big_image=NEW), "2")
    _pods(kube, live, "big", 2, plan.hashes.workers["big"])
    _pods(kube, live, "big", 2, plan.hashes.workers["big"], ready=False)
    batch = replace.next_batch(plan, _applied(plan, live), kube.pods_of("demo"), ["big"])
    assert batch.done and batch.delete == [] and "2 of 4 Ready" in batch.describe()


def test_done_when_every_pod_runs_the_new_template_ready():
    kube, live = _cluster_without_pods()
    plan = plan_for(two_groups(big_image=NEW), "1")
    _pods(kube, live, "big", 4, plan.hashes.workers["big"])
    batch = replace.next_batch(plan, _applied(plan, live), kube.pods_of("demo"), ["big"])
    assert batch.done and batch.delete == []


def test_removed_group_pods_are_deleted_at_once_but_only_the_clusters_own():
    kube, live = _cluster_without_pods()
    spec = two_groups()
    spec["workerGroupSpecs"] = spec["workerGroupSpecs"][:1]
    plan = plan_for(spec, "1")
    _pods(kube, live, "small", 2, plan.hashes.workers["small"])
    gone = _pods(kube, live, "big", 4, "h1-0000000000000000")
    stray = _pods(kube, live, "big", 1, "h1-0000000000000000")[0]
    stray["metadata"]["ownerReferences"] = []
    batch = replace.next_batch(plan, _applied(plan, live), kube.pods_of("demo"), [])
    assert {p["metadata"]["uid"] for p in batch.delete} == {p["metadata"]["uid"] for p in gone}
    assert batch.removed == 4 and not batch.done


def test_the_replica_count_is_read_from_the_live_spec_each_turn():
    """The autoscaler moved big from 4 to 6 replicas: six are wanted (the two missing ones are
    the operator's to create; nothing stale is left, so wait-ready counts them)."""
    kube, live = _cluster_without_pods()
    plan = plan_for(two_groups(big_image=NEW), "100%")
    _pods(kube, live, "big", 4, plan.hashes.workers["big"])
    applied = _applied(plan, live)
    next(g for g in applied["spec"]["workerGroupSpecs"] if g["groupName"] == "big")["replicas"] = 6
    batch = replace.next_batch(plan, applied, kube.pods_of("demo"), ["big"])
    assert batch.groups[0].want == 6 and "4 of 6 Ready with the new template" in batch.describe()


def test_summary_wording():
    assert replace.summary({"big": 4}, ["big"], 0, ["small"]) == "replaced 4 pods of group big; head and group small kept"
    assert replace.summary({}, [], 2, ["small", "x"]) == ("deleted 2 pods of removed groups; "
                                                          "head, group small and group x kept")
    assert replace.summary({"a": 1}, ["a"], 0, []) == "replaced 1 pod of group a; head kept"


def test_status_phrase_names_what_the_next_sync_replaces_and_keeps():
    kube, live = live_cluster()
    spec = two_groups(big_image=NEW)
    d = verdict.decide(NS, plan_for(spec, "2"), live, kube.pods_of("demo"))
    plan = verdict.replacement(plan_for(spec, "2"), d.drift)
    assert plan == {"maxUnavailable": "2", "kept": ["head", "small"],
                    "groups": [{"group": "big", "change": "changed", "pods": {"min": 4, "max": 4}, "atATime": 2}]}
    assert verdict.replacement_words(plan) == "replaces 4 pods of group big (2 at a time); head and group small untouched"
    removed = two_groups()
    removed["workerGroupSpecs"] = removed["workerGroupSpecs"][:1]
    d = verdict.decide(NS, plan_for(removed), live, kube.pods_of("demo"))
    assert verdict.replacement_words(verdict.replacement(plan_for(removed), d.drift)) == (
        "deletes 4 pods of removed group big; head and group small untouched")


def test_diff_says_which_groups_a_replacement_touches(tmp_path):
    """`raygitops diff` of a ReplaceGroups cluster: class replace, only the changed group's
    pods, per-group counts in the JSON, the verdict line, exit 3 with --exit-code."""
    import subprocess
    import sys

    import yaml

    def app(path, big_image, head_image="rayproject/ray:2.41.0"):
        path.mkdir(parents=True)
        (path / "raygitops.yaml").write_text("namespace: ray\n")
        obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "demo", "annotations": {names.STRATEGY_ANNOTATION: "ReplaceGroups",
                                                           names.MAX_UNAVAILABLE_ANNOTATION: "2"}},
               "spec": two_groups(big_image=big_image, head_image=head_image)}
        (path / "demo.yaml").write_text(yaml.safe_dump(obj))

    def diff(*extra):
        return subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(tmp_path / "base"),
                               "--head", str(tmp_path / "head"), "app", *extra], capture_output=True, text=True)

    app(tmp_path / "base" / "app", "rayproject/ray:2.41.0")
    app(tmp_path / "head" / "app", NEW)
    report = json.loads(diff("--output", "json").stdout)
    (cluster,) = report["clusters"]
    assert cluster["class"] == "replace" and report["verdict"] == "replace"
    assert cluster["reason"] == ("opted in (ReplaceGroups): replaces 4 pods of group big (2 at a time); "
                                 "head and group small untouched")
    assert cluster["pods"] == {"min": 4, "max": 4}
    assert cluster["replace"] == {"maxUnavailable": "2", "kept": ["head", "small"], "groups": [
        {"group": "big", "change": "changed", "pods": {"min": 4, "max": 4}, "atATime": 2}]}
    assert report["summary"]["text"] == "This merge replaces worker groups of 1 RayCluster (4 pods; heads kept)"
    assert "replaces 4 pods of group big" in diff("--output", "markdown").stdout
    assert diff("--exit-code").returncode == 3 and diff("--fail-on", "stale").returncode == 0

    # the head changes too: the full cycle, every pod
    app(tmp_path / "head2" / "app", NEW, head_image=NEW)
    (tmp_path / "head").rename(tmp_path / "head1")
    (tmp_path / "head2").rename(tmp_path / "head")
    (cluster,) = json.loads(diff("--output", "json").stdout)["clusters"]
    assert cluster["class"] == "recreate" and "ReplaceGroups takes the full cycle" in cluster["reason"]
    assert cluster["pods"] == {"min": 7, "max": 7}


# ----------------------------------------------------------------------------- the operator's view lags


def _replace_run(kube: FakeKube, plan, wait_ready: bool = True):
    from raygitops.model.plan import Plan
    from test_presync_cycle import _run

    return _run(kube, [Plan(NS, [plan])], wait_ready=wait_ready, max_parallel=1)


def _groups_of(kube: FakeKube) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in kube.pods_of("demo"):
        group = p["metadata"]["labels"]["ray.io/group"]
        counts[group] = counts.get(group, 0) + 1
    return counts


@pytest.mark.parametrize("wait_ready", [True, False])
def test_a_removed_group_is_not_reported_gone_before_the_operator_saw_it_removed(wait_ready):
    """The removed-group race (issue 46): the operator's watch of the RayCluster lags, so after
    the hook deletes the removed group's pods it refills them from the spec it still sees.
    The hook reports ``replaced`` only once the operator has observed the spec without the
    group (status.observedGeneration) and a look after that finds none of its pods; the
    operator catching up 5 s into the run is when that can first be true."""
    kube, _ = live_cluster(kube=FakeKube(replaces_pods=True))
    kube.lag("demo")
    kube.clock.call_later(5.0, kube.catch_up, "demo")
    removed = two_groups()
    removed["workerGroupSpecs"] = removed["workerGroupSpecs"][:1]
    report, lines = _replace_run(kube, plan_for(removed), wait_ready)
    (outcome,) = report.outcomes.values()
    assert outcome.result == cycle.REPLACED, outcome
    seen = kube.clock.monotonic()
    kube.clock.advance(10.0)  # every refill the operator had scheduled has run
    assert _groups_of(kube) == {"headgroup": 1, "small": 2}, (_groups_of(kube), outcome)
    assert seen >= 5.0  # not before the operator could know
    assert any("the operator has not yet observed generation" in l["msg"] for l in lines)


def test_an_operator_that_never_observes_the_spec_fails_the_replacement_closed():
    """Without the operator's word that it saw the spec, no success: the run times out failed,
    saying what it waited for, and leaves the cluster unlocked, never suspended."""
    kube, _ = live_cluster(kube=FakeKube(replaces_pods=True))
    kube.lag("demo")
    removed = two_groups()
    removed["workerGroupSpecs"] = removed["workerGroupSpecs"][:1]
    report, _ = _replace_run(kube, plan_for(removed))
    (outcome,) = report.outcomes.values()
    assert outcome.result == cycle.FAILED and "not yet observed generation" in outcome.message, outcome
    live = kube.clusters[(NS, "demo")]
    assert names.LOCK_ANNOTATION not in live["metadata"]["annotations"] and live["spec"].get("suspend") is not True


def test_leftovers_are_removed_groups_and_old_templates_of_cycled_groups_terminating_included():
    kube, live = live_cluster()
    changed = two_groups(big_image=NEW)
    changed["workerGroupSpecs"][1]["groupName"] = "big"
    plan = plan_for(changed)
    cycled = frozenset({"worker:big"})
    pod_list = kube.pods_of("demo")
    big = sorted(p["metadata"]["name"] for p in pod_list if p["metadata"]["labels"]["ray.io/group"] == "big")
    assert verdict.leftovers(plan, live, pod_list, cycled) == big  # the old template of the replaced group
    # a kept group whose pods carry another scheme's stamp is in sync by spec, not judged by hash
    for p in pod_list:
        if p["metadata"]["labels"]["ray.io/group"] == "small":
            p["metadata"]["annotations"][HASH_ANNOTATION] = "h1-0123456789abcdef"
    assert verdict.leftovers(plan, live, pod_list, cycled) == big
    assert len(verdict.leftovers(plan, live, pod_list)) == len(big) + 2  # a recreate made every group anew
    # a terminating old pod is still left; a pod of a removed group too; another's pod never
    going = copy.deepcopy(next(p for p in pod_list if p["metadata"]["labels"]["ray.io/group"] == "big"))
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert verdict.leftovers(plan, live, [going], cycled) == [going["metadata"]["name"]]
    removed = plan_for(dict(two_groups(), workerGroupSpecs=two_groups()["workerGroupSpecs"][:1]))
    assert verdict.leftovers(removed, live, pod_list, frozenset()) == big
    foreign = copy.deepcopy(going)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    assert verdict.leftovers(plan, live, [foreign], cycled) == []


def test_the_end_state_needs_the_operators_word_first():
    kube, live = live_cluster()
    plan = plan_for(two_groups())
    pod_list = kube.pods_of("demo")
    live = copy.deepcopy(live)
    live["metadata"]["generation"], live["status"]["observedGeneration"] = 3, 2
    held, why = verdict.end_state(plan, live, pod_list, 3, ready=False)
    assert not held and why == "the operator has not yet observed generation 3 (status.observedGeneration 2)"
    live["status"]["observedGeneration"] = 3
    assert verdict.end_state(plan, live, pod_list, 3, ready=False)[0]
    assert verdict.end_state(plan, live, pod_list, None, ready=True)[0]
