"""Every parser error, from every input source, is the product's error whatever the library
version: exit 1, one line `raygitops: <file>[:<line>]: <message>`, nothing on stdout, no
"internal error", nothing written.

The assertions are on that contract, never on a library's wording: tests/run.sh runs this
module with the locked, the newest and the lowest versions of PyYAML, Jinja2 and click
(PyYAML 6.0.4's libyaml, for one, stops at its own nesting limit with its own message).
"""

from __future__ import annotations

import gc
import gzip
import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from raygitops.cli.main import main
from test_render import RECREATE, cluster

DEEP_FLOW = "x: " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_BLOCK = "".join("  " * i + "- \n" for i in range(300)) + "  " * 300 + "x\n"
DEEP_MAP_FLOW = "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n"
BAD_SYNTAX = "a: [1, 2\nb: c\n"
TAB_INDENT = "a:\n\t- b\n"
NOT_UTF8 = b"a: \xff\xfe\n"
MALFORMED_YAML = {"deep-flow": DEEP_FLOW, "deep-block": DEEP_BLOCK, "deep-map-flow": DEEP_MAP_FLOW,
                  "syntax": BAD_SYNTAX, "tab": TAB_INDENT, "not-utf8": NOT_UTF8}


class _Finalizer:
    """Cyclic garbage whose finalizer needs a few frames and leaves its successor behind."""

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        _Finalizer()

        def nested(depth: int) -> int:
            return depth if depth == 0 else nested(depth - 1)
        nested(20)


@pytest.fixture(autouse=True)
def collections_at_the_limit():
    """A collection at every allocation, with garbage whose finalizer needs stack: a deep input
    that reaches the recursion limit finds that collection there (CI's flake, tests/flaky.md).
    The one-line contract holds only if no collection runs at the limit."""
    threshold = gc.get_threshold()
    _Finalizer()
    gc.set_threshold(1)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.collect()


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def assert_contract(result, named: str) -> None:
    """Exit 1, nothing on stdout, one line naming ``named``, no internal error."""
    assert result.exit_code == 1, (result.exit_code, result.stdout[-300:], result.stderr[-300:])
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("raygitops: "), lines[0]
    assert named in lines[0], lines[0]
    assert "internal error" not in lines[0] and "Traceback" not in result.stderr, lines[0]


def invoke(args: list[str], stdin: str | bytes | None = None, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, args, input=stdin, env=env)


@pytest.mark.parametrize("kind", sorted(MALFORMED_YAML))
def test_app_file(tmp_path: Path, kind: str) -> None:
    root = write(tmp_path / "app", {"c.yaml": cluster(meta=RECREATE), "bad.yaml": MALFORMED_YAML[kind]})
    out = tmp_path / "out"
    assert_contract(invoke(["render", str(root), "--output-dir", str(out)]), "bad.yaml")
    assert not out.exists(), "nothing written"


@pytest.mark.parametrize("kind", sorted(MALFORMED_YAML))
def test_app_config(tmp_path: Path, kind: str) -> None:
    content = MALFORMED_YAML[kind]
    if isinstance(content, str) and content.startswith("x: "):
        content = "exclude: " + content[3:]  # a known key, so only the nesting is wrong
    root = write(tmp_path, {"c.yaml": cluster(meta=RECREATE), "raygitops.yaml": content})
    assert_contract(invoke(["render", str(root)]), "raygitops.yaml")


@pytest.mark.parametrize("kind", sorted(MALFORMED_YAML))
def test_values_file(tmp_path: Path, kind: str) -> None:
    root = write(tmp_path, {"c.yaml.j2": cluster(meta=RECREATE), "values.yaml": MALFORMED_YAML[kind],
                            "raygitops.yaml": "values: [values.yaml]\n"})
    assert_contract(invoke(["render", str(root)]), "values.yaml")


@pytest.mark.parametrize("kind", sorted(MALFORMED_YAML))
def test_stdin(kind: str) -> None:
    assert_contract(invoke(["render", "-"], stdin=MALFORMED_YAML[kind]), "<stdin>")


@pytest.mark.parametrize("template, line", [
    ("{% if %}\n", 1),                      # syntax
    ("a: 1\n{{ 1 + }}\n", 2),                # syntax on line 2
    ("{{ undefined_name.x }}\n", 1),          # undefined
    ("{{ ''.__class__ }}\n", 1),              # sandbox
    ("{% for x in range(3) %}{{ x }}\n", 1),  # unclosed block
    ("x: " + "{{ (" * 400 + "1" + ") }}" * 400 + "\n", None),  # deep expression: no line
])
def test_jinja_template(tmp_path: Path, template: str, line: int | None) -> None:
    root = write(tmp_path, {"c.yaml.j2": template})
    result = invoke(["render", str(root)])
    assert_contract(result, "c.yaml.j2")
    if line is not None:
        assert f"c.yaml.j2:{line}: " in result.stderr, result.stderr


@pytest.mark.parametrize("raw", ["{", "[{]", "[" * 100_000, '[{"name": 1}]', "\"\\ud800\""])
def test_argocd_parameters(tmp_path: Path, raw: str) -> None:
    root = write(tmp_path, {"c.yaml": cluster(meta=RECREATE)})
    assert_contract(invoke(["render", str(root)], env={"ARGOCD_APP_PARAMETERS": raw}), "ARGOCD_APP_PARAMETERS")


@pytest.mark.parametrize("name, content", [
    ("plan.json", b"{"),
    ("plan.json", b"[" * 100_000),
    ("plan.json", b"\xff\xfe{}"),
    ("plan.json", b'{"apiVersion": 1}'),
    ("plan.json.gz", b"not gzip at all"),
    ("plan.json.gz", gzip.compress(b"{", mtime=0)[:-4]),
    ("plan.json.gz", gzip.compress(b"\xff", mtime=0)),
])
def test_plan_file(tmp_path: Path, name: str, content: bytes) -> None:
    (tmp_path / name).write_bytes(content)
    result = invoke(["presync", "--plan", str(tmp_path / "plan.json"), "--dry-run"])
    assert_contract(result, name)


def test_plan_that_loads_is_not_refused(tmp_path: Path) -> None:
    """The plan tests above fail for the plan, not for the command line."""
    from raygitops.render.pipeline import render_app

    root = write(tmp_path / "app", {"c.yaml": cluster(meta=RECREATE)})
    plan = render_app(str(root), env={}).plans[0]
    (tmp_path / "plan.json").write_text(json.dumps(plan.to_json()))
    from raygitops.presync.planfiles import load_plan

    assert load_plan(str(tmp_path / "plan.json")).namespace == plan.namespace


@pytest.mark.parametrize("change,message", [
    ({"settings": {"maxParallel": 0}}, "settings.maxParallel: expected an integer from 1 to 100, got 0"),
    ({"settings": {"drainGraceSeconds": 3601}}, "settings.drainGraceSeconds: expected an integer from 0 to 3600"),
    ({"settings": {"timeoutSeconds": "9e9"}}, "settings.timeoutSeconds: expected an integer from 1 to 86400"),
    ({"settings": {"waitReady": "maybe"}}, "settings.waitReady: expected true or false"),
    ({"namespace": "Not_A_Valid_NS"}, "namespace 'Not_A_Valid_NS' is not a DNS-1123 label"),
])
def test_plan_with_values_render_refuses_is_refused_by_the_hook(tmp_path: Path, change: dict, message: str) -> None:
    """The hook checks the plan it reads with render's own rules (a hand-edited ConfigMap)."""
    from raygitops.render.pipeline import render_app

    root = write(tmp_path / "app", {"c.yaml": cluster(meta=RECREATE)})
    plan = render_app(str(root), env={}).plans[0].to_json()
    for key, value in change.items():
        plan[key] = {**plan[key], **value} if isinstance(value, dict) else value
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    result = invoke(["presync", "--plan", str(tmp_path / "plan.json"), "--dry-run"])
    assert_contract(result, "plan.json")
    assert message in result.stderr, result.stderr


def test_collections_resume_after_the_deepest_of_overlapping_parses() -> None:
    """The pause is counted: overlapping parses (threads of the hook) leave collections on only
    when the last one ends, and a caller that turned them off keeps them off."""
    from raygitops.errors import no_collection_at_the_limit

    inner_started, outer_may_end = threading.Event(), threading.Event()

    def inner() -> None:
        with no_collection_at_the_limit():
            inner_started.set()
            outer_may_end.wait(10)
            assert not gc.isenabled()

    assert gc.isenabled()
    with no_collection_at_the_limit():
        worker = threading.Thread(target=inner)
        worker.start()
        assert inner_started.wait(10)
    assert not gc.isenabled(), "the other thread's parse still runs"
    outer_may_end.set()
    worker.join(10)
    assert gc.isenabled()

    gc.disable()
    try:
        with no_collection_at_the_limit():
            pass
        assert not gc.isenabled(), "off by the caller's choice stays off"
    finally:
        gc.enable()
