"""The pod oracle on the real operators (docs/pod-fields.md): the operator's pod builder is the
judge of which fields shape pods, version by version.

For each operator of ``podoracle.OPERATORS`` (one control plane each, one namespace), every
sample of ``tests/podoracle.py`` whose field the operator's CRD has: a base cluster of the
sample's context and the changed cluster are applied side by side, and once the operator has
built their pods (or refused the cluster: Warning Event ``InvalidRayClusterSpec``, no pods)
the pods are compared group by group, names, node placement and the token volume aside.
What raygitops predicts for the change (the groups whose template hash moves under
``kuberayVersion``, or render's refusal naming the same message) must be what was built.

Quick mode (CI): ``podoracle.QUICK``, and each measured cell must be the one documented.
Full mode (``RAYGITOPS_ORACLE_FULL=1``): every sample, and the table of docs/pod-fields.md is
written from the measurements (a disagreement is written with what raygitops says, ⚠, and
fails the run unless ``podoracle.KNOWN`` names it with why).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
import yaml

import controlplane
import podoracle
from controlplane import unique_name

pytestmark = pytest.mark.e2e
FULL = os.environ.get("RAYGITOPS_ORACLE_FULL") == "1"
_results: dict[str, dict[tuple[str, str], str]] = {"measured": {}, "predicted": {}}


@pytest.fixture(scope="module", params=podoracle.OPERATORS)
def operator_plane(request) -> tuple[str, controlplane.ControlPlane]:
    """The control plane of one operator: the session's own where it runs that version."""
    version = request.param
    versions = controlplane.load_versions()
    shared = {versions["KUBERAY_VERSION"]: "control_plane", versions["KUBERAY_NEXT_VERSION"]: "control_plane_next"}
    if version in shared:
        yield version, request.getfixturevalue(shared[version])
        return
    with controlplane.running(kuberay=version) as plane:
        yield version, plane


@pytest.fixture(scope="module", autouse=True)
def _write_table():
    """Full mode: the table of docs/pod-fields.md, once every operator was measured."""
    yield
    measured = _results["measured"]
    if FULL and {o for _, o in measured} == set(podoracle.OPERATORS):
        text = podoracle.DOC.read_text()
        before, _, after = text.split(podoracle.MARK)
        table = podoracle.table(measured, _results["predicted"], podoracle.OPERATORS)
        podoracle.DOC.write_text(f"{before}{podoracle.MARK}\n{table}\n{podoracle.MARK}{after}")


def _name(prefix: str, index: int) -> str:
    # fixed width: no name is part of another, so a pod's text can be rewritten by its cluster's name
    return f"{prefix}{index:03d}x"


def _expected_pods(doc: dict[str, Any]) -> int:
    spec = doc["spec"]
    if spec.get("suspend") is True:
        return 0
    workers = sum(max(1, g.get("numOfHosts", 1)) * min(max(g.get("replicas", 0), g.get("minReplicas", 0)),
                                                       g.get("maxReplicas", 2**31 - 1))
                  for g in spec["workerGroupSpecs"] if g.get("suspend") is not True)
    return 1 + workers


def _refusals(plane, ns: str) -> dict[str, str]:
    events = plane.kubectl_json("get", "events", "-n", ns)["items"]
    return {e["involvedObject"]["name"]: e.get("message") or "" for e in events
            if e["reason"] == "InvalidRayClusterSpec"}


def _pods(plane, ns: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in plane.kubectl_json("get", "pods", "-n", ns, "-l", "ray.io/cluster")["items"]:
        if not pod["metadata"].get("deletionTimestamp"):
            out.setdefault(pod["metadata"]["labels"]["ray.io/cluster"], []).append(pod)
    return out


def _built(plane, ns: str, docs: dict[str, dict[str, Any]], timeout: float = 240) -> None:
    """Until every cluster has the pods its spec asks for, or was refused, and nothing moved
    for a few seconds (a refusal comes with the first reconcile; FT clusters wait for their
    finalizer first)."""
    last, since, end = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < end:
        pods, refused = _pods(plane, ns), _refusals(plane, ns)
        pending = sorted(n for n, d in docs.items() if n not in refused and len(pods.get(n, [])) != _expected_pods(d))
        state = (tuple(pending), tuple(sorted(p["metadata"]["uid"] for ps in pods.values() for p in ps)))
        if state != last:
            last, since = state, time.monotonic()
        elif not pending and time.monotonic() - since >= 3:
            return
        time.sleep(1)
    raise AssertionError(f"pods not built for {last[0] if last else '?'}")


def test_pod_oracle(operator_plane, tmp_path) -> None:
    operator, plane = operator_plane
    crd = yaml.safe_load((plane.crd_source / "ray.io_rayclusters.yaml").read_text())
    from raygitops.model.crdschema import crd_spec_schema

    schema = crd_spec_schema(crd)
    missing = [f for f in podoracle.fields(schema) if not any(s.path == f for s in podoracle.SAMPLES)]
    assert not missing, f"fields of the {operator} CRD without a sample in tests/podoracle.py: {missing}"
    samples = [s for s in podoracle.SAMPLES
               if (FULL or s.key in podoracle.QUICK) and podoracle.applies(s, schema)]
    contexts = sorted({s.context for s in samples})
    bases = {c: _name("b", i) for i, c in enumerate(contexts)}
    changed = {s.key: _name("o", i) for i, s in enumerate(samples)}
    docs = {bases[c]: podoracle.cluster(bases[c], c) for c in contexts}
    docs.update({changed[s.key]: podoracle.cluster(changed[s.key], s.context, s) for s in samples})

    ns = plane.create_namespace(unique_name("oracle"))
    started = time.monotonic()
    try:
        res = plane.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump_all(list(docs.values())), check=False)
        assert res.returncode == 0, res.stderr
        _built(plane, ns, docs)
        pods, refused = _pods(plane, ns), _refusals(plane, ns)
        uids = {c["metadata"]["name"]: c["metadata"]["uid"]
                for c in plane.kubectl_json("get", "rayclusters", "-n", ns)["items"]}

        def shapes(name: str) -> dict[str, frozenset[str]]:
            return podoracle.shapes(pods.get(name, []), name, uids[name])

        assert not any(bases[c] in refused for c in contexts), {bases[c]: refused.get(bases[c]) for c in contexts}
        documented = podoracle.documented()
        rows, wrong = [], []
        for s in samples:
            name = changed[s.key]
            predicted = podoracle.predict(s, operator)
            if name in refused:
                observed = podoracle.Answer(predicted.text if predicted.message and predicted.message in refused[name]
                                            else f"{podoracle.REFUSED} ({refused[name]})", refused[name])
            elif s.path == podoracle.W + "groupName":
                observed = podoracle.Answer(podoracle.IDENTITY)
            elif not pods.get(name):
                observed = podoracle.Answer(podoracle.NO_PODS)
            else:
                observed = podoracle.Answer(podoracle.verdict_text(podoracle.compare(shapes(bases[s.context]),
                                                                                     shapes(name))))
            _results["measured"][s.key, operator] = observed.text
            _results["predicted"][s.key, operator] = predicted.text
            rows.append(f"{s.key:90} operator: {observed.text:40} raygitops: {predicted.text}")
            if observed.text != predicted.text and s.key not in podoracle.KNOWN:
                wrong.append(f"{s.key}: the operator built {observed.text}, raygitops says {predicted.text}")
            if not FULL and documented.get((s.key, operator), observed.text) != observed.text:
                wrong.append(f"{s.key}: docs/pod-fields.md says {documented[s.key, operator]}, measured {observed.text}")
        print(f"\nKubeRay {operator}: {len(samples)} changes, {len(docs)} clusters, "
              f"built and compared in {time.monotonic() - started:.0f} s")
        print("\n".join(rows))
        assert not wrong, "\n".join(wrong + ["", "measured:"] + rows)
    finally:
        plane.delete_namespace(ns, wait=False)
