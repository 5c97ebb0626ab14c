"""Output modes and inputs: stdin, JSON, --out DIR, Jinja2 values and Argo CD environment."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from raygitops.render import output
from raygitops.cli.main import main
from raygitops.errors import RaygitopsError
from raygitops.render.pipeline import render_app
from raygitops.presync.planfiles import load_plan
from test_render import RECREATE, cluster, write

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '1'}\n"


def invoke(args, stdin=None, env=None):
    result = CliRunner().invoke(main, args, input=stdin, env=env)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_stdin_stream_like_a_post_renderer() -> None:
    out = invoke(["render", "-"], stdin=cluster(meta=RECREATE) + "---\n" + CM)
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["RayCluster", "ConfigMap", "ServiceAccount", "Role",
                                         "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Job"]


def test_json_format_is_a_list(tmp_path: Path) -> None:
    root = write(tmp_path, {"c.yaml": cluster()})
    data = json.loads(invoke(["render", str(root), "--output", "json"]))
    assert data["kind"] == "List" and data["items"][0]["kind"] == "RayCluster"


def test_out_dir_writes_stable_files_and_removes_stale(tmp_path: Path) -> None:
    root = write(tmp_path / "app", {"c.yaml": cluster(meta=RECREATE), "cm.yaml": CM})
    out = tmp_path / "out"
    invoke(["render", str(root), "--output-dir", str(out)])
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.yaml"))
    assert files == [
        "_cluster/clusterrole-raygitops-presync-default.yaml", "_cluster/clusterrolebinding-raygitops-presync-default.yaml",
        "default/configmap-raygitops-plan.yaml", "default/configmap-settings.yaml",
        "default/job-raygitops-presync.yaml", "default/raycluster-c.yaml",
        "default/role-raygitops-presync.yaml", "default/rolebinding-raygitops-presync.yaml",
        "default/serviceaccount-raygitops-presync.yaml",
    ]
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.yaml")}
    invoke(["render", str(root), "--output-dir", str(out)])
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.yaml")} == before
    (root / "cm.yaml").unlink()
    invoke(["render", str(root), "--output-dir", str(out)])
    assert not (out / "default/configmap-settings.yaml").exists()


def test_out_dir_refuses_foreign_directory(tmp_path: Path) -> None:
    root = write(tmp_path / "app", {"c.yaml": cluster()})
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.yaml").write_text("keep me")
    result = CliRunner().invoke(main, ["render", str(root), "--output-dir", str(out)])
    assert result.exit_code == 1 and "refusing" in result.stderr
    assert (out / "precious.yaml").read_text() == "keep me"


def test_out_dir_untouched_on_error(tmp_path: Path) -> None:
    root = write(tmp_path / "app", {"c.yaml": cluster(), "bad.yaml": "a: [\n"})
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["render", str(root), "--output-dir", str(out)])
    assert result.exit_code == 1 and not out.exists()


def test_jinja_values_later_wins_and_argocd_env(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "raygitops.yaml": "values: [values.yaml, values-prod.yaml]\n",
        "values.yaml": "image: {repo: rayproject/ray, tag: '2.40.0'}\nworkers: 1\n",
        "values-prod.yaml": "image: {tag: '2.41.0'}\n",
        "c.yaml.j2": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ argocd.app_name }}\n"
            "data:\n  image: '{{ values.image.repo }}:{{ image.tag }}'\n"
            "  env: '{{ env.TIER }}'\n  workers: '{{ workers }}'\n  ns: '{{ argocd.app_namespace }}'\n"
        ),
    })
    env = {"ARGOCD_APP_NAME": "my-app", "ARGOCD_APP_NAMESPACE": "ray", "ARGOCD_ENV_TIER": "gold",
           "ARGOCD_APP_PARAMETERS": json.dumps([{"name": "values", "map": {"workers": "3"}}])}
    obj = render_app(str(root), env=env).objects[0]
    assert obj["metadata"]["name"] == "my-app"
    assert obj["data"] == {"image": "rayproject/ray:2.41.0", "env": "gold", "workers": "3", "ns": "ray"}


def test_argocd_parameters_override_config_and_cli_overrides_both(tmp_path: Path) -> None:
    root = write(tmp_path, {"raygitops.yaml": "hook:\n  image: from-config\n  maxParallel: 2\n",
                            "c.yaml": cluster(meta=RECREATE)})
    params = json.dumps([{"name": "hook-image", "string": "from-argocd"},
                         {"name": "max-parallel", "string": "7"}])

    def job(result):
        return next(o for o in result.objects if o["kind"] == "Job")

    via_params = job(render_app(str(root), env={"ARGOCD_APP_PARAMETERS": params}))
    assert via_params["spec"]["template"]["spec"]["containers"][0]["image"] == "from-argocd"
    assert "7" in via_params["spec"]["template"]["spec"]["containers"][0]["args"]
    via_cli = job(render_app(str(root), env={"ARGOCD_APP_PARAMETERS": params},
                             overrides={"hook_image": "from-cli"}))
    assert via_cli["spec"]["template"]["spec"]["containers"][0]["image"] == "from-cli"


def test_hash_command_table_and_json(tmp_path: Path) -> None:
    root = write(tmp_path, {"c.yaml": cluster(meta=RECREATE)})
    table = invoke(["hash", str(root / "c.yaml")]).splitlines()
    assert table[0].split() == ["CLUSTER", "GROUP", "HASH", "STRATEGY"]
    assert [row.split()[1] for row in table[1:]] == ["head", "worker:w"]
    data = json.loads(invoke(["hash", str(root / "c.yaml"), "--output", "json"]))
    assert set(data["default/c"]) == {"strategy", "head", "workers"}
    assert data["default/c"]["head"] == table[1].split()[2]


def test_flux_names_the_job_after_the_plan(tmp_path: Path) -> None:
    root = write(tmp_path, {"c.yaml": cluster(meta=RECREATE)})
    a = render_app(str(root), env={}, overrides={"hook_name_suffix": True})
    name = next(o for o in a.objects if o["kind"] == "Job")["metadata"]["name"]
    assert name == f"raygitops-presync-{a.plans[0].digest()}"
    (root / "c.yaml").write_text(cluster(meta=RECREATE).replace("2.41.0", "2.42.0"))
    b = render_app(str(root), env={}, overrides={"hook_name_suffix": True})
    assert next(o for o in b.objects if o["kind"] == "Job")["metadata"]["name"] != name


@pytest.mark.parametrize("raw", ["null", "", "  ", "[]", " null\n"])
def test_argocd_parameters_absent_in_every_form_argocd_sends(tmp_path: Path, raw: str) -> None:
    """Argo CD sends ARGOCD_APP_PARAMETERS=null for an Application without parameters
    (argo-cd #11900): a plain Application must render exactly as without the variable."""
    root = write(tmp_path, {"c.yaml": cluster(meta=RECREATE)})
    plain = render_app(str(root), env={})
    assert render_app(str(root), env={"ARGOCD_APP_PARAMETERS": raw}).objects == plain.objects


@pytest.mark.parametrize("raw", ["{}", '"x"', "[1]", "[null]", "nul", "[" * 5000])
def test_argocd_parameters_malformed_are_located_errors(tmp_path: Path, raw: str) -> None:
    root = write(tmp_path, {"c.yaml": cluster(meta=RECREATE)})
    with pytest.raises(RaygitopsError, match="ARGOCD_APP_PARAMETERS"):
        render_app(str(root), env={"ARGOCD_APP_PARAMETERS": raw})


def test_out_dir_files_are_readable_like_any_file(tmp_path: Path) -> None:
    """0644 files and 0755 directories under the usual umask (mkstemp alone gave 0600)."""
    import os
    import stat

    root = write(tmp_path / "app", {"c.yaml": cluster(meta=RECREATE)})
    out = tmp_path / "out"
    old = os.umask(0o022)
    try:
        invoke(["render", str(root), "--output-dir", str(out)])
    finally:
        os.umask(old)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in files), \
        {p.name: oct(p.stat().st_mode) for p in files}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o755 for p in out.rglob("*") if p.is_dir())


@pytest.mark.parametrize("source", ["dir", "file", "stdin"])
def test_a_missing_or_broken_values_file_is_an_error(tmp_path: Path, source: str) -> None:
    root = write(tmp_path / "app", {"c.yaml": cluster()})
    (tmp_path / "broken.yaml").write_text("a: [1\n")
    target = {"dir": str(root), "file": str(root / "c.yaml"), "stdin": "-"}[source]
    for values, why in ((str(tmp_path / "missing.yaml"), "cannot read values file"),
                        (str(tmp_path / "broken.yaml"), "broken.yaml:")):
        result = CliRunner().invoke(main, ["render", target, "--values", values],
                                    input=cluster() if source == "stdin" else None)
        assert result.exit_code == 1 and result.stdout == "", (source, values, result.output)
        assert why in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_single_template_file_is_templated(tmp_path: Path) -> None:
    root = write(tmp_path / "app", {"c.yaml.j2": cluster(name="{{ name }}")})
    (tmp_path / "v.yaml").write_text("name: from-values\n")
    docs = list(yaml.safe_load_all(invoke(["render", str(root / "c.yaml.j2"), "--values", str(tmp_path / "v.yaml")])))
    assert docs[0]["metadata"]["name"] == "from-values"


def test_version_command() -> None:
    from raygitops import __version__

    assert invoke(["version"]) == f"raygitops, version {__version__}\n" == invoke(["--version"])


def test_short_options_like_kubectl(tmp_path: Path) -> None:
    root = write(tmp_path, {"c.yaml": cluster()})
    assert invoke(["render", str(root), "-o", "json", "-n", "ml"]) == \
        invoke(["render", str(root), "--output", "json", "--namespace", "ml"])
    assert json.loads(invoke(["hash", str(root / "c.yaml"), "-o", "json"]))


def test_hash_and_render_of_one_file_use_its_apps_settings(tmp_path: Path) -> None:
    """A single file belongs to the app of its directory: the namespace of its raygitops.yaml."""
    root = write(tmp_path / "app", {"c.yaml": cluster(meta=RECREATE), "raygitops.yaml": "namespace: ml\n"})
    hashes = json.loads(invoke(["hash", str(root / "c.yaml"), "-o", "json"]))
    assert list(hashes) == ["ml/c"]
    docs = list(yaml.safe_load_all(invoke(["render", str(root / "c.yaml")])))
    assert docs[0]["metadata"]["namespace"] == "ml"
    assert list(json.loads(invoke(["hash", str(root), "-o", "json"]))) == ["ml/c"]


def test_plan_out_writes_the_hooks_plan_for_presync_by_hand(tmp_path: Path) -> None:
    """`render --plan-out DIR`: the plan the hook's ConfigMap holds, one file per namespace,
    which `raygitops presync --plan` reads (docs/presync.md "Running the hook by hand")."""

    repo = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-m", "raygitops", "render", str(repo / "examples" / "plain"),
                          "--plan-out", str(tmp_path / "plans")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    configmap = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "raygitops-plan")
    (written,) = sorted((tmp_path / "plans").iterdir())
    assert written.name == f"{configmap['metadata']['namespace']}.json"
    assert json.loads(written.read_text()) == json.loads(configmap["data"]["plan.json"])
    assert load_plan(str(written)).namespace == configmap["metadata"]["namespace"]
    none = subprocess.run([sys.executable, "-m", "raygitops", "render", "-", "--plan-out", str(tmp_path / "x")],
                          input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
                          capture_output=True, text=True, timeout=60)
    assert none.returncode == 1 and none.stdout == "" and "no plan" in none.stderr


def test_stdin_is_templated_only_when_asked(tmp_path: Path) -> None:
    """`render - --template` templates the stream like a *.j2 file (values from --values,
    includes inside the working directory); without it a stream's own {{ }} stays as it is
    (a Helm chart's ConfigMap may carry Go templates)."""
    values = tmp_path / "values.yaml"
    values.write_text("name: abc\n")
    stream = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "{{ name }}-cm"}\ndata: {t: "{{ name }}"}\n'

    def run(*args: str, text: str = stream) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "raygitops", "render", *args], input=text, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)

    templated = run("-", "--template", "--values", str(values))
    assert templated.returncode == 0, templated.stderr
    (cm,) = [d for d in yaml.safe_load_all(templated.stdout) if d]
    assert cm["metadata"]["name"] == "abc-cm" and cm["data"]["t"] == "abc"
    literal = run("-", text=stream.replace('"{{ name }}-cm"', "go-templates"))
    assert literal.returncode == 0 and "{{ name }}" in literal.stdout
    for text, message in (("{{ nope }}\n", "<stdin>:1: undefined template variable"),
                          ("a: 1\n{% if %}\n", "<stdin>:2: template syntax error"),
                          ('{% include "../outside.yaml" %}\n', "<stdin>:1: template not found")):
        res = run("-", "--template", text=text)
        assert res.returncode == 1 and res.stdout == "" and res.stderr.startswith(f"raygitops: {message}"), res.stderr
    assert "--template is for stdin" in run(str(values), "--template").stderr


def test_a_stream_that_cannot_be_dumped_writes_nothing():
    out = io.StringIO()
    with pytest.raises(yaml.YAMLError):
        output.write_yaml_stream([{"kind": "ConfigMap"}, {"data": object()}], out)
    assert out.getvalue() == ""
    output.write_yaml_stream([{"kind": "ConfigMap"}], out)
    assert out.getvalue() == "---\nkind: ConfigMap\n"


def test_a_stream_larger_than_the_memory_spool_is_copied_whole(monkeypatch):
    monkeypatch.setattr(output, "SPOOL_IN_MEMORY", 1000)
    docs = [{"kind": "ConfigMap", "data": {"k": "v" * 100, "i": str(i)}} for i in range(50)]
    out = io.StringIO()
    output.write_yaml_stream(docs, out)
    assert out.getvalue() == output.yaml_stream(docs)
