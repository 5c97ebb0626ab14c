"""Every KubeRay sample renders, and the output is accepted by the CRD schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sharedpaths import CRDS
from crdschema import load_schema, validate
from raygitops.hashing import HASHES_ANNOTATION
from raygitops.pipeline import render_app
from raygitops.render import is_raycluster
from raygitops.strategy import STRATEGY_ANNOTATION

CRD_VERSIONS = ("kuberay-v1.5.0", "kuberay-v1.6.2")


@pytest.fixture(scope="module", params=CRD_VERSIONS)
def schema(request) -> dict:
    crd = CRDS / request.param / "ray.io_rayclusters.yaml"
    if not crd.is_file():
        pytest.skip(f"KubeRay CRD not found at {crd}")
    return load_schema(crd)


def problems(obj: dict, schema: dict) -> set[str]:
    # the live object is JSON: round-trip like the API server does
    return set(validate(json.loads(json.dumps(obj, default=str)), schema))


def originals(sample: Path) -> dict[str, dict]:
    import yaml

    docs = [d for d in yaml.safe_load_all(sample.read_text()) if d]
    return {d["metadata"]["name"]: d for d in docs if is_raycluster(d)}


def test_every_sample_renders_and_validates(corpus: list[Path], schema: dict) -> None:
    """The 1.7.0 samples use fields newer than some CRDs: render must add no problem."""
    clusters = 0
    for sample in corpus:
        before = originals(sample)
        result = render_app(str(sample), env={})
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
        import yaml

        docs = [d for d in yaml.safe_load_all(sample.read_text()) if d]
        if not before:
            continue
        for doc in docs:
            if is_raycluster(doc):
                doc["spec"]["upgradeStrategy"] = {"type": "Recreate"}
        app = tmp_path / sample.stem
        app.mkdir()
        (app / sample.name).write_text(yaml.safe_dump_all(docs))
        result = render_app(str(app), env={})
        rayclusters = [o for o in result.objects if is_raycluster(o)]
        for obj in rayclusters:
            assert obj["metadata"]["annotations"][STRATEGY_ANNOTATION] == "Recreate"
            assert not problems(obj, schema) - problems(before[obj["metadata"]["name"]], schema)
        assert any(o["kind"] == "Job" for o in result.objects), sample.name


def test_rayjob_and_rayservice_samples_pass_through(corpus: list[Path]) -> None:
    for sample in corpus:
        if not sample.name.startswith(("ray-job", "ray-service")):
            continue
        import yaml

        original = [d for d in yaml.safe_load_all(sample.read_text()) if d]
        result = render_app(str(sample), env={})
        assert result.objects == original
