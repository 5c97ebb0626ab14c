"""Golden outputs: each example app renders to exactly its recorded manifests.

Regenerate after an intended change with RAYGITOPS_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sharedpaths import REPO
from raygitops.render.output import yaml_stream
from raygitops.render.pipeline import render_app

GOLDEN = Path(__file__).parent / "golden" / "render"
# A fixed Argo CD build environment, so goldens do not depend on the caller's.
ENV = {"ARGOCD_APP_NAME": "example", "ARGOCD_APP_NAMESPACE": "ray"}


def example_apps() -> list[Path]:
    return sorted(p.parent for p in (REPO / "examples").glob("*/raygitops.yaml"))


@pytest.mark.parametrize("app", example_apps(), ids=lambda p: p.name)
def test_example_matches_golden(app: Path) -> None:
    rendered = yaml_stream(render_app(str(app), env=ENV).objects)
    golden = GOLDEN / f"{app.name}.yaml"
    if os.environ.get("RAYGITOPS_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(rendered)
    assert golden.is_file(), f"no golden for {app.name}: run with RAYGITOPS_UPDATE_GOLDEN=1"
    assert rendered == golden.read_text()


def test_there_are_examples() -> None:
    assert any(p.name == "plain" for p in example_apps())
