"""The hook and KubeRay's native Recreate (docs/kuberay-1.6.md): a native-only cluster is
left alone and said to be; the arming trap and a CRD without the field are warned about,
never failed on.  In memory (FakeKube); tests/e2e/test_native_live.py does it on the real
operators."""

from __future__ import annotations

import dataclasses
import io
import json

from raygitops.model.names import NATIVE_HASH_ANNOTATION as HASH_ANNOTATION
from raygitops.model.plan import Plan
from raygitops.model import verdict
from raygitops.kube.client import ApiError
from raygitops.presync.logs import Log
from raygitops.presync.run import RunOptions, run

from test_presync_fakes import NS, FakeKube, cluster_spec, make_plan, stamped, with_crd_defaults

OLD, NEW = cluster_spec(image="old:1"), cluster_spec(image="new:2")


def _kube(armed: bool) -> FakeKube:
    kube = FakeKube()
    kube.add_cluster("demo", with_crd_defaults(stamped(OLD)))
    if armed:
        for pod in kube.pods_of("demo"):
            if pod["metadata"]["labels"]["ray.io/node-type"] == "head":
                pod["metadata"]["annotations"][HASH_ANNOTATION] = "ABCDEF"
    return kube


def _run(kube: FakeKube, strategy: str, dry_run: bool = False) -> tuple[dict, list[dict]]:
    plan = dataclasses.replace(make_plan(spec=NEW, strategy=strategy), native=True)
    out = io.StringIO()
    opts = RunOptions(timeout=20, drain_grace=5, max_parallel=4, wait_ready=True, dry_run=dry_run, clock=kube.clock)
    report = run(kube, [Plan(NS, [plan])], opts, Log("json", out))
    (cluster,) = report.to_json()["clusters"]
    return cluster, [json.loads(line) for line in out.getvalue().splitlines()]


def test_native_only_is_left_alone_and_said_so():
    kube = _kube(armed=True)
    cluster, lines = _run(kube, "None")
    assert cluster["decision"] == verdict.SKIP and cluster["reason"] == verdict.NATIVE_ONLY
    assert "warnings" not in cluster and not kube.deleted_pods and not kube.patches
    assert kube.by_verb.get("dry-run") == 1  # the CRD probe, never a write
    assert any("left to KubeRay's native Recreate" in line["msg"] for line in lines)


def test_arming_trap_is_warned_on_native_only_in_a_dry_run_too():
    for dry_run in (True, False):
        kube = _kube(armed=False)
        cluster, lines = _run(kube, "None", dry_run=dry_run)
        (warning,) = cluster["warnings"]
        assert "not armed" in warning and "demo-head" in warning and "will NOT reach the pods" in warning
        assert any(line["level"] == "warn" and line["msg"] == warning for line in lines)
        assert not kube.deleted_pods


def test_arming_trap_is_moot_when_the_hook_recreates():
    kube = _kube(armed=False)
    cluster, _ = _run(kube, "Recreate")
    assert cluster["outcome"] == "recreated" and "warnings" not in cluster


def test_arming_trap_on_an_opted_in_cluster_the_hook_leaves():
    kube = _kube(armed=False)
    plan = dataclasses.replace(make_plan(spec=OLD), native=True)
    pods = kube.pods_of("demo")
    live = kube.clusters[(NS, "demo")]
    (warning,) = verdict.native_warnings(plan, verdict.decide(NS, plan, live, pods), live, pods, True)
    assert "only the operator's hash sees" in warning


def test_a_crd_without_the_field_is_warned_about():
    kube = _kube(armed=False)
    kube.crd_has_upgrade_strategy = False
    cluster, _ = _run(kube, "None")
    (warning,) = cluster["warnings"]
    assert "unknown to this cluster's RayCluster CRD" in warning
    assert cluster["decision"] == verdict.SKIP


def test_a_failed_probe_is_a_warning_never_a_failure():
    kube = _kube(armed=True)
    kube.knows_upgrade_strategy = lambda ns, name: (_ for _ in ()).throw(ApiError(403, "Forbidden", "no"))
    cluster, _ = _run(kube, "Recreate")
    assert cluster["outcome"] == "recreated"
    assert any("could not check" in w for w in cluster["warnings"])


def test_no_probe_without_a_native_cluster():
    kube = _kube(armed=True)
    plan = make_plan(spec=NEW)
    run(kube, [Plan(NS, [plan])], RunOptions(timeout=20, drain_grace=5, max_parallel=4, wait_ready=True, clock=kube.clock),
        Log("json", io.StringIO()))
    assert "dry-run" not in kube.by_verb
