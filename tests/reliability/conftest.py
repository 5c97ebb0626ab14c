"""Fixtures of the reliability suite.

- ``slow`` tests (the long campaign variants) are skipped unless ``RAYGITOPS_SLOW=1``.
- ``control_plane`` (session): the e2e control plane of tests/e2e (controlplane.py).  When
  the e2e suite already started one in this session it is reused (one apiserver, not two);
  otherwise one is started here.  Without binaries, tests using it are skipped (failed with
  ``RAYGITOPS_REQUIRE_E2E=1``), exactly like tests/e2e.
- ``control_plane_next`` (session, started only when asked for): the same with the next
  KubeRay (KUBERAY_NEXT_VERSION), reused from tests/e2e likewise.
- ``namespace`` (function): a fresh namespace on it.
- ``proxy`` (function): a :class:`faultproxy.FaultProxy` in front of its apiserver.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent.parent / "e2e"
HERE = Path(__file__).resolve().parent
SLOW = os.environ.get("RAYGITOPS_SLOW") == "1"
REQUIRE = os.environ.get("RAYGITOPS_REQUIRE_E2E") == "1"

if str(E2E_DIR) not in sys.path:
    sys.path.insert(0, str(E2E_DIR))

import controlplane  # noqa: E402  (the same module object tests/e2e/conftest.py imports)

try:
    controlplane.locate_binaries()
    _unavailable: str | None = None
except controlplane.Unavailable as exc:
    _unavailable = str(exc)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE not in Path(str(item.fspath)).resolve().parents:
            continue
        if "slow" in item.keywords and not SLOW:
            item.add_marker(pytest.mark.skip(reason="slow campaign: set RAYGITOPS_SLOW=1"))
        if "e2e" in item.keywords and _unavailable and not REQUIRE:
            item.add_marker(pytest.mark.skip(reason=_unavailable))


def _e2e_plane(config: pytest.Config, name: str = "_default") -> controlplane.ControlPlane | None:
    """The control plane tests/e2e/conftest.py started in this session (its global ``name``), if any."""
    for plugin in config.pluginmanager.get_plugins():
        path = getattr(plugin, "__file__", None)
        if path and Path(path).resolve() == E2E_DIR / "conftest.py":
            plane = getattr(plugin, name, None)
            if plane is not None and plane.has("kube-apiserver"):
                return plane
    return None


def _session_plane(request: pytest.FixtureRequest, shared_name: str, kuberay: str | None = None):
    if _unavailable:
        pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: {_unavailable}", pytrace=False)
    shared = _e2e_plane(request.config, shared_name)
    if shared is not None:
        yield shared
        return
    with controlplane.running(kuberay=kuberay) as plane:
        yield plane


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> controlplane.ControlPlane:
    yield from _session_plane(request, "_default")


@pytest.fixture(scope="session")
def control_plane_next(request: pytest.FixtureRequest) -> controlplane.ControlPlane:
    versions = controlplane.load_versions()
    version = versions["KUBERAY_NEXT_VERSION"]
    try:
        controlplane.locate_binaries((controlplane.operator_binary(version, versions),))
    except controlplane.Unavailable as exc:
        if REQUIRE:
            pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: {exc}", pytrace=False)
        pytest.skip(str(exc))
    yield from _session_plane(request, "_next", version)


@pytest.fixture
def namespace(control_plane: controlplane.ControlPlane) -> str:
    name = control_plane.create_namespace(controlplane.unique_name("rel"))
    yield name
    control_plane.delete_namespace(name, wait=False)


@pytest.fixture
def proxy(control_plane: controlplane.ControlPlane):
    from reliability.faultproxy import FaultProxy

    with FaultProxy(control_plane.kubeconfig, seed=int(os.environ.get("RAYGITOPS_SEED", "0"))) as p:
        yield p


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name in ("control_plane", "control_plane_next"):
            plane = getattr(item, "funcargs", {}).get(name)
            if isinstance(plane, controlplane.ControlPlane):
                report.sections.append((f"{name} logs", plane.logs(tail=40)))
