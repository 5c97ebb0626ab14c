"""README.md and docs/ stay true: links resolve, the documented parameters and commands exist."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# every Markdown file of the repository (none exempted)
DOCS = sorted(p for p in REPO.rglob("*.md") if "node_modules" not in p.parts
              and not any(part.startswith(".") for part in p.relative_to(REPO).parts))  # .git, tool caches


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(doc: Path) -> None:
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", doc.read_text(), flags=re.S))  # code is not links
    for target in re.findall(r"\]\(([^)#\s]+)\)", prose):
        if "://" in target:
            continue
        path = (doc.parent / target).resolve()
        assert path.exists(), f"{doc.relative_to(REPO)}: broken link {target}"


def test_parameter_table_matches_plugin() -> None:
    """docs/argocd.md's parameter table names exactly the parameters plugin.yaml announces."""
    plugin = yaml.safe_load((REPO / "argocd" / "plugin.yaml").read_text())
    announced = {p["name"] for p in plugin["spec"]["parameters"]["static"]}
    section = REPO.joinpath("docs", "argocd.md").read_text().split("\n## Parameters\n")[1]
    table = next(block for block in section.split("\n\n") if block.startswith("| parameter |"))
    documented = set(re.findall(r"`([a-z-]+)`", "\n".join(l.split("|")[1] for l in table.splitlines()[2:])))
    assert documented == announced


def test_readme_cli_commands_exist() -> None:
    res = subprocess.run([sys.executable, "-m", "raygitops", "--help"], capture_output=True, text=True, check=True)
    readme = (REPO / "README.md").read_text()
    lines, fenced = [], False
    for line in readme.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            lines.append(line)
    blocks = "\n".join(lines)
    commands = set(re.findall(r"^(?:\$ )?raygitops (\w+) ", blocks, re.M))
    assert {"render", "hash", "diff", "presync"} <= commands
    for command in commands:
        assert f"  {command} " in res.stdout, command


def test_two_commands_section_is_intact() -> None:
    """The first installs from the locks (hashes checked) with pip's output on stderr and
    renders an example; the second is the whole suite, what CI runs (.ci/run).
    tests/unit/test_ship_readme.py runs the first in a fresh clone."""
    sys.path.insert(0, str(REPO / "tests" / "unit"))
    import ship_support

    install, suite = ship_support.readme_two_commands()
    steps = [step.strip() for step in install.split("&&")]
    assert steps[0] == "python3 -m venv .venv" and steps[1] == ". .venv/bin/activate", steps
    pips = [step for step in steps if step.startswith("pip ")]
    assert pips == ["pip install -q --require-hashes --no-deps -r requirements/runtime.txt >&2",
                    "pip install -q --no-deps -e . >&2"], pips
    assert steps[-1] == "raygitops render examples/plain" and len(steps) == 5, steps
    assert suite == "bash tests/run.sh" and suite in (REPO / ".ci" / "run").read_text()
    assert (REPO / "requirements" / "runtime.txt").is_file()
    assert (REPO / "tests" / "run.sh").is_file() and (REPO / "examples" / "plain").is_dir()


def test_readme_is_a_newcomers_page() -> None:
    """Issue 48: under 200 lines; the reference lives in docs/, each page linked from it."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    for page in ("configuration", "reference", "argocd", "presync", "preview", "faq", "testing"):
        assert f"](docs/{page}.md)" in readme, page


def test_replace_groups_example_renders_as_it_says(tmp_path: Path) -> None:
    """docs/configuration.md's two-group ReplaceGroups example is a valid app: render plans a
    ReplaceGroups cluster with max-unavailable 1 and both worker groups."""
    section = (REPO / "docs" / "configuration.md").read_text().split("## Replacing only the worker groups that changed")[1]
    example = re.search(r"```yaml\n(.*?)```", section, flags=re.S).group(1)
    (tmp_path / "demo.yaml").write_text(example)
    (tmp_path / "raygitops.yaml").write_text("namespace: ray\n")
    out = subprocess.run([sys.executable, "-m", "raygitops", "render", str(tmp_path), "--output", "json"],
                         capture_output=True, text=True, check=True).stdout
    items = json.loads(out)
    items = items["items"] if isinstance(items, dict) else items
    plan = json.loads(next(o for o in items if o["kind"] == "ConfigMap" and "plan.json" in o.get("data", {}))
                      ["data"]["plan.json"])
    (cluster,) = plan["clusters"]
    assert cluster["strategy"] == "ReplaceGroups" and cluster["maxUnavailable"] == "1"
    assert sorted(cluster["hashes"]["workers"]) == ["cpu", "gpu"]


FAIL_ON_CLASSES = re.compile(r"--fail-on ([a-z][a-z,-]*[a-z])")


def exit_code_meanings(text: str) -> list[str]:
    """The ``--fail-on`` classes every sentence (or table row) that names ``--exit-code`` binds it to."""
    chunks = []
    for paragraph in text.split("\n\n"):
        if paragraph.lstrip().startswith("|"):
            chunks += paragraph.splitlines()
        else:
            chunks += re.split(r"(?<=[.;])\s", " ".join(paragraph.split()))
    return [m for chunk in chunks if "--exit-code" in chunk for m in FAIL_ON_CLASSES.findall(chunk)]


def test_exit_code_means_one_thing_everywhere() -> None:
    """`--exit-code` is `--fail-on recreate,replace` in the code, its --help and every doc
    that says what it is."""
    from raygitops.preview.command import fail_classes

    assert fail_classes(None, True) == fail_classes("recreate,replace", False)
    help_text = subprocess.run([sys.executable, "-m", "raygitops", "diff", "--help"], capture_output=True,
                               text=True, check=True).stdout
    said = {"diff --help": exit_code_meanings("--exit-code" + help_text.split("--exit-code", 1)[1].split("--fail-on CLASSES")[0])}
    for doc in DOCS:
        found = exit_code_meanings(doc.read_text())
        if found:
            said[doc.relative_to(REPO).as_posix()] = found
    assert {"diff --help", "examples/pr-preview/README.md", "docs/preview.md"} <= set(said), said
    assert {place: meanings for place, meanings in said.items() if set(meanings) != {"recreate,replace"}} == {}, said


def test_faq_rbac_summary_lists_every_right_of_the_role() -> None:
    """docs/faq.md's "What rights does the hook have?" names every verb on every resource of the
    Role render writes (app/ConfigMap and Secret rules included)."""
    from raygitops.render.hookresources import RULES, _config_rules
    from raygitops.model.plan import Plan

    answer = (REPO / "docs" / "faq.md").read_text().split("**What rights does the hook have?**")[1].split("\n\n")[0]
    answer = " ".join(answer.split()).lower()
    rules = RULES + [{"resources": ["jobs"], "verbs": ["patch"]}] + _config_rules(
        Plan(namespace="ray", config_maps={"c": {}}, secrets={"s": {}}))
    for rule in rules:
        for resource in rule["resources"]:
            for verb in rule["verbs"]:
                assert re.search(rf"\b{verb}\b[^.;]*\b{resource.rstrip('s')}", answer), (verb, resource, answer)


TOOL_VERSIONS = {  # how a doc names a tool's version -> the versions.env pin it must be
    r"Argo CD v(\d+\.\d+\.\d+)": "ARGOCD_VERSION", r"argo-cd/v(\d+\.\d+\.\d+)": "ARGOCD_VERSION",
    r"Helm v(\d+\.\d+\.\d+)": "HELM_VERSION", r"kustomize v(\d+\.\d+\.\d+)": "KUSTOMIZE_VERSION",
    r"kustomize-controller v(\d+\.\d+\.\d+)": "FLUX_KUSTOMIZE_CONTROLLER_VERSION",
}
PLACEHOLDER_HOSTS = ("example.com", "example.invalid", "kubernetes.default.svc", "127.0.0.1", "localhost")


def shipped_texts() -> dict[str, str]:
    """Every Markdown file and every YAML file a user copies (argocd/, examples/, helm-plugin/)."""
    files = [*DOCS, *(p for d in ("argocd", "examples", "helm-plugin") for p in (REPO / d).rglob("*.y*ml"))]
    return {p.relative_to(REPO).as_posix(): p.read_text() for p in files}


def test_versions_named_are_the_ones_the_tests_run() -> None:
    """Issue 37: the install snippet said Argo CD 3.5.1 while the tests run 3.6.1."""
    sys.path.insert(0, str(REPO / "tests" / "unit"))
    import ship_support

    pinned = ship_support.e2e_versions()
    wrong = [(name, m.group(0)) for name, text in shipped_texts().items() for pattern, key in TOOL_VERSIONS.items()
             for m in re.finditer(pattern, text) if f"v{m.group(1)}" != pinned[key]]
    assert wrong == [], wrong


def test_no_url_but_placeholders_and_the_tested_argo_cd_install() -> None:
    """No repository, tag or release that does not exist is promised: a URL in a doc or a
    shipped manifest is a placeholder (example.com, ...) or Argo CD's install.yaml of the tested
    release (served: the module at that version holds manifests/install.yaml)."""
    sys.path.insert(0, str(REPO / "tests" / "unit"))
    import ship_support

    install = ship_support.INSTALL_URL.format(version=ship_support.ARGOCD_VERSION)
    found = {(name, url.rstrip(".,;:")) for name, text in shipped_texts().items()
             for url in re.findall(r"https?://[^\s)`\"'<>]+", text)}
    other = sorted((name, url) for name, url in found if url != install
                   and not any(host in url.split("/")[2] for host in PLACEHOLDER_HOSTS))
    assert other == [], other
    assert any(url == install for _, url in found) and "README.md" in {n for n, u in found if u == install}
    module = ship_support.argocd_module_dir()
    if module is not None:
        assert (module / "manifests" / "install.yaml").is_file()
