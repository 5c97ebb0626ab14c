"""Phase 1: hostile input to ``raygitops render`` and ``raygitops diff``.

Every case must end in one clean error line (exit 1, empty stdout) or a correct render: no
crash, no hang, bounded memory, no read outside the app directory (see hostile.py).

Default run (tests/fast.sh): the catalog in-process (every open audited) but for its huge
files and template DoS, and a few hundred hypothesis examples per property.
``RAYGITOPS_SLOW=1`` (tests/run.sh, CI): the dangerous part of the catalog (deep nesting, huge
files, template DoS) and then the whole of it as real subprocesses with time and memory bounds,
and thousands of examples.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reliability import hostile
from reliability.hostile import CONFIGMAP, Case, Workspace, cluster

SLOW = os.environ.get("RAYGITOPS_SLOW") == "1"
EXAMPLES = 3000 if SLOW else 150
CATALOG = hostile.catalog()
BY_NAME = {c.name: c for c in CATALOG}
# Dangerous enough to need a real process (stack, memory, time): in the whole suite first
# (`test_render_subprocess`), then every other case (`test_render_subprocess_full`). A process
# per case is the developer loop's largest cost, so both are `slow`: tests/run.sh runs them.
SUBPROCESS_DEFAULT = [c for c in CATALOG if (c.big and "30MB-valid" not in c.name) or c.slow_template
                      or c.name.startswith(("deep-", "billion", "merge-key", "alias-chain", "config-deep",
                                            "symlink-loop", "include-self"))]


def _assert_clean(case: Case, outcome, found: list[str]) -> None:
    assert not found, f"{case.name}: " + "; ".join(found)


# ----------------------------------------------------------------------------- catalog


@pytest.mark.parametrize("case", [c for c in CATALOG if not c.big and not c.slow_template], ids=lambda c: c.name)
def test_render_inprocess(case: Case) -> None:
    outcome, found, _ = hostile.run_case(case, "inprocess")
    _assert_clean(case, outcome, found)


@pytest.mark.slow
@pytest.mark.parametrize("case", SUBPROCESS_DEFAULT, ids=lambda c: c.name)
def test_render_subprocess(case: Case) -> None:
    outcome, found, _ = hostile.run_case(case, "subprocess")
    _assert_clean(case, outcome, found)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CATALOG if c not in SUBPROCESS_DEFAULT], ids=lambda c: c.name)
def test_render_subprocess_full(case: Case) -> None:
    outcome, found, _ = hostile.run_case(case, "subprocess")
    _assert_clean(case, outcome, found)


@pytest.mark.parametrize("case", [c for c in CATALOG if not c.big and not c.slow_template and not c.args
                                  and c.stdin is None], ids=lambda c: c.name)
def test_diff_inprocess(case: Case) -> None:
    outcome, found, _ = hostile.run_case(case, "inprocess", command="diff")
    _assert_clean(case, outcome, found)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["deep-flow-seq-100k-toplevel", "deep-block-seq-100k", "billion-laughs",
                                  "file-40MB", "jinja-dos-01", "jinja-dos-12"])
def test_diff_subprocess(name: str) -> None:
    outcome, found, _ = hostile.run_case(BY_NAME[name], "subprocess", command="diff")
    _assert_clean(BY_NAME[name], outcome, found)


@pytest.mark.parametrize("target", ["@outside/secret-cm.yaml", "/etc/passwd", "@outside/dir"])
def test_diff_git_revision_with_symlink_out(tmp_path: Path, target: str) -> None:
    """A committed symlink that leads out of the repository never pulls the file in."""
    ws = Workspace.create(tmp_path)
    repo = ws.root / "repo"
    (repo / "app").mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "app" / "c.yaml").write_text(cluster())
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    os.symlink(str(ws.root / target[1:]) if target.startswith("@") else target, repo / "app" / "evil.yaml")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "head"], check=True)
    case = Case("git-symlink", expect="any")
    outcome = hostile.run_subprocess(["diff", "--base", "HEAD~1", "--head", "HEAD", "--output", "json", "app"],
                                     cwd=str(repo))
    found = hostile.problems(case, ws, outcome, hostile.MAX_RSS_MB)
    found = [p for p in found if not p.startswith(("render output", "render succeeded"))]
    assert not found, found
    assert outcome.code in (0, 1), outcome.stderr


# ----------------------------------------------------------------------------- regressions
# One per bug the campaign found (also covered by the catalog; these name the bug).


def _render(tmp_path: Path, files: dict[str, str | bytes], *args: str, env: dict[str, str] | None = None):
    ws = Workspace.create(tmp_path)
    case = Case("regression", files)
    argv = case.build(ws)
    return ws, hostile.run_subprocess([*argv, *args], env=env)


def test_regression_deep_nesting_segfault(tmp_path: Path) -> None:
    """libyaml's C composer overflowed the stack (SIGSEGV) at ~25k levels."""
    ws, out = _render(tmp_path, {"a.yaml": "[" * 100_000 + "]" * 100_000})
    assert out.signal is None and out.code == 1 and "nests deeper than 200" in out.stderr


def test_regression_deep_nesting_recursion_error(tmp_path: Path) -> None:
    """900 levels without an alias passed the loader and died in the dumper (RecursionError)."""
    ws, out = _render(tmp_path, {"a.yaml": hostile.configmap("[" * 900 + "]" * 900)})
    assert out.code == 1 and "nests deeper" in out.stderr and "internal error" not in out.stderr


def test_regression_alias_chain_depth(tmp_path: Path) -> None:
    """Depth reached through a chain of aliases was not counted (memoised subtree sizes)."""
    text = CONFIGMAP + "".join(f"d{i}: &d{i} [[[[[[[[[[*d{i - 1}]]]]]]]]]]\n" if i else "d0: &d0 [x]\n"
                               for i in range(300))
    ws, out = _render(tmp_path, {"a.yaml": text})
    assert out.code == 1 and "nests deeper" in out.stderr


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "9" * 5000, '"' + "9" * 5000 + 'm"'])
def test_regression_quantities(tmp_path: Path, value: str) -> None:
    """Non-finite floats and >4300-digit numbers crashed quantity.parse (ValueError)."""
    text = cluster(extra_head=f"          resources:\n            limits: {{cpu: {value}}}\n")
    ws, out = _render(tmp_path, {"c.yaml": text})
    assert "internal error" not in out.stderr and out.code in (0, 1), out.stderr


def test_regression_template_memory(tmp_path: Path) -> None:
    """One C call (center/ljust/%/format/replace) allocated ~9 GB past every bound."""
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: \"{{ 'x'|center(3000000000) }}\"}\n"
    ws, out = _render(tmp_path, {"t.yaml.j2": body})
    assert out.code == 1 and "MiB of memory" in out.stderr
    assert out.max_rss_kb < 512 * 1024


def test_regression_config_symlink_leak(tmp_path: Path) -> None:
    """raygitops.yaml symlinked out of the app echoed the target's keys in the error."""
    ws = Workspace.create(tmp_path)
    (ws.app / "ok.yaml").write_text(CONFIGMAP)
    os.symlink(ws.outside / "raygitops.yaml", ws.app / "raygitops.yaml")
    out = hostile.run_subprocess(["render", str(ws.app)])
    assert out.code == 1 and "outside the app directory" in out.stderr and ws.secret not in out.stderr


def test_regression_include_reads_outside_before_refusing(tmp_path: Path) -> None:
    """{% include %} of a symlink to outside opened (read) the file before refusing it."""
    case = BY_NAME["include-symlink-outside"]
    outcome, found, _ = hostile.run_case(case, "inprocess")
    assert not outcome.outside_opens and not found


def test_regression_out_dir_traversal(tmp_path: Path) -> None:
    """render --out wrote ../../x-pwned.yaml for kind '../../x'."""
    ws, out = _render(tmp_path, {"c.yaml": "apiVersion: v1\nkind: ../../x\nmetadata: {name: pwned}\n"},
                      "--output-dir", str(tmp_path / "out"))
    assert out.code == 1 and not list(tmp_path.rglob("*pwned*"))


@pytest.mark.parametrize("files,env,message", [
    ({"a.yaml": CONFIGMAP, "b": None}, {}, "symlink loop"),
    ({"raygitops.yaml": "namespace: !!python/object/apply:os.system [id]\n", "a.yaml": CONFIGMAP}, {}, "constructor"),
    ({"raygitops.yaml": "exclude: " + "[" * 50_000 + "]" * 50_000 + "\n", "a.yaml": CONFIGMAP}, {}, "nests deeper"),
    ({"a.yaml": CONFIGMAP}, {"ARGOCD_APP_PARAMETERS": '[{"name": ["x"]}]'}, "not a string"),
    ({"a.yaml": CONFIGMAP}, {"ARGOCD_APP_PARAMETERS": '[{"name": "values-files", "array": [1]}]'}, "list of strings"),
    ({"a\nb.yaml": "kind: [\n"}, {}, "invalid YAML"),
    ({"a.yaml": CONFIGMAP + "data: {a: 2001-13-45}\n"}, {}, "invalid value"),
    ({"raygitops.yaml": "namespace: 2001-13-45\n", "a.yaml": CONFIGMAP}, {}, "invalid value"),
])
def test_regression_internal_errors(tmp_path: Path, files: dict, env: dict, message: str) -> None:
    """Each was `internal error` (exit 2) or a two-line error before the fix."""
    ws = Workspace.create(tmp_path)
    for name, text in files.items():
        if text is None:  # a symlink loop
            os.symlink(ws.app / "c.yaml", ws.app / "b.yaml")
            os.symlink(ws.app / "b.yaml", ws.app / "c.yaml")
        else:
            (ws.app / name).write_text(text)
    out = hostile.run_subprocess(["render", str(ws.app)], env=env)
    assert out.code == 1, out.stderr
    assert len(out.stderr.splitlines()) == 1 and message in out.stderr, out.stderr


def test_regression_config_values_absolute_path(tmp_path: Path) -> None:
    ws = Workspace.create(tmp_path)
    (ws.app / "raygitops.yaml").write_text(f"values: [{ws.outside / 'values.yaml'}]\n")
    (ws.app / "t.yaml.j2").write_text(CONFIGMAP)
    out = hostile.run_subprocess(["render", str(ws.app)])
    assert out.code == 1 and "outside the app directory" in out.stderr


def test_regression_merge_key_override(tmp_path: Path) -> None:
    """A key overriding a merged one (`<<: *base` then `image: new`) is YAML, not a duplicate."""
    ws, out = _render(tmp_path, {"a.yaml": hostile._merge_override()})
    assert out.code == 0, out.stderr
    doc = next(d for d in yaml.safe_load_all(out.stdout) if d)
    assert doc["data"] == {"image": "new", "pull": "Always"}


# ----------------------------------------------------------------------------- hypothesis

SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not SLOW,
                    suppress_health_check=list(HealthCheck))

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
    st.sampled_from(["1e999999", "1Gi", "500m", ".inf", "~", "<<", "&a", "*a", "!!python/object", "{{ x }}",
                     "{% include 'x' %}", "\x00", "\ufeff", "\r\n", "Recreate", "None", "h1-0123456789abcdef"]),
)
_keys = st.one_of(st.text(max_size=12), st.sampled_from(
    ["apiVersion", "kind", "metadata", "name", "spec", "headGroupSpec", "workerGroupSpecs", "groupName",
     "template", "containers", "resources", "limits", "cpu", "annotations", "raygitops.dev/upgrade-strategy",
     "rayStartParams", "upgradeStrategy", "type", "suspend", "replicas", "ownerReferences", "<<"]))
_trees = st.recursive(_scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                        st.dictionaries(_keys, kids, max_size=5)), max_leaves=40)


@st.composite
def _objects(draw) -> dict:
    obj = draw(st.dictionaries(_keys, _trees, max_size=4))
    kind = draw(st.sampled_from(["RayCluster", "ConfigMap", "RayJob", "RayService", "Job"]))
    obj.update({"apiVersion": "ray.io/v1" if kind.startswith("Ray") else "v1", "kind": kind})
    meta = draw(st.dictionaries(_keys, _trees, max_size=3))
    meta["name"] = draw(st.one_of(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), _scalars))
    obj["metadata"] = meta
    if kind == "RayCluster" and draw(st.booleans()):
        base = yaml.safe_load(cluster(name="c"))
        base["spec"].update(draw(st.dictionaries(_keys, _trees, max_size=3)))
        obj["spec"] = base["spec"]
    return obj


def _stdin_case(data: bytes) -> tuple:
    case = Case("hypothesis", stdin=data, expect="any")
    ws = Workspace.create()
    try:
        outcome = hostile.run_inprocess(["render", "-"], data, {}, ws.outside, timeout=60)
        return outcome, hostile.problems(case, ws, outcome)
    finally:
        hostile._rmtree(ws.root)


@SETTINGS
@given(st.lists(_objects(), min_size=1, max_size=4), st.sampled_from([False, None, True]),
       st.sampled_from([True, False]))
@example(docs=[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"\x85": None, "name": "a"}}],
         flow=False, unicode=True)  # found in CI: the input emitter's NEL, not render
@example(docs=[{"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "a", "ownerReferences": True},
               "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                   {"name": "h", "image": "rayproject/ray:2.41.0"}]}}}}}],
         flow=False, unicode=True)  # found in CI: a RayCluster's owner was looked up in a non-list
def test_hypothesis_documents(docs: list[dict], flow, unicode) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow, allow_unicode=unicode, sort_keys=False)
    outcome, found = _stdin_case(text.encode("utf-8"))
    assert not found, (found, text[:2000])
    if outcome.code == 0:  # a correct render: every other object passes through unchanged
        rendered = [d for d in yaml.safe_load_all(outcome.stdout) if d is not None]
        # Compare with what the text says, not with ``docs``: PyYAML's pure-Python emitter
        # does not round-trip every string (allow_unicode writes NEL, U+0085, raw inside a
        # single-quoted scalar, which then reads back as a space).
        meant = [d for d in yaml.safe_load_all(text) if d is not None]
        plain = [d for d in meant if isinstance(d, dict) and d.get("kind") in ("ConfigMap", "Job")]
        for doc in plain:
            assert doc in rendered or any(
                {**r, "metadata": {k: v for k, v in r["metadata"].items() if k != "namespace"}} == doc
                for r in rendered if isinstance(r, dict) and isinstance(r.get("metadata"), dict)), doc


@SETTINGS
@given(st.binary(max_size=2000))
def test_hypothesis_raw_bytes(data: bytes) -> None:
    outcome, found = _stdin_case(data)
    assert not found, (found, data[:500])


_VALID = cluster().encode()


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, len(_VALID)), st.integers(0, 8), st.binary(max_size=8)), min_size=1, max_size=6))
def test_hypothesis_mutated_cluster(edits) -> None:
    """A valid RayCluster with random byte splices."""
    data = bytearray(_VALID)
    for at, cut, insert in edits:
        data[at:at + cut] = insert
    outcome, found = _stdin_case(bytes(data))
    assert not found, (found, bytes(data)[:800])


def _depth(node) -> int:
    """How deep a composed node nests (what libyaml's composer recurses through)."""
    if isinstance(node, yaml.MappingNode):
        return 1 + max([_depth(n) for pair in node.value for n in pair] + [0])
    if isinstance(node, yaml.SequenceNode):
        return 1 + max([_depth(n) for n in node.value] + [0])
    return 0


@SETTINGS
@given(st.lists(_trees, min_size=1, max_size=4), st.sampled_from([False, None, True]), st.integers(2, 9),
       st.booleans(), st.integers(0, 60))
def test_hypothesis_nesting_bound_is_an_upper_bound(trees, flow, indent, explicit, limit) -> None:
    """yamlio's cheap nesting bound (which decides whether to scan events before libyaml's
    recursive composer) must never be below the real depth of any document of a stream, by
    its quick look (a limit it fits under) or document by document (one it does not)."""
    from raygitops.sources import yamlio

    text = yaml.safe_dump_all(trees, default_flow_style=flow, indent=indent, explicit_start=explicit or len(trees) > 1)
    real = max(_depth(n) for n in yaml.compose_all(text, Loader=yaml.CSafeLoader) if n is not None)
    assert real <= yamlio._nesting_bound(text, limit)
    assert real <= yamlio._nesting_bound(text)


@SETTINGS
@given(st.lists(st.text(alphabet="[]{}-:?!&*'\" \n\tab,#|>.\r\x85\u2028\u2029\ufeff", max_size=60), min_size=1,
                max_size=8), st.integers(0, 60))
@example(["# x\r" + "- " * 10 + "a"], 9)  # a line started by "\r" (NEL, LS and PS alike)
@example(["# x", "\ufeff" + "- " * 10 + "a"], 9)  # a byte order mark at a line's start: one column
@example(["---", "[[[[[[a]]]]]]", "---", "[[[[[[b]]]]]]"], 9)
def test_hypothesis_yaml_punctuation(lines: list[str], limit: int) -> None:
    """Punctuation soup (libyaml's other line breaks, byte order marks and document markers
    too): whatever libyaml makes of it, never more depth than the bound says."""
    from raygitops.sources import yamlio

    text = "\n".join(lines)
    if "*" in text:
        return  # depth through aliases is yamlio._check_expansion's job, not the bound's
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.CSafeLoader))
    except yaml.YAMLError:
        return
    real = max([_depth(n) for n in nodes if n is not None] + [0])
    assert real <= yamlio._nesting_bound(text, limit), text
    assert real <= yamlio._nesting_bound(text), text


def test_mutation_fuzz() -> None:
    """Seeded random mutations of valid apps (hostile.fuzz): clean error or render, always."""
    figures = hostile.fuzz(5000 if SLOW else 300, seed=int(os.environ.get("RAYGITOPS_SEED", "0")))
    assert figures.crashes == 0 and not figures.failures, figures.failures[:5]


def test_error_path_with_newline_is_one_line(tmp_path: Path) -> None:
    out = hostile.run_subprocess(["render", str(tmp_path / "no\nsuch")])
    assert out.code == 1 and len(out.stderr.splitlines()) == 1, out.stderr
