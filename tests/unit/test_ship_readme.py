"""The README's first command, as a newcomer runs it: in a fresh clone, with nothing installed,
it installs the locked dependencies and raygitops into .venv and renders an example, and its
stdout is the manifests and nothing else (pip's output goes to stderr), so it can be piped to
kubectl or compared. The line is read from README.md, never copied here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
import ship_support  # noqa: E402

REPO = ship_support.REPO
pytestmark = pytest.mark.packaging  # a virtualenv and pip installs from PyPI: not in tests/fast.sh


def test_readme_first_command_prints_only_the_manifests(tmp_path: Path) -> None:
    install, _ = ship_support.readme_two_commands()
    clone = ship_support.fresh_clone(tmp_path / "raygitops")
    assert not (clone / ".venv").exists()
    # the user's shell: no virtualenv active, no PYTHONPATH leading to this checkout
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(str(Path(sys.prefix))))
    res = subprocess.run(["bash", "-c", install], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (clone / ".venv" / "bin" / "raygitops").is_file()
    try:
        documents = list(yaml.safe_load_all(res.stdout))
    except yaml.YAMLError as err:
        pytest.fail(f"stdout is not only manifests ({err.__class__.__name__}); it begins: {res.stdout[:300]!r}")
    strays = [d for d in documents if not (isinstance(d, dict) and d.get("apiVersion") and d.get("kind"))]
    assert documents and strays == [], strays[:3]
    kinds = [d["kind"] for d in documents]
    assert "RayCluster" in kinds and "Job" in kinds, kinds
    # exactly what this checkout renders
    here = subprocess.run([sys.executable, "-m", "raygitops", "render", "examples/plain"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    assert res.stdout == here.stdout
