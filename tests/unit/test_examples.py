"""Every example under examples/ works the way its README says.

plain (directory), jinja (values per environment, switched by flag or Argo CD parameter),
kustomize (`kubectl kustomize overlay | raygitops render -`), helm (post-renderer: this chart's
references substituted here and the stream piped as Helm 3 pipes it; the real Helm 4 runs in
tests/e2e/test_helm.py), flux (rendered output up to date, and
the two Flux Kustomizations split it into hook objects and the rest, emulated with kustomize).
The CMP contract for the app directories is in test_ship_cmp.py.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ship_support  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
HOOK_LABEL = "app.kubernetes.io/component"
HOOK_KINDS = ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Job"]
MINE = ["plain", "jinja", "kustomize", "helm", "flux"]


def render(*args: str, stdin: str | None = None, env: dict | None = None, cwd: Path = REPO,
           ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", "render", *args], input=stdin, cwd=cwd,
                          capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def docs_of(res: subprocess.CompletedProcess) -> list[dict]:
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def clusters(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "RayCluster"}


def hashes(rc: dict) -> dict:
    return json.loads(rc["metadata"]["annotations"]["raygitops.dev/template-hashes"])


def hook_docs(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d["metadata"].get("labels", {}).get(HOOK_LABEL) == "presync-hook"]


@pytest.fixture(scope="module")
def kubectl() -> str:
    found = ship_support.kubectl_binary()
    if not found:
        pytest.skip("no kubectl (tests/e2e/build.sh builds one)")
    return found


@pytest.mark.parametrize("name", MINE)
def test_every_example_has_a_readme(name: str) -> None:
    readme = EXAMPLES / name / "README.md"
    assert readme.is_file() and len(readme.read_text()) > 200


# ----------------------------------------------------------------------------- plain


def test_plain(tmp_path: Path) -> None:
    docs = docs_of(render("examples/plain"))
    rc = clusters(docs)["demo"]
    assert [d["kind"] for d in hook_docs(docs)] == HOOK_KINDS
    assert {d["metadata"].get("namespace") for d in hook_docs(docs) if "Cluster" not in d["kind"]} == {"ray"}
    before = hashes(rc)
    # scaling: same hashes; an env var: the worker group's hash only
    app = tmp_path / "plain"
    shutil.copytree(EXAMPLES / "plain", app)
    source = (app / "raycluster.yaml").read_text()
    (app / "raycluster.yaml").write_text(source.replace("replicas: 2", "replicas: 3"))
    assert hashes(clusters(docs_of(render(str(app))))["demo"]) == before
    (app / "raycluster.yaml").write_text(source.replace("value: info", "value: debug"))
    after = hashes(clusters(docs_of(render(str(app))))["demo"])
    assert after["head"] == before["head"] and after["workers"]["small"] != before["workers"]["small"]


# ----------------------------------------------------------------------------- jinja


def _keys(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return {k for key, item in value.items() for k in {f"{prefix}{key}", *_keys(item, f"{prefix}{key}.")}}
    if isinstance(value, list):
        return {k for item in value for k in _keys(item, f"{prefix}[].")}
    return set()


def test_jinja_values_files_set_the_same_keys() -> None:
    """values-prod.yaml is merged over values-dev.yaml: nothing of dev may leak into prod."""
    dev = yaml.safe_load((EXAMPLES / "jinja" / "values-dev.yaml").read_text())
    prod = yaml.safe_load((EXAMPLES / "jinja" / "values-prod.yaml").read_text())
    assert _keys(dev) == _keys(prod)


def test_jinja_dev_by_default() -> None:
    docs = docs_of(render("examples/jinja"))
    rc = clusters(docs)["ray-dev"]
    assert [g["groupName"] for g in rc["spec"]["workerGroupSpecs"]] == ["cpu"]
    assert rc["metadata"]["annotations"]["example.com/git-revision"] == "local"


def test_jinja_prod_by_flag_and_by_argocd_parameter() -> None:
    by_flag = docs_of(render("examples/jinja", "--values", "examples/jinja/values-prod.yaml"))
    params = json.dumps([{"name": "values-files", "array": ["values-prod.yaml"]}])
    by_param = docs_of(render("examples/jinja", env={"ARGOCD_APP_PARAMETERS": params}))
    for docs in (by_flag, by_param):
        rc = clusters(docs)["ray-prod"]
        assert [g["groupName"] for g in rc["spec"]["workerGroupSpecs"]] == ["cpu", "highmem"]
        head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        assert head["image"] == "rayproject/ray:2.41.0-py311"
        assert {"name": "RAY_LOG_LEVEL", "value": "info"} in head["env"]
    assert hashes(clusters(by_flag)["ray-prod"]) == hashes(clusters(by_param)["ray-prod"])


def test_jinja_revision_is_not_hashed() -> None:
    """The README's advice: the revision on the RayCluster's metadata never recreates pods."""
    a = clusters(docs_of(render("examples/jinja", env={"ARGOCD_APP_REVISION": "a" * 40})))["ray-dev"]
    b = clusters(docs_of(render("examples/jinja", env={"ARGOCD_APP_REVISION": "b" * 40})))["ray-dev"]
    assert a["metadata"]["annotations"]["example.com/git-revision"] == "a" * 40
    assert hashes(a) == hashes(b)


# ----------------------------------------------------------------------------- kustomize


def kustomize(kubectl: str, path: Path) -> str:
    res = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_kustomize_overlay_piped_into_render(kubectl: str) -> None:
    base = docs_of(render("-", stdin=kustomize(kubectl, EXAMPLES / "kustomize" / "base")))
    prod = docs_of(render("-", stdin=kustomize(kubectl, EXAMPLES / "kustomize" / "overlays" / "prod")))
    rc = clusters(prod)["prod-demo"]
    assert rc["metadata"]["namespace"] == "ray-prod"
    assert rc["metadata"]["labels"] == {"environment": "prod"}
    workers = rc["spec"]["workerGroupSpecs"]
    assert len(workers) == 1 and workers[0]["replicas"] == 4 and workers[0]["template"]["spec"]["containers"]
    assert {d["metadata"].get("namespace") for d in hook_docs(prod) if "Cluster" not in d["kind"]} == {"ray-prod"}
    plan = json.loads(next(d for d in prod if d["kind"] == "ConfigMap")["data"]["plan.json"])
    assert [c["name"] for c in plan["clusters"]] == ["prod-demo"]
    # the image patch changes both groups' hashes (a recreate); name, labels, scale would not
    assert hashes(rc)["head"] != hashes(clusters(base)["demo"])["head"]
    assert hashes(rc)["workers"]["small"] != hashes(clusters(base)["demo"])["workers"]["small"]


def test_kustomize_build_failure_is_not_an_empty_render() -> None:
    """`set -o pipefail` aside: an empty stream on stdin is an error, never an empty render."""
    res = render("-", stdin="")
    assert res.returncode != 0 and res.stdout == ""


# ----------------------------------------------------------------------------- helm


CHART = EXAMPLES / "helm" / "chart"


def emulate_helm_template(release: str, namespace: str) -> str:
    """`helm template RELEASE CHART --namespace NS` for this chart's constructs only."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def lookup(dotted: str) -> Any:
        value: Any = values
        for part in dotted.split("."):
            value = value[part]
        return value

    def substitute(match: re.Match) -> str:
        expr = match.group(1).strip()
        quote = expr.endswith("| quote")
        expr = expr.removesuffix("| quote").strip()
        if expr == ".Release.Name":
            value: Any = release
        elif expr == ".Release.Namespace":
            value = namespace
        elif expr.startswith(".Values."):
            value = lookup(expr[len(".Values."):])
        else:
            raise AssertionError(f"the emulation does not know {{{{ {expr} }}}}: keep the chart simple")
        return json.dumps(str(value)) if quote else str(value)

    out = []
    for template in sorted((CHART / "templates").glob("*.yaml")):
        text = re.sub(r"\{\{-?(.*?)-?\}\}", substitute, template.read_text())
        assert "{{" not in text
        out.append(f"---\n# Source: {chart['name']}/templates/{template.name}\n{text}")
    return "".join(out)


def test_helm3_post_renderer_command() -> None:
    """docs/helm.md's Helm 3 command on the stream Helm 3 pipes (the real Helm 4 and its plugin
    run in tests/e2e/test_helm.py): namespace-less objects stay so (Helm puts them in the
    release namespace), the Job is named after the plan (Helm 3 applies it as a plain object)."""
    docs = docs_of(render("-", "--helm", "--flux", stdin=emulate_helm_template("demo", "ray")))
    rc = clusters(docs)["demo"]
    assert rc["spec"]["rayVersion"] == "2.41.0" and hashes(rc)["workers"]["workers"].startswith("h3.")
    assert all("namespace" not in d["metadata"] for d in docs)
    hooks = hook_docs(docs)
    # no ClusterRole: its binding would have to name the release namespace, which Helm does not tell
    assert [d["kind"] for d in hooks] == [k for k in HOOK_KINDS if not k.startswith("Cluster")]
    assert re.fullmatch(r"raygitops-presync-[0-9a-f]{8,}", hooks[-1]["metadata"]["name"])


def test_helm_post_renderer_error_reaches_helm() -> None:
    res = subprocess.run(["raygitops", "render", "-"], input="---\nkind: [unclosed\n",
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and res.stdout == "" and res.stderr.startswith("raygitops: <stdin>:")


# ----------------------------------------------------------------------------- flux


FLUX = EXAMPLES / "flux"


def flux_objects() -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all((FLUX / "clusters" / "ray-demo.yaml").read_text()) if d}


def test_flux_rendered_is_up_to_date(tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    res = render("examples/flux/app", "--flux", "--output-dir", str(out))
    assert res.returncode == 0, res.stderr
    cmp = filecmp.dircmp(out, FLUX / "rendered")

    def diffs(c: filecmp.dircmp, prefix: str = "") -> list[str]:
        found = [prefix + n for n in c.left_only + c.right_only + c.diff_files + c.funny_files]
        for name, sub in c.subdirs.items():
            found += diffs(sub, f"{prefix}{name}/")
        return found

    assert not diffs(cmp), ("examples/flux/rendered is stale: run "
                            "`raygitops render examples/flux/app --flux --output-dir examples/flux/rendered`")


def emulate_kustomize_controller(kubectl: str, ks: dict, workdir: Path) -> list[dict]:
    """kustomize-controller for a path without kustomization.yaml: generate one listing every
    manifest under the path, add spec.patches, build."""
    src = REPO / ks["spec"]["path"]
    dest = workdir / ks["metadata"]["name"]
    shutil.copytree(src, dest)
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.yaml"))
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                     "resources": files, "patches": ks["spec"].get("patches", [])}
    (dest / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return [d for d in yaml.safe_load_all(kustomize(kubectl, dest)) if d]


def test_flux_kustomizations_split_hook_and_app(kubectl: str, tmp_path: Path) -> None:
    objs = flux_objects()
    presync, app = objs["ray-demo-presync"], objs["ray-demo"]
    assert objs["ray-apps"]["kind"] == "GitRepository"
    for ks in (presync, app):
        assert ks["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1" and ks["kind"] == "Kustomization"
        assert ks["spec"]["path"] == "./examples/flux/rendered" and ks["spec"]["prune"] is True
        assert ks["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "ray-apps"}
    assert presync["spec"]["wait"] is True
    # a failed hook is retried within a minute, not after the 10 m interval (issue #21)
    assert presync["spec"]["retryInterval"] == app["spec"]["retryInterval"] == "1m"
    assert app["spec"]["dependsOn"] == [{"name": "ray-demo-presync"}]
    # Flux must wait longer than the Job may run (hook timeout + the Job's deadline margin)
    from raygitops.render.hookresources import DEADLINE_MARGIN_SECONDS

    timeout = presync["spec"]["timeout"]
    assert timeout.endswith("m") and int(timeout[:-1]) * 60 > 900 + DEADLINE_MARGIN_SECONDS

    hook = emulate_kustomize_controller(kubectl, presync, tmp_path)
    rest = emulate_kustomize_controller(kubectl, app, tmp_path)
    assert sorted(d["kind"] for d in hook) == sorted(HOOK_KINDS)
    job = next(d for d in hook if d["kind"] == "Job")
    assert re.fullmatch(r"raygitops-presync-[0-9a-f]{8,}", job["metadata"]["name"])
    assert [d["kind"] for d in rest] == ["RayCluster"]
    rendered = [yaml.safe_load(p.read_text()) for p in sorted((FLUX / "rendered").rglob("*.yaml"))]
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, hook + rest)) == sorted(map(key, rendered))


def test_flux_job_name_follows_the_plan(tmp_path: Path) -> None:
    app = tmp_path / "app"
    shutil.copytree(FLUX / "app", app)
    first = docs_of(render(str(app), "--flux"))
    (app / "raycluster.yaml").write_text((app / "raycluster.yaml").read_text().replace("value: info", "value: warn"))
    second = docs_of(render(str(app), "--flux"))
    job = lambda docs: next(d for d in docs if d["kind"] == "Job")["metadata"]["name"]  # noqa: E731
    assert job(first) != job(second)
    # the app config alone (without --flux) names it the same way
    assert job(docs_of(render(str(app)))) == job(second)
