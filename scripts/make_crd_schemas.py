#!/usr/bin/env python3
"""Write the RayCluster CRD schemas render checks against (plugin/raygitops/model/schemas/).

One file per KubeRay minor version, from KubeRay's own CRD: ``ray.io_rayclusters.yaml`` of the
ray-operator module, the versions pinned in tests/e2e/versions.env (KUBERAY_VERSION,
KUBERAY_NEXT_VERSION). The module comes from the Go module proxy (``go mod download``), or
give the CRD files: ``--crd 1.5=PATH --crd 1.6=PATH``. Only what the check reads is kept
(raygitops.model.crdschema.strip_schema); the output is gzip'ed JSON, byte-for-byte reproducible.

    python scripts/make_crd_schemas.py
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugin"))
from raygitops.model.crdschema import SCHEMAS, crd_spec_schema  # noqa: E402

OUT = REPO / "plugin" / "raygitops" / "model" / "schemas"
MODULE = "github.com/ray-project/kuberay/ray-operator"
CRD_IN_MODULE = "config/crd/bases/ray.io_rayclusters.yaml"


def pinned_versions() -> dict[str, str]:
    """minor -> the exact version versions.env pins (v1.5.0, v1.6.2)."""
    env = dict(line.split("=", 1) for line in (REPO / "tests" / "e2e" / "versions.env").read_text().splitlines()
               if "=" in line and not line.startswith("#"))
    versions = [env["KUBERAY_VERSION"], env["KUBERAY_NEXT_VERSION"]]
    return {".".join(v.lstrip("v").split(".")[:2]): v for v in versions}


def module_crd(version: str) -> Path:
    res = subprocess.run(["go", "mod", "download", "-json", f"{MODULE}@{version}"], capture_output=True, text=True,
                         check=True)
    return Path(json.loads(res.stdout)["Dir"]) / CRD_IN_MODULE


def spec_schema(crd_file: Path) -> Any:
    return crd_spec_schema(yaml.load(crd_file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


def packed(schema: dict) -> bytes:
    text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    return gzip.compress(text.encode(), mtime=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crd", action="append", default=[], metavar="MINOR=PATH",
                        help="a RayCluster CRD file for a minor version (default: from the Go module proxy)")
    args = parser.parse_args()
    given = dict(item.split("=", 1) for item in args.crd)
    pinned = pinned_versions()
    if set(pinned) != set(SCHEMAS):
        sys.exit(f"versions.env pins {sorted(pinned)}, raygitops.model.crdschema.SCHEMAS ships {sorted(SCHEMAS)}")
    OUT.mkdir(exist_ok=True)
    for minor, name in SCHEMAS.items():
        source = Path(given[minor]) if minor in given else module_crd(pinned[minor])
        (OUT / name).write_bytes(packed(spec_schema(source)))
        print(f"{OUT / name}: from {source}")


if __name__ == "__main__":
    main()
