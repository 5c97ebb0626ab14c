"""Render refuses what the API server (or KubeRay) would refuse, each value through each source.

Every invalid value: one ``raygitops: <where>: ...`` line naming its source (file:line, flag,
Argo CD parameter, environment variable), exit 1, empty stdout, nothing written under --out.
Valid edge cases still render.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from raygitops.model import k8snames
from raygitops.cli.main import main
from test_render import RECREATE, cluster

CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{meta}"
LONG63 = "a" * 63


def configmap(name: str = "cm", meta: str = "") -> str:
    return CONFIGMAP.format(name=name, meta=meta)


def invoke(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(main, args, env={"ARGOCD_APP_PARAMETERS": None, "ARGOCD_APP_NAMESPACE": None,
                                               **(env or {})})


def assert_refused(result, where: str, message: str, out: Path | None = None) -> None:
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"raygitops: {where}: "), lines[0]
    assert re.search(message, lines[0]), lines[0]
    assert "Traceback" not in result.stderr
    if out is not None:
        assert not out.exists() or not any(out.iterdir()), sorted(out.rglob("*"))


def app(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "app"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# ----------------------------------------------------------------------------- objects (file:line)

# (document text, the line the error names: of the field at fault, message)
INVALID_OBJECTS = [
    pytest.param(configmap("Bad_Name"), 4, r"ConfigMap metadata.name 'Bad_Name' is not a DNS-1123 subdomain",
                 id="name-upper-underscore"),
    pytest.param(configmap("a" * 254), 4, "254 characters long: a DNS-1123 subdomain has at most 253",
                 id="name-too-long"),
    pytest.param(configmap("a..b"), 4, "not a DNS-1123 subdomain", id="name-empty-part"),
    pytest.param(configmap("'-a'"), 4, "not a DNS-1123 subdomain", id="name-leading-dash"),
    pytest.param(configmap("x", "  namespace: Not_A_Valid_NS\n"), 5,
                 "metadata.namespace 'Not_A_Valid_NS' is not a DNS-1123 label", id="namespace-invalid"),
    pytest.param(configmap("x", "  namespace: a.b\n"), 5, "is not a DNS-1123 label", id="namespace-dotted"),
    pytest.param(configmap("x", f"  namespace: {'n' * 64}\n"), 5, "64 characters long: a DNS-1123 label",
                 id="namespace-64"),
    pytest.param(configmap("x", '  namespace: "evil\\nkind: Secret"\n'), 5,
                 r"'evil\\\\x0akind: Secret' is not a DNS-1123 label", id="namespace-newline"),
    pytest.param("apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n", 3, "Namespace .* DNS-1123 label",
                 id="namespace-object-dotted"),
    pytest.param("apiVersion: v1\nkind: Service\nmetadata: {name: 1svc}\n", 3, "Service .* DNS-1035 label",
                 id="service-leading-digit"),
    pytest.param(cluster("c" * 54), 4, "RayCluster .* 54 characters long: a DNS-1035 label has at most 53",
                 id="raycluster-54"),
    pytest.param(cluster("1c"), 4, "RayCluster metadata.name '1c' is not a DNS-1035 label", id="raycluster-digit"),
    pytest.param(cluster("c.d"), 4, "is not a DNS-1035 label", id="raycluster-dotted"),
    pytest.param("apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: " + "j" * 48 + "}\n", 3,
                 "RayJob .* at most 47", id="rayjob-48"),
    pytest.param("apiVersion: batch/v1\nkind: Job\nmetadata: {name: " + "j" * 64 + "}\n", 3,
                 "Job .* at most 63", id="job-64"),
    pytest.param("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: 'a/b'}\n", 3,
                 "may not contain '/'", id="role-slash"),
    pytest.param(configmap("x", "  labels: {'a/b/c': x}\n"), 5, "labels key 'a/b/c' has more than one '/'",
                 id="label-key-two-slashes"),
    pytest.param(configmap("x", "  labels: {'Example.com/x': y}\n"), 5, "has a prefix that is not a DNS-1123",
                 id="label-key-upper-prefix"),
    pytest.param(configmap("x", f"  labels: {{'{'k' * 64}': y}}\n"), 5, "qualified name has at most 63",
                 id="label-key-64"),
    pytest.param(configmap("x", "  labels: {app: 'a b'}\n"), 5, r"labels\['app'\] value 'a b' is not a label value",
                 id="label-value-space"),
    pytest.param(configmap("x", f"  labels: {{app: {'v' * 64}}}\n"), 5, "label value has at most 63",
                 id="label-value-64"),
    pytest.param(configmap("x", "  labels: {app: -x}\n"), 5, "not a label value", id="label-value-leading-dash"),
    pytest.param(configmap("x", "  labels: {replicas: 3}\n"), 5, r"is int 3, not a string \(quote it\)",
                 id="label-value-int"),
    pytest.param(configmap("x", "  annotations: {enabled: true}\n"), 5, r"is bool True, not a string",
                 id="annotation-value-bool"),
    pytest.param(configmap("x", "  annotations: {'bad key': v}\n"), 5, "annotations key 'bad key' is not a qualified",
                 id="annotation-key-space"),
    pytest.param(configmap("x", f"  annotations: {{big: {'x' * (256 * 1024)}}}\n"), 5,
                 "annotations total 262147 bytes: the API server allows at most 262144", id="annotations-256k"),
    pytest.param(cluster("c").replace("    template:\n      spec:\n        containers: [{name: head",
                                      "    template:\n      metadata: {labels: {'bad label': x}}\n      spec:\n"
                                      "        containers: [{name: head", 1), 8,
                 r"spec.headGroupSpec.template.metadata.labels key 'bad label'", id="raycluster-pod-label"),
    pytest.param(cluster("c", "  ownerReferences: true\n"), 5,
                 "RayCluster metadata.ownerReferences is bool True, not a list", id="raycluster-owner-refs-bool"),
    pytest.param(configmap("x", "  ownerReferences: [owner]\n"), 5,
                 r"metadata.ownerReferences\[0\] is str 'owner', not a mapping", id="owner-ref-not-mapping"),
    pytest.param("apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: Cm-}\n", 3,
                 "metadata.generateName 'Cm-' is not a DNS-1123 subdomain", id="generate-name-upper"),
]


@pytest.mark.parametrize("text,line,message", INVALID_OBJECTS)
def test_invalid_object_is_refused_at_its_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    root = app(tmp_path, {"a.yaml": configmap("first") + "---\n" + text})
    out = tmp_path / "out"
    first_lines = configmap("first").count("\n") + 1
    assert_refused(invoke(["render", str(root), "--output-dir", str(out)]), f"{root}/a.yaml:{first_lines + line}",
                   message, out)


VALID_OBJECTS = [
    pytest.param(configmap(LONG63), id="name-63"),
    pytest.param(configmap(".".join(["a" * 63] * 3) + "." + "b" * 61), id="subdomain-253"),
    pytest.param(configmap("my.dotted.name"), id="dotted-subdomain"),
    pytest.param(configmap("0cm"), id="subdomain-leading-digit"),
    pytest.param(configmap("x", f"  namespace: {'n' * 63}\n"), id="namespace-63"),
    pytest.param(cluster("c" * 53), id="raycluster-53"),
    pytest.param(configmap("x", "  labels: {app.kubernetes.io/name: a-b_c.d, empty: '', 'x.io/Key_1': V}\n"),
                 id="label-values-dash-underscore-dot"),
    pytest.param(configmap("x", "  annotations: {Example.COM/UPPER: anything goes here}\n"),
                 id="annotation-key-upper-prefix"),
    pytest.param("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: 'system:x'}\n",
                 id="rbac-colon"),
    pytest.param("apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: cm-}\n", id="generate-name-dash"),
]


@pytest.mark.parametrize("text", VALID_OBJECTS)
def test_valid_edge_cases_render(tmp_path: Path, text: str) -> None:
    root = app(tmp_path, {"a.yaml": text})
    result = invoke(["render", str(root)])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""


def test_hook_objects_are_checked_too(tmp_path: Path) -> None:
    root = app(tmp_path, {"c.yaml": cluster("c", RECREATE)})
    result = invoke(["render", str(root), "--output", "json"])
    assert result.exit_code == 0, result.stderr
    items = json.loads(result.stdout)["items"]
    assert [o["kind"] for o in items][-1] == "Job"
    for obj in items:
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        assert k8snames.object_problem(group, obj["kind"], obj) is None


@pytest.mark.parametrize("image,valid", [
    ("rayproject/ray:2.41.0", True),
    ("localhost:5000/raygitops", True),
    ("registry.example.com:443/team/raygitops:0.1.0@sha256:" + "a" * 64, True),
    ("[::1]:5000/x", True),
    ("ghcr.io/Org/x", False),
    ("x:", False),
    ("x y", False),
    ("", False),
    ("x:" + "t" * 129, False),
    ("a/" * 128 + "b", False),
])
def test_image_reference_grammar(image: str, valid: bool) -> None:
    assert (k8snames.image_reference(image) is None) is valid


# ----------------------------------------------------------------------------- settings, per source

# (raygitops.yaml key path, Argo CD parameter, flag): the three ways to set one setting
SETTING_SOURCES = {
    "namespace": (("namespace",), "namespace", "--namespace"),
    "hook_image": (("hook", "image"), "hook-image", "--hook-image"),
    "drain_grace_seconds": (("hook", "drainGraceSeconds"), "drain-grace-seconds", "--drain-grace"),
    "timeout_seconds": (("hook", "timeoutSeconds"), "timeout-seconds", "--timeout"),
    "max_parallel": (("hook", "maxParallel"), "max-parallel", "--max-parallel"),
    "wait_ready": (("hook", "waitReady"), "wait-ready", None),  # the flag is --wait-ready/--no-wait-ready
}
INVALID_SETTINGS = [  # (setting, value as a file would hold it, message)
    ("namespace", "evil\nkind: Secret", r"namespace 'evil\\\\x0akind: Secret' is not a DNS-1123 label"),
    ("namespace", "Not_A_Valid_NS", "namespace 'Not_A_Valid_NS' is not a DNS-1123 label"),
    ("namespace", "bad ns", "namespace 'bad ns' is not a DNS-1123 label"),
    ("namespace", "n" * 64, "64 characters long: a DNS-1123 label has at most 63"),
    ("hook_image", "x y", "image 'x y'"),
    ("hook_image", "ghcr.io/Org/x", "image 'ghcr.io/Org/x'"),
    ("hook_image", "x:", "image 'x:'"),
    ("drain_grace_seconds", -1, "expected an integer from 0 to 3600"),
    ("drain_grace_seconds", 3601, "expected an integer from 0 to 3600, got 3601"),
    ("drain_grace_seconds", "1.5", "expected an integer from 0 to 3600"),
    ("timeout_seconds", 0, "expected an integer from 1 to 86400, got 0"),
    ("timeout_seconds", 86401, "expected an integer from 1 to 86400, got 86401"),
    ("max_parallel", 0, "expected an integer from 1 to 100, got 0"),
    ("max_parallel", 101, "expected an integer from 1 to 100, got 101"),
    ("max_parallel", "four", "expected an integer from 1 to 100, got 'four'"),
    ("wait_ready", "maybe", "expected true or false, got 'maybe'"),
]
VALID_SETTINGS = [  # edge values every source accepts
    ("namespace", "n" * 63), ("namespace", "a-b-0"),
    ("hook_image", "registry.example.com:443/team/raygitops:0.1.0@sha256:" + "a" * 64),
    ("hook_image", "localhost:5000/raygitops"),
    ("drain_grace_seconds", 0), ("drain_grace_seconds", 3600), ("timeout_seconds", 1), ("timeout_seconds", 86400),
    ("max_parallel", 1), ("max_parallel", 100), ("wait_ready", False),
]


def _nested(path: tuple[str, ...], value) -> dict:
    return {path[0]: value} if len(path) == 1 else {path[0]: _nested(path[1:], value)}


def _through(source: str, setting: str, value, tmp_path: Path, out: Path) -> tuple[object, str]:
    """Render an app with ``setting`` = ``value`` given by ``source``; (result, where it names)."""
    key_path, parameter, flag = SETTING_SOURCES[setting]
    files = {"c.yaml": cluster("c", RECREATE)}  # opted in: the hook objects are rendered
    args, env = ["render", "--output-dir", str(out)], {}
    if source == "file":
        files["raygitops.yaml"] = "# settings\n" + yaml.safe_dump(_nested(key_path, value))
        where = f"{tmp_path / 'app' / 'raygitops.yaml'}:{1 + len(key_path)}"
    elif source == "argocd":
        env["ARGOCD_APP_PARAMETERS"] = json.dumps([{"name": parameter, "string": str(value)}])
        where = f"ARGOCD_APP_PARAMETERS: parameter '{parameter}'"
    else:
        args += [flag, str(value)]
        where = flag
    root = app(tmp_path, files)
    return invoke([*args, str(root)], env), where


def _per_source(cases: list[tuple]) -> list:
    """Each case through each source that can carry it (a boolean flag is a plain switch)."""
    return [pytest.param(source, *case, id=f"{source}-{case[0]}-{str(case[1])[:20]}")
            for case in cases for source in ("file", "argocd", "flag")
            if source != "flag" or SETTING_SOURCES[case[0]][2] is not None]


@pytest.mark.parametrize("source,setting,value,message", _per_source(INVALID_SETTINGS))
def test_invalid_setting_is_refused_naming_its_source(tmp_path: Path, source: str, setting: str, value,
                                                      message: str) -> None:
    out = tmp_path / "out"
    result, where = _through(source, setting, value, tmp_path, out)
    assert_refused(result, where, message, out)


@pytest.mark.parametrize("source,setting,value", _per_source(VALID_SETTINGS))
def test_valid_setting_edges_render_from_every_source(tmp_path: Path, source: str, setting: str, value) -> None:
    out = tmp_path / "out"
    result, _ = _through(source, setting, value, tmp_path, out)
    assert result.exit_code == 0, result.stderr
    job = next(doc for p in out.rglob("*.yaml") for doc in [yaml.safe_load(p.read_text())] if doc["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    shown = {"namespace": job["metadata"]["namespace"], "hook_image": container["image"],
             "drain_grace_seconds": _arg(container, "--drain-grace"), "timeout_seconds": _arg(container, "--timeout"),
             "max_parallel": _arg(container, "--max-parallel"),
             "wait_ready": "--wait-ready" in container["args"]}[setting]
    assert shown == (value if isinstance(value, (str, bool)) else str(value))


def _arg(container: dict, flag: str) -> str:
    return container["args"][container["args"].index(flag) + 1]


def test_invalid_argocd_destination_namespace_is_named_as_such(tmp_path: Path) -> None:
    out = tmp_path / "out"
    root = app(tmp_path, {"c.yaml": cluster("c", RECREATE)})
    result = invoke(["render", "--output-dir", str(out), str(root)], {"ARGOCD_APP_NAMESPACE": "Bad_NS"})
    assert_refused(result, "ARGOCD_APP_NAMESPACE", "namespace 'Bad_NS' is not a DNS-1123 label", out)
    # a namespace set in raygitops.yaml wins over the destination, which is then not used
    (root / "raygitops.yaml").write_text("namespace: ray\n")
    assert invoke(["render", str(root)], {"ARGOCD_APP_NAMESPACE": "Bad_NS"}).exit_code == 0
