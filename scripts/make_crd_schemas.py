#!/usr/bin/env python3
"""Write the RayCluster CRD schemas render checks against (plugin/raygitops/model/schemas/).

One file per KubeRay minor version, from KubeRay's own CRD: ``ray.io_rayclusters.yaml`` of the
ray-operator module, the versions pinned in tests/e2e/versions.env (KUBERAY_OLDER_VERSIONS,
KUBERAY_VERSION, KUBERAY_NEXT_VERSION: 1.1 to 1.6). The module comes from the Go module proxy
(``go mod download``). The proxy refuses ray-operator v1.7.x, so 1.7's comes from the CRDs taken
from the upstream tag (``../shared/crds/kuberay-v1.7.0/``, :data:`FROM_SHARED`). Or give the CRD
files: ``--crd 1.5=PATH --crd 1.7=PATH``. Only what the check reads is kept
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
SHARED_CRDS = REPO.parent / "shared" / "crds"
# minor -> the CRD folder under ../shared/crds, for the versions the module proxy does not serve
FROM_SHARED = {"1.7": "kuberay-v1.7.0"}
PINNED = ("KUBERAY_OLDER_VERSIONS", "KUBERAY_VERSION", "KUBERAY_NEXT_VERSION")


def pinned_versions() -> dict[str, str]:
    """minor -> the exact version versions.env pins (v1.1.1 ... v1.6.2), as bash reads it."""
    script = 'source "$0"; for n in "$@"; do printf "%s\\n" "${!n}"; done'
    out = subprocess.run(["bash", "-c", script, str(REPO / "tests" / "e2e" / "versions.env"), *PINNED],
                         capture_output=True, text=True, check=True).stdout
    return {".".join(v.lstrip("v").split(".")[:2]): v for v in out.split()}


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
    if set(pinned) | set(FROM_SHARED) != set(SCHEMAS):
        sys.exit(f"versions.env pins {sorted(pinned)} and ../shared gives {sorted(FROM_SHARED)}, "
                 f"raygitops.model.crdschema.SCHEMAS ships {sorted(SCHEMAS)}")
    OUT.mkdir(exist_ok=True)
    for minor, name in SCHEMAS.items():
        if minor in given:
            source = Path(given[minor])
        elif minor in FROM_SHARED:
            source = SHARED_CRDS / FROM_SHARED[minor] / "ray.io_rayclusters.yaml"
        else:
            source = module_crd(pinned[minor])
        (OUT / name).write_bytes(packed(spec_schema(source)))
        print(f"{OUT / name}: from {source}")


if __name__ == "__main__":
    main()
