"""Generate large apps for benchmarks: RayClusters varied from the KubeRay corpus (or a
built-in cluster when ../shared is absent) plus other documents, written by PyYAML
(:func:`write_app`); and the corpus' RayClusters as their authors wrote them, renamed, with
ConfigMaps between them (:func:`write_sample_app`)."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sharedpaths import CORPUS_KUBERAY, corpus_files  # noqa: E402

CORPUS_KUBERAY_MINOR = ".".join(CORPUS_KUBERAY.split(".")[:2])

FALLBACK = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "fallback"},
    "spec": {
        "rayVersion": "2.41.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "rayproject/ray:2.41.0",
             "resources": {"limits": {"cpu": "1", "memory": "2Gi"}}}]}}},
        "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 1, "maxReplicas": 3,
                              "rayStartParams": {}, "template": {"spec": {"containers": [
                                  {"name": "w", "image": "rayproject/ray:2.41.0"}]}}}],
    },
}


def sample_clusters() -> list[dict]:
    found = []
    for path in corpus_files():
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "RayCluster":
                doc.get("metadata", {}).pop("namespace", None)
                found.append(doc)
    return found or [FALLBACK]


def config_map(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"},
            "data": {f"key{j}": f"value {i} {j}" for j in range(8)}}


def other_document(i: int) -> dict:
    kind = i % 3
    if kind == 0:
        return config_map(i)
    if kind == 1:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i}", "labels": {"app": f"a{i}"}},
                "spec": {"selector": {"app": f"a{i}"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"dep-{i}"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": f"d{i}"}},
                     "template": {"metadata": {"labels": {"app": f"d{i}"}},
                                  "spec": {"containers": [{"name": "c", "image": f"nginx:1.{i % 30}",
                                                           "ports": [{"containerPort": 80}]}]}}}}


def cluster(samples: list[dict], i: int, variant: int = 0) -> dict:
    obj = copy.deepcopy(samples[i % len(samples)])
    obj["metadata"]["name"] = f"rc-{i}"
    if i % 2 == 0:
        obj["metadata"].setdefault("annotations", {})["raygitops.dev/upgrade-strategy"] = "Recreate"
    obj["metadata"]["namespace"] = f"team-{i % 4}"
    containers = obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    containers[0].setdefault("env", []).append({"name": "VARIANT", "value": f"{i}-{variant}"})
    return obj


def write_app(root: Path, clusters: int, others: int, changed: set[int] = frozenset()) -> Path:
    """Write an app: one file per 10 clusters, one per 10 other documents."""
    root.mkdir(parents=True, exist_ok=True)
    samples = sample_clusters()
    if corpus_files():  # the samples' own KubeRay: their newer fields are warnings, not errors
        (root / "raygitops.yaml").write_text(f"kuberayVersion: {CORPUS_KUBERAY}\n")
    for start in range(0, clusters, 10):
        docs = [cluster(samples, i, 1 if i in changed else 0) for i in range(start, min(start + 10, clusters))]
        (root / f"clusters-{start:05d}.yaml").write_text(yaml.dump_all(docs, Dumper=yaml.CSafeDumper, sort_keys=False))
    for start in range(0, others, 10):
        docs = [other_document(i) for i in range(start, min(start + 10, others))]
        (root / f"other-{start:05d}.yaml").write_text(yaml.dump_all(docs, Dumper=yaml.CSafeDumper, sort_keys=False))
    return root


# A document marker line of a YAML stream (the samples use bare "---")
_MARKER = re.compile(r"^---[ \t]*(?:#.*)?\n", re.MULTILINE)


def sample_texts() -> list[str]:
    """The KubeRay samples' RayCluster documents as their authors wrote them (comments,
    indentation, quoting, flow collections kept), in corpus order; empty when ../shared is absent."""
    found = []
    for path in corpus_files():
        for part in _MARKER.split(path.read_text(encoding="utf-8")):
            doc = yaml.safe_load(part)
            if isinstance(doc, dict) and doc.get("kind") == "RayCluster":
                found.append(part if part.endswith("\n") else part + "\n")
    return found


def renamed(text: str, name: str) -> str:
    """A RayCluster document's text with the scalar of ``metadata.name`` replaced by ``name``
    (found by the parser's marks), every other character as written."""
    root = yaml.compose(text, Loader=yaml.CSafeLoader)
    metadata = next(v for k, v in root.value if k.value == "metadata")
    value = next(v for k, v in metadata.value if k.value == "name")
    return text[:value.start_mark.index] + name + text[value.end_mark.index:]


def write_sample_app(root: Path, clusters: int, files: int = 20) -> Path | None:
    """The KubeRay samples as written (:func:`sample_texts`), cycled to ``clusters``
    RayClusters named ``rc-<i>`` and with a ConfigMap after each, in ``files`` files;
    ``kuberayVersion`` the samples' own.  None when ../shared is absent."""
    texts = sample_texts()
    if not texts:
        return None
    root.mkdir(parents=True, exist_ok=True)
    (root / "raygitops.yaml").write_text(f'kuberayVersion: "{CORPUS_KUBERAY_MINOR}"\n')
    per_file = -(-clusters // files)
    for start in range(0, clusters, per_file):
        parts = []
        for i in range(start, min(start + per_file, clusters)):
            parts.append(renamed(texts[i % len(texts)], f"rc-{i}"))
            parts.append(yaml.dump(config_map(i), Dumper=yaml.CSafeDumper, sort_keys=False))
        (root / f"samples-{start:05d}.yaml").write_text("---\n".join(parts), encoding="utf-8")
    return root
