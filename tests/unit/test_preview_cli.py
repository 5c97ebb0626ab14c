"""``raygitops diff`` as a command: errors name the side, exit codes, size limits, imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from raygitops.cli.main import main

CLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: {name}
  namespace: {namespace}
  annotations:
    raygitops.dev/upgrade-strategy: {strategy}
spec:
  headGroupSpec:
    rayStartParams: {{}}
    template:
      spec:
        containers:
          - name: ray-head
            image: {image}
  workerGroupSpecs:
    - groupName: workers
      replicas: {replicas}
      minReplicas: 0
      maxReplicas: 100
      rayStartParams: {{}}
      template:
        spec:
          containers:
            - name: ray-worker
              image: {image}
"""


def cluster(name: str = "c", namespace: str = "default", strategy: str = "Recreate",
            image: str = "rayproject/ray:2.9.0", replicas: int = 2) -> str:
    return CLUSTER.format(name=name, namespace=namespace, strategy=strategy, image=image,
                          replicas=replicas)


def app(root: Path, name: str, files: dict[str, str]) -> Path:
    path = root / name / "app"
    path.mkdir(parents=True)
    for file, text in files.items():
        (path / file).write_text(text)
    return path


def invoke(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(main, ["diff", *args])


def test_bad_yaml_at_base_names_side_file_and_line(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    app(tmp_path, "b", {"cluster.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: [x\n"})
    app(tmp_path, "h", {"cluster.yaml": cluster()})
    result = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app", "--output", "json")
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("raygitops: base: b/app/cluster.yaml:")
    assert "invalid YAML" in lines[0]
    assert "Traceback" not in result.stderr


def test_error_at_head_names_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app(tmp_path, "b", {"cluster.yaml": cluster()})
    app(tmp_path, "h", {"cluster.yaml": cluster().replace("groupName: workers", "groupName: ''")})
    result = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app", "--exit-code")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("raygitops: head: h/app/cluster.yaml:17: ")
    assert "groupName" in result.stderr


@pytest.mark.parametrize("config,message", [
    ("namespace: Not_A_Valid_NS\n", "namespace 'Not_A_Valid_NS' is not a DNS-1123 label"),
    ("hook:\n  maxParallel: 0\n", "hook.maxParallel: expected an integer from 1 to 100, got 0"),
])
def test_invalid_settings_at_head_are_refused_like_render(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           config: str, message: str) -> None:
    app(tmp_path, "b", {"cluster.yaml": cluster()})
    app(tmp_path, "h", {"cluster.yaml": cluster(), "raygitops.yaml": "# settings\n" + config})
    result = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app", "--exit-code")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(f"raygitops: head: h/app/raygitops.yaml:{config.count(chr(10)) + 1}: ")
    assert message in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr


def test_unknown_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app(tmp_path, "h", {"cluster.yaml": cluster()})
    result = invoke(tmp_path, monkeypatch, "--base", "no-such", "--head", "h", "app")
    assert result.exit_code == 1
    assert result.stderr.startswith("raygitops: base: 'no-such'")
    assert result.stdout == ""


def test_option_like_revision_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app(tmp_path, "h", {"cluster.yaml": cluster()})
    result = invoke(tmp_path, monkeypatch, "--base=--output=/tmp/x", "--head", "h", "app")
    assert result.exit_code == 1
    assert "neither a directory nor a git revision" in result.stderr


def test_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app(tmp_path, "b", {"cluster.yaml": cluster()})
    app(tmp_path, "h", {"cluster.yaml": cluster(image="rayproject/ray:2.10.0")})
    app(tmp_path, "s", {"cluster.yaml": cluster(image="rayproject/ray:2.10.0", strategy="None")})
    app(tmp_path, "r", {"cluster.yaml": cluster(replicas=5)})
    recreate = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app", "--exit-code")
    assert recreate.exit_code == 3, recreate.output
    assert invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app").exit_code == 0
    # stale (not opted in) and in-place never fail the check
    assert invoke(tmp_path, monkeypatch, "--base", "b", "--head", "s", "app",
                  "--exit-code").exit_code == 0
    assert invoke(tmp_path, monkeypatch, "--base", "b", "--head", "r", "app",
                  "--exit-code").exit_code == 0


def test_fail_on_chooses_the_classes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app(tmp_path, "b", {"cluster.yaml": cluster() + "---\n" + cluster(name="gone")})
    app(tmp_path, "d", {"cluster.yaml": cluster()})  # "gone" deleted: every pod of it goes
    app(tmp_path, "s", {"cluster.yaml": cluster(image="rayproject/ray:2.10.0", strategy="None")
                         + "---\n" + cluster(name="gone")})
    deleted = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "d", "app", "--output", "json")
    data = json.loads(deleted.stdout)
    assert deleted.exit_code == 0 and data["verdict"] == "delete", deleted.output  # never "changes"
    assert data["summary"]["text"] == "This merge deletes 1 RayCluster (3 pods go)"
    md = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "d", "app", "--output", "markdown")
    assert "\n⚠️ **This merge deletes 1 RayCluster" in md.stdout and "✅" not in md.stdout, md.stdout
    cases = [("d", "delete", 3), ("d", "recreate,stale", 0), ("d", "any", 3), ("s", "stale", 3),
             ("s", "delete, stale", 3), ("s", "recreate", 0), ("s", "in-place", 0)]
    for head, classes, code in cases:
        result = invoke(tmp_path, monkeypatch, "--base", "b", "--head", head, "app", "--fail-on", classes)
        assert result.exit_code == code, (head, classes, result.output)
    bad = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "d", "app", "--fail-on", "recreate,deleted")
    assert bad.exit_code == 1 and "--fail-on: unknown class deleted" in bad.output


def test_preview_masking_patterns_from_raygitops_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = "\n            env:\n              - {name: LICENSE_ID, value: %s}\n              - {name: LEVEL, value: %s}\n"
    base = cluster().replace("            image: rayproject/ray:2.9.0\n  workerGroupSpecs",
                             "            image: rayproject/ray:2.9.0" + env % ("L-1", "info") + "  workerGroupSpecs")
    head = base.replace("L-1", "L-2").replace("info", "debug")
    config = "preview:\n  mask: [license_*]\n"
    app(tmp_path, "b", {"cluster.yaml": base, "raygitops.yaml": config})
    app(tmp_path, "h", {"cluster.yaml": head, "raygitops.yaml": config})
    result = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app", "--output", "json")
    assert result.exit_code == 0, result.output
    changes = {c["path"].rsplit("/", 2)[-2]: c for c in json.loads(result.stdout)["clusters"][0]["changes"]}
    assert (changes["0"]["old"], changes["0"]["new"], changes["0"]["masked"]) == ("••••", "••••", True)
    assert (changes["1"]["old"], changes["1"]["new"], changes["1"]["masked"]) == ("info", "debug", False)
    assert "L-2" not in result.stdout
    app(tmp_path, "x", {"cluster.yaml": head, "raygitops.yaml": "preview:\n  hide: [x]\n"})
    bad = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "x", "app")
    assert bad.exit_code == 1 and "raygitops.yaml:2: unknown setting 'preview.hide'" in bad.output


def test_same_values_flags_on_both_sides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    template = cluster(image="{{ image }}")
    app(tmp_path, "b", {"cluster.yaml.j2": template})
    app(tmp_path, "h", {"cluster.yaml.j2": template.replace("replicas: 2", "replicas: 3")})
    (tmp_path / "values.yaml").write_text("image: rayproject/ray:2.9.0\n")
    result = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app",
                    "--values", "values.yaml", "--output", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [c["class"] for c in data["clusters"]] == ["in-place"]


def test_markdown_stays_under_github_limit(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    base = "---\n".join(cluster(name=f"c{i:03d}") for i in range(300))
    head = "---\n".join(
        cluster(name=f"c{i:03d}", image=f"rayproject/ray:2.10.{'x' * 60}{i}") for i in range(300)
    )
    app(tmp_path, "b", {"c.yaml": base})
    app(tmp_path, "h", {"c.yaml": head})
    result = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app",
                    "--output", "markdown")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert len(text) <= 65536
    # the table is whole: every cluster has its row
    assert all(f"| `default/c{i:03d}` |" in text for i in range(300))
    assert "omitted to stay under GitHub's comment size limit" in text
    assert text.count("<details>") == text.count("</details>") > 0


def test_markdown_table_folds_only_minor_rows_in_the_extreme() -> None:
    from raygitops.preview import report_markdown
    from raygitops.model.pods import PodCount
    from raygitops.preview.impact import IN_PLACE, RECREATE_CLASS, ClusterImpact, Report
    from raygitops.preview.revisions import Side

    def impact(i: int, klass: str) -> ClusterImpact:
        return ClusterImpact(f"ns{'x' * 40}", f"c{i:05d}", klass, "r", None, None, None, None,
                             None, False, PodCount(1, 1), PodCount(1, 1))

    clusters = [impact(i, RECREATE_CLASS) for i in range(50)]
    clusters += [impact(i, IN_PLACE) for i in range(50, 3000)]
    side = Side("base", "b", "directory", "b")
    text = report_markdown.render(Report(clusters, []), side, side)
    assert len(text) <= 65536
    assert all(f"c{i:05d}`" in text for i in range(50))
    assert "more (in-place, created or deleted)" in text


def test_diff_never_imports_kubernetes(tmp_path: Path) -> None:
    app(tmp_path, "b", {"cluster.yaml": cluster()})
    app(tmp_path, "h", {"cluster.yaml": cluster(image="x")})
    code = (
        "import sys\n"
        "from raygitops.cli.main import main\n"
        "try:\n"
        "    main(['diff', '--base', 'b', '--head', 'h', 'app', '--format', 'json'])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "assert not [m for m in sys.modules if m == 'kubernetes' or m.startswith('kubernetes.')]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def test_hook_objects_ignored_and_other_kinds_counted(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {n}\ndata:\n  a: '{v}'\n"
    app(tmp_path, "b", {"c.yaml": cluster(), "cm.yaml": cm.format(n="x", v=1) + "---\n"
                        + cm.format(n="gone", v=1)})
    app(tmp_path, "h", {"c.yaml": cluster(image="new"), "cm.yaml": cm.format(n="x", v=2)
                        + "---\n" + cm.format(n="new", v=1)})
    result = invoke(tmp_path, monkeypatch, "--base", "b", "--head", "h", "app",
                    "--output", "json")
    data = json.loads(result.stdout)
    kinds = {k["kind"]: k for k in data["otherObjects"]}
    # the PreSync hook resources (Job, Role, ConfigMap raygitops-plan, …) are not counted
    assert set(kinds) == {"ConfigMap"}
    assert (kinds["ConfigMap"]["created"], kinds["ConfigMap"]["changed"],
            kinds["ConfigMap"]["deleted"]) == (1, 1, 1)
