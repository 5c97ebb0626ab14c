"""Every KubeRay sample renders, and the output is accepted by the CRD schema.

The schema comes from the CRD files in ../shared (not the package data render ships), read
with the same checker render uses; test_crdschema.py checks the package data against them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sharedpaths import CORPUS_KUBERAY, CRDS
from raygitops.model import crdschema
from raygitops.model.names import HASHES_ANNOTATION
from raygitops.render.pipeline import render_app
from raygitops.render.renderer import is_raycluster
from raygitops.model.names import STRATEGY_ANNOTATION

CRD_VERSIONS = ("kuberay-v1.5.0", "kuberay-v1.6.2")
TARGET = {"kuberay_version": CORPUS_KUBERAY}  # the samples' own KubeRay


def crd_spec_schema(crd: Path) -> dict:
    """The RayCluster spec schema of a CRD file, as render's checker reads it."""
    return crdschema.crd_spec_schema(yaml.load(crd.read_text(), Loader=yaml.CSafeLoader))


@pytest.fixture(scope="module", params=CRD_VERSIONS)
def schema(request) -> dict:
    crd = CRDS / request.param / "ray.io_rayclusters.yaml"
    if not crd.is_file():
        pytest.skip(f"KubeRay CRD not found at {crd}")
    return crd_spec_schema(crd)


def problems(obj: dict, schema: dict) -> set[str]:
    # the live object is JSON: round-trip like the API server does
    return set(crdschema.problems(json.loads(json.dumps(obj, default=str))["spec"], schema, "spec"))


def originals(sample: Path) -> dict[str, dict]:
    docs = [d for d in yaml.safe_load_all(sample.read_text()) if d]
    return {d["metadata"]["name"]: d for d in docs if is_raycluster(d)}


def test_every_sample_renders_and_validates(corpus: list[Path], schema: dict) -> None:
    """The 1.7.0 samples use fields newer than some CRDs: render must add no problem."""
    clusters = 0
    for sample in corpus:
        before = originals(sample)
        result = render_app(str(sample), env={}, overrides=TARGET)
        for obj in result.objects:
            if not is_raycluster(obj):
                continue
            clusters += 1
            assert HASHES_ANNOTATION in obj["metadata"]["annotations"]
            added = problems(obj, schema) - problems(before[obj["metadata"]["name"]], schema)
            assert not added, f"{sample.name}: {sorted(added)[:5]}"
    assert clusters >= 20


def test_opted_in_samples_validate(corpus: list[Path], schema: dict, tmp_path: Path) -> None:
    """Opt-in by spec field, as a KubeRay 1.6 user would write it: the 1.5 CRD has no such
    field, so render must move it out of the spec and add nothing the CRD would prune."""
    for sample in corpus:
        before = originals(sample)
        docs = [d for d in yaml.safe_load_all(sample.read_text()) if d]
        if not before:
            continue
        for doc in docs:
            if is_raycluster(doc):
                doc["spec"]["upgradeStrategy"] = {"type": "Recreate"}
        app = tmp_path / sample.stem
        app.mkdir()
        (app / sample.name).write_text(yaml.safe_dump_all(docs))
        result = render_app(str(app), env={}, overrides=TARGET)
        rayclusters = [o for o in result.objects if is_raycluster(o)]
        for obj in rayclusters:
            assert obj["metadata"]["annotations"][STRATEGY_ANNOTATION] == "Recreate"
            assert not problems(obj, schema) - problems(before[obj["metadata"]["name"]], schema)
        assert any(o["kind"] == "Job" for o in result.objects), sample.name


def test_rayjob_and_rayservice_samples_pass_through(corpus: list[Path]) -> None:
    for sample in corpus:
        if not sample.name.startswith(("ray-job", "ray-service")):
            continue
        original = [d for d in yaml.safe_load_all(sample.read_text()) if d]
        for doc in original:  # unchanged but for the namespace every namespaced object gets
            doc["metadata"].setdefault("namespace", "default")
        result = render_app(str(sample), env={})
        assert result.objects == original
