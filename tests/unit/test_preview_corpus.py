"""Mutation suite over the KubeRay samples: each mutation of a RayCluster gets the right class
and the right groups, opted in (annotation ``raygitops.dev/upgrade-strategy: Recreate``) and not.

Reads ``<repo>/../shared/corpus/kuberay-v1.7.0/*.yaml`` in place (never copied into the repo);
skips cleanly when it is absent.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from raygitops.preview.impact import classify
from raygitops.preview.revisions import render_sides
from raygitops.model.quantity import parse
from raygitops.render.renderer import is_raycluster
from raygitops.model.names import STRATEGY_ANNOTATION
from sharedpaths import CORPUS, CORPUS_KUBERAY


def _documents(path: Path) -> list[dict]:
    """A sample's documents (libyaml: the corpus is read for 600 cases at collection)."""
    return [d for d in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if d]


def samples() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    out = []
    for path in sorted(CORPUS.glob("*.yaml")):
        docs = _documents(path)
        if any(is_raycluster(d) for d in docs):
            out.append(path)
    return out


SAMPLES = samples()

# ---------------------------------------------------------------------------------------------
# Mutations: (cluster object) -> expected changed groups (None: the mutation does not apply),
# and the expected class when the hashes do not move.


def _containers(group: dict) -> list[dict]:
    return group["template"]["spec"]["containers"]


def _workers(c: dict) -> list[dict]:
    return c["spec"].get("workerGroupSpecs") or []


def all_groups(c: dict) -> set[str]:
    return {"head"} | {f"worker:{g['groupName']}" for g in _workers(c)}


def m_image_head(c: dict) -> set[str] | None:
    _containers(c["spec"]["headGroupSpec"])[0]["image"] = "example.com/ray:mutated"
    return {"head"}


def m_image_worker(c: dict) -> set[str] | None:
    if not _workers(c):
        return None
    group = _workers(c)[-1]
    _containers(group)[0]["image"] = "example.com/ray:mutated"
    return {f"worker:{group['groupName']}"}


def m_env(c: dict) -> set[str] | None:
    container = _containers(c["spec"]["headGroupSpec"])[0]
    container.setdefault("env", []).append({"name": "RAYGITOPS_MUTATION", "value": "1"})
    return {"head"}


def m_resources(c: dict) -> set[str] | None:
    group = _workers(c)[0] if _workers(c) else c["spec"]["headGroupSpec"]
    container = _containers(group)[0]
    limits = container.setdefault("resources", {}).setdefault("limits", {})
    limits["memory"] = "12345Mi"
    return {f"worker:{group['groupName']}" if group is not c["spec"]["headGroupSpec"] else "head"}


def m_ray_start_params(c: dict) -> set[str] | None:
    c["spec"]["headGroupSpec"].setdefault("rayStartParams", {})["object-store-memory"] = "77777777"
    return {"head"}


def _unified_probes(version: str) -> bool:
    return tuple(int(p) for p in version.split(".")[:3]) >= (2, 53, 0)


def m_ray_version(c: dict) -> set[str] | None:
    """Another Ray version on the same side of 2.53: the pods KubeRay builds do not change."""
    before = str(c["spec"].get("rayVersion") or "2.0.0")
    c["spec"]["rayVersion"] = "9.9.9" if _unified_probes(before) else "2.52.9"
    return set()


def m_ray_version_probes(c: dict) -> set[str] | None:
    """Ray 2.53: KubeRay 1.6 writes HTTP probes where the Ray container sets none."""
    if _unified_probes(str(c["spec"].get("rayVersion") or "2.0.0")):
        return None
    c["spec"]["rayVersion"] = "2.53.0"
    groups = [("head", c["spec"]["headGroupSpec"])] + [(f"worker:{g['groupName']}", g) for g in _workers(c)]
    return {key for key, g in groups
            if not (_containers(g)[0].get("livenessProbe") and _containers(g)[0].get("readinessProbe"))}


def m_replicas(c: dict) -> set[str] | None:
    if not _workers(c):
        return None
    group = _workers(c)[0]
    group["replicas"] = (group.get("replicas") or 0) + 1
    group["maxReplicas"] = max(group.get("maxReplicas") or 0, group["replicas"]) + 5
    group["minReplicas"] = 0
    return set()


def _reorder(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reorder(v) for v in value]
    return value


def m_key_reorder(c: dict) -> set[str] | None:
    reordered = _reorder(c)
    c.clear()
    c.update(reordered)
    return set()


def _other_notation(value: Any) -> Any:
    number = parse(value)
    if number is None:
        return value
    text = str(value)
    for big, small, factor in (("Gi", "Mi", 1024), ("Mi", "Ki", 1024), ("G", "M", 1000),
                               ("M", "k", 1000)):
        if text.endswith(big):
            n = Fraction(text[: -len(big)]) * factor
            if n.denominator == 1:
                return f"{n.numerator}{small}"
    milli = number * 1000
    if milli.denominator == 1 and not text.endswith("m"):
        return f"{milli.numerator}m"
    if isinstance(value, str) and number.denominator == 1:
        return int(number)  # "4" -> 4
    return value


def m_quantity_notation(c: dict) -> set[str] | None:
    changed = False

    def walk(node: Any) -> None:
        nonlocal changed
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("limits", "requests") and isinstance(value, dict):
                    for k, v in value.items():
                        new = _other_notation(v)
                        if new != v:
                            value[k] = new
                            changed = True
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(c["spec"])
    return set() if changed else None


def m_metadata_only(c: dict) -> set[str] | None:
    c["metadata"].setdefault("labels", {})["team"] = "mutated"
    c["metadata"].setdefault("annotations", {})["example.com/note"] = "mutated"
    return set()


MUTATIONS: dict[str, tuple[Callable[[dict], set[str] | None], str | None]] = {
    # name: (mutation, class when no hash moves: None = the hashes must move)
    "image-head": (m_image_head, None),
    "image-worker": (m_image_worker, None),
    "env": (m_env, None),
    "resources": (m_resources, None),
    "rayStartParams": (m_ray_start_params, None),
    "rayVersion": (m_ray_version, "in-place"),
    "rayVersion-probes": (m_ray_version_probes, None),
    "replicas": (m_replicas, "in-place"),
    "key-reorder": (m_key_reorder, "unchanged"),
    "quantity-notation": (m_quantity_notation, "in-place"),
    "metadata-only": (m_metadata_only, "in-place"),
}


def _opt(doc: dict, opted_in: bool) -> dict:
    doc = copy.deepcopy(doc)
    doc["spec"].pop("upgradeStrategy", None)
    annotations = doc.setdefault("metadata", {}).setdefault("annotations", {}) or {}
    doc["metadata"]["annotations"] = annotations
    annotations.pop(STRATEGY_ANNOTATION, None)
    if opted_in:
        annotations[STRATEGY_ANNOTATION] = "Recreate"
    if not annotations:
        del doc["metadata"]["annotations"]
    return doc


def _write(root: Path, docs: list[dict]) -> None:
    root.mkdir(parents=True)
    (root / "app.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    (root / "raygitops.yaml").write_text(f"kuberayVersion: {CORPUS_KUBERAY}\n")


def _applies(sample: Path, mutation: str) -> bool:
    """A mutation that needs what a sample lacks (e.g. a worker group) is not a case."""
    docs = _documents(sample)
    cluster = next(d for d in docs if is_raycluster(d))
    return MUTATIONS[mutation][0](copy.deepcopy(cluster)) is not None


CASES = [(s, m) for s in SAMPLES for m in sorted(MUTATIONS) if _applies(s, m)]


@pytest.mark.skipif(not SAMPLES, reason=f"corpus not found at {CORPUS}")
@pytest.mark.parametrize("opted_in", [True, False], ids=["opted-in", "not-opted-in"])
@pytest.mark.parametrize("sample,mutation", CASES, ids=[f"{s.name}-{m}" for s, m in CASES])
def test_mutation(sample: Path, mutation: str, opted_in: bool, tmp_path: Path) -> None:
    docs = _documents(sample)
    index = next(i for i, d in enumerate(docs) if is_raycluster(d))
    base_docs = [_opt(d, opted_in) if i == index else d for i, d in enumerate(docs)]
    head_docs = copy.deepcopy(base_docs)
    mutate, still_class = MUTATIONS[mutation]
    expected_groups = mutate(head_docs[index])
    _write(tmp_path / "base", base_docs)
    _write(tmp_path / "head", head_docs)

    base, head = render_sides(str(tmp_path / "base"), str(tmp_path / "head"))
    report = classify(base.result, head.result)
    name = docs[index]["metadata"]["name"]
    (target,) = [c for c in report.clusters if c.name == name]
    others = [c for c in report.clusters if c.name != name]

    assert {g.group for g in target.hashed_groups} == expected_groups
    if expected_groups:
        assert target.klass == ("recreate" if opted_in else "stale")
        assert any(c.pod_shaping and not c.same_value for c in target.changes)
        if opted_in:
            assert target.pods == target.pods_total
    else:
        assert target.klass == still_class
        assert all(not c.pod_shaping or c.same_value for c in target.changes)
    if mutation == "key-reorder":
        assert target.changes == []
    if mutation == "quantity-notation":
        assert target.changes and all(c.same_value for c in target.changes)
    assert all(c.klass == "unchanged" for c in others)
    assert all(not (k.created or k.changed or k.deleted) for k in report.others)
