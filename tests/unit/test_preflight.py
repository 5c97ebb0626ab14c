"""The preflight (model/preflight.py: what new pods need, and the judgement of what the hook
found) and its step in the hook's cycle on the fake API (nothing written before a failed
preflight)."""

from __future__ import annotations

import copy
import io
import dataclasses
from fractions import Fraction
from typing import Any

import pytest

from raygitops.model import preflight
from raygitops.model.hashing import split_spec
from raygitops.model.names import LOCK_ANNOTATION
from raygitops.model.plan import ClusterPlan, Plan
from raygitops.presync import cycle
from raygitops.presync.logs import Log
from raygitops.presync.run import RunOptions, run
from raygitops.render.hookresources import hook_resources
from raygitops.sources.settings import Settings

from test_presync_fakes import NS, FakeKube, cluster_spec, make_plan, node, stamped, with_crd_defaults

CPU, MEM = "cpu", "memory"


def pod(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "ray", "image": "ray"}], **spec}}


def objects(template: dict[str, Any]) -> dict[tuple[str, str], tuple[str, ...]]:
    spec = split_spec({"headGroupSpec": {"template": template}})
    return preflight.needs("c", spec).objects


def group(**spec: Any) -> preflight.GroupNeeds:
    return preflight.needs("c", split_spec({"headGroupSpec": {"template": pod(**spec)}})).groups[0]


# ------------------------------------------------------------------------------- what is needed


def test_every_reference_kind_is_needed_and_optional_ones_are_not():
    template = pod(
        containers=[{"name": "ray", "env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "a"}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "b"}}},
            {"name": "C", "valueFrom": {"secretKeyRef": {"name": "optional-secret", "key": "c", "optional": True}}},
            {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "envFrom": [{"configMapRef": {"name": "from-cm"}}, {"secretRef": {"name": "from-secret"}},
                        {"configMapRef": {"name": "optional-cm", "optional": True}}]}],
        initContainers=[{"name": "init", "envFrom": [{"secretRef": {"name": "init-secret"}}]}],
        volumes=[{"name": "a", "configMap": {"name": "vol-cm"}},
                 {"name": "b", "secret": {"secretName": "vol-secret"}},
                 {"name": "c", "secret": {"secretName": "vol-optional", "optional": True}},
                 {"name": "d", "projected": {"sources": [{"configMap": {"name": "proj-cm"}},
                                                         {"secret": {"name": "proj-secret"}},
                                                         {"serviceAccountToken": {"path": "t"}}]}},
                 {"name": "e", "persistentVolumeClaim": {"claimName": "data"}},
                 {"name": "f", "emptyDir": {}}],
        imagePullSecrets=[{"name": "regcred"}],
        serviceAccountName="ray-sa",
        priorityClassName="high",
        runtimeClassName="gvisor",
    )
    assert set(objects(template)) == {
        ("ConfigMap", "env-cm"), ("Secret", "env-secret"), ("ConfigMap", "from-cm"), ("Secret", "from-secret"),
        ("Secret", "init-secret"), ("ConfigMap", "vol-cm"), ("Secret", "vol-secret"), ("ConfigMap", "proj-cm"),
        ("Secret", "proj-secret"), ("PersistentVolumeClaim", "data"), ("Secret", "regcred"),
        ("ServiceAccount", "ray-sa"), ("PriorityClass", "high"), ("RuntimeClass", "gvisor")}


def test_the_default_service_account_and_builtin_priority_classes_are_not_looked_for():
    assert objects(pod(serviceAccountName="default", priorityClassName="system-node-critical")) == {}
    assert objects(pod(serviceAccount="legacy")) == {("ServiceAccount", "legacy"): ("head",)}


def test_what_the_hook_makes_live_itself_and_groups_not_replaced_are_left_out():
    spec = cluster_spec(workers=("small", "big"))
    for g in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        g["template"]["spec"]["volumes"] = [{"name": "s", "configMap": {"name": "settings"}}]
    spec["workerGroupSpecs"][1]["template"]["spec"]["volumes"].append(
        {"name": "d", "persistentVolumeClaim": {"claimName": "big-data"}})
    plan = make_plan(spec=spec)
    assert plan.preflight_needs().objects == {
        ("ConfigMap", "settings"): ("head", "worker:small", "worker:big"),
        ("PersistentVolumeClaim", "big-data"): ("worker:big",)}
    tracked = dataclasses.replace(plan, config_maps=("settings",))
    assert tracked.preflight_needs(("small",)).objects == {}
    assert [g.group for g in tracked.preflight_needs(("big",)).groups] == ["worker:big"]


# ------------------------------------------------------------------------------- requests


def test_requests_sum_the_containers_and_take_a_limit_for_a_missing_request():
    g = group(containers=[{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                          {"name": "b", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": 1}}},
                          {"name": "c", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "4"}}}])
    assert g.requests == {CPU: Fraction(11, 4), MEM: 2**30, "nvidia.com/gpu": 1}


def test_an_init_container_larger_than_the_containers_sets_the_request():
    g = group(containers=[{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
              initContainers=[{"name": "i", "resources": {"requests": {"cpu": "3", "memory": "512Mi"}}}])
    assert g.requests == {CPU: 3, MEM: 2**30}  # per resource: the init's cpu, the containers' memory


def test_sidecars_count_with_the_containers_and_under_later_init_containers():
    g = group(containers=[{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
              initContainers=[{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                              {"name": "init", "resources": {"requests": {"cpu": "2500m"}}}])
    assert g.requests == {CPU: Fraction(7, 2)}  # the init (2.5) runs beside the sidecar started before it (1)
    g = group(containers=[{"name": "a", "resources": {"requests": {"cpu": "2"}}}],
              initContainers=[{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}])
    assert g.requests == {CPU: 3}


# ------------------------------------------------------------------------------- judgement


def judge(g: preflight.GroupNeeds, *nodes: dict[str, Any], only_pod_nodes: bool = False) -> list[preflight.Failure]:
    needs = preflight.Needs("c", {}, (g,))
    return preflight.check(needs, preflight.Live(nodes=list(nodes), only_pod_nodes=only_pod_nodes))


def test_a_request_larger_than_every_node_fails_naming_the_closest_node():
    g = group(containers=[{"name": "a", "resources": {"requests": {"cpu": "8", "memory": "64Gi"}}}])
    (failure,) = judge(g, node("n1", cpu="4", memory="16Gi"), node("n2", cpu="16", memory="32Gi"))
    assert not failure.unknown and failure.node == "n2" and failure.group == "head"
    assert failure.line() == ("cluster c, head: its pod's requests (cpu: 8, memory: 64Gi) fit none of the 2 nodes "
                              "its constraints allow; closest: memory 64Gi > 32Gi allocatable (node n2)")
    assert judge(g, node("n1", cpu="4"), node("n3", cpu="8", memory="64Gi")) == []


def test_an_extended_resource_no_node_has_fails():
    g = group(containers=[{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])
    (failure,) = judge(g, node("cpu-only"))
    assert "nvidia.com/gpu 1 > 0" in failure.what
    assert judge(g, node("gpu", **{"nvidia.com/gpu": "8"})) == []


def test_node_selector_and_required_affinity_choose_the_nodes():
    big, small = node("big", cpu="64", labels={"pool": "gpu", "zone": "a"}), node("small", cpu="2", labels={"pool": "cpu"})
    wants = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "8"}}}]}
    assert judge(group(nodeSelector={"pool": "gpu"}, **wants), big, small) == []
    (failure,) = judge(group(nodeSelector={"pool": "cpu"}, **wants), big, small)  # only the small one allowed
    assert not failure.unknown and failure.node == "small"
    affinity = lambda *exprs: {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {  # noqa: E731
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}
    assert judge(group(affinity=affinity({"key": "zone", "operator": "In", "values": ["a"]}), **wants), big, small) == []
    assert judge(group(affinity=affinity({"key": "zone", "operator": "DoesNotExist"}), **wants), big, small)
    assert judge(group(affinity=affinity({"key": "pool", "operator": "NotIn", "values": ["cpu"]}), **wants),
                 big, small) == []
    # no node its constraints allow: unknown (a node autoscaler may make one), the policy decides
    (failure,) = judge(group(nodeSelector={"pool": "tpu"}, **wants), big, small)
    assert failure.unknown and "nodeSelector pool=tpu" in failure.what


def test_taints_keep_pods_off_unless_tolerated():
    tainted = node("gpu", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                  {"key": "soft", "effect": "PreferNoSchedule"}])
    (failure,) = judge(group(), tainted)
    assert failure.unknown and "taint nvidia.com/gpu=present:NoSchedule" in failure.what
    assert judge(group(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]), tainted) == []
    assert judge(group(tolerations=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
                 tainted) == []
    assert judge(group(tolerations=[{"key": "nvidia.com/gpu", "value": "absent"}]), tainted)
    assert judge(group(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]), tainted)
    assert judge(group(tolerations=[{"operator": "Exists"}]), tainted) == []  # tolerates everything
    cordoned = node("c")
    cordoned["spec"]["unschedulable"] = True
    assert judge(group(), cordoned)[0].unknown


def test_missing_and_unreadable_objects_and_no_nodes():
    needs = preflight.Needs("c", {("Secret", "creds"): ("head", "worker:a"), ("PersistentVolumeClaim", "d"): ("head",),
                                  ("PriorityClass", "p"): ("head",)}, (group(),))
    live = preflight.Live({("Secret", "creds"): False, ("PersistentVolumeClaim", "d"): True,
                           ("PriorityClass", "p"): "the hook may not get priorityclasses (403 Forbidden)"},
                          nodes=None, nodes_why="the hook may not list nodes")
    failures = preflight.check(needs, live)
    assert [(f.line(), f.unknown) for f in failures] == [
        ("cluster c, head, worker:a: Secret creds does not exist", False),
        ("cluster c, head: cannot check that PriorityClass p exists: the hook may not get priorityclasses "
         "(403 Forbidden)", True),
        ("cluster c, head: cannot check that a node fits its pod: the hook may not list nodes", True)]
    assert preflight.blocking(failures, preflight.Policy()) == failures
    assert preflight.blocking(failures, preflight.Policy(unknown=preflight.PROCEED)) == [failures[0]]
    assert [f.what for f in preflight.check(needs, dataclasses.replace(live, objects={}))][1:2] == [
        "cannot check that PersistentVolumeClaim d exists: not looked at"]  # never taken for there


def test_only_the_pods_nodes_seen_makes_a_misfit_unknown():
    g = group(containers=[{"name": "a", "resources": {"requests": {"cpu": "8"}}}])
    (failure,) = judge(g, node("n1", cpu="4"), only_pod_nodes=True)
    assert failure.unknown and failure.node == "n1"


def test_a_group_without_replicas_places_no_pod():
    spec = split_spec({"headGroupSpec": {"template": pod()},
                       "workerGroupSpecs": [{"groupName": "gpu", "replicas": 0, "template": pod(nodeSelector={"x": "y"})}]})
    needs = preflight.needs("c", spec)
    assert preflight.check(needs, preflight.Live(nodes=[node("n")])) == []


def test_without_cluster_reads_nothing_cluster_scoped_is_needed():
    spec = split_spec({"headGroupSpec": {"template": pod(priorityClassName="p", runtimeClassName="r",
                                                         imagePullSecrets=[{"name": "reg"}])}})
    needs = preflight.needs("c", spec, cluster_reads=False)
    assert list(needs.objects) == [("Secret", "reg")] and not needs.nodes
    assert preflight.check(needs, preflight.Live({("Secret", "reg"): True})) == []


def test_the_policy_reads_back_from_the_plan_and_bad_values_are_refused():
    plan = dataclasses.replace(make_plan(), preflight_policy=preflight.Policy(False, preflight.PROCEED, False))
    assert ClusterPlan.from_json(plan.to_json()).preflight_policy == plan.preflight_policy
    assert "preflight" not in make_plan().to_json()  # the default: plans keep their digest
    data = plan.to_json()
    data["preflight"]["unknown"] = "maybe"
    with pytest.raises(ValueError, match="preflight.unknown: 'maybe' is not fail or proceed"):
        ClusterPlan.from_json(data)


def test_the_policy_comes_from_the_annotations_over_the_app_default_and_render_refuses_bad_ones(tmp_path):
    import json

    from raygitops.errors import RaygitopsError
    from raygitops.model import strategy
    from raygitops.model.names import PREFLIGHT_ANNOTATION, PREFLIGHT_UNKNOWN_ANNOTATION, STRATEGY_ANNOTATION
    from raygitops.render.pipeline import render_app

    def rc(ann: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": "c", "annotations": ann}}

    app = preflight.Policy(True, preflight.PROCEED)
    recreate = {STRATEGY_ANNOTATION: "Recreate"}
    assert strategy.preflight_policy(rc(recreate), "Recreate", app) == app
    assert strategy.preflight_policy(rc({**recreate, PREFLIGHT_ANNOTATION: "false", PREFLIGHT_UNKNOWN_ANNOTATION: "fail"}),
                                     "Recreate", app) == preflight.Policy(False, preflight.FAIL)
    for bad, message in [({PREFLIGHT_ANNOTATION: "no"}, "'no' is not \"true\" or \"false\""),
                         ({PREFLIGHT_UNKNOWN_ANNOTATION: "skip"}, "'skip' is not fail or proceed")]:
        with pytest.raises(RaygitopsError, match=message):
            strategy.preflight_policy(rc({**recreate, **bad}), "Recreate", app)
    with pytest.raises(RaygitopsError, match="applies only to clusters raygitops recreates"):
        strategy.preflight_policy(rc({PREFLIGHT_ANNOTATION: "false"}), "None", app)
    # raygitops.yaml's hook.preflight and hook.preflightUnknown reach the plan, per cluster
    (tmp_path / "raygitops.yaml").write_text(f"namespace: {NS}\nhook: {{preflight: false, preflightUnknown: proceed}}\n")
    (tmp_path / "c.yaml").write_text(json.dumps({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                                 "metadata": {"name": "demo", "annotations": recreate},
                                                 "spec": cluster_spec()}))
    (cluster,) = render_app(str(tmp_path), cli_values=[], overrides={}).clusters
    assert cluster.plan.preflight_policy == preflight.Policy(False, preflight.PROCEED) and not cluster.plan.preflights
    (tmp_path / "raygitops.yaml").write_text(f"namespace: {NS}\nhook: {{preflightUnknown: skip}}\n")
    with pytest.raises(RaygitopsError, match="hook.preflightUnknown: 'skip' is not fail or proceed"):
        render_app(str(tmp_path), cli_values=[], overrides={})


# ------------------------------------------------------------------------------- RBAC


def test_the_role_reads_by_name_and_the_cluster_role_reads_nodes():
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"].update(
        priorityClassName="high", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
        imagePullSecrets=[{"name": "regcred"}])
    objs = hook_resources(Plan(NS, [make_plan(spec=spec)]), Settings())
    role = next(o for o in objs if o["kind"] == "Role")
    assert [r for r in role["rules"] if r["resources"][0] in ("secrets", "persistentvolumeclaims")] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["regcred"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "resourceNames": ["data"], "verbs": ["get"]}]
    cluster_role = next(o for o in objs if o["kind"] == "ClusterRole")
    assert cluster_role["metadata"]["name"] == f"raygitops-presync-{NS}" and "namespace" not in cluster_role["metadata"]
    assert cluster_role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "resourceNames": ["high"], "verbs": ["get"]}]
    off = dataclasses.replace(make_plan(spec=spec), preflight_policy=preflight.Policy(enabled=False))
    objs = hook_resources(Plan(NS, [off]), Settings())
    assert not [o for o in objs if o["kind"].startswith("Cluster")]
    assert not [r for r in next(o for o in objs if o["kind"] == "Role")["rules"] if "persistentvolumeclaims" in r["resources"]]


# ------------------------------------------------------------------------------- the hook's step


OLD, NEW = cluster_spec(image="old:1"), cluster_spec(image="new:2")
WRITES = ("patch_cluster", "delete_pod", "create_core", "patch_core")


def _run(kube: FakeKube, plan: ClusterPlan) -> tuple[Any, list[str]]:
    writes: list[str] = []
    for name in WRITES:
        real = getattr(kube, name, None)
        if real is None:
            continue

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            writes.append(_name)
            return _real(*args, **kwargs)

        setattr(kube, name, spy)
    report = run(kube, [Plan(NS, [plan])], RunOptions(timeout=120, drain_grace=5, max_parallel=1, wait_ready=True,
                                                      clock=kube.clock), Log("json", io.StringIO()))
    return report, writes


def _with_pvc(spec: dict[str, Any], claim: str = "data") -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    for g in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        g["template"]["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
    return spec


@pytest.mark.parametrize("strategy", ["Recreate", "ReplaceGroups"])
@pytest.mark.parametrize("trouble", ["missing-pvc", "too-big", "forbidden-nodes"])
def test_a_failed_preflight_writes_nothing_but_the_lock(strategy: str, trouble: str):
    kube = FakeKube(replaces_pods=True)
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    uids = sorted(p["metadata"]["uid"] for p in kube.pods_of("demo"))
    new = _with_pvc(NEW)
    if trouble != "missing-pvc":
        kube.objects.add(("persistentvolumeclaims", NS, "data"))
    if trouble == "too-big":
        for g in [new["headGroupSpec"], *new["workerGroupSpecs"]]:
            g["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100"}}
    if trouble == "forbidden-nodes":
        kube.forbidden = {"nodes", "node"}
        kube.pod_node = "node-1"
        kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))  # its pods on node-1, which the hook may not GET either
        uids = sorted(p["metadata"]["uid"] for p in kube.pods_of("demo"))
    if strategy == "ReplaceGroups":
        new["headGroupSpec"] = copy.deepcopy(OLD["headGroupSpec"])  # the head kept: a replacement
    report, writes = _run(kube, make_plan(spec=new, strategy=strategy))
    (outcome,) = report.outcomes.values()
    assert outcome.result == cycle.FAILED, outcome
    expected = {"missing-pvc": "PersistentVolumeClaim data does not exist",
                "too-big": "its pod's requests (cpu: 100) fit none of the 1 nodes its constraints allow; closest: "
                           "cpu 100 > 64 allocatable (node node-1)",
                "forbidden-nodes": "cannot check that a node fits its pod: no right to list nodes (403 Forbidden"}
    assert outcome.message.startswith("preflight failed, not touched: cluster demo, ") and expected[trouble] in \
        outcome.message and "\n" not in outcome.message, outcome.message
    # nothing but the lock and its removal was written: no suspend, no spec, no pod deleted
    live = kube.clusters[(NS, "demo")]
    assert writes == ["patch_cluster", "patch_cluster"], writes
    assert live["spec"] == with_crd_defaults(stamped(OLD)) and LOCK_ANNOTATION not in live["metadata"]["annotations"]
    assert sorted(p["metadata"]["uid"] for p in kube.pods_of("demo")) == uids and not kube.deleted_pods
    assert "PreflightFailed" in kube.event_reasons("demo")
    assert report.failed


def test_a_good_change_passes_the_preflight_and_recreates():
    kube = FakeKube()
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    kube.objects.add(("persistentvolumeclaims", NS, "data"))
    report, _ = _run(kube, make_plan(spec=_with_pvc(NEW)))
    assert [o.result for o in report.outcomes.values()] == [cycle.RECREATED]


def test_proceed_and_off_let_a_check_that_cannot_be_made_pass():
    for policy in (preflight.Policy(unknown=preflight.PROCEED), preflight.Policy(enabled=False)):
        kube = FakeKube()
        kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
        kube.forbidden = {"nodes", "node"}
        plan = dataclasses.replace(make_plan(spec=NEW), preflight_policy=policy)
        report, _ = _run(kube, plan)
        assert [o.result for o in report.outcomes.values()] == [cycle.RECREATED]
    kube = FakeKube()
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    report, _ = _run(kube, dataclasses.replace(make_plan(spec=_with_pvc(NEW)), preflight_policy=preflight.Policy(False)))
    assert [o.result for o in report.outcomes.values()] == [cycle.RECREATED]  # off: not even a missing PVC is looked for


def test_without_node_list_rights_the_nodes_of_the_clusters_pods_are_read():
    kube = FakeKube()
    kube.pod_node = "node-1"
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    kube.forbidden = {"nodes"}
    report, _ = _run(kube, make_plan(spec=NEW))
    assert [o.result for o in report.outcomes.values()] == [cycle.RECREATED]


# ------------------------------------------------------------------------------- diff and status


def test_the_diff_line_says_what_the_hook_will_check():
    spec = _with_pvc(NEW)
    spec["headGroupSpec"]["template"]["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    plan = make_plan(spec=spec)
    assert preflight.outlook(plan.preflight_policy, plan.preflight_needs()) == (
        "preflight: before any pod goes the hook checks that data (PersistentVolumeClaim), regcred (Secret) exist, "
        "and that a node fits each of head, worker:small (requests, nodeSelector, affinity, taints); a check it "
        "cannot make fails the sync")
    assert preflight.outlook(preflight.Policy(enabled=False), None).startswith("preflight off: ")


def test_status_runs_the_preflight_of_a_drifted_cluster_without_writing(tmp_path):
    import json

    from raygitops.model.names import STRATEGY_ANNOTATION
    from raygitops.render.pipeline import render_app
    from raygitops.status.live import statuses

    app = tmp_path / "app"
    app.mkdir()
    (app / "raygitops.yaml").write_text(f"namespace: {NS}\nhook: {{runningJobs: proceed}}\n")
    (app / "c.yaml").write_text(json.dumps({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                            "metadata": {"name": "demo", "annotations": {STRATEGY_ANNOTATION: "Recreate"}},
                                            "spec": _with_pvc(NEW)}))
    result = render_app(str(app), cli_values=[], overrides={})
    kube = FakeKube()
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    before = copy.deepcopy(kube.clusters)
    (status,) = statuses(kube, result)
    assert status.detail.endswith("; preflight now: the sync would fail, not touching it: cluster demo, head, "
                                  "worker:small: PersistentVolumeClaim data does not exist"), status.detail
    assert status.to_json()["preflight"]["wouldFail"] is True and kube.clusters == before and not kube.patches
    kube.objects.add(("persistentvolumeclaims", NS, "data"))
    (status,) = statuses(kube, result)
    assert status.detail.endswith("; preflight now: passes") and status.preflight["failures"] == []
