"""User mistakes, table-driven (issue #48): every slip that changes what the PreSync hook does
(opt-in, strategy, policies, versions, bounds, hook settings) is an error, exit non-zero, one
line on stderr at the offending file and line, with nothing on stdout and no plan written.

Each row is one mistake as a user writes it, run through the real CLI entry point
(``raygitops.cli.main:main``, click's CliRunner).  The line an error must point at is marked
in the row's files with ``#!`` at the end of that line (a YAML comment: it changes nothing
else); a row whose mistake is in no file (a flag, an Argo CD parameter) names the prefix its
message must start with instead.  ``ACCEPTED`` holds the spellings that look like mistakes but
are understood, and must render.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from raygitops.cli.main import main

MARK = "#!"  # ends the line an error must point at

BASE = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: demo
@META  annotations:
    raygitops.dev/upgrade-strategy: @STRATEGY
@ANN@AFTER_METAspec:
@SPEC  headGroupSpec:
    rayStartParams: {}
    template:
@HEAD_META      spec:
        containers:
        - name: head
          image: rayproject/ray:2.41.0
@HEAD_PORTS  workerGroupSpecs:
  - groupName: cpu
    replicas: 2
    minReplicas: 0
    maxReplicas: 4
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: worker
          image: rayproject/ray:2.41.0
"""


def cluster(strategy: str = "Recreate", ann: str = "", meta: str = "", after_meta: str = "", spec: str = "",
            head_meta: str = "", head_ports: str = "") -> str:
    """The app's RayCluster with the mistake put in: ``ann`` lines under its annotations,
    ``meta`` under metadata, ``after_meta`` at the top level after metadata, ``spec`` first
    under spec, ``head_meta`` as the head template's metadata, ``head_ports`` under the head
    container."""
    text = BASE
    for token, value in (("@STRATEGY", strategy), ("@ANN", ann), ("@META", meta), ("@AFTER_META", after_meta),
                         ("@SPEC", spec), ("@HEAD_META", head_meta), ("@HEAD_PORTS", head_ports)):
        text = text.replace(token, value)
    return text


def ann(line: str) -> str:
    """One more annotation of the RayCluster, marked as the line an error points at."""
    return f"    {line}  {MARK}\n"


@dataclass
class Mistake:
    name: str
    files: dict[str, str]
    says: str  # a regular expression the error line must match
    args: tuple[str, ...] = ("render", "{app}", "--plan-out", "{plans}")
    env: dict[str, str] = field(default_factory=dict)
    code: int = 1
    starts: str | None = None  # the message's start, for a mistake in no file (a flag, a parameter)


def app_files(extra: dict[str, str] | None = None, **kw: str) -> dict[str, str]:
    return {"cluster.yaml": cluster(**kw), **(extra or {})}


def params(*given: dict) -> dict[str, str]:
    return {"ARGOCD_APP_PARAMETERS": json.dumps(list(given))}


def config(text: str) -> dict[str, str]:
    return app_files({"raygitops.yaml": text})


A = "raygitops.dev/"

MISTAKES = [
    # --- the object's own shape: what the API server refuses, and what leaves it not opted in
    Mistake("annotations beside metadata (one indent off)",
            app_files(after_meta=f"annotations:  {MARK}\n  {A}running-jobs: fail\n"),
            r"unknown field annotations at the top level .*belongs under metadata"),
    Mistake("labels beside metadata", app_files(after_meta=f"labels:  {MARK}\n  team: ml\n"),
            r"unknown field labels at the top level"),
    Mistake("a typo of spec at the top level",
            {"cluster.yaml": cluster().replace("spec:\n  headGroupSpec", f"specs:  {MARK}\n  headGroupSpec", 1)},
            r"unknown field specs .*did you mean spec\?"),
    Mistake("the opt-in straight under metadata", app_files(meta=f"  {A}upgrade-strategy: Recreate  {MARK}\n"),
            r"unknown field metadata\.raygitops\.dev/upgrade-strategy.*under metadata\.annotations"),
    Mistake("annotation (singular) under metadata", app_files(meta=f"  annotation:  {MARK}\n    team: ml\n"),
            r"unknown field metadata\.annotation: .*did you mean annotations\?"),
    Mistake("a typo of labels under metadata", app_files(meta=f"  lables: {{team: ml}}  {MARK}\n"),
            r"did you mean labels\?"),
    Mistake("spec indented under metadata",
            {"cluster.yaml": cluster(meta=f"  spec: {{}}  {MARK}\n")}, r"unknown field metadata\.spec.*top level"),
    # --- near misses of raygitops' annotation keys: the intended setting would silently not apply
    Mistake("running-job (one letter off running-jobs)", app_files(ann=ann(f"{A}running-job: fail")),
            r"raygitops has no such annotation \(did you mean raygitops\.dev/running-jobs\?\)"),
    Mistake("upgrade-stratgy", app_files(strategy="None", ann=ann(f"{A}upgrade-stratgy: Recreate")),
            r"did you mean raygitops\.dev/upgrade-strategy\?"),
    Mistake("raygitops.io instead of raygitops.dev", app_files(strategy="None", ann=ann("raygitops.io/upgrade-strategy: Recreate")),
            r"did you mean raygitops\.dev/upgrade-strategy\?"),
    Mistake("running-jobs-wait (no -seconds)", app_files(ann=ann(f'{A}running-jobs-wait: "600"')),
            r"did you mean raygitops\.dev/running-jobs-wait-seconds\?"),
    Mistake("max-unavailble", app_files(strategy="ReplaceGroups", ann=ann(f'{A}max-unavailble: "1"')),
            r"did you mean raygitops\.dev/max-unavailable\?"),
    Mistake("max-unavailable-per-group", app_files(strategy="ReplaceGroups", ann=ann(f'{A}max-unavailable-per-group: "cpu=1"')),
            r"did you mean raygitops\.dev/max-unavailable-by-group\?"),
    Mistake("hash-configs", app_files(ann=ann(f'{A}hash-configs: "false"')),
            r"did you mean raygitops\.dev/hash-config\?"),
    Mistake("an unknown raygitops.dev key", app_files(ann=ann(f'{A}recreate-now: "true"')),
            r"raygitops has no such annotation \(raygitops reads raygitops\.dev/upgrade-strategy"),
    Mistake("the opt-in written as a label",
            app_files(meta=f"  labels:\n    {A}upgrade-strategy: Recreate  {MARK}\n"),
            r"metadata\.labels\.raygitops\.dev/upgrade-strategy: .*never from labels"),
    Mistake("a policy on the head pod template",
            app_files(head_meta=f"      metadata:\n        annotations:\n          {A}running-jobs: proceed  {MARK}\n"),
            r"spec\.headGroupSpec\.template\.metadata\.annotations\.raygitops\.dev/running-jobs: .*not from a pod template"),
    Mistake("the hook's own lock annotation in the manifest", app_files(ann=ann(f"{A}recreate: x")),
            r"written by the raygitops PreSync hook only"),
    # --- values of raygitops' annotations
    Mistake("strategy in lower case", app_files(strategy=f"recreate  {MARK}"), r"did you mean Recreate\?"),
    Mistake("strategy Replace", app_files(strategy=f"Replace  {MARK}"), r"did you mean ReplaceGroups\?"),
    Mistake("strategy contradicts spec.upgradeStrategy",
            app_files(strategy=f"Recreate  {MARK}", spec="  upgradeStrategy: {type: None}\n"),
            r"contradicts spec\.upgradeStrategy\.type=None"),
    Mistake("running-jobs: fial", app_files(ann=ann(f"{A}running-jobs: fial")), r"'fial' is not wait, fail or proceed \(did you mean fail\?\)"),
    Mistake("running-jobs: Wait", app_files(ann=ann(f"{A}running-jobs: Wait")), r"did you mean wait\?"),
    Mistake("running-jobs on a cluster not opted in", app_files(strategy="None", ann=ann(f"{A}running-jobs: fail")),
            r"applies only to clusters raygitops recreates"),
    Mistake('running-jobs-wait-seconds: "0" (quoted)', app_files(ann=ann(f'{A}running-jobs-wait-seconds: "0"')),
            r"'0' is not a number of seconds from 1 to 86400$"),
    Mistake("running-jobs-wait-seconds unquoted", app_files(ann=ann(f"{A}running-jobs-wait-seconds: 600")),
            r"is int 600, not a string \(quote it"),
    Mistake("a negative wait", app_files(ann=ann(f'{A}running-jobs-wait-seconds: "-5"')), r"'-5' is not a number of seconds"),
    Mistake("a wait longer than a day", app_files(ann=ann(f'{A}running-jobs-wait-seconds: "90000"')),
            r"from 1 to 86400"),
    Mistake("a wait bound with policy fail",
            app_files(ann=f"    {A}running-jobs: fail\n" + ann(f'{A}running-jobs-wait-seconds: "60"')),
            r"applies only with raygitops\.dev/running-jobs: wait"),
    Mistake('max-unavailable "150%"', app_files(strategy="ReplaceGroups", ann=ann(f'{A}max-unavailable: "150%"')),
            r"is not a pod count .* or a percentage \(1% to 100%\)"),
    Mistake('max-unavailable "0"', app_files(strategy="ReplaceGroups", ann=ann(f'{A}max-unavailable: "0"')),
            r"is not a pod count"),
    Mistake("max-unavailable unquoted", app_files(strategy="ReplaceGroups", ann=ann(f"{A}max-unavailable: 2")),
            r"not a string \(quote it\)"),
    Mistake("max-unavailable under Recreate", app_files(ann=ann(f'{A}max-unavailable: "1"')),
            r"applies only with raygitops\.dev/upgrade-strategy: ReplaceGroups"),
    Mistake("max-unavailable-by-group of a group the cluster lacks",
            app_files(strategy="ReplaceGroups", ann=ann(f'{A}max-unavailable-by-group: "cpus=1"')),
            r"'cpus' is not a worker group of this cluster \(did you mean cpu\?\)"),
    Mistake("max-unavailable-by-group with a colon",
            app_files(strategy="ReplaceGroups", ann=ann(f'{A}max-unavailable-by-group: "cpu:1"')),
            r"is not <group>=<count or percentage>"),
    Mistake('hash-config: "no"', app_files(ann=ann(f'{A}hash-config: "no"')), r"'no' is not true or false"),
    # --- the dashboard the running-jobs policy needs
    Mistake("head ports without the dashboard (policy wait)",
            app_files(head_ports=f"          ports:  {MARK}\n          - {{containerPort: 6379, name: gcs}}\n"),
            r"RayCluster demo: head service demo-head-svc exposes no dashboard port .*policy wait"),
    Mistake("head ports without the dashboard (policy fail)",
            app_files(ann=f"    {A}running-jobs: fail\n",
                      head_ports=f"          ports:  {MARK}\n          - {{containerPort: 10001, name: client}}\n"),
            r"exposes no dashboard port .*policy fail"),
    # --- raygitops.yaml
    Mistake("an unknown KubeRay version", config(f'kuberayVersion: "1.9"  {MARK}\n'),
            r"KubeRay 1\.9 is not a version raygitops knows \(1\.1 to 1\.7\).*\"1\.9\+newest-rules\""),
    Mistake("KubeRay 1.10 written unquoted", config(f"kuberayVersion: 1.10  {MARK}\n"), r"quote it"),
    Mistake("a KubeRay older than raygitops serves", config(f'kuberayVersion: "1.0"  {MARK}\n'),
            r"raygitops serves KubeRay 1\.1 and later"),
    Mistake("the escape on a known version", config(f'kuberayVersion: "1.6+newest-rules"  {MARK}\n'),
            r"KubeRay 1\.6 is a line raygitops knows: drop \+newest-rules"),
    Mistake("a negative hook timeout", config(f"hook:\n  timeoutSeconds: -5  {MARK}\n"), r"hook\.timeoutSeconds: "),
    Mistake("a timeout with a unit", config(f'hook:\n  timeoutSeconds: "900s"  {MARK}\n'), r"hook\.timeoutSeconds: "),
    Mistake("no cluster at a time", config(f"hook:\n  maxParallel: 0  {MARK}\n"), r"hook\.maxParallel: "),
    Mistake("a drain grace past its bound", config(f"hook:\n  drainGraceSeconds: 99999  {MARK}\n"),
            r"hook\.drainGraceSeconds: "),
    Mistake("a typo of the app's policy", config(f"hook:\n  runningJobs: fial  {MARK}\n"),
            r"hook\.runningJobs: 'fial' is not wait, fail or proceed \(did you mean fail\?\)"),
    Mistake("a misspelt hook setting", config(f"hook:\n  runingJobs: wait  {MARK}\n"), r"did you mean runningJobs\?"),
    Mistake("a hook setting one indent off", config(f"timeoutSeconds: 600  {MARK}\n"), r"it belongs under hook:"),
    Mistake("waitReady: yes", config(f'hook:\n  waitReady: "yes"  {MARK}\n'), r"expected true or false"),
    # --- flags and Argo CD parameters (no file: the message names them)
    Mistake("--kuberay-version 1.9", app_files(), r"is not a version raygitops knows",
            args=("render", "{app}", "--kuberay-version", "1.9", "--plan-out", "{plans}"), starts="--kuberay-version: "),
    Mistake("--running-jobs Proceed", app_files(), r"'Proceed' is not wait, fail or proceed \(did you mean proceed\?\)",
            args=("render", "{app}", "--running-jobs", "Proceed", "--plan-out", "{plans}"), starts="--running-jobs: "),
    Mistake("--running-jobs-wait-seconds 0", app_files(), r"is not a number of seconds",
            args=("render", "{app}", "--running-jobs-wait-seconds", "0", "--plan-out", "{plans}"),
            starts="--running-jobs-wait-seconds: "),
    Mistake("values given as a string parameter", app_files(),
            r"given as string, but it takes map", env=params({"name": "values", "string": "image.tag: 2.46.0"}),
            starts="ARGOCD_APP_PARAMETERS: parameter 'values': "),
    Mistake("the KubeRay version as an array parameter", app_files(), r"given as array, but it takes string",
            env=params({"name": "kuberay-version", "array": ["1.6"]}),
            starts="ARGOCD_APP_PARAMETERS: parameter 'kuberay-version': "),
    Mistake("an unknown KubeRay version parameter", app_files(), r"is not a version raygitops knows",
            env=params({"name": "kuberay-version", "string": "1.9"}),
            starts="ARGOCD_APP_PARAMETERS: parameter 'kuberay-version': "),
    Mistake("a misspelt parameter", app_files(), r"unknown parameter \(did you mean running-jobs\?\)",
            env=params({"name": "running-job", "string": "fail"}), starts="ARGOCD_APP_PARAMETERS: parameter 'running-job': "),
    Mistake("a parameter with a stray key", app_files(), r"unknown key 'value'",
            env=params({"name": "running-jobs", "value": "fail"}), starts="ARGOCD_APP_PARAMETERS: parameter 'running-jobs': "),
    # --- templates, and every command that reads the app points at the same line
    Mistake("tojson of an undefined variable",
            {"cluster.yaml.j2": cluster(ann=f"    {A}running-jobs: {{{{ policy | tojson }}}}  {MARK}\n")},
            r"undefined template variable: 'policy' is undefined"),
    Mistake("raygitops hash sees the near miss", app_files(ann=ann(f"{A}running-job: fail")),
            r"did you mean raygitops\.dev/running-jobs\?", args=("hash", "{app}")),
    Mistake("raygitops diff sees the near miss in head", app_files(ann=ann(f"{A}running-job: fail")),
            r"did you mean raygitops\.dev/running-jobs\?", args=("diff", "--base", "{base}", "--head", "{app}")),
    Mistake("raygitops status sees the near miss", app_files(ann=ann(f"{A}running-job: fail")),
            r"did you mean raygitops\.dev/running-jobs\?", args=("status", "{app}", "--kubeconfig", "{tmp}/none")),
    Mistake("presync with a kubeconfig that is not there", app_files(), r"kubeconfig file not found",
            args=("presync", "--plan", "{plan}", "--kubeconfig", "{tmp}/missing-kubeconfig"),
            starts="{tmp}/missing-kubeconfig: "),
]

# What looks like a mistake but is understood: renders, exit 0.
ACCEPTED = [
    ("kuberayVersion written unquoted, as the docs' tables show it", config("kuberayVersion: 1.6\n"), {}, ()),
    ("a newer KubeRay with the explicit escape", config('kuberayVersion: "1.9+newest-rules"\n'), {}, ()),
    ("a patch release raygitops has not seen", config('kuberayVersion: "v1.6.9"\n'), {}, ()),
    ("values as a map parameter", app_files(), params({"name": "values", "map": {"image.tag": "2.46.0"}}), ()),
    ("an empty value of another kind beside the value", app_files(),
     params({"name": "running-jobs", "string": "proceed", "array": []}), ()),
    ("a dashboard port declared beside others",
     app_files(head_ports="          ports:\n          - {containerPort: 6379, name: gcs}\n"
                          "          - {containerPort: 8265, name: dashboard}\n"), {}, ()),
    ("ports without the dashboard under policy proceed",
     app_files(ann=f"    {A}running-jobs: proceed\n", head_ports="          ports: [{containerPort: 6379, name: gcs}]\n"),
     {}, ()),
    ("a foreign annotation", app_files(ann="    example.com/owner: ml-team\n"), {}, ()),
    ("a manifest exported from a cluster: every ObjectMeta field, and status",
     app_files(meta='  namespace: ray\n  uid: 0f4e7c9a-1b2c-4d5e-8f90-123456789abc\n  resourceVersion: "42"\n'
                    '  generation: 3\n  creationTimestamp: null\n  finalizers: [example.com/keep]\n  labels: {team: ml}\n',
               after_meta="status: {state: ready}\n"), {}, ()),
]


def _write(root: Path, files: dict[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)


def _marked(root: Path, files: dict[str, str]) -> tuple[str, int] | None:
    """The file and line marked with MARK, if any."""
    for name, text in files.items():
        for number, line in enumerate(text.splitlines(), 1):
            if line.rstrip().endswith(MARK) or f"{MARK}\n" in line + "\n":
                return str(root / name), number
    return None


def _invoke(args: list[str], env: dict[str, str]):
    return CliRunner().invoke(main, args, env={"ARGOCD_APP_PARAMETERS": None, "KUBECONFIG": None, **env})


def _args(template: tuple[str, ...], tmp_path: Path) -> list[str]:
    places = {"{app}": tmp_path / "app", "{plans}": tmp_path / "plans", "{base}": tmp_path / "base",
              "{tmp}": tmp_path, "{plan}": tmp_path / "base-plans" / "default.json"}
    out = []
    for arg in template:
        for key, value in places.items():
            arg = arg.replace(key, str(value))
        out.append(arg)
    return out


def test_the_table_holds_at_least_40_mistakes_each_failing():
    assert len(MISTAKES) >= 40
    assert len({m.name for m in MISTAKES}) == len(MISTAKES)
    assert all(m.code != 0 for m in MISTAKES)  # no mistake that changes the hook's behaviour exits 0
    for m in MISTAKES:  # each points somewhere: a marked line, or the flag or parameter it names
        assert (_marked(Path("."), m.files) is None) == (m.starts is not None), m.name


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_a_mistake_is_an_error_at_its_line(tmp_path: Path, mistake: Mistake) -> None:
    app = tmp_path / "app"
    _write(app, mistake.files)
    _write(tmp_path / "base", {"cluster.yaml": cluster()})  # the valid app a diff or a presync starts from
    if "{plan}" in " ".join(mistake.args):
        made = _invoke(["render", str(tmp_path / "base"), "--plan-out", str(tmp_path / "base-plans")], {})
        assert made.exit_code == 0, made.stderr
    result = _invoke(_args(mistake.args, tmp_path), mistake.env)
    assert result.exit_code == mistake.code, (result.exit_code, result.stderr)
    assert result.stdout == "", result.stdout  # nothing half-written
    assert not (tmp_path / "plans").exists() or not any((tmp_path / "plans").iterdir())
    # the error line (presync logs its start first)
    first = next(line for line in result.stderr.splitlines() if line.startswith("raygitops: "))
    assert "Traceback" not in result.stderr
    marked = _marked(app, mistake.files)
    if marked is not None:
        path, line = marked
        located = re.match(r"^raygitops: (?:head: )?(?P<path>[^:]+):(?P<line>\d+): ", first)
        assert located, first
        assert (located["path"], int(located["line"])) == (path, line), first
    else:
        assert mistake.starts is not None
        assert first.startswith("raygitops: " + mistake.starts.replace("{tmp}", str(tmp_path))), first
    assert re.search(mistake.says, first), first


@pytest.mark.parametrize("name,files,env,args", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_what_is_understood_renders(tmp_path: Path, name: str, files: dict[str, str], env: dict[str, str],
                                    args: tuple[str, ...]) -> None:
    _write(tmp_path / "app", files)
    result = _invoke(["render", str(tmp_path / "app"), *args], env)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("---\napiVersion: ray.io/v1\nkind: RayCluster")


def test_a_newer_kuberay_says_which_rules_check_it(tmp_path: Path) -> None:
    _write(tmp_path / "app", config('kuberayVersion: "1.9+newest-rules"\n'))
    result = _invoke(["render", str(tmp_path / "app"), "--hook-image", "example.com/raygitops:1"], {})
    assert result.exit_code == 0
    said = ("kuberayVersion 1.9+newest-rules: raygitops knows KubeRay 1.1 to 1.7; checked with KubeRay 1.7's rules "
            "(CRD schema, operator validation, pod rules)")
    assert result.stderr == f"raygitops: warning: {said}\n"
    _write(tmp_path / "base", {"cluster.yaml": cluster()})  # the pull request that sets it: its preview says so
    preview = _invoke(["diff", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "app")], {})
    assert preview.exit_code == 0 and f"note: {said}\n" in preview.stdout, preview.stdout + preview.stderr
