"""Render: hashes written, opt-in, RayJob/RayService rules, plans and hook resources."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from raygitops.errors import RaygitopsError
from raygitops.model.names import HASH_ANNOTATION, HASHES_ANNOTATION
from raygitops.render.hookresources import RULES
from raygitops.render.pipeline import render_app
from raygitops.presync.recovery import AFTER_STOP_SECONDS
from raygitops.presync.drain import WATCH_SECONDS

CLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: {name}
{meta}spec:
{spec}  headGroupSpec:
    template:
      spec:
        containers: [{{name: head, image: "rayproject/ray:2.41.0"}}]
  workerGroupSpecs:
  - groupName: w
    replicas: 2
    minReplicas: 0
    maxReplicas: 4
    template:
      spec:
        containers: [{{name: w, image: "rayproject/ray:2.41.0"}}]
"""


def cluster(name: str = "c", meta: str = "", spec: str = "") -> str:
    return CLUSTER.format(name=name, meta=meta, spec=spec)


RECREATE = "  annotations: {raygitops.dev/upgrade-strategy: Recreate}\n"


def write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def render(tmp_path: Path, files: dict[str, str], **kw):
    return render_app(str(write(tmp_path, files)), env={}, **kw)


def kinds(result) -> list[str]:
    return [o["kind"] for o in result.objects]


def test_hashes_are_written_to_templates_and_cluster(tmp_path: Path) -> None:
    result = render(tmp_path, {"c.yaml": cluster()})
    obj = result.objects[0]
    hashes = json.loads(obj["metadata"]["annotations"][HASHES_ANNOTATION])
    head = obj["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"][HASH_ANNOTATION]
    worker = obj["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"][HASH_ANNOTATION]
    assert hashes == {"head": head, "workers": {"w": worker}}
    assert re.fullmatch(r"h3\.[0-9a-f]{6}-[0-9a-f]{16}", head) and head != worker


def test_without_opt_in_hashes_but_no_hooks(tmp_path: Path) -> None:
    result = render(tmp_path, {"c.yaml": cluster()})
    assert kinds(result) == ["RayCluster"]
    assert result.plans == []
    assert result.clusters[0].plan.strategy == "None"


def test_opt_in_by_annotation_appends_hooks_in_waves(tmp_path: Path) -> None:
    result = render(tmp_path, {"c.yaml": cluster(meta=RECREATE)})
    assert kinds(result) == ["RayCluster", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                             "ClusterRoleBinding", "ConfigMap", "Job"]
    waves = [o["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] for o in result.objects[1:]]
    assert waves == ["-3", "-3", "-2", "-3", "-2", "-1", "0"]
    for hook in result.objects[1:]:
        annotations = hook["metadata"]["annotations"]
        assert annotations["argocd.argoproj.io/hook"] == "PreSync"
        assert annotations["argocd.argoproj.io/hook-delete-policy"] == "BeforeHookCreation"
        assert hook["metadata"].get("namespace") == (None if hook["kind"].startswith("Cluster") else "default")


def test_opt_in_by_spec_field_moves_to_annotation_unless_kept(tmp_path: Path) -> None:
    text = cluster(spec="  upgradeStrategy: {type: Recreate}\n")
    moved = render(tmp_path / "a", {"c.yaml": text}).objects[0]
    assert "upgradeStrategy" not in moved["spec"]
    assert moved["metadata"]["annotations"]["raygitops.dev/upgrade-strategy"] == "Recreate"
    kept = render(tmp_path / "b", {"c.yaml": text}, overrides={"keep_upgrade_strategy": True}).objects[0]
    assert kept["spec"]["upgradeStrategy"] == {"type": "Recreate"}
    assert "Job" in kinds(render(tmp_path / "c", {"c.yaml": text}))


def test_hook_rbac_is_least_privilege_and_job_is_locked_down(tmp_path: Path) -> None:
    result = render(tmp_path, {"c.yaml": cluster(meta=RECREATE)})
    role = next(o for o in result.objects if o["kind"] == "Role")
    assert role["rules"][:len(RULES)] == RULES
    verbs = {(r["apiGroups"][0], res, tuple(r.get("resourceNames", ())), v)
             for r in role["rules"] for res in r["resources"] for v in r["verbs"]}
    assert verbs == {("ray.io", "rayclusters", (), "list")} | {  # its own clusters only, but the LIST
        ("ray.io", "rayclusters", ("c",), v) for v in ("get", "watch", "patch")
    } | {("", "pods", (), v) for v in ("list", "watch", "delete")} | {("", "events", (), "create")} | {
        ("batch", "jobs", ("raygitops-presync",), "patch")} | {  # its own Job only: the failure reason
        ("", "services/proxy", ("c-head-svc:dashboard",), "get")}  # its head's dashboard port only: running jobs
    job = next(o for o in result.objects if o["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] > 900
    grace = job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > AFTER_STOP_SECONDS + WATCH_SECONDS  # room to resume after SIGTERM
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["args"][:3] == ["presync", "--plan", "/plan/plan.json"]
    assert container["args"][container["args"].index("--job") + 1] == job["metadata"]["name"]
    assert pod["serviceAccountName"] == "raygitops-presync"


def test_plan_lists_every_cluster_of_the_namespace(tmp_path: Path) -> None:
    files = {
        "a.yaml": cluster("a", meta=RECREATE),
        "b.yaml": cluster("b"),
        "c.yaml": cluster("c", meta="  namespace: other\n"),
    }
    result = render(tmp_path, files)
    assert [p.namespace for p in result.plans] == ["default"]
    configmap = next(o for o in result.objects if o["kind"] == "ConfigMap")
    plan = json.loads(configmap["data"]["plan.json"])
    assert plan["kind"] == "PresyncPlan" and plan["namespace"] == "default"
    assert [(c["name"], c["strategy"]) for c in plan["clusters"]] == [("a", "Recreate"), ("b", "None")]
    a = plan["clusters"][0]
    assert a["hashes"] == json.loads(result.objects[0]["metadata"]["annotations"][HASHES_ANNOTATION])
    assert a["spec"]["workers"]["w"]["replicas"] == 2  # the whole desired spec: the hook's resume writes it
    stamped = a["spec"]["workers"]["w"]["template"]["metadata"]["annotations"]
    assert stamped == {"raygitops.dev/template-hash": a["hashes"]["workers"]["w"]}
    assert a["spec"]["head"]["template"]["spec"]["containers"][0]["image"] == "rayproject/ray:2.41.0"


def test_hooks_per_namespace(tmp_path: Path) -> None:
    files = {
        "a.yaml": cluster("a", meta=RECREATE + "  namespace: one\n"),
        "b.yaml": cluster("b", meta=RECREATE + "  namespace: two\n"),
    }
    result = render(tmp_path, files)
    assert [p.namespace for p in result.plans] == ["one", "two"]
    jobs = [o["metadata"]["namespace"] for o in result.objects if o["kind"] == "Job"]
    assert jobs == ["one", "two"]


def test_default_namespace_comes_from_setting_then_argocd(tmp_path: Path) -> None:
    app = write(tmp_path, {"c.yaml": cluster(meta=RECREATE)})
    via_env = render_app(str(app), env={"ARGOCD_APP_NAMESPACE": "ray"})
    assert via_env.plans[0].namespace == "ray"
    via_flag = render_app(str(app), env={"ARGOCD_APP_NAMESPACE": "ray"}, overrides={"namespace": "x"})
    assert via_flag.plans[0].namespace == "x"
    # the cluster is written where its plan and hook are, whatever Argo CD's destination
    assert via_flag.objects[0]["metadata"]["namespace"] == "x"


def test_other_documents_pass_through_unchanged_and_in_order(tmp_path: Path) -> None:
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: z}\ndata: {b: '1', a: '2'}\n"
    result = render(tmp_path, {"1.yaml": cm + "---\n" + cluster(), "2.yaml": cm.replace("name: z", "name: y")})
    assert kinds(result) == ["ConfigMap", "RayCluster", "ConfigMap"]
    # unchanged but for the namespace every namespaced object gets (below)
    assert result.objects[0] == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "z", "namespace": "default"},
                                 "data": {"b": "1", "a": "2"}}
    assert list(result.objects[0]["data"]) == ["b", "a"]


def test_the_namespace_setting_applies_to_every_namespaced_object_that_names_none(tmp_path: Path) -> None:
    """As kustomize's `namespace:`: a ConfigMap, a ServiceAccount, a custom resource of the
    app land in raygitops.yaml's namespace (Argo CD would put them in its destination);
    cluster-scoped kinds and objects naming a namespace keep theirs; the hook's Role names
    the ConfigMap the pods read in that namespace, the duplicate check and --out agree."""
    reads = yaml.safe_load(cluster(meta=RECREATE))
    reads["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "cfg"}}]
    reads = yaml.safe_dump(reads)
    others = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: '1'}\n---\n"
              "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n---\n"
              "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\n"
              "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: cr}\n---\n"
              "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n"
              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: elsewhere, namespace: other}\n")
    app = write(tmp_path / "app", {"raygitops.yaml": "namespace: ray\n", "c.yaml": reads, "o.yaml": others})
    result = render_app(str(app), env={"ARGOCD_APP_NAMESPACE": "destination"})
    where = {(o["kind"], o["metadata"]["name"]): o["metadata"].get("namespace") for o in result.objects}
    assert where[("ConfigMap", "cfg")] == where[("ServiceAccount", "sa")] == where[("Widget", "w")] == "ray"
    assert where[("ClusterRole", "cr")] is None and where[("Namespace", "ns")] is None
    assert where[("ConfigMap", "elsewhere")] == "other"
    (role,) = [o for o in result.objects if o["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "ray"
    assert {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"], "verbs": ["get", "patch"]} \
        in role["rules"]
    (app / "twice.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: ray}\n")
    with pytest.raises(RaygitopsError, match="ConfigMap ray/cfg is defined twice"):
        render_app(str(app))
    (app / "twice.yaml").unlink()
    from raygitops.render.output import write_out_dir

    written = write_out_dir(render_app(str(app)).objects, str(tmp_path / "out"), "ray")
    assert {"ray/configmap-cfg.yaml", "ray/widget-w.yaml", "_cluster/clusterrole-cr.yaml",
            "other/configmap-elsewhere.yaml"} <= set(written)
    assert yaml.safe_load((tmp_path / "out" / "ray" / "widget-w.yaml").read_text())["metadata"]["namespace"] == "ray"


@pytest.mark.parametrize("kind,field", [("RayJob", "rayClusterSpec"), ("RayService", "rayClusterConfig")])
def test_opt_in_inside_rayjob_or_rayservice_is_an_error(tmp_path: Path, kind: str, field: str) -> None:
    text = f"""\
    apiVersion: ray.io/v1
    kind: {kind}
    metadata: {{name: j}}
    spec:
      {field}:
        upgradeStrategy: {{type: Recreate}}
        headGroupSpec: {{template: {{}}}}
    """
    with pytest.raises(RaygitopsError, match=f"not allowed.*{kind}") as err:
        render(tmp_path, {"j.yaml": text})
    assert (err.value.path, err.value.line) == (f"{tmp_path}/j.yaml", 6)  # the field's own line


@pytest.mark.parametrize("opt_in", ["annotation", "field"])
def test_opt_in_inside_a_raycronjob_is_an_error(tmp_path: Path, opt_in: str) -> None:
    """KubeRay 1.7's RayCronJob: its RayJob spec is spec.jobTemplate, the cluster's spec
    spec.jobTemplate.rayClusterSpec; the clusters its RayJobs make are theirs, never the hook's."""
    annotation = "  annotations: {raygitops.dev/upgrade-strategy: Recreate}\n" if opt_in == "annotation" else ""
    field = "      upgradeStrategy: {type: Recreate}\n" if opt_in == "field" else ""
    text = ("apiVersion: ray.io/v1\nkind: RayCronJob\nmetadata:\n  name: nightly\n" + annotation
            + "spec:\n  schedule: '0 3 * * *'\n  jobTemplate:\n    entrypoint: python job.py\n"
            + "    rayClusterSpec:\n" + field + "      headGroupSpec: {template: {}}\n")
    with pytest.raises(RaygitopsError, match="not allowed.*RayCronJob") as err:
        render(tmp_path, {"c.yaml": text})
    assert (err.value.path, err.value.line) == (f"{tmp_path}/c.yaml", 5 if opt_in == "annotation" else 10)
    if opt_in == "field":
        assert str(err.value).count("spec.jobTemplate.rayClusterSpec.upgradeStrategy.type") == 1
    plain = text.replace(annotation, "").replace(field, "")
    assert kinds(render(tmp_path / "plain", {"c.yaml": plain})) == ["RayCronJob"]


def test_a_raycronjob_pod_template_label_is_checked(tmp_path: Path) -> None:
    """Its clusters' pods carry the template's labels: a value the API server refuses on a pod
    is refused here, at the RayCronJob."""
    text = ("apiVersion: ray.io/v1\nkind: RayCronJob\nmetadata: {name: nightly}\nspec:\n  schedule: '@daily'\n"
            "  jobTemplate:\n    rayClusterSpec:\n      headGroupSpec:\n        template:\n"
            "          metadata: {labels: {team: 'a b'}}\n")
    with pytest.raises(RaygitopsError, match="spec.jobTemplate.rayClusterSpec.headGroupSpec.template.metadata"):
        render(tmp_path, {"c.yaml": text})


def test_rayjob_without_opt_in_passes_through(tmp_path: Path) -> None:
    text = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j}\nspec: {entrypoint: x}\n"
    assert kinds(render(tmp_path, {"j.yaml": text})) == ["RayJob"]


def test_owned_cluster_is_marked_in_the_plan(tmp_path: Path) -> None:
    meta = RECREATE + "  labels: {ray.io/originated-from-crd: RayJob, ray.io/originated-from-cr-name: j}\n"
    result = render(tmp_path, {"c.yaml": cluster(meta=meta)})
    assert result.clusters[0].plan.owner == "RayJob/j"


def test_conflicting_opt_in_is_an_error(tmp_path: Path) -> None:
    text = cluster(meta="  annotations: {raygitops.dev/upgrade-strategy: None}\n",
                   spec="  upgradeStrategy: {type: Recreate}\n")
    with pytest.raises(RaygitopsError, match="contradicts"):
        render(tmp_path, {"c.yaml": text})


def test_render_is_idempotent(tmp_path: Path) -> None:
    from raygitops.render.output import yaml_stream

    first = yaml_stream(render(tmp_path / "a", {"c.yaml": cluster(meta=RECREATE)}).objects)
    again = render(tmp_path / "b", {"c.yaml": first.split("\n---\napiVersion: v1\nkind: ServiceAccount")[0]})
    assert yaml_stream(again.objects) == first


def test_large_plans_are_compressed(tmp_path: Path) -> None:
    import base64
    import gzip

    env = "\n".join(f"          - {{name: VAR_{i}, value: '{'x' * 200}'}}" for i in range(3000))
    text = cluster(meta=RECREATE).replace(
        'containers: [{name: head, image: "rayproject/ray:2.41.0"}]',
        'containers:\n        - name: head\n          image: ray\n          env:\n' + env)
    result = render(tmp_path, {"c.yaml": text})
    configmap = next(o for o in result.objects if o["kind"] == "ConfigMap")
    packed = configmap["binaryData"]["plan.json.gz"]
    assert json.loads(gzip.decompress(base64.b64decode(packed)))["clusters"][0]["name"] == "c"


@pytest.mark.parametrize("key", ["raygitops.dev/upgrade-stratgy", "raygitops.io/upgrade-strategy",
                                 "raygitop.dev/upgrade-strategy", "raygitops.dev/recreate-strategy"])
def test_a_near_miss_opt_in_is_an_error_at_its_line_with_the_spelling(tmp_path: Path, key: str) -> None:
    """As written it would leave the cluster not opted in: refused, never guessed."""
    text = cluster(meta=f"  annotations:\n    team: ml\n    {key}: Recreate\n")
    with pytest.raises(RaygitopsError) as err:
        render(tmp_path, {"c.yaml": text})
    assert str(err.value).startswith(f"{tmp_path}/c.yaml:7: metadata.annotations.{key}: raygitops has no such "
                                     "annotation (")
    assert "raygitops.dev/upgrade-strategy" in str(err.value)


def test_a_warning_is_said_once_per_app_with_its_clusters(tmp_path: Path) -> None:
    """The same unknown field of a newer KubeRay in many clusters is one line at the first
    place, with how many RayClusters carry it and where the next ones are; each message its
    own line, in the order found; each "did you mean" searched once."""
    import difflib

    from raygitops import errors

    future = "  futureOptions: {enabled: true}\n"
    later = "  laterOptions: {enabled: true}\n"
    files = {"a.yaml": "---\n".join(cluster(f"a{i}", spec=future + later) for i in range(3)),
             "b.yaml": "---\n".join([cluster("b0", spec=future), cluster("b1", spec=future + later)]),
             "raygitops.yaml": "kuberayVersion: '1.99+newest-rules'\n"}
    searched = []
    errors._closest.cache_clear()
    real = difflib.get_close_matches
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(difflib, "get_close_matches", lambda *a, **k: searched.append(a[0]) or real(*a, **k))
        result = render(tmp_path, files)
    a = f"{tmp_path}/a.yaml"
    rules, first, second = result.warnings
    assert rules.startswith("kuberayVersion 1.99+newest-rules: raygitops knows KubeRay 1.1 to 1.7; checked with")
    assert first.startswith(f"{a}:1: spec.futureOptions: unknown field")
    assert first.endswith(f"(in 5 RayClusters: {a}:1, {a}:21, {a}:41, and 2 more)")
    assert second.startswith(f"{a}:1: spec.laterOptions: unknown field")
    assert second.endswith(f"the newest raygitops knows; KubeRay 1.99 may drop it (in 4 RayClusters: {a}:1, {a}:21, "
                           f"{a}:41, and 1 more)")
    assert sorted(searched) == ["futureOptions", "laterOptions"]


def test_app_warnings_name_up_to_three_places_and_count_the_rest() -> None:
    from raygitops.render.appwarnings import AppWarnings

    warnings = AppWarnings()
    for where, message in [("a:1", "m"), ("a:9", "n"), ("b:2", "m"), ("c:3", "m")]:
        warnings.add(where, message)
    assert warnings.lines() == ["a:1: m (in 3 RayClusters: a:1, b:2, c:3)", "a:9: n"]
    warnings.add("d:4", "m")
    assert warnings.lines()[0] == "a:1: m (in 4 RayClusters: a:1, b:2, c:3, and 1 more)"


def test_known_and_foreign_annotations_do_not_warn(tmp_path: Path) -> None:
    meta = "  annotations: {raygitops.dev/upgrade-strategy: Recreate, example.com/team: ml}\n"
    assert render(tmp_path, {"c.yaml": cluster(meta=meta)}, overrides={"hook_image": PUSHED}).warnings == []


PUSHED = "registry.example.com/team/raygitops:0.1.0"


@pytest.mark.parametrize("image,env", [(None, {}), ("raygitops:0.1.0", {}), (None, {"RAYGITOPS_HOOK_IMAGE": "raygitops:9"}),
                                       ("docker.io/library/raygitops:0.1.0", {})])
def test_a_hook_image_no_registry_serves_is_warned_about(tmp_path: Path, image: str | None, env: dict) -> None:
    """The default (the local build's name) and its spellings: the hook Job's pod would wait
    in ImagePullBackOff until its deadline (about 17 minutes) with nothing said at render."""
    result = render_app(str(write(tmp_path, {"c.yaml": cluster(meta=RECREATE)})), env=env,
                        overrides={"hook_image": image})
    (warning,) = result.warnings
    assert warning.startswith("hook image raygitops:") or warning.startswith("hook image docker.io/library/raygitops:")
    assert "no registry serves it" in warning and "hook.image" in warning


@pytest.mark.parametrize("image", [PUSHED, "localhost/raygitops:test", "localhost:5000/raygitops", "myorg/raygitops:1"])
def test_a_hook_image_with_a_registry_or_a_path_is_not_warned_about(tmp_path: Path, image: str) -> None:
    result = render_app(str(write(tmp_path, {"c.yaml": cluster(meta=RECREATE)})), env={},
                        overrides={"hook_image": image})
    assert result.warnings == [] and result.plans


def test_no_hook_no_hook_image_warning(tmp_path: Path) -> None:
    assert render(tmp_path, {"c.yaml": cluster()}).warnings == []  # nothing opts in: no Job


def test_a_lowercase_strategy_says_the_spelling(tmp_path: Path) -> None:
    with pytest.raises(RaygitopsError, match=r"is not Recreate or None \(did you mean Recreate\?\)"):
        render(tmp_path, {"c.yaml": cluster(spec="  upgradeStrategy: {type: recreate}\n")})


def test_render_prints_warnings_on_stderr(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from raygitops.cli.main import main

    root = write(tmp_path, {"c.yaml": cluster(meta=RECREATE), "raygitops.yaml": "kuberayVersion: 1.9+newest-rules\n"})
    result = CliRunner().invoke(main, ["render", str(root)])
    assert result.exit_code == 0 and result.stdout.startswith("---\napiVersion: ray.io/v1")
    assert result.stderr.startswith("raygitops: warning: kuberayVersion 1.9+newest-rules: ") and "1.7's rules" in result.stderr


def test_rendering_the_output_again_gives_the_output(tmp_path: Path) -> None:
    """Render is idempotent on its whole output, hook objects included (no duplicates)."""
    from raygitops.render.output import yaml_stream

    first = yaml_stream(render(tmp_path / "a", {"c.yaml": cluster(meta=RECREATE)}).objects)
    again = render(tmp_path / "b", {"all.yaml": first})
    assert yaml_stream(again.objects) == first


def test_render_never_reads_its_own_out_dir(tmp_path: Path) -> None:
    """The Flux layout: `render app --out app/rendered` beside the manifests."""
    from click.testing import CliRunner

    from raygitops.cli.main import main

    app = write(tmp_path / "app", {"c.yaml": cluster(meta=RECREATE)})
    before = render_app(str(app), env={}).objects
    result = CliRunner().invoke(main, ["render", str(app), "--output-dir", str(app / "rendered")])
    assert result.exit_code == 0, result.output
    assert render_app(str(app), env={}).objects == before


def test_an_annotation_error_stays_one_line_whatever_the_key(tmp_path: Path) -> None:
    obj = {"metadata": {"annotations": {"raygitops.dev/x\nraygitops: fake line": "1"}}}
    from raygitops.model.strategy import annotation_problems

    ((_, message),) = annotation_problems(obj)
    assert "\n" not in message and "\\x0a" in message
