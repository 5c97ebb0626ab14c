"""Bad and hostile input: one line on stderr naming file and line, exit non-zero, empty stdout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from raygitops.cli.main import main
from test_render import RECREATE, cluster

LOCATED = re.compile(r"^raygitops: (?P<path>[^:]+):(?P<line>\d+): (?P<message>.+)$")


def run(args: list[str], stdin: bytes | None = None):
    result = CliRunner().invoke(main, args, input=stdin)
    return result


def assert_error(result, path: str, line: int | None, message: str) -> None:
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    if line is None:  # the line is optional here; the file is not
        assert re.match(rf"^raygitops: {re.escape(path)}(:\d+)?: ", lines[0]), lines[0]
    else:
        match = LOCATED.match(lines[0])
        assert match, lines[0]
        assert (match["path"], int(match["line"])) == (path, line), lines[0]
    assert re.search(message, lines[0]), lines[0]
    assert "Traceback" not in result.stderr


def app(tmp_path: Path, files: dict[str, str | bytes]) -> str:
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(tmp_path)


@pytest.mark.parametrize(
    "content,line,message",
    [
        ("a: 1\nb: [1, 2\n", 3, "invalid YAML"),
        ("- just\n- a list\n", 1, "not a Kubernetes object"),
        ("---\nkind: ConfigMap\n", 2, "no apiVersion and kind"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: 1, x: 2}\n", 4, "duplicate key"),
        ("apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c}\nspec: {workerGroupSpecs: []}\n",
         4, "no spec.headGroupSpec"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n"
         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", 5, "defined twice"),
    ],
)
def test_bad_yaml_and_objects(tmp_path: Path, content: str, line: int, message: str) -> None:
    root = app(tmp_path, {"bad.yaml": content})
    assert_error(run(["render", root]), f"{root}/bad.yaml", line, message)


def test_duplicate_worker_group(tmp_path: Path) -> None:
    text = cluster().replace("  - groupName: w\n", "  - groupName: w\n    template: {}\n  - groupName: w\n", 1)
    root = app(tmp_path, {"c.yaml": "# comment\n" + text})
    assert_error(run(["render", root]), f"{root}/c.yaml", 14, "duplicate worker groupName 'w'")  # the second one's


def test_undefined_template_variable(tmp_path: Path) -> None:
    root = app(tmp_path, {"c.yaml.j2": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ nope }}\n"})
    assert_error(run(["render", root]), f"{root}/c.yaml.j2", 4, "undefined template variable.*nope")


@pytest.mark.parametrize(
    "template,message",
    [
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "sandbox|undefined"),
        ("{{ cycler.__init__.__globals__.os.popen('id').read() }}", "sandbox|undefined"),
        ("{% for i in range(10**9) %}x{% endfor %}", "range too big|sandbox|template error"),
    ],
)
def test_sandbox_escapes_are_errors(tmp_path: Path, template: str, message: str) -> None:
    root = app(tmp_path, {"x.yaml.j2": "a:\n  b: 1\nc: " + template + "\n"})
    result = run(["render", root])
    assert_error(result, f"{root}/x.yaml.j2", 3, message)


def test_include_outside_app_directory(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    root = app(tmp_path / "app", {"x.yaml.j2": "a: 1\nb: {% include '../secret.txt' %}\n"})
    result = run(["render", root])
    assert_error(result, f"{root}/x.yaml.j2", 2, "template not found")
    assert "TOP SECRET" not in result.stderr


def test_include_through_symlink_outside(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    root = app(tmp_path / "app", {"x.yaml.j2": "a: 1\nb: {% include 'link.txt' %}\n"})
    os.symlink(tmp_path / "secret.txt", Path(root) / "link.txt")
    result = run(["render", root])
    assert_error(result, f"{root}/x.yaml.j2", 2, "outside the app directory")


def test_manifest_symlink_outside(tmp_path: Path) -> None:
    (tmp_path / "outside.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n")
    root = app(tmp_path / "app", {"ok.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
    os.symlink(tmp_path / "outside.yaml", Path(root) / "evil.yaml")
    assert_error(run(["render", root]), f"{root}/evil.yaml", None, "outside the app directory")


def test_values_file_outside(tmp_path: Path) -> None:
    root = app(tmp_path / "app", {
        "raygitops.yaml": "values: [../../etc/passwd]\n",
        "x.yaml.j2": "a: 1\n"})
    result = run(["render", root])
    assert result.exit_code == 1 and result.stdout == ""
    assert "outside the app directory" in result.stderr


def test_alias_bomb(tmp_path: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    root = app(tmp_path, {"bomb.yaml": "\n".join(lines) + "\n"})
    assert_error(run(["render", root]), f"{root}/bomb.yaml", None, "expands to more than")


def test_non_utf8(tmp_path: Path) -> None:
    root = app(tmp_path, {"latin.yaml": b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n"})
    assert_error(run(["render", root]), f"{root}/latin.yaml", 3, "not UTF-8")


def test_empty_app(tmp_path: Path) -> None:
    root = app(tmp_path, {"empty.yaml": "# nothing here\n---\n"})
    result = run(["render", root])
    assert result.exit_code == 1 and result.stdout == ""
    assert "no documents" in result.stderr


def test_unknown_setting(tmp_path: Path) -> None:
    root = app(tmp_path, {"raygitops.yaml": "hook:\n  image: x\n  timeout: 5\n", "c.yaml": cluster()})
    assert_error(run(["render", root]), f"{root}/raygitops.yaml", 3, "unknown setting 'hook.timeout'")


def test_missing_path() -> None:
    result = run(["render", "/nonexistent/app"])
    assert result.exit_code == 1 and "no such file" in result.stderr


def test_bad_stdin() -> None:
    result = run(["render", "-"], stdin=b"kind: [\n")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("raygitops: <stdin>:")


def test_crlf_and_bom_render(tmp_path: Path) -> None:
    text = "\ufeff" + cluster(meta=RECREATE).replace("\n", "\r\n")
    root = app(tmp_path, {"c.yaml": text.encode("utf-8")})
    result = run(["render", root])
    assert result.exit_code == 0, result.stderr
    assert "raygitops.dev/template-hashes" in result.stdout


def test_render_never_imports_kubernetes(tmp_path: Path) -> None:
    root = app(tmp_path, {"c.yaml": cluster(meta=RECREATE), "t.yaml.j2": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\n"})
    code = (
        "import sys\n"
        "from raygitops.cli.main import main\n"
        f"sys.argv = ['raygitops', 'render', {root!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "bad = sorted(m for m in sys.modules if m == 'kubernetes' or m.startswith('kubernetes.'))\n"
        "assert not bad, bad\n"
        "sys.stderr.write('checked\\n')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env={**os.environ, "RAYGITOPS_HOOK_IMAGE": "registry.example.com/raygitops:0.1.0"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "checked"
    assert "kind: Job" in proc.stdout


@pytest.mark.parametrize(
    "expression,message",
    [
        ("{{ 'x' * 10**10 }}", "sandbox.*repetition|power"),
        ("{{ [1] * 999999999 }}", "sandbox.*repetition"),
        ("{{ 7 ** 999999 }}", "sandbox.*power"),
    ],
)
def test_templates_cannot_exhaust_memory(tmp_path: Path, expression: str, message: str) -> None:
    root = app(tmp_path, {"x.yaml.j2": "a: 1\nb: " + expression + "\n"})
    assert_error(run(["render", root]), f"{root}/x.yaml.j2", 2, message)


def test_templates_cannot_run_forever(tmp_path: Path) -> None:
    loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    root = app(tmp_path, {"x.yaml.j2": "a: 1\n" + loop + "\n"})
    code = (f"import sys\nfrom raygitops.cli.main import main\nsys.argv=['raygitops','render',{root!r}]\nmain()\n")
    env = dict(os.environ, RAYGITOPS_TEMPLATE_SECONDS="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == f"raygitops: {root}/x.yaml.j2: templates ran longer than 1 s"


@pytest.mark.parametrize("key", ["raygitops.dev/recreate", "raygitops.dev/last-recreate",
                                 "raygitops.dev/last-recreate-outcome"])
def test_hook_owned_annotation_in_input(tmp_path: Path, key: str) -> None:
    """The hook's state in a manifest would be applied by every sync and read back as a
    recreate in progress: refused, naming file, the annotation's line and key."""
    text = cluster().replace("metadata:\n", f"metadata:\n  annotations: {{{key}: x}}\n", 1)
    root = app(tmp_path, {"c.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n" + text})
    assert_error(run(["render", root]), f"{root}/c.yaml", 8, rf"RayCluster \S+: metadata\.annotations\.{key}: ")
