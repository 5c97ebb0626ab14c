#!/usr/bin/env python3
"""Write argocd/argocd-cm-health.yaml from argocd/health/raycluster.lua (the one source).

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
LUA = HERE / "raycluster.lua"
PATCH = HERE.parent / "argocd-cm-health.yaml"
KEY = "resource.customizations.health.ray.io_RayCluster"


def patch_text(lua: str) -> str:
    if "\t" in lua or any(line != line.rstrip() for line in lua.splitlines()):
        raise SystemExit(f"{LUA}: tabs or trailing spaces cannot round-trip a YAML block scalar")
    body = "".join(f"    {line}\n" if line else "\n" for line in lua.rstrip("\n").split("\n"))
    return (
        "# Generated from argocd/health/raycluster.lua by argocd/health/generate.py: do not edit.\n"
        "# Adds raygitops' RayCluster health check to Argo CD (strategic-merge patch of argocd-cm).\n"
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: argocd-cm\n"
        "data:\n"
        f"  {KEY}: |\n"
        f"{body}"
    )


def main(argv: list[str]) -> int:
    want = patch_text(LUA.read_text(encoding="utf-8"))
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
