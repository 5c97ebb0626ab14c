"""The pod rules (model/podrules.py): what each KubeRay line's pod builder reads, as the
template hash of scheme h3 covers it; the measured table of docs/pod-fields.md is what raygitops
predicts (the real operators measure it: tests/e2e/test_pod_oracle.py)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from raygitops.model.convert import version_tuple
from raygitops.model import crdschema, podrules
from raygitops.model.canonical import canonical_bytes
from raygitops.model.hashing import HashRules, hash_cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import podoracle  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ship_support  # noqa: E402

V15, V16 = podrules.BY_NAME["1.5"], podrules.BY_NAME["1.6"]


@pytest.mark.parametrize("minor", sorted(crdschema.SCHEMAS))
def test_every_field_of_the_crd_has_an_entry_and_a_sample(minor: str) -> None:
    """A field of a shipped CRD outside the templates that the rules do not name would be hashed
    whole; one without a sample would never be measured."""
    fields = podoracle.fields(crdschema.spec_schema(minor))
    rules = podrules.rules_for(minor)
    assert all(e.effect in podrules.EFFECTS and e.why for e in rules.fields.values())
    unknown = [f for f in fields if f not in rules.fields]
    if version_tuple(minor) > version_tuple(podrules.RULES[-1].name):
        # a line newer than the rules (1.7: its CRDs, no operator to read or measure): its new
        # fields are hashed whole in every group, and docs/pod-fields.md says which
        assert all(rules.effect(f) == podrules.PODS for f in unknown)
        doc = podoracle.DOC.read_text()
        assert [f for f in unknown if f"`{f}`" not in doc] == [], "docs/pod-fields.md does not name them"
        return
    assert unknown == []
    assert [f for f in fields if not any(s.path == f for s in podoracle.SAMPLES)] == []


def test_rules_per_version() -> None:
    assert podrules.rules_for(None) is V16 and podrules.rules_for("1.6.2") is V16
    assert podrules.rules_for("1.7.0") is V16 and podrules.rules_for("1.5") is V15
    assert podrules.rules_for("1.3.2") is V15  # older lines: 1.5's rules for the fields their CRDs have


def test_generic_version() -> None:
    """k8s.io/apimachinery version.ParseGeneric and AtLeast, as supportsUnifiedHealthCheck uses them."""
    assert podrules.generic_version("2.53.0") == (2, 53, 0) and podrules.generic_version("v2.53") == (2, 53)
    assert podrules.generic_version("2.53.0rc1") == (2, 53, 0) and podrules.generic_version("2") is None
    assert podrules.generic_version("02.1") is None and podrules.generic_version(None) is None
    assert podrules.at_least((2, 53), (2, 53, 0)) and not podrules.at_least((2, 52, 9), (2, 53, 0))
    assert not podrules.at_least(None, (2, 53, 0))


@pytest.mark.parametrize("path,v15,v16", [
    ("/spec/headGroupSpec/template/spec/containers/0/image", True, True),
    ("/spec/headGroupSpec/template/metadata/name", False, False),
    ("/spec/headGroupSpec/serviceType", False, False),
    ("/spec/headGroupSpec/headService/metadata/name", True, True),
    ("/spec/headGroupSpec/headService/spec/type", False, False),
    ("/spec/workerGroupSpecs/0/replicas", False, False),
    ("/spec/workerGroupSpecs/0/numOfHosts", False, False),
    ("/spec/workerGroupSpecs/0/scaleStrategy/workersToDelete", False, False),
    ("/spec/workerGroupSpecs/0/idleTimeoutSeconds", False, False),
    ("/spec/workerGroupSpecs/0/rayStartParams/num-cpus", True, True),
    ("/spec/workerGroupSpecs/0", True, True),
    ("/spec/rayVersion", False, True),
    ("/spec/enableInTreeAutoscaling", True, True),
    ("/spec/autoscalerOptions/image", True, True),
    ("/spec/autoscalerOptions/idleTimeoutSeconds", False, False),
    ("/spec/autoscalerOptions", True, True),
    ("/spec/suspend", False, False),
    ("/spec/headServiceAnnotations/a", False, False),
    ("/spec/networkPolicy/mode", True, True),  # a field no rule names (KubeRay 1.7): pod-shaping until measured
    ("/metadata/labels/team", False, False),
])
def test_path_shapes_pods(path: str, v15: bool, v16: bool) -> None:
    tokens = path.strip("/").split("/")
    assert podrules.path_shapes_pods(tokens, V15) is v15
    assert podrules.path_shapes_pods(tokens, V16) is v16


def spec() -> dict:
    doc = podoracle.cluster("c", "plain")
    return doc["spec"]


def changed(mutate, rules: podrules.PodRules = V16, annotations: dict | None = None) -> set[str]:
    """The groups whose pod input a change moves."""
    before = podrules.pod_inputs(spec(), {}, rules)
    alt = spec()
    mutate(alt)
    after = podrules.pod_inputs(alt, annotations or {}, rules)
    return {k for k in before if canonical_bytes(before[k]) != canonical_bytes(after.get(k))}


EVERY = {"head", "worker:a", "worker:b"}


def test_what_reaches_which_pods() -> None:
    def head_service(s):
        s["headGroupSpec"]["headService"] = {"metadata": {"name": "svc2"}, "spec": {"type": "NodePort"}}

    def head_init_and_service(s):
        head_service(s)
        s["headGroupSpec"]["template"]["spec"]["initContainers"] = [{"name": "i", "image": "busybox"}]

    def port(s):
        s["headGroupSpec"]["rayStartParams"] = {"port": "6380"}

    def block(s):
        s["workerGroupSpecs"][0]["rayStartParams"] = {"block": "false"}

    def template_name(s):
        s["workerGroupSpecs"][0]["template"]["metadata"] = {"name": "x", "namespace": "y"}

    def unknown(s):
        s["networkPolicy"] = {"mode": "DenyAll"}

    assert changed(head_service) == {"worker:a", "worker:b"}
    assert changed(head_init_and_service) == EVERY
    assert changed(port) == EVERY
    assert changed(block) == set()
    assert changed(template_name) == set()
    assert changed(lambda s: s.update(rayVersion="2.53.0"), V15) == set()
    assert changed(lambda s: s.update(rayVersion="2.53.0"), V16) == EVERY
    assert changed(unknown) == EVERY
    assert changed(lambda s: None, annotations={"ray.io/ft-enabled": "true"}) == EVERY
    assert changed(lambda s: None, annotations={"ray.io/ft-enabled": "false"}) == set()
    assert changed(lambda s: s["headGroupSpec"].update(enableIngress=True, serviceType="NodePort")) == set()


def test_the_ray_version_reaches_only_pods_whose_probes_the_operator_writes() -> None:
    probed = spec()
    for g in [probed["headGroupSpec"], *probed["workerGroupSpecs"][1:]]:
        g["template"]["spec"]["containers"][0].update(livenessProbe={"exec": {"command": ["true"]}},
                                                      readinessProbe={"exec": {"command": ["true"]}})
    newer = copy.deepcopy(probed)
    newer["rayVersion"] = "2.53.0"
    before, after = podrules.pod_inputs(probed, {}, V16), podrules.pod_inputs(newer, {}, V16)
    assert {k for k in before if before[k] != after[k]} == {"worker:a"}


def test_ft_reaches_the_head_whole_and_the_workers_as_a_switch() -> None:
    def on(s):
        s["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}

    def on_other(s):
        s["gcsFaultToleranceOptions"] = {"redisAddress": "redis-2:6379", "externalStorageNamespace": "n"}

    base = podrules.pod_inputs(spec(), {}, V16)
    one, other = spec(), spec()
    on(one)
    on_other(other)
    a, b = podrules.pod_inputs(one, {}, V16), podrules.pod_inputs(other, {}, V16)
    assert all(a[k] != base[k] for k in EVERY)
    assert a["head"] != b["head"] and a["worker:a"] == b["worker:a"]


def test_the_tag_names_the_operator_line() -> None:
    """The same spec hashes under another tag for another line: pods stamped under 1.5's rules
    are compared by spec once the app says 1.6, never recreated for the tag."""
    h15 = hash_cluster(spec(), HashRules(pods="1.5"))
    h16 = hash_cluster(spec(), HashRules(pods="1.6"))
    assert h15.head.split("-")[0] != h16.head.split("-")[0]


def test_documented_table_is_what_raygitops_predicts() -> None:
    """docs/pod-fields.md was measured on the real operators; every cell of it is what
    raygitops says today, but for the disagreements the page names (podoracle.KNOWN)."""
    documented = podoracle.documented()
    assert documented, "docs/pod-fields.md has no table"
    page = podoracle.DOC.read_text()
    wrong = []
    for (key, operator), cell in sorted(documented.items()):
        if cell == "not in this CRD":
            continue
        predicted = podoracle.predict(podoracle.sample(key), operator).text
        if key in podoracle.KNOWN:
            assert f"⚠ raygitops: {predicted}" in page
        elif predicted != cell:
            wrong.append(f"{key} on {operator}: documented {cell}, raygitops says {predicted}")
    assert not wrong, "\n".join(wrong)
    assert {s.key for s in podoracle.SAMPLES} == {k for k, _ in documented}


def test_the_oracle_measures_every_operator_the_tests_build() -> None:
    """A KubeRay line added to tests/e2e/versions.env is measured by the oracle too, and has
    its column in docs/pod-fields.md."""
    pins = ship_support.e2e_versions()
    built = [*pins["KUBERAY_OLDER_VERSIONS"].split(), pins["KUBERAY_VERSION"], pins["KUBERAY_NEXT_VERSION"]]
    assert list(podoracle.OPERATORS) == built
    assert {o for _, o in podoracle.documented()} == set(built)


def _impact(s: podoracle.Sample, version: str | None):
    import yaml

    from raygitops.preview.impact import classify
    from raygitops.render.renderer import render_documents
    from raygitops.sources.settings import Settings
    from raygitops.sources.yamlio import load_documents

    settings = Settings(kuberay_version=version)
    docs = [podoracle.cluster("c", s.context, change) for change in (None, s)]
    (impact,) = classify(*[render_documents(load_documents(yaml.safe_dump(d), "c.yaml"), settings, "ns")
                          for d in docs]).clusters
    return impact


def test_the_preview_says_which_version_answers_otherwise() -> None:
    """The issue's table: a change whose answer depends on the operator version is noted with
    what the other known version does; one that does not, is not."""
    probes = podoracle.sample("rayVersion | 2.52.0 → 2.53.0 | plain")
    newest = _impact(probes, None)
    assert newest.klass == "stale" and "on KubeRay 1.5 (not the target): no group's pods change" in newest.notes
    older = _impact(probes, "1.5")
    assert older.klass == "in-place"
    assert "on KubeRay 1.6 (not the target): the pods of head, worker:a, worker:b change" in older.notes
    idle = _impact(podoracle.sample("workerGroupSpecs[].idleTimeoutSeconds | 60 | plain"), "1.5.0")
    (note,) = [n for n in idle.notes if "1.6" in n]
    assert note.startswith("on KubeRay 1.6 (not the target) the operator refuses this RayCluster: worker group a: "
                           "idleTimeoutSeconds is set") and note.endswith("validation.go:750 at v1.6.2)")
    image = _impact(podoracle.sample("template: image | another image (group a) | plain"), None)
    assert not [n for n in image.notes if "not the target" in n]


def test_the_oracle_compares_ray_start_flags_in_any_order() -> None:
    """KubeRay 1.1 and 1.2 write ``ray start``'s flags in a Go map's order, one pod to the
    next: the oracle's pod shape sorts them, and nothing else."""
    def pod(args: str, value: str) -> dict:
        return {"metadata": {"labels": {"ray.io/group": "a"}},
                "spec": {"containers": [{"name": "ray", "args": [args],
                                         "env": [{"name": "KUBERAY_GEN_RAY_START_CMD", "value": value}]}]}}

    one = pod("ulimit -n 65536; ray start  --address=c-head-svc:6379  --block  --num-cpus=1 ",
              "ray start  --address=c-head-svc:6379  --block  --num-cpus=1 ")
    other = pod("ulimit -n 65536; ray start  --num-cpus=1  --address=c-head-svc:6379  --block ",
                "ray start  --block  --num-cpus=1  --address=c-head-svc:6379 ")
    changed = pod("ulimit -n 65536; ray start  --num-cpus=2  --address=c-head-svc:6379  --block ",
                  "ray start  --block  --num-cpus=2  --address=c-head-svc:6379 ")
    assert podoracle.shape(one, "c", "u") == podoracle.shape(other, "c", "u")
    assert podoracle.shape(one, "c", "u") != podoracle.shape(changed, "c", "u")
