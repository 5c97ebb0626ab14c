"""Fixtures for the e2e suite: a real control plane (see controlplane.py for the API).

- `control_plane` (session): started once, stopped at the end (process groups, no orphans).
- `control_plane_next` (session, started only when asked for): the same with the next KubeRay
  (KUBERAY_NEXT_VERSION, its CRDs). A module runs its tests on it by overriding
  `control_plane` with it (tests/e2e/test_kuberay_next.py).
- `control_plane_jobs` (session, started only when asked for): Job pods are left for a runner
  that runs them for real (tests/e2e/jobrunner.py) instead of kwok faking them Complete.
- `image` (session): the raygitops container image (tests/image/build.sh).
- `namespace` (function): a fresh unique namespace, deleted after the test.
- Every test collected under tests/e2e gets `pytest.mark.e2e`.
- Missing binaries: all e2e tests are skipped with one reason (one `-ra` line, also in the
  header); with RAYGITOPS_REQUIRE_E2E=1 they fail instead.
- A failing test gets a "control plane logs" report section with each component's log tail.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# `import controlplane` (also done by tests/reliability and e2e test modules): one module object
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import controlplane  # noqa: E402
import imagerun  # noqa: E402

E2E_DIR = Path(__file__).resolve().parent
REQUIRE = os.environ.get("RAYGITOPS_REQUIRE_E2E") == "1"

_unavailable: str | None = None
try:
    # RAYGITOPS_REQUIRE_E2E=1 (CI): kwok and kube-scheduler are required too
    controlplane.locate_binaries(controlplane.REQUIRED + (controlplane.OPTIONAL if REQUIRE else ()))
except controlplane.Unavailable as exc:
    _unavailable = str(exc)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end test against a local control plane (tests/e2e/build.sh)")


def pytest_report_header(config: pytest.Config) -> str:
    return f"e2e: binaries in {controlplane.cache_dir() / 'bin'}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            if _unavailable and not REQUIRE:
                item.add_marker(pytest.mark.skip(reason=_unavailable))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _unavailable and isinstance(report.longrepr, tuple):
        # one location for the whole suite, so that `-ra` prints ONE line
        report.longrepr = (os.path.relpath(__file__), 1, f"Skipped: {_unavailable}")
    plane = getattr(item, "funcargs", {}).get("control_plane")
    if report.failed and isinstance(plane, controlplane.ControlPlane):
        report.sections.append(("control plane logs", plane.logs(tail=40)))


@pytest.fixture(scope="session", autouse=True)
def _e2e_binaries() -> None:
    """With RAYGITOPS_REQUIRE_E2E=1, missing binaries fail every e2e test (instead of a skip)."""
    if _unavailable:
        pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: {_unavailable}", pytrace=False)


def _plane(kuberay: str | None = None, run_job_pods: bool = False):
    with controlplane.running(kuberay=kuberay, run_job_pods=run_job_pods) as plane:
        yield plane


# A session control plane stops as soon as no test left in the run needs it, not at the end
# of the session: an idle one still costs CPU (the API server's watch caches, the operator's
# and kwok's heartbeats), taken from the tests that run after it.
_started: dict[str, controlplane.ControlPlane] = {}  # session plane fixture name -> its plane
_last_user: dict[str, str] = {}  # session plane fixture name -> nodeid of the last test needing it
SESSION_PLANES = ("control_plane", "control_plane_next", "control_plane_jobs")


def _planes_needed(item: pytest.Item) -> set[str]:
    """The session control planes a test uses: those in its fixture closure (whichever
    conftest defines ``control_plane``: tests/reliability shares this one's), and the one its
    ``plane`` parameter picks."""
    info = getattr(item, "_fixtureinfo", None)
    needed = {name for name in SESSION_PLANES
              if info is not None and name in info.names_closure
              and any(d.scope == "session" for d in info.name2fixturedefs.get(name, ()))}
    param = getattr(getattr(item, "callspec", None), "params", {}).get("plane")
    if param is not None:
        needed.add("control_plane" if param == "kuberay" else "control_plane_next")
    return needed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    yield  # after the test's own fixtures are torn down (its namespace, on this plane)
    if not _last_user:  # once, from the run's final order (the last user of each plane wins)
        for each in item.session.items:
            for name in _planes_needed(each):
                _last_user[name] = each.nodeid
        _last_user.setdefault("", "")
    for name, plane in list(_started.items()):
        if _last_user.get(name) == item.nodeid:
            del _started[name]
            plane.stop()  # the fixture's own cleanup at the session's end finds it stopped


_default: controlplane.ControlPlane | None = None  # shared with tests/reliability (its conftest reads it)


@pytest.fixture(scope="session")
def control_plane(_e2e_binaries) -> controlplane.ControlPlane:
    global _default
    for plane in _plane():
        _default = _started["control_plane"] = plane
        try:
            yield plane
        finally:
            _default = None


_next: controlplane.ControlPlane | None = None  # shared with tests/reliability too


@pytest.fixture(scope="session")
def control_plane_next(_e2e_binaries) -> controlplane.ControlPlane:
    global _next
    version = controlplane.load_versions()["KUBERAY_NEXT_VERSION"]
    try:
        controlplane.locate_binaries((controlplane.operator_binary(version, controlplane.load_versions()),))
    except controlplane.Unavailable as exc:
        if REQUIRE:
            pytest.fail(f"RAYGITOPS_REQUIRE_E2E=1: {exc}", pytrace=False)
        pytest.skip(str(exc))
    for plane in _plane(version):
        _next = _started["control_plane_next"] = plane
        try:
            yield plane
        finally:
            _next = None


@pytest.fixture(params=["kuberay", "kuberay-next"])
def plane(request) -> controlplane.ControlPlane:
    """Each operator in turn: KubeRay 1.5 (``control_plane``) and KUBERAY_NEXT_VERSION."""
    return request.getfixturevalue("control_plane" if request.param == "kuberay" else "control_plane_next")


@pytest.fixture(scope="session")
def control_plane_jobs(_e2e_binaries) -> controlplane.ControlPlane:
    """A control plane whose Job pods stay Pending for a runner (tests/e2e/jobrunner.py)
    instead of being faked Complete by kwok (started only when asked for)."""
    for plane in _plane(run_job_pods=True):
        _started["control_plane_jobs"] = plane
        yield plane


@pytest.fixture(scope="session")
def image() -> str:
    """The raygitops image (tests/image/build.sh), built or reused from podman's cache."""
    try:
        return imagerun.build_image()
    except imagerun.ImageUnavailable as exc:
        if REQUIRE:
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def runner(control_plane_jobs: controlplane.ControlPlane, image: str):
    """The kubelet for Job pods on ``control_plane_jobs`` (tests/e2e/jobrunner.py): each runs in
    the raygitops image with its ServiceAccount's token (Argo CD's and Flux's hook Jobs)."""
    from jobrunner import JobRunner

    plane = control_plane_jobs
    jobs = JobRunner(plane.kubeconfig, plane.server, plane.pki.path("ca.crt"), image, plane.log_dir / "job-pods").start()
    yield jobs
    jobs.stop()


@pytest.fixture(autouse=True)
def _no_node_flap(request: pytest.FixtureRequest):
    """Fail a test during which a fake node went NotReady (it would see pods flap not Ready)."""
    yield
    plane = request.node.funcargs.get("control_plane")
    if isinstance(plane, controlplane.ControlPlane) and plane.has("kube-apiserver"):
        flaps = plane.node_flaps()
        plane.nodes_ready_at = plane._node_ready_transitions()  # one failure per flap
        if flaps:
            pytest.fail(f"kwok node Ready condition flapped during the test: {', '.join(flaps)}", pytrace=False)


@pytest.fixture
def namespace(control_plane: controlplane.ControlPlane) -> str:
    name = control_plane.create_namespace(controlplane.unique_name("e2e"))
    yield name
    control_plane.delete_namespace(name, wait=False)
