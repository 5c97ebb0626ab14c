"""Fixtures shared by every test tier."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sharedpaths import CORPUS, corpus_files  # noqa: E402


@pytest.fixture
def corpus() -> list[Path]:
    """The KubeRay samples; skips cleanly when ../shared is absent."""
    files = corpus_files()
    if not files:
        pytest.skip(f"KubeRay corpus not found at {CORPUS}")
    return files
