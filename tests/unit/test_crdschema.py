"""Render checks RayClusters against the KubeRay CRD schema (raygitops.model.crdschema).

Typos, wrong types and missing required fields fail with ``file:line: path: message`` and an
unknown field names the closest known one; the schema of the target KubeRay is used (1.1 to
1.7 shipped, made by scripts/make_crd_schemas.py; unset: 1.7); what only a newer KubeRay
accepts says which one; open parts stay open. The package data is checked against KubeRay's
CRD files in ../shared and the operator modules in GOMODCACHE (skipped without them).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from raygitops.model import crdschema
from sharedpaths import CORPUS, CORPUS_KUBERAY, raycluster_crd
from test_render_corpus import crd_spec_schema

REPO = Path(__file__).resolve().parents[2]
CLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: demo
spec:
  rayVersion: "2.41.0"
  headGroupSpec:
    rayStartParams: {dashboard-host: 0.0.0.0}
    template:
      spec:
        containers:
          - name: ray-head
            image: rayproject/ray:2.41.0
            resources: {limits: {cpu: 1, memory: 2Gi}}
  workerGroupSpecs:
    - groupName: small
      replicas: 1
      rayStartParams: {}
      template:
        spec:
          containers: [{name: ray-worker, image: rayproject/ray:2.41.0}]
"""


def render(text: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    app = tmp_path / "app"
    app.mkdir(exist_ok=True)
    (app / "cluster.yaml").write_text(text)
    return subprocess.run([sys.executable, "-m", "raygitops", "render", str(app), *args],
                          capture_output=True, text=True, timeout=60)


def refused(text: str, *args: str, tmp_path: Path) -> str:
    res = render(text, *args, tmp_path=tmp_path)
    assert res.returncode == 1 and res.stdout == "", res.stdout
    assert res.stderr.count("\n") == 1, res.stderr
    return res.stderr


@pytest.mark.parametrize("before,after,line,message", [
    ("  workerGroupSpecs:", "  workerGroupSpec:", 15, "spec.workerGroupSpec: unknown field (did you mean workerGroupSpecs?)"),
    ("rayStartParams: {}", "rayStartParam: {}", 18, "spec.workerGroupSpecs[0].rayStartParam: unknown field (did you mean rayStartParams?)"),
    ("containers: [{", "containres: [{", 21, "spec.workerGroupSpecs[0].template.spec.containres: unknown field (did you mean containers?)"),
    ("replicas: 1", "replicas: one", 17, "spec.workerGroupSpecs[0].replicas: expected integer, got string"),
    ("dashboard-host: 0.0.0.0", "num-cpus: 1", 8, "spec.headGroupSpec.rayStartParams.num-cpus: expected string, got integer"),
    ("cpu: 1,", "cpu: [1],", 14, "spec.headGroupSpec.template.spec.containers[0].resources.limits.cpu: expected integer or string, got list"),
    # a missing field: where the mapping that lacks it starts
    ("- name: ray-head\n            image", "- image", 12, "spec.headGroupSpec.template.spec.containers[0].name: required field missing"),
])
def test_a_spec_the_api_server_would_not_keep_is_refused_at_its_line(before: str, after: str, line: int,
                                                                    message: str, tmp_path: Path) -> None:
    assert before in CLUSTER
    res = render(CLUSTER.replace(before, after, 1), tmp_path=tmp_path)
    assert res.returncode == 1 and res.stdout == ""
    # the first line is this one (a typo of containers also leaves containers missing)
    assert res.stderr.splitlines()[0] == f"raygitops: {tmp_path / 'app' / 'cluster.yaml'}:{line}: {message}", res.stderr


def test_every_schema_error_is_listed_each_at_its_line(tmp_path: Path) -> None:
    """Issue 37: `cluster.yaml:1: spec.workerGroupSpecs[0].minReplica: unknown field ... (and
    2 more)` pointed at the document and hid the rest.  Each error is its own line at its own
    place, in document order; a cluster in a List (`-o json`) too."""
    text = (CLUSTER.replace("      replicas: 1\n", "      replicas: 1\n      minReplica: 0\n")
            .replace("containers: [{", "containres: [{").replace("dashboard-host: 0.0.0.0", "num-cpus: 1"))
    res = render(text, tmp_path=tmp_path)
    where = tmp_path / "app" / "cluster.yaml"
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines() == [
        f"raygitops: {where}:8: spec.headGroupSpec.rayStartParams.num-cpus: expected string, got integer",
        f"raygitops: {where}:18: spec.workerGroupSpecs[0].minReplica: unknown field (did you mean minReplicas?)",
        f"raygitops: {where}:22: spec.workerGroupSpecs[0].template.spec.containres: unknown field (did you mean containers?)",
        f"raygitops: {where}:21: spec.workerGroupSpecs[0].template.spec.containers: required field missing",
    ], res.stderr
    import yaml

    as_list = json.dumps({"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(text)]}, indent=2)
    listed = render(as_list, tmp_path=tmp_path)
    assert listed.returncode == 1 and len(listed.stderr.splitlines()) == 4, listed.stderr
    lines = as_list.splitlines()
    for error in listed.stderr.splitlines():
        _, place, path, message = error.split(": ", 3)
        keys = [k.split("[")[0] for k in path.split(".")]
        key = keys[-2] if message == "required field missing" else keys[-1]  # missing: where its mapping is
        line = int(place.rsplit(":", 1)[1])
        assert lines[line - 1].strip().startswith(f'"{key}":'), (error, lines[line - 1])


def test_schema_errors_are_bounded(tmp_path: Path) -> None:
    """Twenty at most, then how many more: a broken generator must not flood the log."""
    import yaml

    cluster = yaml.safe_load(CLUSTER)
    cluster["spec"]["workerGroupSpecs"] = [
        {"groupName": f"g{i}", "replicas": "x", "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}
        for i in range(25)]
    res = render(yaml.safe_dump(cluster), tmp_path=tmp_path)
    lines = res.stderr.splitlines()
    assert res.returncode == 1 and len(lines) == 21, res.stderr
    assert all("expected integer, got string" in line for line in lines[:20])
    assert lines[-1].endswith(": and 5 more schema errors in this RayCluster"), lines[-1]


def test_the_valid_cluster_renders(tmp_path: Path) -> None:
    assert render(CLUSTER, tmp_path=tmp_path).returncode == 0


def test_the_target_version_picks_the_schema(tmp_path: Path) -> None:
    """upgradeStrategy is a 1.6 field: kept for 1.6, refused for 1.5 (render's own rule first)."""
    kept = CLUSTER.replace('  rayVersion: "2.41.0"\n', '  rayVersion: "2.41.0"\n  upgradeStrategy: {type: Recreate}\n')
    assert render(kept, "--keep-upgrade-strategy", "--kuberay-version", "1.6.2", tmp_path=tmp_path).returncode == 0
    assert "1.5.0 does not know this field" in refused(kept, "--keep-upgrade-strategy", "--kuberay-version", "1.5.0",
                                                        tmp_path=tmp_path)
    typo = kept.replace("upgradeStrategy: {type", "upgradeStrategy: {typ")
    assert "spec.upgradeStrategy.typ: unknown field (did you mean type?)" in refused(
        typo, "--keep-upgrade-strategy", tmp_path=tmp_path)
    assert crdschema.schema_version(None) == ("1.7", True)  # the newest raygitops knows
    assert crdschema.schema_version("1.5.3") == ("1.5", True)
    assert crdschema.schema_version("1.4.2") == ("1.4", True)
    assert crdschema.schema_version("1.1") == ("1.1", True)
    assert crdschema.schema_version("1.7.1") == ("1.7", True)
    assert crdschema.schema_version("1.8.0") == ("1.7", False)
    # rayStartParams was required up to 1.3 (no default): the API server of 1.3 refuses it missing
    bare = CLUSTER.replace("      rayStartParams: {}\n", "")
    assert render(bare, "--kuberay-version", "1.4.2", tmp_path=tmp_path).returncode == 0
    assert ("spec.workerGroupSpecs[0].rayStartParams: required field missing (optional from KubeRay 1.4; "
            "kuberayVersion is 1.3.2: set it to your operator's version)") in refused(
        bare, "--kuberay-version", "1.3.2", tmp_path=tmp_path)


def _with(spec_lines: str) -> str:
    """CLUSTER with more lines at the top of its spec."""
    return CLUSTER.replace("  headGroupSpec:", spec_lines + "  headGroupSpec:")


@pytest.mark.parametrize("lines,error", [
    ("  tlsOptions: {enabled: true}\n", "spec.tlsOptions: exists from KubeRay 1.7"),
    ("  networkPolicy: {mode: DenyAllIngress}\n", "spec.networkPolicy: exists from KubeRay 1.7"),
    ("  historyServerOptions: {}\n", "spec.historyServerOptions: exists from KubeRay 1.7"),
    ("  autoscalerOptions: {command: [run]}\n", "spec.autoscalerOptions.command: exists from KubeRay 1.7"),
    ("  gcsFaultToleranceOptions: {backend: rocksdb}\n", "spec.gcsFaultToleranceOptions.backend: exists from KubeRay 1.7"),
    ("  gcsFaultToleranceOptions: {externalStorageNamespace: x}\n",
     "spec.gcsFaultToleranceOptions.redisAddress: required field missing (optional from KubeRay 1.7"),
])
def test_kuberay_1_7_fields_render_unset_and_name_their_version_for_an_older_target(lines: str, error: str,
                                                                                      tmp_path: Path) -> None:
    """With kuberayVersion unset the target is the newest KubeRay raygitops knows (1.7): its
    fields and relaxed rules render; for 1.6 the error says from which KubeRay they exist."""
    res = render(_with(lines), tmp_path=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    res = render(_with(lines), "--kuberay-version", "1.6.2", tmp_path=tmp_path)
    assert res.returncode == 1 and res.stdout == "", res.stdout
    # at the field's own line (_with writes it on line 7); a backend without a redisAddress
    # is two errors of the 1.6 schema, each its own line
    (err,) = [line for line in res.stderr.splitlines() if error in line]
    assert f"cluster.yaml:7: {error}" in err and "kuberayVersion is 1.6.2: set it to your operator's version" in err
    assert "did you mean" not in res.stderr


def test_a_kuberay_newer_than_every_schema_warns_about_what_it_may_add_or_relax(tmp_path: Path) -> None:
    """For 1.8 (newer than every shipped schema) an unknown field, a required field missing
    and a value outside an enum are warnings (1.8 may have added or relaxed them); for the
    newest known (unset) they are errors; a wrong type is an error whatever the version."""
    cases = [("  tlsOption: {enabled: true}\n", "spec.tlsOption: unknown field (did you mean tlsOptions?)",
              "may drop it"),
             ("  gcsFaultToleranceOptions: {redisPassword: {valueFrom: {secretKeyRef: {}}}}\n",
              "spec.gcsFaultToleranceOptions.redisPassword.valueFrom.secretKeyRef.key: required field missing",
              "may accept it"),
             ("  networkPolicy: {mode: DenySome}\n", "spec.networkPolicy.mode: 'DenySome' is not one of", "may accept it")]
    for lines, problem, may in cases:
        assert problem in refused(_with(lines), tmp_path=tmp_path)
        res = render(_with(lines), "--kuberay-version", "1.8.0+newest-rules", tmp_path=tmp_path)
        assert res.returncode == 0 and res.stdout
        said, warned = res.stderr.splitlines()
        assert said == ("raygitops: warning: kuberayVersion 1.8.0+newest-rules: raygitops knows KubeRay 1.1 to 1.7; "
                        "checked with KubeRay 1.7's rules (CRD schema, operator validation, pod rules)")
        assert warned.startswith("raygitops: warning: "), res.stderr
        assert problem in res.stderr and "the KubeRay 1.7 CRD, the newest raygitops knows" in res.stderr
        assert f"KubeRay 1.8.0 {may}" in res.stderr, res.stderr
    wrong = _with(cases[0][0]).replace("replicas: 1", "replicas: x")
    assert "spec.workerGroupSpecs[0].replicas: expected integer, got string" in refused(
        wrong, "--kuberay-version", "1.8.0+newest-rules", tmp_path=tmp_path)


def test_open_parts_stay_open_and_null_and_defaults_are_fine() -> None:
    schema = {"type": "object", "required": ["a", "d"],
              "properties": {"a": {"type": "string"}, "d": {"type": "integer", "default": 1},
                             "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                      "properties": {"k": {"type": "integer"}}}}}
    assert crdschema.problems({"a": "x", "open": {"anything": [1]}}, schema, "spec") == []
    assert crdschema.problems({"a": None}, schema, "spec") == ["spec.a: required field missing"]
    assert crdschema.problems({"a": "x", "open": {"k": "no"}}, schema, "spec") == [
        "spec.open.k: expected integer, got string"]


def test_leaves_pass_by_their_class_as_the_type_check_passes_them() -> None:
    """The walk lets a leaf through by its class without a look (crdschema._Node.passes):
    only what the type check takes, and a subclass still by isinstance."""
    import datetime

    class Text(str):
        pass

    leaves = {"s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
              "b": {"type": "boolean"}, "q": {"x-kubernetes-int-or-string": True}}
    schema = {"type": "object", "properties": {**leaves, "l": {"type": "array", "items": {"type": "integer"}}}}
    fine = {"s": Text("x"), "i": 1, "n": 1.5, "b": False, "q": "50%", "l": [1, 2]}
    assert crdschema.problems(fine, schema, "spec") == []
    assert crdschema.problems({"s": datetime.date(2026, 1, 2), "n": 2, "q": 3}, schema, "spec") == []
    assert crdschema.problems({"i": True, "n": True, "q": True, "s": 1, "b": 0, "l": [1, True, "2"]}, schema,
                              "spec") == [
        "spec.i: expected integer, got boolean", "spec.n: expected number, got boolean",
        "spec.q: expected integer or string, got boolean", "spec.s: expected string, got integer",
        "spec.b: expected boolean, got integer", "spec.l[1]: expected integer, got boolean",
        "spec.l[2]: expected integer, got string"]


def test_diff_does_not_refuse_the_base_for_what_the_head_fixes(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    for side, text in ((base, CLUSTER.replace("containers: [{", "containres: [{")), (head, CLUSTER)):
        side.mkdir()
        (side / "cluster.yaml").write_text(text)
    res = subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(base), "--head", str(head),
                          "--output", "json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    res = subprocess.run([sys.executable, "-m", "raygitops", "diff", "--base", str(head), "--head", str(base)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "head:" in res.stderr and "containres" in res.stderr, res.stderr


@pytest.mark.parametrize("minor,version", [("1.1", "v1.1.1"), ("1.2", "v1.2.2"), ("1.3", "v1.3.2"), ("1.4", "v1.4.2"),
                                           ("1.5", "v1.5.0"), ("1.6", "v1.6.2"), ("1.7", "v1.7.0")])
def test_package_data_is_the_crds_schema(minor: str, version: str) -> None:
    """What scripts/make_crd_schemas.py makes from KubeRay's CRD, byte for byte: the copy in
    ../shared, else the operator module the e2e build downloaded."""
    source, candidates = raycluster_crd(version)
    if source is None:
        pytest.skip(f"KubeRay {version} CRD not found at {' or '.join(map(str, candidates))}")
    shipped = REPO / "plugin" / "raygitops" / "model" / "schemas" / crdschema.SCHEMAS[minor]
    made = json.dumps(crd_spec_schema(source), sort_keys=True, separators=(",", ":")).encode()
    assert gzip.decompress(shipped.read_bytes()) == made
    assert crdschema.spec_schema(minor) == json.loads(made)


def test_every_corpus_sample_renders_unset_and_is_checked_against_older_kuberays(corpus: list[Path]) -> None:
    """Every KubeRay v1.7.0 sample renders with kuberayVersion unset (the newest known, 1.7)
    and with its own version, without a warning; for 1.6 exactly the samples with fields the
    1.6 CRD lacks are refused, each naming a field and the KubeRay it exists from."""
    refused_for_16 = []
    for sample in corpus:
        for target in ((), ("--kuberay-version", CORPUS_KUBERAY)):
            ok = subprocess.run([sys.executable, "-m", "raygitops", "render", str(sample), *target],
                                capture_output=True, text=True, timeout=60)
            assert ok.returncode == 0 and ok.stderr == "", (sample.name, target, ok.stderr)
        old = subprocess.run([sys.executable, "-m", "raygitops", "render", str(sample), "--kuberay-version", "1.6"],
                             capture_output=True, text=True, timeout=60)
        if old.returncode:
            lines = old.stderr.splitlines()  # one line per such field, each at its own line
            assert lines and all(": exists from KubeRay 1.7; kuberayVersion is 1.6" in line
                                 and line.startswith(f"raygitops: {sample}:") for line in lines), old.stderr
            assert len({line.split(":")[2] for line in lines}) == len(lines), old.stderr
            refused_for_16.append(sample.name)
    assert refused_for_16 == ["ray-cluster.autoscaler-v2-overwrite-cmd.yaml", "ray-cluster.mtls.yaml"], refused_for_16
    assert CORPUS.name.endswith(CORPUS_KUBERAY)


def test_paths_name_int_keys_and_list_indexes_apart() -> None:
    """A mapping key that is an int is `.1`, a list index `[1]` (the walk keeps them apart)."""
    schema = {"type": "object", "properties": {
        "m": {"type": "object", "additionalProperties": {"type": "string"}},
        "l": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}
    assert crdschema.problems({"m": {1: 2}, "l": [{"a": 1}, {"a": "x"}]}, schema, "spec") == [
        "spec.m.1: expected string, got integer", "spec.l[1].a: expected integer, got string"]
