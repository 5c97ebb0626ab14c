"""Hostile inputs for ``raygitops render`` / ``raygitops diff`` and the harness that runs them.

Each :class:`Case` builds an app directory inside a workspace that also holds, *outside* the
app, canary files carrying a unique secret.  A case must end in either

- a clean error: exit 1, EMPTY stdout, exactly one stderr line ``raygitops: ...``; or
- a correct render: exit 0, stdout a YAML stream of objects, nothing on stderr;

never a traceback / ``internal error`` / signal (a crash), a hang (every case is
bounded in time), unbounded memory (peak RSS of the subprocess, per child via ``wait4``),
or a file read outside the app directory (the canary secret never shows up in any output;
in-process runs also audit every ``open`` with ``sys.addaudithook``).

Used by tests/reliability/test_hostile.py and tests/bench/bench_reliability.py.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from raygitops.render.renderer import MAX_SCHEMA_ERRORS

# Hard safety cap for every child (address space): a runaway fails there instead of taking
# the machine down; the campaign's own bound (MAX_RSS_MB) is far below it.
CHILD_ADDRESS_SPACE = 6 * 1024**3
MAX_RSS_MB = 512  # ordinary hostile input
MAX_RSS_BIG_MB = 1536  # the largest inputs (files up to sources.MAX_FILE_BYTES)
CASE_SECONDS = 90  # wall-clock bound of one subprocess case
TEMPLATE_SECONDS = "3"  # RAYGITOPS_TEMPLATE_SECONDS for subprocess runs

ERROR_LINE = re.compile(r"^raygitops: \S.*$")
LOCATED_LINE = re.compile(r"^raygitops: (?:(?:base|head): )?\S[^:]*:\d+: \S.*$")


# ----------------------------------------------------------------------------- documents


def cluster(name: str = "c", opt_in: bool = True, extra_head: str = "", image: str = "rayproject/ray:2.41.0") -> str:
    """A small valid RayCluster (block YAML)."""
    meta = "  annotations:\n    raygitops.dev/upgrade-strategy: Recreate\n" if opt_in else ""
    return (
        "apiVersion: ray.io/v1\nkind: RayCluster\n"
        f"metadata:\n  name: {name}\n{meta}"
        "spec:\n  rayVersion: '2.41.0'\n  headGroupSpec:\n    rayStartParams: {}\n"
        "    template:\n      spec:\n        containers:\n        - name: ray-head\n"
        f"          image: {image}\n{extra_head}"
        "  workerGroupSpecs:\n  - groupName: w\n    replicas: 1\n    rayStartParams: {}\n"
        "    template:\n      spec:\n        containers:\n        - name: w\n"
        f"          image: {image}\n"
    )


CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n"


def configmap(value: str, name: str = "cm") -> str:
    """A ConfigMap whose data.x is ``value`` (inserted verbatim as YAML)."""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata:\n  x: {value}\n"


# ----------------------------------------------------------------------------- cases


@dataclass
class Workspace:
    """tmp/outside/ (canaries), tmp/app/ (the app under test)."""

    root: Path
    secret: str

    @property
    def app(self) -> Path:
        return self.root / "app"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @classmethod
    def create(cls, base: Path | None = None) -> "Workspace":
        root = Path(tempfile.mkdtemp(prefix="raygitops-hostile-", dir=base))
        secret = f"CANARY{uuid.uuid4().hex}"
        ws = cls(root, secret)
        ws.outside.mkdir()
        ws.app.mkdir()
        # Canaries in every shape a hostile repo might try to pull in.
        (ws.outside / "secret.txt").write_text(f"{secret}\n")
        (ws.outside / "secret.yaml").write_text(f"{secret}: {secret}\n")
        (ws.outside / "secret-cm.yaml").write_text(configmap(secret, name="leak"))
        (ws.outside / "values.yaml").write_text(f"leak: {secret}\nimage: {secret}\n")
        (ws.outside / "raygitops.yaml").write_text(f"namespace: {secret.lower()}\n{secret}: 1\n")
        (ws.outside / "dir").mkdir()
        (ws.outside / "dir" / "cm.yaml").write_text(configmap(secret, name="leak2"))
        return ws


Files = dict[str, "str | bytes | Callable[[Workspace], str | bytes]"]


@dataclass
class Case:
    """One hostile input.  ``files`` are written under the app dir; ``links`` are symlinks
    (name -> target; a target starting with ``@`` is relative to the workspace root)."""

    name: str
    files: Files = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    stdin: bytes | Callable[[Workspace], bytes] | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    expect: str = "error"  # "error" | "ok" | "any"
    message: str | None = None  # regex the error line must match
    big: bool = False  # subprocess only, bigger memory bound
    slow_template: bool = False  # relies on RAYGITOPS_TEMPLATE_SECONDS: subprocess only
    check: Callable[["Workspace", "Outcome"], list[str]] | None = None
    group: str = "yaml"

    def build(self, ws: Workspace) -> list[str]:
        """Write the app; return the render argv (after ``raygitops``)."""
        for name, content in self.files.items():
            path = ws.app / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if callable(content):
                content = content(ws)
            path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        for name, target in self.links.items():
            path = ws.app / name
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(str(ws.root / target[1:]) if target.startswith("@") else target, path)
        args = [a.replace("{app}", str(ws.app)).replace("{root}", str(ws.root)) for a in self.args]
        if self.stdin is not None:
            return ["render", "-", *args]
        return ["render", str(ws.app), *args]

    def stdin_bytes(self, ws: Workspace) -> bytes | None:
        return self.stdin(ws) if callable(self.stdin) else self.stdin


@dataclass
class Outcome:
    code: int | None  # None: killed by the timeout
    stdout: str
    stderr: str
    seconds: float
    max_rss_kb: int = 0
    signal: int | None = None
    exception: BaseException | None = None  # in-process: an exception click did not handle
    outside_opens: list[str] = field(default_factory=list)


# ---- the catalog -------------------------------------------------------------------


def _alias_bomb(levels: int = 9, width: int = 10) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n" + "".join(
        f"  {line}\n" for line in lines)


def _map_alias_bomb(levels: int = 9) -> str:
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: lol" for j in range(10)) + "}"]
    for i in range(1, levels):
        lines.append(f"m{i}: &m{i} {{" + ", ".join(f"k{j}: *m{i - 1}" for j in range(10)) + "}")
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n" + "".join(
        f"  {line}\n" for line in lines)


def _merge_bomb(levels: int = 40) -> str:
    """Nested merge keys: each level merges the two before it (Fibonacci growth)."""
    lines = ["m0: &m0 {a0: 0}", "m1: &m1 {a1: 1}"]
    for i in range(2, levels):
        lines.append(f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 2}], a{i}: {i}}}")
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: merge}\ndata:\n" + "".join(
        f"  {line}\n" for line in lines)


def _merge_override() -> str:
    return (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: merge}\n"
        "base: &base {image: old, pull: Always}\n"
        "data:\n  <<: *base\n  image: new\n"
    )


# A KubeRay newer than the shipped CRD schemas: a field they do not know is only warned about,
# so a deep value in one reaches the hash (a known field would be refused for its type).
NEWER_KUBERAY = "kuberayVersion: 1.8.0+newest-rules\n"  # the schemas ship 1.1 to 1.7


def _deep_in_cluster(levels: int) -> str:
    """A RayCluster whose head container carries a value nested ``levels`` deep (flow), in a
    field of a newer KubeRay (see NEWER_KUBERAY)."""
    value = "[" * levels + "1" + "]" * levels
    return cluster(extra_head=f"          env:\n          - name: DEEP\n            value: \"x\"\n"
                   f"          futureField: {value}\n")


def _big_valid_app(target_bytes: int) -> Callable[[Workspace], str]:
    """Many RayClusters and ConfigMaps in one file, about ``target_bytes`` long."""

    def make(ws: Workspace) -> str:
        parts, size, i = [], 0, 0
        padding = "x" * 200
        while size < target_bytes:
            doc = cluster(name=f"c{i}", opt_in=i % 2 == 0) if i % 10 == 0 else configmap(
                f"'{padding}-{i}'", name=f"cm{i}")
            parts.append(doc)
            size += len(doc) + 4
            i += 1
        return "---\n".join(parts)

    return make


def _huge_scalar(n: int) -> Callable[[Workspace], str]:
    return lambda ws: configmap("'" + "y" * n + "'")


JINJA_ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''.__class__ }}",
    "{{ (1).__class__.__base__.__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ joiner.__init__.__globals__.os.popen('id').read() }}",
    "{{ namespace.__init__.__globals__.os.popen('id').read() }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ lipsum.__globals__.__builtins__.open('@SECRET@').read() }}",
    "{{ cycler.next.__func__.__globals__ }}",
    "{{ range.__self__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ self.__dict__ }}",
    "{{ request.application.__globals__.__builtins__.open('@SECRET@').read() }}",
    "{{ config.__class__.__init__.__globals__['os'].popen('id').read() }}",
    "{{ ''|attr('__class__') }}",
    "{{ ()|attr('__class__')|attr('__base__')|attr('__subclasses__')() }}",
    "{{ [1]|map(attribute='__class__')|list }}",
    "{{ ['']|map('attr', '__class__')|list }}",
    "{{ '{0.__class__.__mro__}'.format('') }}",
    "{{ '{a.__class__}'.format_map({'a': 1}) }}",
    "{{ '%s'|format(''.__class__) }}",
    "{{ values.__class__ }}",
    "{{ values.update({'a': 1}) }}",
    "{{ values.clear() }}",
    "{{ env.__class__.__init__ }}",
    "{{ argocd.items().__class__ }}",
    "{% set x = namespace() %}{% set x.__class__ = 1 %}{{ x }}",
    "{{ ''.join.__self__.__class__ }}",
    "{{ ''.__mod__ }}",
    "{{ dict.__base__ }}",
    "{% import 'os' as os %}{{ os }}",
    "{% include '/etc/passwd' %}",
    "{% include '@SECRET@' %}",
    "{% include '../outside/secret.txt' %}",
    "{% extends '../outside/secret.txt' %}",
    "{% from '../outside/secret.txt' import x %}{{ x }}",
    "{% include 'sub/../../outside/secret.txt' %}",
    "{{ undefined_variable.attr }}",
    "{% for c in ''.__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    "{{ params.__class__ }}",
    "{{ caller() }}",
    "{{ ().__class__.__bases__[0].__subclasses__()[59].__init__.__globals__ }}",
    "{{ getattr }}{{ __import__('os') }}",
    "{{ loop.__class__ }}",
    "{{ [].pop() }}",
    "{{ {}.setdefault('a', 1) }}",
]

JINJA_DOS = [
    ("{{ 'x'.ljust(3*10**9) }}", "memory"),
    ("{{ 'x'|center(3000000000) }}", "memory"),
    ("{{ '%3000000000d' % 1 }}", "memory"),
    ("{{ '{:>3000000000}'.format(1) }}", "memory"),
    ("{% set s = 'a'*1000000 %}{{ s|replace('a', 'b'*3000)|length }}", "memory"),
    ("{{ 'x'|indent(3000000000, true) }}", "memory"),
    ("{{ 'x' * 10**10 }}", "sandbox"),
    ("{{ [1] * 999999999 }}", "sandbox"),
    ("{{ 7 ** 999999 }}", "sandbox"),
    ("{{ range(10**9)|list|length }}", "range|sandbox"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursion|memory"),
    ("{% for i in range(99999) %}{{ 'x' * 1000 }}{% endfor %}", "output exceeds"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "longer than"),
    ("{{ lipsum(10**7)|length }}", "longer than|memory"),
    ("{% set l = [] %}{% for i in range(100000) %}{{ l.append(i) }}{% endfor %}", "sandbox|modif|error"),
]


def _template(body: str) -> Callable[[Workspace], str]:
    return lambda ws: (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t\ndata:\n  x: |\n    "
        + body.replace("@SECRET@", str(ws.outside / "secret.txt")) + "\n"
    )


def _no_escape_from_out(ws: Workspace, outcome: Outcome) -> list[str]:
    problems = []
    for path in ws.root.rglob("*"):
        if path.is_file() and "pwned" in path.name and ws.root / "out" not in path.parents:
            problems.append(f"--out wrote outside its directory: {path}")
    return problems


def _ok_has_kind(kind: str) -> Callable[[Workspace, Outcome], list[str]]:
    def check(ws: Workspace, outcome: Outcome) -> list[str]:
        if outcome.code == 0 and f"kind: {kind}" not in outcome.stdout:
            return [f"render succeeded without a {kind}"]
        return []
    return check


def catalog() -> list[Case]:
    """Every hand-written hostile case."""
    cases: list[Case] = []
    add = cases.append

    # --- structure, nesting, size
    add(Case("deep-flow-seq-10k", {"a.yaml": configmap("[" * 10_000 + "]" * 10_000)}, message="nests deeper"))
    add(Case("deep-flow-map-10k", {"a.yaml": configmap("{a: " * 10_000 + "1" + "}" * 10_000)}, message="nests deeper"))
    add(Case("deep-flow-seq-100k-toplevel", {"a.yaml": "[" * 100_000 + "]" * 100_000}, message="nests deeper"))
    add(Case("deep-flow-unclosed-1M", {"a.yaml": "[" * 1_000_000}, message="nests deeper|invalid YAML"))
    add(Case("deep-block-seq-100k", {"a.yaml": configmap("\n    " + "- " * 100_000 + "x")}, message="nests deeper"))
    add(Case("deep-block-map-3000", {"a.yaml": lambda ws: "a:\n" + "".join(
        " " * i + "a:\n" for i in range(1, 3000)) + " " * 3000 + "b: 1\n"}, message="nests deeper"))
    add(Case("deep-stdin-100k", stdin=b"[" * 100_000 + b"]" * 100_000, message="nests deeper"))
    add(Case("deep-900-configmap", {"a.yaml": configmap("[" * 900 + "]" * 900)}, message="nests deeper"))
    add(Case("deep-190-in-raycluster", {"c.yaml": _deep_in_cluster(180), "raygitops.yaml": NEWER_KUBERAY},
             expect="ok"))
    add(Case("deep-250-in-raycluster", {"c.yaml": _deep_in_cluster(250), "raygitops.yaml": NEWER_KUBERAY},
             message="nests deeper"))
    # libyaml starts a line after "\r", NEL, LS and PS too, and skips a byte order mark there
    # (its column counts): the cheap bound once read "\n" only and missed such a line's prefix
    for name, start in (("cr", "\r"), ("nel", "\x85"), ("ls", "\u2028"), ("ps", "\u2029"), ("bom", "\n\ufeff")):
        add(Case(f"deep-block-seq-300-after-{name}", {"a.yaml": configmap(start + "    " + "- " * 300 + "x")},
                 message="nests deeper than 200"))
    # 100k of them: a segfault in libyaml 0.2.5's composer (PyYAML 6.0.1's wheels, the lowest pyproject allows)
    add(Case("deep-block-seq-100k-after-cr", {"a.yaml": configmap("\r    " + "- " * 100_000 + "x")},
             message="nests deeper than 200"))
    add(Case("deep-mixed-block-flow-250", {"a.yaml": configmap("\n    " + "- " * 150 + "[" * 100 + "]" * 100)},
             message="nests deeper than 200"))
    add(Case("deep-mixed-block-flow-190", {"a.yaml": configmap("\n    " + "- " * 90 + "[" * 95 + "]" * 95)},
             expect="ok"))
    # each document's own brackets: a deep one among many shallow ones, deep ones side by side
    add(Case("deep-after-100-documents", {"a.yaml": "---\n".join(
        [configmap("[" * 5 + "]" * 5, f"cm-{i}") for i in range(100)] + [configmap("[" * 250 + "]" * 250, "deep")])},
        message="a.yaml:605: document nests deeper than 200"))
    add(Case("deep-150-in-three-documents", {"a.yaml": "---\n".join(
        configmap("[" * 150 + "]" * 150, f"cm-{i}") for i in range(3))}, expect="ok"))
    add(Case("deep-bound-many-flat-documents", {"a.yaml": "---\n".join(
        configmap("[" + "[], " * 300 + "[]]", f"cm-{i}") for i in range(12))}, expect="ok"))
    add(Case("deep-alias-into-deep-anchor", {"a.yaml": configmap(
        "&deep " + "[" * 150 + "1" + "]" * 150) + "  y: " + "[" * 60 + "*deep" + "]" * 60 + "\n"},
        message="nests deeper than 200"))
    add(Case("billion-laughs", {"a.yaml": _alias_bomb()}, message="expands to more than"))
    add(Case("billion-laughs-maps", {"a.yaml": _map_alias_bomb()}, message="expands to more than"))
    add(Case("billion-laughs-stdin", stdin=_alias_bomb().encode(), message="expands to more than"))
    add(Case("merge-key-bomb", {"a.yaml": _merge_bomb()}, expect="error"))
    add(Case("merge-key-override", {"a.yaml": _merge_override()}, expect="any"))
    add(Case("alias-chain-depth", {"a.yaml": lambda ws: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
                                   + "".join(f"d{i}: &d{i} [[[[[[[[[[*d{i - 1}]]]]]]]]]]\n" if i else "d0: &d0 [x]\n"
                                             for i in range(60))}, message="nests deeper|expands"))
    add(Case("file-40MB", {"a.yaml": lambda ws: configmap("'" + "z" * (40 * 1024 * 1024) + "'")},
             message="larger than", big=True))
    add(Case("stdin-40MB", stdin=lambda ws: configmap("'" + "z" * (40 * 1024 * 1024) + "'").encode(),
             message="larger than", big=True))
    add(Case("file-30MB-valid-app", {"a.yaml": _big_valid_app(30 * 1024 * 1024)}, expect="ok", big=True,
             check=_ok_has_kind("Job")))
    # parsed whole, then refused: a ConfigMap holds at most 1 MiB (model/sizes.py)
    add(Case("scalar-30MB", {"a.yaml": _huge_scalar(30 * 1024 * 1024)}, message="over the 1,048,576 the API server",
             big=True))
    add(Case("many-empty-documents", {"a.yaml": "---\n" * 500_000 + CONFIGMAP}, expect="ok", big=True))
    add(Case("only-empty-documents", {"a.yaml": "---\n# c\n" * 1000}, message="no documents"))
    add(Case("empty-app", {}, message="no documents"))
    add(Case("empty-stdin", stdin=b"", message="no documents"))
    add(Case("long-key-2MB", {"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  "
                              + "k" * 2_000_000 + ": v\n"}, expect="any"))
    add(Case("complex-keys", {"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n"
                              "  ? [a, b]\n  : c\n"}, message="not a scalar"))
    add(Case("mapping-as-key", {"a.yaml": "{? {a: 1} : b}\n"}, message="not a scalar"))
    add(Case("duplicate-keys", {"a.yaml": CONFIGMAP + "data: {a: 1, a: 2}\n"}, message="duplicate key"))
    add(Case("duplicate-top-keys", {"a.yaml": CONFIGMAP + "kind: Secret\n"}, message="duplicate key"))

    # --- encodings and bytes
    add(Case("nul-byte", {"a.yaml": CONFIGMAP.encode() + b"data: {a: \"x\x00y\"}\n"}, message="invalid YAML|special"))
    add(Case("nul-bytes-only", {"a.yaml": b"\x00" * 1000}, message="invalid YAML|special"))
    add(Case("latin1", {"a.yaml": b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n"}, message="not UTF-8"))
    add(Case("utf16-bom", {"a.yaml": "\ufeff".encode("utf-16-le") + CONFIGMAP.encode("utf-16-le")}, message="not UTF-8|invalid"))
    add(Case("utf8-surrogate", {"a.yaml": CONFIGMAP.encode() + b"data: {a: \"\xed\xa0\x80\"}\n"}, message="not UTF-8"))
    add(Case("overlong-utf8", {"a.yaml": CONFIGMAP.encode() + b"data: {a: \"\xc0\xaf\"}\n"}, message="not UTF-8"))
    add(Case("bom-crlf-cluster", {"c.yaml": ("\ufeff" + cluster()).replace("\n", "\r\n").encode()}, expect="ok",
             check=_ok_has_kind("Job")))
    add(Case("cr-only-newlines", {"a.yaml": CONFIGMAP.replace("\n", "\r").encode()}, expect="ok"))
    add(Case("bom-mid-stream", {"a.yaml": (CONFIGMAP + "---\n\ufeff" + configmap("1", "b")).encode()}, expect="any"))
    add(Case("bom-stdin", stdin=("\ufeff" + CONFIGMAP).encode(), expect="ok"))
    add(Case("control-chars", {"a.yaml": CONFIGMAP + "data: {a: \"\x1b[31mred\x07\"}\n"}, expect="any"))
    add(Case("random-binary", {"a.yaml": bytes(range(256)) * 64}, expect="error"))
    add(Case("tab-indentation", {"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: a\n"}, message="invalid YAML"))

    # --- YAML tags: the safe loader must refuse every Python tag
    for tag in ["!!python/object/apply:os.system ['echo PWNED']", "!!python/object/new:os.system ['echo PWNED']",
                "!!python/name:os.system", "!!python/module:os", "!!python/object:__main__.X {a: 1}",
                "!!python/tuple [1, 2]", "!!python/bytes aGk=", "!<tag:yaml.org,2002:python/object/apply:os.system> [id]",
                "!custom {a: 1}", "!!js/function 'function(){}'"]:
        add(Case(f"tag-{tag.split()[0][:40]}", {"a.yaml": CONFIGMAP + f"data:\n  a: {tag}\n"},
                 message="invalid YAML|constructor", group="tags"))
    for tag, expect in [("!!binary aGVsbG8=", "any"), ("!!set {a, b}", "any"), ("!!timestamp 2001-12-14", "any"),
                        ("!!omap [a: 1, b: 2]", "any"), ("!!pairs [a: 1, a: 2]", "any"), ("!!float .nan", "any"),
                        ("!!float -.inf", "any"), ("!!str 1", "ok"), ("!!int '0x_1F'", "any")]:
        add(Case(f"tag-{tag.split()[0]}", {"a.yaml": CONFIGMAP + f"data:\n  a: {tag}\n"}, expect=expect, group="tags"))

    # --- numbers and quantities
    big_int = "9" * 5000
    add(Case("timestamp-invalid", {"a.yaml": CONFIGMAP + "data:\n  a: 2001-13-45\n"}, message="invalid value",
             group="numbers"))
    add(Case("timestamp-invalid-key", {"a.yaml": CONFIGMAP + "data:\n  2001-02-30: a\n"}, message="invalid value",
             group="numbers"))
    add(Case("config-timestamp-invalid", {"raygitops.yaml": "namespace: 2001-13-45\n", "a.yaml": CONFIGMAP},
             expect="error", group="numbers"))
    add(Case("config-int-5000-digits", {"raygitops.yaml": f"hook: {{maxParallel: {big_int}}}\n", "a.yaml": CONFIGMAP},
             expect="any", group="numbers"))
    add(Case("values-int-5000-digits", {"values.yaml": f"n: {big_int}\n", "raygitops.yaml": "values: [values.yaml]\n",
                                        "t.yaml.j2": CONFIGMAP}, expect="any", group="numbers"))
    add(Case("int-5000-digits", {"a.yaml": CONFIGMAP + f"data:\n  a: {big_int}\n"}, expect="any", group="numbers"))
    add(Case("int-5000-digits-replicas", {"c.yaml": cluster().replace("replicas: 1", f"replicas: {big_int}")},
             expect="any", group="numbers"))
    add(Case("float-1e999", {"a.yaml": CONFIGMAP + "data:\n  a: 1.0e+999\n"}, expect="any", group="numbers"))
    add(Case("json-output-inf", {"a.yaml": CONFIGMAP + "data:\n  a: .inf\n"}, args=["--output", "json"],
             message="JSON cannot hold", group="numbers"))
    add(Case("json-float-1e999", {"a.json": '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},'
                                  '"data":{"a":1e999}}'}, expect="any", group="numbers"))
    for value in ['"1e999999"', "1e999999", "1.0e+999999", ".inf", "-.inf", ".nan", big_int, f'"{big_int}"',
                  f'"{big_int}m"', '"1e64"', '"1e-64"', '"0.0000000000000000000000001Ei"', "1.5e308", '"-1"', '"+.5Ki"',
                  "[1, 2]", "{a: 1}", "null", "true", '"1_000"', '"0x10"', '"١٢"']:
        add(Case(f"quantity-cpu-{value[:24]}", {"c.yaml": cluster(extra_head=(
            "          resources:\n            limits:\n"
            f"              cpu: {value}\n              memory: {value}\n"
            f"          volumeMounts: []\n"))}, expect="any", group="numbers",
            check=_ok_has_kind("RayCluster")))
        add(Case(f"quantity-rayresources-{value[:24]}", {"c.yaml": cluster().replace(
            "  headGroupSpec:\n", f"  headGroupSpec:\n    resources: {{GPU: {value}}}\n")},
            expect="any", group="numbers"))

    # --- RayCluster / object shapes
    shapes = {
        "spec-null": "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c}\nspec: null\n",
        "spec-list": "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c}\nspec: [1]\n",
        "head-string": "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c}\nspec: {headGroupSpec: x}\n",
        "workers-map": cluster().replace("  workerGroupSpecs:\n", "  workerGroupSpecs: {}\n  x:\n"),
        "group-name-int": cluster().replace("groupName: w", "groupName: 123"),
        "group-name-null": cluster().replace("groupName: w", "groupName: null"),
        "group-name-list": cluster().replace("groupName: w", "groupName: [a]"),
        "template-null": cluster().replace("    template:\n      spec:\n        containers:\n        - name: w\n",
                                           "    template: null\n    x:\n      - name: w\n"),
        "annotations-list": cluster().replace("  annotations:\n    raygitops.dev/upgrade-strategy: Recreate\n",
                                              "  annotations: [a, b]\n"),
        "annotations-int-values": cluster().replace("raygitops.dev/upgrade-strategy: Recreate",
                                                    "raygitops.dev/upgrade-strategy: 5"),
        "strategy-lowercase": cluster().replace("Recreate", "recreate"),
        "strategy-newline": cluster().replace("Recreate", '"Recreate\\n"'),
        "upgrade-strategy-list": cluster(opt_in=False).replace("  rayVersion:", "  upgradeStrategy: {type: [1]}\n  rayVersion:"),
        "upgrade-strategy-string": cluster(opt_in=False).replace("  rayVersion:", "  upgradeStrategy: Recreate\n  rayVersion:"),
        "owner-refs-string": cluster().replace("metadata:\n", "metadata:\n  ownerReferences: x\n", 1),
        "owner-refs-ints": cluster().replace("metadata:\n", "metadata:\n  ownerReferences: [1, 2]\n", 1),
        "owner-refs-kind-list": cluster().replace("metadata:\n", "metadata:\n  ownerReferences: [{kind: [RayJob]}]\n", 1),
        "labels-list": cluster().replace("metadata:\n", "metadata:\n  labels: [ray.io/originated-from-crd]\n", 1),
        "origin-label-list": cluster().replace("metadata:\n", "metadata:\n  labels: {ray.io/originated-from-crd: [RayJob]}\n", 1),
        "name-int": "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: 5}\nspec: {}\n",
        "name-huge": cluster(name="n" * 100_000),
        "name-with-newline": cluster(name='"a\\nb"'),
        "namespace-list": cluster().replace("metadata:\n", "metadata:\n  namespace: [a]\n", 1),
        "namespace-traversal": cluster().replace("metadata:\n", "metadata:\n  namespace: ../../etc\n", 1),
        "generate-name-cluster": cluster().replace("  name: c\n", "  generateName: c-\n"),
        "rayjob-opt-in": "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: j\n  annotations:\n"
                         "    raygitops.dev/upgrade-strategy: Recreate\nspec:\n  rayClusterSpec:\n"
                         "    upgradeStrategy: {type: Recreate}\n",
        "rayjob-cluster-spec-list": "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j}\nspec: {rayClusterSpec: [1]}\n",
        "rayservice-weird": "apiVersion: ray.io/v1\nkind: RayService\nmetadata: {name: s}\nspec: [1]\n",
        "rayservice-groups-int": "apiVersion: ray.io/v1\nkind: RayService\nmetadata: {name: s}\n"
                                 "spec: {rayClusterConfig: {headGroupSpec: 7, workerGroupSpecs: 5}}\n",
        "rayjob-cluster-list": "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j}\nspec: {rayClusterSpec: [1]}\n",
        "apiversion-int": "apiVersion: 1\nkind: RayCluster\nmetadata: {name: c}\n",
        "kind-map": "apiVersion: v1\nkind: {a: 1}\nmetadata: {name: c}\n",
        "metadata-list": "apiVersion: v1\nkind: ConfigMap\nmetadata: [name, c]\n",
        "ray-start-params-nested": cluster().replace("rayStartParams: {}", "rayStartParams: {a: {b: [1]}, c: null}", 1),
        "containers-string": cluster().replace("        containers:\n        - name: ray-head\n", "        containers: x\n        y:\n        - name: ray-head\n", 1),
        "cluster-twice": cluster() + "---\n" + cluster(),
        "list-kind": "apiVersion: v1\nkind: List\nitems:\n- " + CONFIGMAP.replace("\n", "\n  "),
        "scalar-document": "just a string\n",
        "int-document": "42\n",
        "v1-list-of-clusters": "apiVersion: v1\nkind: List\nmetadata: {name: l}\nitems: [1, 2]\n",
    }
    for name, text in shapes.items():
        add(Case(f"shape-{name}", {"c.yaml": text}, expect="any", group="shapes"))

    # --- ReplaceGroups and its max-unavailable bound (issue #22): refused with the file, or rendered
    replace_groups = cluster().replace("upgrade-strategy: Recreate", "upgrade-strategy: ReplaceGroups")

    def bound(value: str, text: str = replace_groups) -> str:
        return text.replace("ReplaceGroups\n", f"ReplaceGroups\n    raygitops.dev/max-unavailable: {value}\n", 1)

    for name, value in {"zero": "'0'", "zero-percent": "'0%'", "over-100": "'101%'", "negative": "'-1'",
                        "fraction": "'1.5'", "int": "2", "bool": "true", "null": "null", "list": "['1']",
                        "map": "{a: 1}", "unicode-digit": "'\u00b2'", "fullwidth": "'\uff12'",
                        "huge": "'" + "9" * 5000 + "'", "newline": '"1\\n%"', "space-percent": "'25 %'",
                        "exponent": "'1e3'", "nul": '"1\\0"', "hex": "'0x10'"}.items():
        add(Case(f"max-unavailable-{name}", {"c.yaml": bound(value)}, message="c.yaml:7", group="replace-groups"))  # the annotation's line
    def by_group(value: str) -> str:
        return replace_groups.replace("ReplaceGroups\n", f"ReplaceGroups\n    raygitops.dev/max-unavailable-by-group: {value}\n", 1)

    for name, value in {"unknown-group": "'gpu=1'", "near-miss": "'x=1'", "twice": "'w=1,w=2'", "zero": "'w=0'",
                        "no-equals": "'w'", "empty": "''", "bool": "true", "map": "{w: 1}", "nul": '"w=1\\0"',
                        "huge": "'" + ",".join(f"g{i}=1" for i in range(5000)) + "'", "percent-over": "'w=101%'",
                        "digits-fullwidth": "'w=\uff11'"}.items():
        add(Case(f"max-unavailable-by-group-{name}", {"c.yaml": by_group(value)}, message="c.yaml:7: annotation "
                 "raygitops.dev/max-unavailable-by-group", group="replace-groups"))
    add(Case("max-unavailable-by-group-valid", {"c.yaml": by_group("'w=1'")}, expect="ok", group="replace-groups",
             check=_ok_has_kind("RayCluster")))
    add(Case("max-unavailable-without-replace-groups", {"c.yaml": bound("'2'").replace("ReplaceGroups", "Recreate")},
             message="applies only with", group="replace-groups"))
    add(Case("max-unavailable-valid-percent", {"c.yaml": bound("'25%'")}, expect="ok", group="replace-groups",
             check=_ok_has_kind("RayCluster")))
    add(Case("replace-groups-lowercase", {"c.yaml": replace_groups.replace("ReplaceGroups", "replacegroups")},
             message="did you mean ReplaceGroups", group="replace-groups"))
    add(Case("replace-groups-in-spec-field", {"c.yaml": cluster(opt_in=False).replace(
        "  rayVersion:", "  upgradeStrategy: {type: ReplaceGroups}\n  rayVersion:")},
        message="is not Recreate or None", group="replace-groups"))
    add(Case("replace-groups-on-rayjob", {"c.yaml": "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: j\n"
                                                    "  annotations:\n    raygitops.dev/upgrade-strategy: ReplaceGroups\n"
                                                    "spec: {}\n"},
             message="ReplaceGroups is not allowed on a RayJob", group="replace-groups"))
    # --- config hashes (issue #22): the switch and odd references render or fail cleanly
    reads = cluster().replace("        - name: w\n", "        - name: w\n          envFrom: [{configMapRef: {name: cfg}}]\n", 1)
    cfg = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: '1'}\n"
    for name, value in {"no": "'no'", "bool": "false", "int": "0", "list": "[a]", "empty": "''"}.items():
        add(Case(f"hash-config-{name}", {"c.yaml": reads.replace(
            "upgrade-strategy: Recreate\n", f"upgrade-strategy: Recreate\n    raygitops.dev/hash-config: {value}\n") + cfg},
            message="c.yaml:7: annotation raygitops.dev/hash-config", group="config-hash"))
    odd_refs = {"name-list": "envFrom: [{configMapRef: {name: [cfg]}}]", "ref-string": "envFrom: [{configMapRef: cfg}]",
                "envfrom-map": "envFrom: {configMapRef: {name: cfg}}", "env-valuefrom-list": "env: [{name: A, valueFrom: [1]}]",
                "nul-name": 'envFrom: [{configMapRef: {name: "c\\0fg"}}]'}
    for name, text in odd_refs.items():
        add(Case(f"config-ref-{name}", {"c.yaml": cluster().replace(
            "        - name: w\n", f"        - name: w\n          {text}\n", 1) + cfg}, expect="any", group="config-hash"))
    for name, data in {"data-list": "data: [1]", "data-null": "data: null", "binary-int": "binaryData: {a: 5}",
                       "data-nested": "data: {a: {b: 1}}"}.items():
        add(Case(f"config-content-{name}", {"c.yaml": reads + cfg.replace("data: {a: '1'}", data)},
                 expect="any", group="config-hash"))
    # Secrets the pods read: hashed and carried to the hook, or refused at the Secret's line,
    # naming the key and never the value (the canary must not appear in any output)
    reads_secret = cluster().replace("        - name: w\n", "        - name: w\n          envFrom: [{secretRef: {name: sec}}]\n", 1)
    sec = "---\napiVersion: v1\nkind: Secret\nmetadata: {name: sec}\n"
    for name, body in {"data-list": "data: [@C@]", "data-int": "data: {a: 5}", "stringdata-nested": "stringData: {a: {b: @C@}}",
                       "stringdata-list": "stringData: {a: [@C@]}", "stringdata-binary": "stringData: {a: !!binary aGk=}",
                       "data-key-int": "data: {1: aGk=}"}.items():
        add(Case(f"secret-content-{name}", {"c.yaml": lambda ws, body=body: (
            reads_secret + sec + body.replace("@C@", ws.secret) + "\n")},
            message="c.yaml:[0-9]+: Secret sec: (data|stringData)", group="config-hash"))
    for name, body in {"data-null": "data: null", "binary": "data: {a: !!binary aGk=}", "both": "data: {a: aGk=}\nstringData: {a: x}",
                       "empty": "data: {}", "huge-key-count": "data: {" + ", ".join(f"k{i}: aGk=" for i in range(5000)) + "}"}.items():
        add(Case(f"secret-content-ok-{name}", {"c.yaml": reads_secret + sec + body + "\n"}, expect="ok",
                 group="config-hash", check=_ok_has_kind("Secret")))
    add(Case("owner-refs-bool", {"c.yaml": cluster().replace("metadata:\n", "metadata:\n  ownerReferences: true\n", 1)},
             message="ownerReferences is bool True, not a list", group="shapes"))

    # --- paths, symlinks, traversal (the canary must never leak, nothing outside may be read)
    add(Case("symlink-manifest-outside", {"ok.yaml": CONFIGMAP}, links={"evil.yaml": "@outside/secret-cm.yaml"},
             message="outside the app", group="paths"))
    add(Case("symlink-manifest-absolute-etc", {"ok.yaml": CONFIGMAP}, links={"passwd.yaml": "/etc/passwd"},
             message="outside the app", group="paths"))
    add(Case("symlink-manifest-dev-zero", {"ok.yaml": CONFIGMAP}, links={"zero.yaml": "/dev/zero"},
             message="outside the app|not a regular", group="paths"))
    add(Case("symlink-manifest-dev-urandom-inside", {"ok.yaml": CONFIGMAP}, links={"r.yaml": "/dev/urandom"},
             message="outside the app|not a regular", group="paths"))
    add(Case("symlink-dir-outside", {"ok.yaml": CONFIGMAP}, links={"sub": "@outside/dir"}, expect="any",
             group="paths"))
    add(Case("symlink-loop", {"ok.yaml": CONFIGMAP}, links={"a.yaml": "b.yaml", "b.yaml": "a.yaml"},
             expect="error", group="paths"))
    add(Case("symlink-self-loop-dir", {"ok.yaml": CONFIGMAP}, links={"loop": "."}, expect="any", group="paths"))
    add(Case("symlink-dangling", {"ok.yaml": CONFIGMAP}, links={"gone.yaml": "@outside/nope.yaml"},
             expect="error", group="paths"))
    add(Case("symlink-config-outside", {"ok.yaml": CONFIGMAP}, links={"raygitops.yaml": "@outside/raygitops.yaml"},
             message="outside the app", group="paths"))
    add(Case("symlink-config-dev-zero", {"ok.yaml": CONFIGMAP}, links={"raygitops.yaml": "/dev/zero"},
             expect="any", group="paths"))
    add(Case("config-values-traversal", {"raygitops.yaml": "values: [../outside/values.yaml]\n",
                                         "t.yaml.j2": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ leak }}'}\n"},
             message="outside the app", group="paths"))
    add(Case("config-values-absolute", {"raygitops.yaml": lambda ws: f"values: [{ws.outside / 'values.yaml'}]\n",
                                        "t.yaml.j2": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ leak }}'}\n"},
             message="outside the app", group="paths"))
    add(Case("config-values-symlink-outside", {"raygitops.yaml": "values: [v.yaml]\n",
                                               "t.yaml.j2": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ leak }}'}\n"},
             links={"v.yaml": "@outside/values.yaml"}, message="outside the app", group="paths"))
    add(Case("config-values-dir", {"raygitops.yaml": "values: [sub]\n", "sub/x.txt": "x",
                                   "t.yaml.j2": CONFIGMAP}, expect="error", group="paths"))
    add(Case("config-values-missing", {"raygitops.yaml": "values: [nope.yaml]\n", "t.yaml.j2": CONFIGMAP},
             expect="error", group="paths"))
    add(Case("config-values-dev-zero", {"raygitops.yaml": "values: [z.yaml]\n", "t.yaml.j2": CONFIGMAP},
             links={"z.yaml": "/dev/zero"}, expect="error", group="paths"))
    add(Case("config-not-mapping", {"raygitops.yaml": "[1, 2]\n", "ok.yaml": CONFIGMAP}, message="mapping", group="paths"))
    add(Case("config-bad-types", {"raygitops.yaml": "hook: {maxParallel: [1], timeoutSeconds: -1}\n", "ok.yaml": CONFIGMAP},
             expect="error", group="paths"))
    add(Case("config-python-tag", {"raygitops.yaml": "namespace: !!python/object/apply:os.system [id]\n",
                                   "ok.yaml": CONFIGMAP}, expect="error", group="paths"))
    add(Case("config-alias-bomb", {"raygitops.yaml": "exclude: " + _alias_bomb().split("data:\n")[1].replace("  a", "a")
                                   .splitlines()[-1].split(": ", 1)[1] + "\n" + "\n".join(
        line.strip() for line in _alias_bomb().split("data:\n")[1].splitlines()[:-1]) + "\n",
                                   "ok.yaml": CONFIGMAP}, expect="error", group="paths"))
    add(Case("config-deep", {"raygitops.yaml": "exclude: " + "[" * 100_000 + "]" * 100_000 + "\n", "ok.yaml": CONFIGMAP},
             expect="error", group="paths"))
    add(Case("include-symlink-outside", {"t.yaml.j2": _template("{% include 'link.txt' %}")},
             links={"link.txt": "@outside/secret.txt"}, message="outside|not found", group="paths"))
    add(Case("include-symlinked-dir", {"t.yaml.j2": _template("{% include 'sub/cm.yaml' %}")},
             links={"sub": "@outside/dir"}, message="outside|not found", group="paths"))
    add(Case("include-dev-zero", {"t.yaml.j2": _template("{% include 'z.txt' %}")},
             links={"z.txt": "/dev/zero"}, message="outside|not found", group="paths"))
    add(Case("include-self", {"t.yaml.j2": "{% include 't.yaml.j2' %}"}, message="recursion|memory", group="paths"))
    add(Case("out-dir-traversal", {"c.yaml": CONFIGMAP.replace("name: ok", "name: ../../../pwned")},
             args=["--output-dir", "{root}/out"], expect="any", check=_no_escape_from_out, group="paths"))
    add(Case("out-dir-namespace-traversal", {"c.yaml": CONFIGMAP.replace("{name: ok}", "{name: pwned, namespace: ../..}")},
             args=["--output-dir", "{root}/out"], expect="any", check=_no_escape_from_out, group="paths"))
    add(Case("out-dir-kind-traversal", {"c.yaml": "apiVersion: v1\nkind: ../../x\nmetadata: {name: pwned}\n"},
             args=["--output-dir", "{root}/out"], expect="any", check=_no_escape_from_out, group="paths"))
    add(Case("filename-newline", {"a\nb.yaml": "kind: [\n"}, expect="error", group="paths"))
    add(Case("argocd-params-not-json", {"ok.yaml": CONFIGMAP}, env={"ARGOCD_APP_PARAMETERS": "{"},
             expect="error", group="paths"))
    add(Case("argocd-params-values-files-ints", {"ok.yaml": CONFIGMAP},
             env={"ARGOCD_APP_PARAMETERS": '[{"name": "values-files", "array": [1]}]'}, expect="error", group="paths"))
    add(Case("argocd-params-name-list", {"ok.yaml": CONFIGMAP},
             env={"ARGOCD_APP_PARAMETERS": '[{"name": ["x"]}]'}, expect="error", group="paths"))
    add(Case("argocd-params-values-traversal", {"ok.yaml": CONFIGMAP, "t.yaml.j2": CONFIGMAP.replace("ok", "t")},
             env={"ARGOCD_APP_PARAMETERS": '[{"name": "values-files", "array": ["../outside/values.yaml"]}]'},
             message="outside the app", group="paths"))
    add(Case("argocd-params-values-map-weird", {"t.yaml.j2": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
             env={"ARGOCD_APP_PARAMETERS": '[{"name": "values", "map": {"": "x", ".": "y", "a..b": "z", "c.": 1}}]'},
             expect="any", group="paths"))

    # --- Jinja2 sandbox escapes and denial of service
    for i, payload in enumerate(JINJA_ESCAPES):
        add(Case(f"jinja-escape-{i:02d}", {"t.yaml.j2": _template(payload)}, expect="any", group="jinja"))
    for i, (payload, message) in enumerate(JINJA_DOS):
        add(Case(f"jinja-dos-{i:02d}", {"t.yaml.j2": _template(payload)}, message=message, group="jinja",
                 slow_template=True))
    return cases


# ----------------------------------------------------------------------------- running


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_subprocess(argv: list[str], stdin: bytes | None = None, env: dict[str, str] | None = None,
                   timeout: float = CASE_SECONDS, cwd: str | None = None) -> Outcome:
    """``python -m raygitops ARGV``: exit code, output, wall time and the child's own peak RSS."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        full_env = dict(os.environ, RAYGITOPS_TEMPLATE_SECONDS=TEMPLATE_SECONDS, **(env or {}))
        full_env.pop("RAYGITOPS_DEBUG", None)
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "raygitops", *argv], stdin=inp if stdin is not None else
                                subprocess.DEVNULL, stdout=out, stderr=err, env=full_env, cwd=cwd,
                                preexec_fn=_limit_child)
        status = rusage = None
        timed_out = False
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                proc.kill()
                _, status, rusage = os.wait4(proc.pid, 0)
                timed_out = True
                break
            time.sleep(0.01)
        proc.returncode = 0  # reaped by wait4: keep Popen from waiting again
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        code = None if timed_out else (os.WEXITSTATUS(status) if os.WIFEXITED(status) else None)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) and not timed_out else None
        return Outcome(code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                       seconds, rusage.ru_maxrss, sig)


class OpenAudit:
    """Records files opened (and directories listed) while armed; installed once per process."""

    _installed = False
    armed: "OpenAudit | None" = None

    def __init__(self, forbidden: Path):
        self.forbidden = str(forbidden.resolve())
        self.hits: list[str] = []

    @classmethod
    def _hook(cls, event: str, args: tuple) -> None:
        audit = cls.armed
        if audit is None or event not in ("open", "os.listdir", "os.scandir"):
            return
        target = args[0] if args else None
        if isinstance(target, bytes):
            target = os.fsdecode(target)
        if not isinstance(target, str):
            return
        try:
            cls.armed = None  # realpath itself must not recurse into the hook
            real = os.path.realpath(target)
        finally:
            cls.armed = audit
        if real == audit.forbidden or real.startswith(audit.forbidden + os.sep):
            audit.hits.append(f"{event} {target}")

    def __enter__(self) -> "OpenAudit":
        if not OpenAudit._installed:
            sys.addaudithook(OpenAudit._hook)
            OpenAudit._installed = True
        OpenAudit.armed = self
        return self

    def __exit__(self, *exc: Any) -> None:
        OpenAudit.armed = None


def run_inprocess(argv: list[str], stdin: bytes | None, env: dict[str, str], forbidden: Path,
                  timeout: float = CASE_SECONDS) -> Outcome:
    """The CLI through click's CliRunner, with every open audited; a hang kills the process
    with a traceback dump (faulthandler), so it can never hang the suite silently."""
    from click.testing import CliRunner

    from raygitops.cli.main import main

    runner = CliRunner()
    saved = {k: os.environ.get(k) for k in env}
    start = time.monotonic()
    faulthandler.dump_traceback_later(timeout, exit=True)
    try:
        os.environ.update(env)
        os.environ.pop("RAYGITOPS_DEBUG", None)
        with OpenAudit(forbidden) as audit:
            result = runner.invoke(main, argv, input=stdin, catch_exceptions=True)
    finally:
        faulthandler.cancel_dump_traceback_later()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    exc = result.exception if not isinstance(result.exception, SystemExit) else None
    return Outcome(result.exit_code, result.stdout, result.stderr, time.monotonic() - start,
                   exception=exc, outside_opens=audit.hits)


def problems(case: Case, ws: Workspace, outcome: Outcome, max_rss_mb: int | None = None) -> list[str]:
    """Everything wrong with an outcome (empty list: the case passed)."""
    found: list[str] = []
    if outcome.code is None and outcome.signal is None and outcome.exception is None:
        found.append(f"hang: killed after {outcome.seconds:.0f} s")
    if outcome.signal is not None:
        found.append(f"crash: killed by signal {outcome.signal}")
    if outcome.exception is not None:
        found.append(f"crash: {type(outcome.exception).__name__}: {outcome.exception}")
    if "Traceback" in outcome.stderr or "internal error" in outcome.stderr:
        found.append(f"crash: {outcome.stderr.strip().splitlines()[-1][:300]}")
    for text, where in ((outcome.stdout, "stdout"), (outcome.stderr, "stderr")):
        if ws.secret in text or ws.secret.lower() in text:
            found.append(f"leak: the canary secret appears on {where}")
    if "uid=" in outcome.stdout or "PWNED" in outcome.stdout:
        found.append("escape: command output in the render")
    if outcome.outside_opens:
        found.append(f"read outside the app dir: {outcome.outside_opens[:3]}")
    if max_rss_mb is not None and outcome.max_rss_kb > max_rss_mb * 1024:
        found.append(f"memory: peak RSS {outcome.max_rss_kb // 1024} MiB > {max_rss_mb} MiB")
    if outcome.code == 1:
        lines = outcome.stderr.splitlines()
        if outcome.stdout:
            found.append(f"error with output on stdout ({len(outcome.stdout)} chars)")
        # one line; or, for the schema errors of a RayCluster, one line each, every one at
        # its file and line, at most MAX_SCHEMA_ERRORS and the count of the rest
        several = 1 < len(lines) <= MAX_SCHEMA_ERRORS + 1 and all(LOCATED_LINE.match(line) for line in lines)
        if not lines or not all(ERROR_LINE.match(line) for line in lines) or (len(lines) > 1 and not several):
            found.append(f"error is not one 'raygitops: ...' line: {outcome.stderr[:300]!r}")
        elif case.message and not any(re.search(case.message, line) for line in lines):
            found.append(f"error does not match /{case.message}/: {lines[0][:300]}")
        if case.expect == "ok":
            found.append(f"expected a render, got: {outcome.stderr.strip()[:300]}")
    elif outcome.code == 0:
        if case.expect == "error":
            found.append("expected an error, got a render")
        if "--output-dir" not in case.args:
            if not outcome.stdout.strip():
                found.append("exit 0 with empty stdout (Argo CD would prune everything)")
            else:
                try:
                    docs = [d for d in yaml.load_all(outcome.stdout, Loader=yaml.CSafeLoader) if d is not None]
                except yaml.YAMLError as err:
                    found.append(f"render output is not YAML: {str(err)[:200]}")
                else:
                    if not docs or not all(isinstance(d, dict) and d.get("kind") for d in docs):
                        found.append("render output holds something that is not an object")
        # on success stderr holds nothing but one-line warnings (near-miss opt-ins)
        other = [line for line in outcome.stderr.splitlines() if not line.startswith("raygitops: warning: ")]
        if any(line.strip() for line in other):
            found.append(f"render succeeded but wrote to stderr: {outcome.stderr[:200]!r}")
    elif outcome.code is not None:
        found.append(f"exit code {outcome.code}")
    if case.check is not None:
        found.extend(case.check(ws, outcome))
    return found


@dataclass
class Figures:
    """What a hostile campaign found."""

    tried: int = 0
    crashes: int = 0
    failures: list[str] = field(default_factory=list)
    peak_rss_kb: int = 0
    peak_rss_case: str = ""
    largest_input_bytes: int = 0
    largest_input_rss_kb: int = 0

    def record(self, name: str, outcome: Outcome, found: list[str], input_bytes: int = 0) -> None:
        self.tried += 1
        if any(p.startswith(("crash", "hang")) for p in found):
            self.crashes += 1
        self.failures.extend(f"{name}: {p}" for p in found)
        if outcome.max_rss_kb > self.peak_rss_kb:
            self.peak_rss_kb, self.peak_rss_case = outcome.max_rss_kb, name
        if outcome.code == 0 and input_bytes >= self.largest_input_bytes and outcome.max_rss_kb:
            self.largest_input_bytes, self.largest_input_rss_kb = input_bytes, outcome.max_rss_kb

    def merge(self, other: "Figures") -> None:
        self.tried += other.tried
        self.crashes += other.crashes
        self.failures += other.failures
        if other.peak_rss_kb > self.peak_rss_kb:
            self.peak_rss_kb, self.peak_rss_case = other.peak_rss_kb, other.peak_rss_case
        if other.largest_input_bytes >= self.largest_input_bytes:
            self.largest_input_bytes = other.largest_input_bytes
            self.largest_input_rss_kb = other.largest_input_rss_kb


def input_size(ws: Workspace, stdin: bytes | None) -> int:
    total = len(stdin or b"")
    for path in ws.app.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def run_case(case: Case, mode: str = "subprocess", base: Path | None = None, command: str = "render") -> tuple[Outcome, list[str], int]:
    """Build and run one case (``mode``: subprocess | inprocess); ``command`` render | diff."""
    ws = Workspace.create(base)
    try:
        argv = case.build(ws)
        stdin = case.stdin_bytes(ws)
        if command == "diff":
            if stdin is not None:
                return Outcome(0, "", "", 0.0), [], 0  # diff has no stdin side
            base_app = ws.root / "base"
            base_app.mkdir()
            (base_app / "c.yaml").write_text(cluster())
            argv = ["diff", "--base", str(base_app), "--head", str(ws.app), "--output", "json", *argv[2:]]
        size = input_size(ws, stdin)
        if mode == "subprocess":
            outcome = run_subprocess(argv, stdin, case.env)
            bound = MAX_RSS_BIG_MB if case.big else MAX_RSS_MB
        else:
            outcome = run_inprocess(argv, stdin, case.env, ws.outside)
            bound = None
        found = problems(case, ws, outcome, bound)
        if command == "diff" and outcome.code in (0, 3):
            # a diff prints a report, not manifests: only check it is there and clean
            found = [p for p in found if not p.startswith(("render output", "expected an error", "exit code 3",
                                                           "render succeeded"))]
            if case.expect == "error":
                found.append("diff accepted an input render refuses")
        return outcome, found, size
    finally:
        _rmtree(ws.root)


def _rmtree(path: Path) -> None:
    import shutil

    def onerror(func: Any, p: str, exc: Any) -> None:
        try:
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)


def run_catalog(cases: Iterable[Case], mode: str = "subprocess", command: str = "render",
                progress: Callable[[str], None] | None = None) -> Figures:
    figures = Figures()
    for case in cases:
        if mode == "inprocess" and (case.big or case.slow_template):
            continue
        outcome, found, size = run_case(case, mode, command=command)
        figures.record(case.name, outcome, found, size)
        if progress:
            progress(f"{case.name}: {'OK' if not found else '; '.join(found)} ({outcome.seconds:.1f} s, "
                     f"{outcome.max_rss_kb // 1024} MiB)")
    return figures


def figures_json(figures: Figures) -> str:
    return json.dumps(figures.__dict__, indent=2)


# ----------------------------------------------------------------------------- mutation fuzz


def fuzz(count: int, seed: int = 0, progress: Callable[[str], None] | None = None) -> Figures:
    """``count`` seeded random mutations (byte splices, duplicated lines, nesting, tags) of
    valid apps, rendered in-process through stdin with every open audited."""
    import random

    rng = random.Random(seed)
    seeds = [cluster().encode(), (cluster(opt_in=False) + "---\n" + CONFIGMAP).encode(),
             _merge_override().encode(), _deep_in_cluster(20).encode()]
    tokens = [b"[", b"]", b"{", b"}", b"- ", b": ", b"&a ", b"*a", b"<<: ", b"!!python/object ", b"\x00", b"\xff",
              "\ufeff".encode(), b"\r\n", b"\t", b"'", b'"', b"1e999999", b"---\n", b"? ", b"|\n", b"{{ x }}"]
    figures = Figures()
    ws = Workspace.create()
    try:
        for i in range(count):
            data = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 6)):
                at = rng.randrange(len(data) + 1)
                op = rng.random()
                if op < 0.4:
                    data[at:at] = rng.choice(tokens) * rng.randint(1, 3)
                elif op < 0.7:
                    del data[at:at + rng.randint(1, 8)]
                elif op < 0.85:
                    data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
                else:
                    lines = bytes(data).split(b"\n")
                    j = rng.randrange(len(lines))
                    lines.insert(j, lines[j])
                    data = bytearray(b"\n".join(lines))
            outcome = run_inprocess(["render", "-"], bytes(data), {}, ws.outside, timeout=60)
            found = problems(Case("fuzz", expect="any"), ws, outcome)
            figures.record(f"fuzz-{seed}-{i}", outcome, found)
            if found and progress:
                progress(f"fuzz-{seed}-{i}: {found} {bytes(data)[:200]!r}")
    finally:
        _rmtree(ws.root)
    return figures
