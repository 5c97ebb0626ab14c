#!/usr/bin/env python3
"""Write argocd/argocd-cm-health.yaml from argocd/health/*.lua (the one source of each check).

    python3 argocd/health/generate.py          # rewrite the patch
    python3 argocd/health/generate.py --check  # exit 1 if the patch is out of date

The patch is a strategic-merge patch of Argo CD's `argocd-cm` ConfigMap, used by the
kustomize component in argocd/ or directly:
    kubectl -n argocd patch configmap argocd-cm --patch-file argocd/argocd-cm-health.yaml
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATCH = HERE.parent / "argocd-cm-health.yaml"
# argocd-cm key -> the Lua file it holds
CHECKS = {
    "resource.customizations.health.ray.io_RayCluster": HERE / "raycluster.lua",
    "resource.customizations.health.batch_Job": HERE / "job.lua",
}


def _block(path: Path) -> str:
    lua = path.read_text(encoding="utf-8")
    if "\t" in lua or any(line != line.rstrip() for line in lua.splitlines()):
        raise SystemExit(f"{path}: tabs or trailing spaces cannot round-trip a YAML block scalar")
    return "".join(f"    {line}\n" if line else "\n" for line in lua.rstrip("\n").split("\n"))


def patch_text() -> str:
    return (
        "# Generated from argocd/health/*.lua by argocd/health/generate.py: do not edit.\n"
        "# Adds raygitops' health checks to Argo CD (strategic-merge patch of argocd-cm): the\n"
        "# RayCluster check, and Argo CD's own Job check plus the hook's failure reason.\n"
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: argocd-cm\n"
        "data:\n"
        + "".join(f"  {key}: |\n{_block(path)}" for key, path in CHECKS.items())
    )


def main(argv: list[str]) -> int:
    want = patch_text()
    if "--check" in argv:
        have = PATCH.read_text(encoding="utf-8") if PATCH.is_file() else ""
        if have != want:
            print(f"{PATCH} is out of date: run python3 argocd/health/generate.py", file=sys.stderr)
            return 1
        return 0
    PATCH.write_text(want, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
