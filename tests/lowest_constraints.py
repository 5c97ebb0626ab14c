"""Print pip constraints pinning every direct dependency of pyproject.toml (runtime and the
``test`` extra) to the lowest version its range declares: ``name>=X`` becomes ``name==X``.

Used by tests/venvs.sh for the "lowest versions" run. A requirement without a lower bound
is an error: a range that admits anything cannot be tested at its bottom.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def lowest(requirement: str) -> str | None:
    """``name==lowest`` for one requirement string; None when its marker excludes this
    interpreter."""
    req = Requirement(requirement)
    if req.marker is not None and not req.marker.evaluate({"extra": "test"}):
        return None
    bounds = [s.version for s in req.specifier if s.operator in (">=", "==", "~=")]
    if not bounds:
        raise SystemExit(f"{PYPROJECT.name}: {requirement!r} declares no lowest version")
    return f"{req.name}=={bounds[0]}"


def main() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    for requirement in requirements:
        pin = lowest(requirement)
        if pin:
            sys.stdout.write(pin + "\n")


if __name__ == "__main__":
    main()
