"""Shared test helpers: where the project's shared reference material lives."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus" / "kuberay-v1.7.0"
CRDS = SHARED / "crds"


def corpus_files() -> list[Path]:
    """The KubeRay sample manifests (empty when ../shared is absent)."""
    return sorted(CORPUS.glob("*.yaml")) if CORPUS.is_dir() else []


@pytest.fixture
def corpus() -> list[Path]:
    files = corpus_files()
    if not files:
        pytest.skip(f"KubeRay corpus not found at {CORPUS}")
    return files
