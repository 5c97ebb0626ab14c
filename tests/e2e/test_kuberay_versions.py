"""The hook's core on every KubeRay raygitops serves, and an operator upgrade under unchanged
manifests (docs/kuberay-versions.md).

One control plane for the module; its operator is switched in place between the tests of
each version (``ControlPlane.switch_operator``: the version's CRDs replace the installed ones):
ray-operator v1.1.1, v1.2.2, v1.3.2, v1.4.2 (KUBERAY_OLDER_VERSIONS), v1.5.0 and v1.6.2.  On
each:

- one hook run with the rendered Role's token recreates a ``Recreate`` cluster (suspend,
  drain, resume with the new templates) and replaces the changed worker group of a
  ``ReplaceGroups`` one (its head and other group kept); ``raygitops status`` before, between
  and after;
- a recreate whose pods cannot get ready fails the hook (exit 1), resumed and recorded;
- a worker group removed from the spec: what the operator does alone, what the hook does.

What each run observes about the operator (its CRD, its pods, its suspend conditions) is a
row of the support table in docs/kuberay-versions.md, and must be what
``raygitops.model.operators`` says of that version.  A normal run compares every observed
fact with the table; ``RAYGITOPS_WRITE_SUPPORT_TABLE=1`` (a run of the whole module) writes
the table from what it measured instead, timings included.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import controlplane
from raygitops.model import operators
from test_presync_hook import HASH, LAST, LOCK, App, desired_hashes, raycluster, rendered
from test_removed_groups import groups, two_groups, without_big
from test_removed_group_race import force_the_race, operator_behind_proxy
from test_replace_groups import HookApp, replace_groups, uids_by_group, with_big_image

pytestmark = pytest.mark.e2e
NEW = "rayproject/ray:2.42.0"
_VERSIONS = controlplane.load_versions()
VERSIONS = [*_VERSIONS["KUBERAY_OLDER_VERSIONS"].split(), _VERSIONS["KUBERAY_VERSION"],
            _VERSIONS["KUBERAY_NEXT_VERSION"]]
UPGRADE = ("v1.4.2", "v1.5.0", "v1.6.2")
DOC = controlplane.REPO_ROOT / "docs" / "kuberay-versions.md"
WRITE = os.environ.get("RAYGITOPS_WRITE_SUPPORT_TABLE") == "1"

# Columns of the support table: facts (compared with the table) and timings (written only).
FACTS = ("spec.suspend", "suspend conditions", "pod labels", "head pod stamped", "upgradeStrategy in CRD",
         "rayStartParams required", "removed group, operator alone", "Recreate cycle", "ReplaceGroups",
         "failed recreate", "status", "hook's Role")
TIMINGS = ("cycle s", "replace s")
MEASURED: dict[str, dict[str, str]] = {}
UPGRADES: list[str] = []  # what the upgrade test saw, one line per step (written with the table)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def swap_plane(_e2e_binaries) -> controlplane.ControlPlane:
    """A control plane of the module's own whose operator the tests switch (started with the
    oldest; stopped when the module ends)."""
    try:
        controlplane.locate_binaries([controlplane.operator_binary(v, _VERSIONS) for v in VERSIONS])
    except controlplane.Unavailable as exc:
        if os.environ.get("RAYGITOPS_REQUIRE_E2E") == "1":
            pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: {exc}", pytrace=False)
        pytest.skip(str(exc))
    with controlplane.running(kuberay=VERSIONS[0]) as plane:
        yield plane
    if WRITE:
        _write_doc()


@pytest.fixture(scope="module", params=VERSIONS)
def version(request) -> str:
    """Module-scoped, so that pytest runs every test of one version before the next."""
    return request.param


@pytest.fixture
def control_plane(swap_plane: controlplane.ControlPlane, version: str) -> controlplane.ControlPlane:
    if swap_plane.kuberay != version:
        swap_plane.switch_operator(version)
    return swap_plane


# ----------------------------------------------------------------------------- the table


def _documented() -> dict[str, dict[str, str]]:
    """version -> column -> cell, from the table between the support-table markers."""
    table = DOC.read_text().split("<!-- support-table -->")[1].split("<!-- /support-table -->")[0]
    rows = [[c.strip() for c in r.strip().strip("|").split("|")] for r in table.strip().splitlines()]
    header = rows[0]
    return {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows[2:]}


def record(version: str, column: str, value: Any) -> None:
    """What was measured on ``version``; checked against the documented table unless it is
    being written."""
    text = str(value)
    MEASURED.setdefault(version, {})[column] = text
    if WRITE or column in TIMINGS:
        return
    documented = _documented().get(version, {}).get(column)
    assert documented == text, (f"{version} / {column}: measured {text!r}, docs/kuberay-versions.md says "
                                f"{documented!r} (RAYGITOPS_WRITE_SUPPORT_TABLE=1 writes what is measured)")


def _write_doc() -> None:
    missing = [f"{v} / {c}" for v in VERSIONS for c in (*FACTS, *TIMINGS) if c not in MEASURED.get(v, {})]
    if missing or len(UPGRADES) != 2:
        raise AssertionError(f"RAYGITOPS_WRITE_SUPPORT_TABLE=1 needs the whole module to pass; not measured: "
                             f"{', '.join(missing) or 'the upgrade'}")
    columns = (*FACTS, *TIMINGS)
    lines = ["| KubeRay | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {v} | " + " | ".join(MEASURED[v][c] for c in columns) + " |" for v in VERSIONS]
    text = DOC.read_text()
    for marker, body in (("support-table", "\n".join(lines)), ("upgrade-table", "\n".join(UPGRADES))):
        text = re.sub(rf"(<!-- {marker} -->\n).*?(<!-- /{marker} -->)",
                      lambda m: m.group(1) + body + "\n" + m.group(2), text, flags=re.S)
    DOC.write_text(text)


def yes(flag: bool) -> str:
    return "yes" if flag else "no"


# ----------------------------------------------------------------------------- per operator


def _crd_facts(plane: controlplane.ControlPlane, version: str) -> None:
    crd = plane.kubectl_json("get", "crd", "rayclusters.ray.io")
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    spec = v1["schema"]["openAPIV3Schema"]["properties"]["spec"]
    worker = spec["properties"]["workerGroupSpecs"]["items"]
    record(version, "spec.suspend", yes("suspend" in spec["properties"]))
    record(version, "upgradeStrategy in CRD", yes("upgradeStrategy" in spec["properties"]))
    record(version, "rayStartParams required", yes("rayStartParams" in worker.get("required", [])))
    assert ("upgradeStrategy" in spec["properties"]) == operators.operator(version[1:]).native_recreate


def _pod_facts(app: App, version: str) -> None:
    """The labels raygitops reads on the operator's pods, and the head pod's stamps."""
    pods = app.pods("full")
    kinds = {(p["metadata"]["labels"].get("ray.io/node-type"), p["metadata"]["labels"].get("ray.io/group"))
             for p in pods}
    record(version, "pod labels", "node-type, group" if kinds == {("head", "headgroup"), ("worker", "small")}
           else f"{sorted(kinds)}")
    (head,) = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
    stamp = head["metadata"].get("annotations", {}).get("ray.io/kuberay-version")
    native = "ray.io/upgrade-strategy-recreate-hash" in head["metadata"].get("annotations", {})
    record(version, "head pod stamped", f"{stamp} + hash" if stamp and native else stamp or "no")
    op = operators.operator(version[1:])
    assert op.node_type_label and (bool(stamp) and native) == op.stamps_head_pod


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["clusters"]}


def test_a_recreate_and_a_replacement_with_the_rendered_role(control_plane, namespace, tmp_path: Path,
                                                             version: str):
    """One hook run with the rendered ServiceAccount's token: ``full`` (Recreate) is
    suspended, drained and resumed with its new templates; ``groups`` (ReplaceGroups) has the
    pods of its changed group ``big`` replaced, its head and group ``small`` kept."""
    app = HookApp(control_plane, namespace, tmp_path)
    grouped = replace_groups()
    grouped["metadata"]["name"] = "groups"
    report = app.sync(raycluster(name="full"), grouped)
    assert report["summary"]["skipped"] == 2, report
    app.wait_pods("full", count=3)
    app.wait_pods("groups", count=5)
    assert app.plane.kuberay == version
    _crd_facts(app.plane, version)
    _pod_facts(app, version)
    code, status = app.status()
    assert code == 0 and {c["state"] for c in status["clusters"]} == {"in-sync"}, status

    app.write(raycluster(name="full", image=NEW), with_big_image(grouped))
    code, status = app.status()
    states = {c["name"]: c["state"] for c in status["clusters"]}
    assert code == 3 and states == {"full": "drifted", "groups": "drifted"}, status
    assert "replace" in _by_name(status)["groups"], status
    objs, _, plan = app.render()
    full_before, grouped_before = app.uids("full"), uids_by_group(app.pods("groups"))
    res = app.presync(plan)
    report = _by_name(json.loads(res.stdout))
    assert report["full"]["outcome"] == "recreated" and report["groups"]["outcome"] == "replaced", res.stderr
    assert "cannot record Event" not in res.stderr and "403" not in res.stderr, res.stderr
    for reason in ("RecreateStarted", "PodsDrained", "Resumed", "RecreateCompleted"):
        assert len(app.events(reason, "full")) == 1, reason
    # the suspend conditions the operator reports, and the hook prompting it exactly then
    conditions = {c["type"] for c in app.cluster("full")["status"].get("conditions") or []}
    reported = {"RayClusterSuspending", "RayClusterSuspended"} & conditions
    prompted = [line for line in map(json.loads, filter(lambda s: s.startswith("{"), res.stderr.splitlines()))
                if line.get("step") == "prompt" and line.get("cluster", "").endswith("/full")]
    assert bool(prompted) == bool(reported) == operators.operator(version[1:]).suspend_conditions, (reported, prompted)
    record(version, "suspend conditions", "Suspending, Suspended (hook prompts)" if reported else "none")

    app.apply(objs)
    full = app.wait_pods("full", count=3, hashes=desired_hashes(rendered(objs, "full")))
    assert full_before.isdisjoint(p["metadata"]["uid"] for p in full)
    assert {c["image"] for p in full for c in p["spec"]["containers"]} == {NEW}
    after = uids_by_group(app.wait_pods("groups", count=5, hashes=desired_hashes(rendered(objs, "groups"))))
    assert after["headgroup"] == grouped_before["headgroup"] and after["small"] == grouped_before["small"]
    assert after["big"].isdisjoint(grouped_before["big"])
    code, status = app.status()
    assert code == 0, status
    for column in ("Recreate cycle", "ReplaceGroups", "status", "hook's Role"):
        record(version, column, "passes")
    record(version, "cycle s", f"{report['full']['seconds']:.1f}")
    record(version, "replace s", f"{report['groups']['seconds']:.1f}")


def test_a_recreate_that_cannot_get_ready_fails_the_hook(control_plane, namespace, tmp_path: Path, version: str):
    """Workers pinned to a node pool that does not exist: the hook waits for readiness until
    its timeout and fails (exit 1); the cluster is not left suspended or locked, the failure
    is recorded, and ``raygitops status`` says failed."""
    app = App(control_plane, namespace, tmp_path)
    assert app.sync(raycluster(replicas=1))["summary"]["skipped"] == 1
    app.wait_pods(count=2)
    bad = raycluster(image=NEW, replicas=1)
    bad["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = {"pool": "does-not-exist"}
    # a pool a node autoscaler may make: the preflight cannot tell, and this cluster's policy goes on
    bad["metadata"].setdefault("annotations", {})["raygitops.dev/preflight-unknown"] = "proceed"
    app.write(bad)
    _, _, plan = app.render()
    argv = app.presync_argv(plan, "--wait-ready")
    argv[argv.index("--timeout") + 1] = "10"
    res = subprocess.run(argv, capture_output=True, text=True, env=app.hook_env(), timeout=120)
    assert res.returncode == 1, res.stderr
    (demo,) = json.loads(res.stdout)["clusters"]
    assert demo["outcome"] == "failed" and "ready" in demo["message"], demo
    live = app.cluster()
    assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]
    assert json.loads(live["metadata"]["annotations"][LAST])["outcome"] == "Failed"
    code, status = app.status()
    assert code == 3 and status["clusters"][0]["state"] == "failed", status
    record(version, "failed recreate", "fails the hook")


def test_a_removed_worker_group(control_plane, namespace, tmp_path: Path, version: str):
    """A worker group removed from the spec of a cluster that does not opt in: what the
    operator does with its pods alone (once it acted on the new spec: group ``small`` scaled
    in the same change); then opted in (ReplaceGroups): the hook deletes the removed group's
    pods only."""
    app = App(control_plane, namespace, tmp_path)
    plain = two_groups(strategy=None)
    for group in plain["spec"]["workerGroupSpecs"]:
        group["replicas"] = 1
    app.sync(plain)
    app.wait_pods(count=3)
    removed = without_big(plain)
    removed["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    assert app.sync(removed) is None  # nothing opts in: no hook
    app.plane.wait_for(lambda: groups(app.pods()).get("small") == 2, timeout=60,
                       message="the operator scaling group small (it took the new spec in)")
    time.sleep(2)
    kept = groups(app.pods()).get("big") == 1
    assert kept == operators.operator(version[1:]).removed_group_pods_kept, groups(app.pods())
    record(version, "removed group, operator alone", "pods keep running" if kept else "pods deleted")

    opted = copy.deepcopy(removed)
    opted["metadata"]["annotations"]["raygitops.dev/upgrade-strategy"] = "ReplaceGroups"
    before = uids_by_group(app.pods())
    (demo,) = app.sync(opted)["clusters"]
    assert demo["outcome"] == "replaced" and demo["drift"]["worker:big"]["how"] == "removed-group", demo
    after = uids_by_group(app.wait_pods(count=3))
    assert "big" not in after and after["headgroup"] == before["headgroup"] and after["small"] == before["small"]


def test_the_removed_group_race_is_never_a_false_success(control_plane, namespace, tmp_path: Path, version: str):
    """tests/e2e/test_removed_group_race.py's forced race, on this operator."""
    app = HookApp(control_plane, namespace, tmp_path)
    with operator_behind_proxy(control_plane, tmp_path) as proxy:
        force_the_race(app, control_plane, proxy)


def test_an_operator_whose_crd_has_no_spec_suspend_is_refused(swap_plane, tmp_path: Path):
    """KubeRay 1.0's RayCluster CRD has no ``spec.suspend`` (KUBERAY_UNSUPPORTED_VERSION; here
    under ray-operator v1.1.1, as a Helm upgrade of the operator leaves the CRDs as they
    were): the API server drops the hook's suspend write, and the hook fails at once saying
    why, deleting no pod and leaving no lock."""
    plane = swap_plane
    plane.switch_operator(VERSIONS[0], crds=_VERSIONS["KUBERAY_UNSUPPORTED_VERSION"])
    ns = plane.create_namespace(controlplane.unique_name("nosuspend"))
    try:
        crd = plane.kubectl_json("get", "crd", "rayclusters.ray.io")
        (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        assert "suspend" not in v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        app = App(plane, ns, tmp_path)
        assert app.sync(raycluster(replicas=1))["summary"]["skipped"] == 1
        app.wait_pods(count=2)
        uids = app.uids()
        app.write(raycluster(image=NEW, replicas=1))
        _, _, plan = app.render()
        res = app.presync(plan, check=False)
        assert res.returncode == 1, res.stderr
        (demo,) = json.loads(res.stdout)["clusters"]
        assert demo["outcome"] == "failed" and "KubeRay older than 1.1" in demo["message"], demo
        assert "deleted pod" not in res.stderr and app.uids() == uids
        live = app.cluster()
        assert "suspend" not in live["spec"] and LOCK not in live["metadata"]["annotations"]
    finally:
        plane.delete_namespace(ns, wait=False)
        plane.switch_operator(VERSIONS[0])


# ----------------------------------------------------------------------------- upgrades


def test_an_operator_upgrade_recreates_nothing(swap_plane, tmp_path: Path):
    """Under unchanged manifests, KubeRay 1.4.2 -> 1.5.0 -> 1.6.2 in place: neither the
    operator nor the hook replaces a pod; the hook reports the clusters in sync (``adopted``,
    created before raygitops, by its live spec: its pods carry no hash), and for the cluster
    left to KubeRay's native Recreate, ``raygitops status`` and the hook say what the new
    operator will do (on 1.6 it is not armed on head pods an older operator made)."""
    plane = swap_plane
    if plane.kuberay != UPGRADE[0]:
        plane.switch_operator(UPGRADE[0])
    ns = plane.create_namespace(controlplane.unique_name("upgrade"))
    try:
        app = App(plane, ns, tmp_path)
        grouped = replace_groups()
        grouped["metadata"]["name"] = "groups"
        native = raycluster(name="native", strategy="None")
        native["spec"]["upgradeStrategy"] = {"type": "Recreate"}
        adopted = raycluster(name="adopted")
        app.write(raycluster(name="full"), grouped, native, adopted)
        config = app.dir / "raygitops.yaml"
        config.write_text(config.read_text() + "keepUpgradeStrategy: true\n")
        objs, _, plan = app.render()
        _apply_unvalidated(app, [o for o in objs if o["metadata"]["name"] != "adopted"] + [adopted])
        for name, count in (("full", 3), ("groups", 5), ("native", 3), ("adopted", 3)):
            app.wait_pods(name, count=count)
        assert not any(HASH in p["metadata"].get("annotations", {}) for p in app.pods("adopted"))
        uids = _all_uids(app)
        for previous, version in zip(UPGRADE, UPGRADE[1:]):
            plane.switch_operator(version)
            since = plane.components["ray-operator"].log_offset  # where the new operator's log begins
            for name in ("full", "groups", "native", "adopted"):
                plane.wait_operator_reconciled(name, ns, since, timeout=60)
            time.sleep(3)  # what those reconciles do to the pods
            assert _all_uids(app) == uids, f"the operator upgrade {previous} -> {version} replaced pods"
            res = app.presync(plan)
            report = json.loads(res.stdout)
            clusters = _by_name(report)
            assert report["summary"]["recreated"] == 0 and not report["failed"], res.stderr
            assert {clusters[n]["decision"] for n in ("full", "groups", "adopted")} == {"in-sync"}, clusters
            assert clusters["adopted"]["drift"] == {}, clusters["adopted"]
            assert clusters["native"]["decision"] == "skip", clusters["native"]
            assert "deleted pod" not in res.stderr and _all_uids(app) == uids
            code, status = app.status()
            states = {c["name"]: c["state"] for c in status["clusters"]}
            assert code == 0 and set(states.values()) == {"in-sync"}, status
            (warning,) = _by_name(status)["native"]["warnings"]
            hook_warning = clusters["native"]["warnings"][0]
            if operators.operator(version[1:]).native_recreate:
                assert "not armed" in warning and "not armed" in hook_warning, (warning, hook_warning)
            else:
                assert "unknown to this cluster's RayCluster CRD" in warning, warning
            _apply_unvalidated(app, objs)  # the sync goes on
            time.sleep(3)
            assert _all_uids(app) == uids
            UPGRADES.append(f"- {previous} → {version}: no pod replaced by the operator or the hook (hook: "
                            f"{report['summary']['inSync']} in sync, native cluster skipped); native Recreate "
                            f"cluster: {warning.split(':')[0]}")
    finally:
        plane.delete_namespace(ns, wait=False)


def _apply_unvalidated(app: App, objs: list[dict[str, Any]]) -> None:
    """Apply as a sync without strict field validation does: a CRD older than 1.6 drops the
    kept ``spec.upgradeStrategy`` silently (strict validation would refuse the cluster)."""
    app.plane.kubectl("apply", "--validate=false", "-n", app.ns, "-f", "-", input=yaml.safe_dump_all(objs))


def _all_uids(app: App) -> set[str]:
    return {p["metadata"]["uid"] for p in app.plane.kubectl_json("get", "pods", "-n", app.ns, "-l", "ray.io/cluster")["items"]
            if not p["metadata"].get("deletionTimestamp")}
