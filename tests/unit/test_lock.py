"""The locks (requirements/*.txt, made by requirements/lock.sh) agree with pyproject.toml.

tests/run.sh, the README's install command and the Dockerfile install from the locks; users
who `pip install` the package get pyproject.toml's ranges. A lock that drifted from the
ranges would test something users never get.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# name==version [; marker] \ then one or more "    --hash=sha256:..." lines
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?: ;[^\\\n]*)? \\\n"
                 r"((?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", re.M)


def lock(name: str) -> dict[str, str]:
    """{canonical name: version} of a lock; every pin must carry hashes."""
    text = (REPO / "requirements" / name).read_text()
    pins = {canonicalize_name(m.group(1)): m.group(2) for m in PIN.finditer(text)}
    lines = [line for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)]
    assert len(lines) == len(pins), f"{name}: a pin without --hash lines"
    return pins


def requirements(*groups: str) -> list[Requirement]:
    out = [Requirement(r) for r in PROJECT["project"]["dependencies"]]
    for group in groups:
        out += [Requirement(r) for r in PROJECT["project"]["optional-dependencies"][group]]
    return [r for r in out if r.marker is None or r.marker.evaluate({"extra": "test"})]


@pytest.mark.parametrize("name, groups", [("test.txt", ("test",)), ("runtime.txt", ())])
def test_lock_pins_every_direct_dependency_within_its_range(name: str, groups: tuple[str, ...]) -> None:
    pins = lock(name)
    for req in requirements(*groups):
        version = pins.get(canonicalize_name(req.name))
        assert version is not None, f"{name} lacks {req.name}: run bash requirements/lock.sh"
        assert req.specifier.contains(version, prereleases=True), (
            f"{name} pins {req.name}=={version} outside pyproject.toml's {req.specifier}")


def test_runtime_lock_is_the_tested_versions() -> None:
    """The image (runtime.txt) runs exactly the versions the suite ran (test.txt)."""
    test, runtime = lock("test.txt"), lock("runtime.txt")
    assert runtime, "runtime.txt is empty"
    assert {k: test.get(k) for k in runtime} == runtime


def test_runtime_lock_has_no_test_tools() -> None:
    runtime = lock("runtime.txt")
    for req in PROJECT["project"]["optional-dependencies"]["test"]:
        assert canonicalize_name(Requirement(req).name) not in runtime


def test_build_backend_is_locked() -> None:
    """tests/run.sh installs raygitops itself without build isolation, from the lock."""
    pins = lock("test.txt")
    for spec in PROJECT["build-system"]["requires"]:
        req = Requirement(spec)
        assert req.specifier.contains(pins[canonicalize_name(req.name)])


def test_the_suite_runs_in_the_locked_venv() -> None:
    """Not the machine's site-packages: a package installed by hand cannot make CI pass."""
    run = (REPO / "tests" / "run.sh").read_text()
    venvs = (REPO / "tests" / "venvs.sh").read_text()
    assert "locked=$(venv_locked)" in run and "--require-hashes --no-deps -r requirements/test.txt" in venvs
    assert "--system-site-packages" not in venvs
    assert "-m venv" in venvs
