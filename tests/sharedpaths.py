"""Where the project's shared reference material lives (../shared beside the repo).

A plain module, not a conftest: test packages with conftests of their own import it
by name."""

from __future__ import annotations

import os
import shutil
import subprocess
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


def _gomodcache() -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True).stdout if os.access(go, os.X_OK) else ""
    return Path(out.strip() or Path.home() / "go" / "pkg" / "mod")


def raycluster_crd(version: str) -> tuple[Path | None, list[Path]]:
    """KubeRay ``version``'s RayCluster CRD file (``v1.5.0``): the copy in ../shared, else the
    ray-operator module the e2e build downloaded into GOMODCACHE; None when neither is there,
    with the places looked at."""
    candidates = [CRDS / f"kuberay-{version}" / "ray.io_rayclusters.yaml",
                  _gomodcache() / f"github.com/ray-project/kuberay/ray-operator@{version}/config/crd/bases"
                  / "ray.io_rayclusters.yaml"]
    return next((c for c in candidates if c.is_file()), None), candidates
