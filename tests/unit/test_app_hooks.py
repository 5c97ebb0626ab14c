"""Many apps, one namespace (issue 49): hook objects per app, claims, the upgrade from fixed names.

Render: the same app under two app names, and two apps in one namespace, share no hook
object (names, Role rules, plan contents); names stay within Kubernetes' limits however long
the app name.  Hook: a RayCluster two apps' plans list fails closed naming both (also when
both claim at once); the fixed-name hook objects of the hook's own app are removed, another
app's kept.
"""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from raygitops.cli.main import main
from raygitops.kube.client import Conflict
from raygitops.model import hooknames, k8snames
from raygitops.model.hooknames import LEGACY, LEGACY_OBJECTS, app_key, hook_names
from raygitops.model.names import APP_LABEL, CLAIM_ANNOTATION
from raygitops.model.plan import Plan
from raygitops.presync import claims, legacy
from raygitops.presync.logs import Log
from raygitops.presync.run import RunOptions, run
from raygitops.render.pipeline import render_app

from test_presync_fakes import NS, FakeKube, cluster_spec, make_plan, stamped, with_crd_defaults
from test_render import RECREATE, cluster, write

HOOK_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret", "Job"}
OLD, NEW = cluster_spec(image="old:1"), cluster_spec(image="new:2")


def hooks(tmp: Path, files: dict[str, str], app: str | None, **overrides) -> list[dict]:
    env = {"ARGOCD_APP_NAMESPACE": NS, **({"ARGOCD_APP_NAME": app} if app else {})}
    result = render_app(str(write(tmp, files)), env=env, overrides=overrides)
    return [o for o in result.objects if o["kind"] in HOOK_KINDS]


def ids(objects: list[dict]) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}


def plan_of(objects: list[dict]) -> dict:
    return json.loads(next(o for o in objects if o["kind"] == "ConfigMap")["data"]["plan.json"])


def role_clusters(objects: list[dict]) -> set[str]:
    role = next(o for o in objects if o["kind"] == "Role")
    return {n for r in role["rules"] if "rayclusters" in r["resources"] for n in r.get("resourceNames", [])}


def test_the_same_app_under_two_names_shares_no_hook_object(tmp_path: Path) -> None:
    files = {"c.yaml": cluster("c", meta=RECREATE), "r.yaml": cluster("r", meta=RECREATE)}
    a, b = hooks(tmp_path / "a", files, "team-a"), hooks(tmp_path / "b", files, "team-b")
    assert len(a) == len(b) == 5 and not ids(a) & ids(b), (ids(a), ids(b))
    for objects, app in ((a, "team-a"), (b, "team-b")):
        key = app_key(app)
        assert all(o["metadata"]["labels"][APP_LABEL] == key for o in objects)
        job = next(o for o in objects if o["kind"] == "Job")
        pod = job["spec"]["template"]["spec"]
        # the Job finds its own plan, runs as its own ServiceAccount, may annotate its own Job
        assert pod["volumes"][0]["configMap"]["name"] == f"raygitops-plan-{key}"
        assert pod["serviceAccountName"] == f"raygitops-presync-{key}" == job["metadata"]["name"]
        binding = next(o for o in objects if o["kind"] == "RoleBinding")
        assert binding["roleRef"]["name"] == binding["subjects"][0]["name"] == f"raygitops-presync-{key}"
        assert plan_of(objects)["app"] == app
    # without an app: today's fixed names, no app label
    fixed = hooks(tmp_path / "n", files, None)
    assert {n for _, _, n in ids(fixed)} == {"raygitops-presync", "raygitops-plan"}
    assert all(APP_LABEL not in o["metadata"]["labels"] for o in fixed)


def test_two_apps_in_one_namespace_each_reach_only_their_own_clusters(tmp_path: Path) -> None:
    a = hooks(tmp_path / "a", {"x.yaml": cluster("a1", meta=RECREATE) + "---\n" + cluster("a2", meta=RECREATE)}, "team-a")
    b = hooks(tmp_path / "b", {"y.yaml": cluster("b1", meta=RECREATE)}, "team-b")
    assert not ids(a) & ids(b)
    assert role_clusters(a) == {"a1", "a2"} and role_clusters(b) == {"b1"}
    assert [c["name"] for c in plan_of(a)["clusters"]] == ["a1", "a2"]
    assert [c["name"] for c in plan_of(b)["clusters"]] == ["b1"]
    # what each Role may do by name: nothing of the other app's
    names = lambda objects: {n for o in objects if o["kind"] == "Role" for r in o["rules"]  # noqa: E731
                             for n in r.get("resourceNames", []) if not n.startswith(LEGACY.presync + "-")}
    assert not (names(a) & names(b)) - {o[2] for o in LEGACY_OBJECTS}


@pytest.mark.parametrize("app", ["a", "team-a", "argocd-apps_Team.A", "x" * 320, "ns/" + "y" * 250, "9-a_b.c"])
def test_names_are_valid_and_within_limits_however_long_the_app_name(app: str) -> None:
    names = hook_names(app)
    assert len(names.presync) + hooknames.FLUX_SUFFIX_CHARS <= k8snames.JOB_NAME_MAX
    for name in (names.presync, names.plan, names.plan_secrets, names.presync + "-0123456789"):
        assert k8snames.dns1123_subdomain(name, k8snames.LABEL_VALUE_MAX) is None, name
    assert k8snames.label_value(names.app_key) is None
    assert names.presync.startswith(f"raygitops-presync-{app_key(app)[:3]}")


def test_app_names_that_slug_alike_still_differ() -> None:
    alike = ["team-a", "team_a", "Team-A", "team.a", "team-a" + "b" * 40, "team-a" + "c" * 40]
    assert len({hook_names(a).presync for a in alike}) == len(alike)


def test_app_name_flag_wins_over_argocd_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    app = write(tmp_path, {"c.yaml": cluster("c", meta=RECREATE)})
    runner = CliRunner()
    env = {"ARGOCD_APP_NAME": "from-argocd", "ARGOCD_APP_NAMESPACE": NS, "ARGOCD_APP_PARAMETERS": None}
    out = runner.invoke(main, ["render", str(app), "--app-name", "release-1"], env=env)
    assert out.exit_code == 0, out.stderr
    assert f"name: raygitops-presync-{app_key('release-1')}" in out.stdout
    bad = runner.invoke(main, ["render", str(app), "--app-name", "a b"], env=env)
    assert bad.exit_code == 1 and bad.stdout == "" and len(bad.stderr.splitlines()) == 1
    assert bad.stderr.startswith("raygitops: --app-name: 'a b' is not an app name"), bad.stderr
    bad = runner.invoke(main, ["render", str(app)], env={**env, "ARGOCD_APP_NAME": "-x"})
    assert bad.exit_code == 1 and bad.stderr.startswith("raygitops: ARGOCD_APP_NAME: "), bad.stderr


# ----------------------------------------------------------------------------- claims (hook)


def _run(kube: FakeKube, plans: list[Plan], dry_run: bool = False):
    out = io.StringIO()
    opts = RunOptions(timeout=20, drain_grace=5, max_parallel=4, wait_ready=True, clock=kube.clock, dry_run=dry_run)
    return run(kube, plans, opts, Log("json", out)), out.getvalue()


def _live(kube: FakeKube, name: str) -> dict:
    return kube.clusters[(NS, name)]


def test_a_cluster_two_apps_list_fails_closed_naming_both() -> None:
    kube = FakeKube()
    kube.add_cluster("shared", with_crd_defaults(stamped(OLD)))
    report, _ = _run(kube, [Plan(NS, [make_plan("shared", spec=NEW)], app="team-a")])
    assert report.counts()["recreated"] == 1
    assert _live(kube, "shared")["metadata"]["annotations"][CLAIM_ANNOTATION] == "team-a"
    deleted = len(kube.deleted_pods)
    report, _ = _run(kube, [Plan(NS, [make_plan("shared", spec=OLD)], app="team-b")])
    assert report.failed and report.counts()["failed"] == 1
    reason = report.failure_reason()
    assert "claimed by app team-a" in reason and "plan of app team-b lists it too" in reason, reason
    assert len(kube.deleted_pods) == deleted  # nothing of the cluster touched
    assert _live(kube, "shared")["metadata"]["annotations"][CLAIM_ANNOTATION] == "team-a"
    # its own app's next run passes; a hook without an app neither claims nor checks
    assert not _run(kube, [Plan(NS, [make_plan("shared", spec=NEW)], app="team-a")])[0].failed
    assert not _run(kube, [Plan(NS, [make_plan("shared", spec=NEW)])])[0].failed


def test_a_dry_run_claims_nothing_but_sees_another_apps_claim() -> None:
    kube = FakeKube()
    kube.add_cluster("c", with_crd_defaults(stamped(OLD)))
    report, _ = _run(kube, [Plan(NS, [make_plan("c", spec=NEW)], app="team-a")], dry_run=True)
    assert not report.failed and CLAIM_ANNOTATION not in _live(kube, "c")["metadata"]["annotations"]
    _live(kube, "c")["metadata"]["annotations"][CLAIM_ANNOTATION] = "team-b"
    report, _ = _run(kube, [Plan(NS, [make_plan("c", spec=NEW)], app="team-a")], dry_run=True)
    assert report.failed and "claimed by app team-b" in report.failure_reason()


def test_two_hooks_claiming_at_once_cannot_both_pass() -> None:
    """Both read the cluster unclaimed; the first write wins, the second meets the 409,
    reads the winner's claim and fails."""
    kube = FakeKube()
    kube.add_cluster("c", with_crd_defaults(stamped(OLD)))
    plan_a, plan_b = (Plan(NS, [make_plan("c", spec=NEW)], app=app) for app in ("team-a", "team-b"))
    live_a, live_b = ({"c": kube.get_cluster(NS, "c")} for _ in range(2))  # both LISTed before either wrote
    assert claims.claim(kube, plan_a, live_a) == {}
    failures = claims.claim(kube, plan_b, live_b)
    assert "claimed by app team-a" in failures["c"] and "team-b" in failures["c"]
    assert kube.by_verb["patch"] == 2  # a's write, b's refused one (409)
    assert _live(kube, "c")["metadata"]["annotations"][CLAIM_ANNOTATION] == "team-a"


def test_many_hooks_racing_for_one_cluster_leave_exactly_one_winner() -> None:
    kube = FakeKube()
    kube.add_cluster("c", with_crd_defaults(stamped(OLD)))
    seen = [{"c": kube.get_cluster(NS, "c")} for _ in range(8)]
    results: dict[str, dict] = {}
    start = threading.Barrier(8)

    def one(i: int) -> None:
        start.wait()
        results[f"app-{i}"] = claims.claim(kube, Plan(NS, [make_plan("c", spec=NEW)], app=f"app-{i}"), seen[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [app for app, failed in results.items() if not failed]
    assert winners == [_live(kube, "c")["metadata"]["annotations"][CLAIM_ANNOTATION]]


def test_the_claim_fails_closed_if_its_write_keeps_conflicting() -> None:
    kube = FakeKube()
    kube.add_cluster("c", with_crd_defaults(stamped(OLD)))
    live = {"c": kube.get_cluster(NS, "c")}
    kube.fail_next = [Conflict(409, "Conflict", "x")] * 200
    with pytest.raises(Exception, match="claiming RayCluster ray/c: gave up after 50"):
        claims.claim(kube, Plan(NS, [make_plan("c", spec=NEW)], app="a"), live)


# ----------------------------------------------------------------------------- the upgrade (hook)


def _fixed_objects(kube: FakeKube, app: str, tracking: str = "annotation") -> None:
    for group, resource, name in LEGACY_OBJECTS:
        meta = {"name": name, "namespace": NS, "uid": f"uid-{resource}", "labels": {}, "annotations": {}}
        if tracking == "label":
            meta["labels"]["app.kubernetes.io/instance"] = app
        else:
            meta["annotations"]["argocd.argoproj.io/tracking-id"] = f"{app}:{group}/{resource}:{NS}/{name}"
        kube.hook_objects[(group, resource, NS, name)] = {"metadata": meta}


@pytest.mark.parametrize("tracking", ["annotation", "label"])
def test_the_upgrade_removes_the_apps_own_fixed_name_objects_and_no_pod(tracking: str) -> None:
    kube = FakeKube()
    kube.add_cluster("c", with_crd_defaults(stamped(NEW)))
    _fixed_objects(kube, "team-a", tracking)
    pods = {p["metadata"]["uid"] for p in kube.pods.values()}
    report, log = _run(kube, [Plan(NS, [make_plan("c", spec=NEW)], app="team-a")])
    assert not report.failed and kube.hook_objects == {}
    assert kube.deleted_objects == [(g, r, NS, n) for g, r, n in LEGACY_OBJECTS]  # the Secret first, the ConfigMap last
    assert {p["metadata"]["uid"] for p in kube.pods.values()} == pods and kube.deleted_pods == []
    assert "removed the fixed-name hook objects of app team-a" in log
    # each object is deleted on its own tracking only: one another app's stays
    _fixed_objects(kube, "team-a", tracking)
    kube.hook_objects[("", "serviceaccounts", NS, LEGACY.presync)]["metadata"] = {
        "name": LEGACY.presync, "uid": "x", "labels": {"app.kubernetes.io/instance": "team-b"}}
    assert len(legacy.remove(kube, Plan(NS, [], app="team-a"), Log("json", io.StringIO()))) == 5
    assert list(kube.hook_objects) == [("", "serviceaccounts", NS, LEGACY.presync)]
    del kube.hook_objects[("", "serviceaccounts", NS, LEGACY.presync)]
    # a second run finds nothing left to remove
    assert legacy.remove(kube, Plan(NS, [], app="team-a"), Log("json", io.StringIO())) == []


def test_the_upgrade_keeps_another_apps_fixed_name_objects_reading_one() -> None:
    kube = FakeKube()
    _fixed_objects(kube, "team-b")
    read: list[tuple] = []
    get = kube.get_object
    kube.get_object = lambda *key: read.append(key) or get(*key)  # type: ignore[method-assign]
    assert legacy.remove(kube, Plan(NS, [], app="team-a"), Log("json", io.StringIO())) == []
    assert len(kube.hook_objects) == len(LEGACY_OBJECTS) and kube.deleted_objects == []
    assert read == [("", "configmaps", NS, LEGACY.plan)]  # the same render's ConfigMap says whose they all are
    # a hook without an app (fixed names) removes nothing either, and a dry run only says
    assert legacy.remove(kube, Plan(NS, [], app=None), Log("json", io.StringIO())) == []
    _fixed_objects(kube, "team-a")
    assert len(legacy.remove(kube, Plan(NS, [], app="team-a"), Log("json", io.StringIO()), dry_run=True)) == 6
    assert len(kube.hook_objects) == len(LEGACY_OBJECTS)


def test_a_failed_removal_is_a_warning_not_a_failure() -> None:
    kube = FakeKube()
    kube.add_cluster("c", with_crd_defaults(stamped(NEW)))
    _fixed_objects(kube, "team-a")
    from raygitops.kube.client import ApiError

    kube.fail_next = [ApiError(403, "Forbidden", "no")]
    report, log = _run(kube, [Plan(NS, [make_plan("c", spec=NEW)], app="team-a")])
    assert not report.failed and "could not remove the fixed-name hook objects" in log
