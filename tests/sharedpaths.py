"""Where the project's shared reference material lives (../shared beside the repo).

A plain module, not a conftest: test packages with conftests of their own import it
by name."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus" / "kuberay-v1.7.0"
# the KubeRay the samples are written for: render's kuberayVersion when rendering them (their
# fields newer than the shipped CRD schemas are then warnings, not errors)
CORPUS_KUBERAY = "1.7.0"
CRDS = SHARED / "crds"


def corpus_files() -> list[Path]:
    """The KubeRay sample manifests (empty when ../shared is absent)."""
    return sorted(CORPUS.glob("*.yaml")) if CORPUS.is_dir() else []
