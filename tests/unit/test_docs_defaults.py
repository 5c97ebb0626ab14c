"""Every default the docs state is the code's (issue 48: three docs named three different default
KubeRay versions). The docs are read, not restated here: every Markdown table with a default
column, every "`name` ... default VALUE" in the text and the code blocks, every policy marked
"(default)", every KubeRay version said of an unset ``kuberayVersion`` or of "the newest
raygitops knows". Each is compared with the constant the code uses; a default stated with a
value for a setting this test does not know fails too, so a new one cannot slip by unchecked."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted(p for p in REPO.rglob("*.md") if "node_modules" not in p.parts
              and not any(part.startswith(".") for part in p.relative_to(REPO).parts))


def code_defaults() -> dict[str, str]:
    """Each name a doc may give a setting (raygitops.yaml key, Argo CD parameter, flag,
    annotation, environment variable) -> the code's default, as the docs write it."""
    from raygitops import __version__
    from raygitops.cli.main import main
    from raygitops.model import crdschema, jobs
    from raygitops.model.hashing import DEFAULT_IGNORED_KEYS
    from raygitops.model.lock import DEFAULT_LEASE_SECONDS
    from raygitops.model.plan import HookSettings
    from raygitops.model.strategy import DEFAULT_MAX_UNAVAILABLE
    from raygitops.presync.context import DEFAULT_PAUSE_SECONDS
    from raygitops.sources import settings as settings_module
    from raygitops.sources.templating import DEFAULT_TEMPLATE_MEMORY_MB, DEFAULT_TEMPLATE_SECONDS

    hook, settings = HookSettings(), settings_module.Settings()
    presync = {p.name: p.default for p in main.get_command(click.Context(main), "presync").params}
    assert presync["lease_seconds"] == DEFAULT_LEASE_SECONDS  # the flag's own default is the lock's
    newest = crdschema.schema_version(None)[0]
    assert newest == max(crdschema.SCHEMAS, key=lambda v: tuple(map(int, v.split("."))))
    image = settings.hook_image.replace(__version__, "<version>")
    names = {
        ("hook.drainGraceSeconds", "drain-grace-seconds", "--drain-grace"): str(hook.drain_grace_seconds),
        ("hook.timeoutSeconds", "timeout-seconds", "--timeout"): str(hook.timeout_seconds),
        ("hook.maxParallel", "max-parallel", "--max-parallel"): str(hook.max_parallel),
        ("hook.waitReady", "wait-ready", "--wait-ready"): str(hook.wait_ready).lower(),
        ("hook.runningJobs", "running-jobs", "--running-jobs", "raygitops.dev/running-jobs"): settings.running_jobs,
        ("hook.runningJobsWaitSeconds", "running-jobs-wait-seconds", "--running-jobs-wait-seconds",
         "raygitops.dev/running-jobs-wait-seconds"): "unset" if settings.running_jobs_wait_seconds is None else "?",
        ("hook.preflight", "preflight", "--preflight", "raygitops.dev/preflight"): str(settings.preflight).lower(),
        ("hook.preflightUnknown", "preflight-unknown", "--preflight-unknown", "raygitops.dev/preflight-unknown"):
            settings.preflight_unknown,
        ("hook.jobNameWithPlanHash", "--flux"): str(settings.hook_name_suffix).lower(),
        ("hook.image", "hook-image", "--hook-image", "RAYGITOPS_HOOK_IMAGE"): image,
        ("keepUpgradeStrategy", "keep-upgrade-strategy", "--keep-upgrade-strategy"):
            str(settings.keep_upgrade_strategy).lower(),
        ("kuberayVersion", "kuberay-version", "--kuberay-version"): newest,
        ("namespace",): settings_module.default_namespace(settings, env={}),
        ("values",): str(settings.values_files), ("exclude",): str(settings.exclude),
        ("preview.mask", "preview.unmask"): str(settings.mask_names),
        ("hash.ignore",): "[" + ", ".join(settings.hash_ignore) + "]",
        ("--lease-seconds",): str(presync["lease_seconds"]),
        ("--log-format",): presync["fmt"],
        ("raygitops.dev/max-unavailable",): DEFAULT_MAX_UNAVAILABLE,
        ("rayStartParams.dashboard-port",): str(jobs.DASHBOARD_PORT),
        ("RAYGITOPS_TEMPLATE_SECONDS",): str(DEFAULT_TEMPLATE_SECONDS),
        ("RAYGITOPS_TEMPLATE_MEMORY_MB",): str(DEFAULT_TEMPLATE_MEMORY_MB),
        ("RAYGITOPS_TEST_PAUSE_SECONDS",): str(DEFAULT_PAUSE_SECONDS),
    }
    assert list(settings.hash_ignore) == list(DEFAULT_IGNORED_KEYS)
    return {name: value for spellings, value in names.items() for name in spellings}


# The settings every reader needs: each must be stated somewhere, so the check cannot go empty.
MUST_BE_STATED = {"hook.timeoutSeconds", "hook.drainGraceSeconds", "hook.maxParallel", "hook.waitReady",
                  "hook.runningJobs", "hook.runningJobsWaitSeconds", "hook.preflight", "hook.preflightUnknown",
                  "kuberayVersion", "--lease-seconds",
                  "raygitops.dev/max-unavailable", "RAYGITOPS_TEMPLATE_SECONDS", "RAYGITOPS_TEMPLATE_MEMORY_MB"}
# Defaults the docs state of other tools, next to a name raygitops uses too.
NOT_OURS = {("docs/helm.md", "--timeout", "5m")}  # Helm's own --timeout

VALUE = r"`([^`]+)`|\"([^\"]+)\"|(\d+(?:\.\d+)?(?:%|ms|s|m|h)?)(?!\w)"
VERSION = r"\d+\.\d+"


@dataclass(frozen=True)
class Stated:
    doc: str
    name: str
    value: str
    where: str  # the text it was read from

    def __str__(self) -> str:
        return f"{self.doc}: {self.name} default {self.value!r} in: {self.where[:160]}"


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def default_tables(doc: str, text: str) -> tuple[list[Stated], list[str]]:
    """The rows of every table with a `default` column: (stated, rows with a value for no known name)."""
    known = code_defaults()
    stated, unknown = [], []
    for block in re.split(r"\n\s*\n", text):
        rows = [line for line in block.splitlines() if line.lstrip().startswith("|")]
        if len(rows) < 3:
            continue
        header = [c.lower() for c in cells(rows[0])]
        if "default" not in header:
            continue
        column = header.index("default")
        for row in rows[2:]:
            row_cells = cells(row)
            names = [n for n in re.findall(r"`([^`]+)`", row_cells[0]) if n in known]
            cell = row_cells[column]
            if not names:
                if re.search(r"`|\d", cell):
                    unknown.append(f"{doc}: {row.strip()[:160]}")
                continue
            stated += [Stated(doc, name, cell, row.strip()) for name in names]
    return stated, unknown


def units(text: str) -> list[str]:
    """Sentences of the prose (whitespace joined), each table row, each line of a code block."""
    found, prose = [], []
    for part in re.split(r"(```.*?```)", text, flags=re.S):
        if part.startswith("```"):
            found += part.splitlines()
            continue
        for line in part.splitlines():
            if line.lstrip().startswith("|"):
                found.append(line)
            else:
                prose.append(line)
        prose.append("")
    for paragraph in "\n".join(prose).split("\n\n"):
        found += re.split(r"(?<=[.;])\s", " ".join(paragraph.split()))
    return found


def stated_in_text(doc: str, text: str) -> list[Stated]:
    """"`name` ... default VALUE" (the nearest name before it in its sentence, row or code
    line; a YAML key in code), and "`wait` (default)" of the running-jobs policies."""
    known = code_defaults()
    stated = []
    for unit in units(text):
        for m in re.finditer(rf"\bdefault\b:?,?\s+(?:{VALUE})", unit):
            value = next(g for g in m.groups() if g is not None)
            before = unit[:m.start()]
            names = re.findall(r"`([^`]+)`", before) or re.findall(r"^\s*([\w./-]+):", before)
            if names and names[-1] in known and (doc, names[-1], value) not in NOT_OURS:
                stated.append(Stated(doc, names[-1], value, unit.strip()))
        for m in re.finditer(r"`(wait|fail|proceed)` \(default", unit):
            stated.append(Stated(doc, "hook.runningJobs", m.group(1), unit.strip()))
    return stated


def kuberay_statements(doc: str, text: str) -> list[Stated]:
    """The KubeRay version a doc says an unset kuberayVersion means, or calls the newest known."""
    flat = " ".join(text.split())
    patterns = (rf"\bunset[:,]?\s*(?:the newest[^.;|()]{{0,30}}?,\s*)?({VERSION})\b",
                rf"KubeRay ({VERSION}) CRD, the newest raygitops knows",
                rf"the newest (?:KubeRay )?raygitops knows,? (?:KubeRay )?({VERSION})\b")
    return [Stated(doc, "kuberayVersion", m.group(1), flat[max(0, m.start() - 60):m.end() + 20])
            for pattern in patterns for m in re.finditer(pattern, flat)]


def agrees(stated: Stated, expected: str) -> bool:
    """Whether what a doc states is the code's default: the value itself, or a table cell that
    holds it (every number in a cell of a numeric default must be it)."""
    value = stated.value.strip()
    if value == expected:
        return True
    if expected == "unset":
        return value.startswith("unset")
    tokens = re.findall(r"`([^`]+)`", value)
    bare = re.sub(r"`[^`]*`", " ", value)
    numbers = re.findall(r"(?<![\w.])\d+(?:\.\d+)?%?(?![\w.])", bare)
    if re.fullmatch(r"\d+(?:\.\d+)?%?", expected):
        return expected in tokens + numbers and all(n == expected for n in numbers)
    return expected in tokens + re.findall(r"[\w%.:<>-]+", bare)


def everything_stated() -> tuple[list[Stated], list[str]]:
    stated, unknown = [], []
    for path in DOCS:
        doc, text = path.relative_to(REPO).as_posix(), path.read_text()
        in_tables, unknown_rows = default_tables(doc, text)
        stated += in_tables + stated_in_text(doc, text) + kuberay_statements(doc, text)
        unknown += unknown_rows
    return stated, unknown


def test_every_stated_default_is_the_codes() -> None:
    known = code_defaults()
    stated, unknown = everything_stated()
    wrong = [f"{s} (code: {known[s.name]!r})" for s in stated if not agrees(s, known[s.name])]
    assert wrong == [], "\n".join(wrong)
    assert unknown == [], "defaults this test does not know (add them to code_defaults):\n" + "\n".join(unknown)
    assert MUST_BE_STATED <= {s.name for s in stated}, MUST_BE_STATED - {s.name for s in stated}


def test_the_help_states_the_same_defaults() -> None:
    """`raygitops --help` lists the environment with its defaults (cli.main.ENVIRONMENT)."""
    from raygitops.cli.main import ENVIRONMENT

    known = code_defaults()
    for name, meaning in ENVIRONMENT.items():
        for m in re.finditer(r"\(default (\S+?)\)", meaning):
            assert m.group(1) == known[name], (name, meaning)


def test_a_wrong_default_is_found() -> None:
    """The readers see what issue 48 found: the README's "unset: the newest known, 1.6", a
    timeout of 600 in a table, a lease in the text, a policy marked default."""
    known = code_defaults()
    table = ("| key | default | meaning |\n|---|---|---|\n"
             "| `kuberayVersion` | unset | what the hash covers (unset: the newest known, 1.6) |\n"
             "| `hook.timeoutSeconds` | `600` | the hook gives up after this |\n")
    prose = "The lock's lease (`--lease-seconds`, default 30 s) is renewed. `fail` (default) stops at once.\n"
    stated = (default_tables("x.md", table)[0] + stated_in_text("x.md", table + "\n" + prose)
              + kuberay_statements("x.md", table))
    wrong = {(s.name, s.value) for s in stated if not agrees(s, known[s.name])}
    assert {("kuberayVersion", "1.6"), ("hook.timeoutSeconds", "`600`"), ("--lease-seconds", "30"),
            ("hook.runningJobs", "fail")} <= wrong, wrong
    assert default_tables("x.md", table.replace("`hook.timeoutSeconds`", "`hook.newSetting`"))[1]
