"""raygitops installed the way the image installs it, for the ship tests (not a test module).

`image_venv()` copies the wheel's sources (what .dockerignore lets into the Docker build
context), builds the wheel with ``pip wheel --no-deps``, and installs it with its
dependencies into a fresh virtualenv in a world-readable temp dir — once per process. The
base interpreter is one a non-root user can run (tests run as root here, and a pyenv Python
under /root is not readable by others), so the CMP tests can run ``raygitops`` as uid 65534.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
_cache: dict[str, Path] = {}


class VenvUnavailable(Exception):
    pass


def as_nobody_prefix() -> list[str] | None:
    """argv prefix that drops root to uid/gid 65534; [] when not root; None if impossible."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    return None


def _usable_python() -> str:
    prefix = as_nobody_prefix() or []
    candidates = [sys.executable, "/usr/local/bin/python3", "/usr/bin/python3"]
    for python in dict.fromkeys(candidates):
        if not os.access(python, os.X_OK):
            continue
        probe = subprocess.run([*prefix, python, "-c", "import venv, ensurepip"], capture_output=True,
                               cwd="/", timeout=60)
        if probe.returncode == 0:
            return python
    raise VenvUnavailable(f"no Python interpreter with venv/ensurepip runnable by a non-root user among {candidates}")


def build_context(dest: Path) -> Path:
    """The Docker build context: pyproject.toml, README.md, plugin/ (no caches, no egg-info)."""
    dest.mkdir(parents=True)
    shutil.copy2(REPO / "pyproject.toml", dest)
    shutil.copy2(REPO / "README.md", dest)
    shutil.copy2(REPO / "LICENSE", dest)
    (dest / "requirements").mkdir()
    shutil.copy2(REPO / "requirements" / "runtime.txt", dest / "requirements")
    shutil.copytree(REPO / "plugin", dest / "plugin",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    return dest


def image_venv() -> Path:
    """Path of the venv (``bin/raygitops`` inside); built on first use."""
    if "venv" in _cache:
        return _cache["venv"]
    root = Path(tempfile.mkdtemp(prefix="raygitops-ship-"))
    atexit.register(shutil.rmtree, root, True)
    root.chmod(0o755)
    python = _usable_python()
    context = build_context(root / "context")
    wheels = root / "wheels"
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    run = lambda *argv, cwd=None: subprocess.run(  # noqa: E731
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    res = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels), ".", cwd=context)
    if res.returncode != 0:
        raise VenvUnavailable(f"pip wheel failed: {res.stderr.strip()[-2000:]}")
    wheel = next(wheels.glob("raygitops-*.whl"))
    venv = root / "venv"
    # A fresh venv filled by this process's pip (`pip --python`, pip >= 22.3): no ensurepip,
    # and --no-compile skips byte-compiling the kubernetes client (most of the time).
    res = run(python, "-m", "venv", "--without-pip", str(venv))
    # As the Dockerfile does: the locked dependencies (hashes checked), then the wheel alone.
    lock = ["--require-hashes", "--no-deps", "-r", str(context / "requirements" / "runtime.txt")]
    if res.returncode == 0:
        pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
               "--quiet", "--no-compile"]
        res = run(*pip, *lock)
        if res.returncode == 0:
            res = run(*pip, "--no-deps", str(wheel))
    if res.returncode != 0:
        raise VenvUnavailable(f"pip install of the wheel failed: {res.stderr.strip()[-2000:]}")
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o444 | (0o111 if p.is_dir() else 0))
    _cache["venv"], _cache["wheel"] = venv, wheel
    return venv


def built_wheel() -> Path:
    image_venv()
    return _cache["wheel"]


# ----------------------------------------------------------------------------- external inputs

def e2e_versions() -> dict[str, str]:
    """The pins of tests/e2e/versions.env (NAME=value and NAME="a b" lines, not expanded;
    tests/e2e/controlplane.py's load_versions evaluates them with bash)."""
    import re

    lines = re.findall(r'^(\w+)=(?:"([^"]*)"|(\S+))$', (REPO / "tests" / "e2e" / "versions.env").read_text(), re.M)
    return {name: quoted or plain for name, quoted, plain in lines}


ARGOCD_MODULE = "github.com/argoproj/argo-cd/v3"
ARGOCD_VERSION = e2e_versions()["ARGOCD_VERSION"]  # the Argo CD the e2e tests run


def go_binary() -> str | None:
    go = shutil.which("go")
    if go is None and os.access("/usr/local/go/bin/go", os.X_OK):
        go = "/usr/local/go/bin/go"
    return go


def argocd_module_dir() -> Path | None:
    """Argo CD's Go module (manifests/, CRDs) in GOMODCACHE, downloaded if needed; None if not
    obtainable. Read at test time only: nothing of it is copied into the repository."""
    if "argocd" in _cache:
        return _cache["argocd"]
    go = go_binary()
    found: Path | None = None
    if go is not None:
        # argo-cd 3.6 requires a newer Go than the machine's: the toolchain tests/e2e/build.sh uses
        toolchain = {"GOTOOLCHAIN": e2e_versions()["ARGOCD_GO_TOOLCHAIN"]}
        res = subprocess.run([go, "mod", "download", "-json", f"{ARGOCD_MODULE}@{ARGOCD_VERSION}"],
                             capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir(),
                             env={**os.environ, **toolchain})
        try:
            info = json.loads(res.stdout)
        except json.JSONDecodeError:
            info = {}
        if res.returncode == 0 and info.get("Dir") and Path(info["Dir"], "manifests").is_dir():
            found = Path(info["Dir"])
    _cache["argocd"] = found  # type: ignore[assignment]
    return found


def e2e_binary(name: str) -> str | None:
    """``name`` (kubectl, helm, kustomize) of the e2e build (tests/e2e/build.sh), else one on PATH."""
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    try:
        import controlplane

        built = controlplane.cache_dir() / "bin" / name
        if os.access(built, os.X_OK):
            return str(built)
    except Exception:  # noqa: BLE001 - the e2e helpers are optional here
        pass
    return shutil.which(name)


def kubectl_binary() -> str | None:
    return e2e_binary("kubectl")


# ----------------------------------------------------------------------------- the README's install

def readme_two_commands() -> list[str]:
    """The README's "Two commands": the command lines of its block (comments left out)."""
    import re

    section = (REPO / "README.md").read_text().split("\n## Two commands\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def fresh_clone(dest: Path) -> Path:
    """The working tree as a fresh clone of it has it: every file git tracks or would track
    (not ignored), as it is now, nothing else (no .venv, caches or build output)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True, timeout=60).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is not there
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


INSTALL_URL = "https://raw.githubusercontent.com/argoproj/argo-cd/{version}/manifests/install.yaml"


def readme_install() -> tuple[str, str, str]:
    """The README's Argo CD install: (the overlay directory's name, its kustomization.yaml as
    written, the `kubectl apply -k` command)."""
    import re

    section = (REPO / "README.md").read_text().split("\n## Install into Argo CD\n", 1)[1].split("\n## ", 1)[0]
    name = re.search(r"write `([\w.-]+)/kustomization\.yaml`", section).group(1)
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    text = "\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines()) + "\n"
    command = re.search(r"`(kubectl apply -k [\w./-]+)`", section).group(1)
    return name, text, command


def readme_overlay(workdir: Path, install_yaml: Path) -> tuple[Path, dict]:
    """The README's overlay laid out as it says (beside a checkout named raygitops/: here a
    symlink to this repository), Argo CD's install.yaml read from the file given instead of
    its URL (no GitHub here; the URL must name the tested version). (the overlay, its
    kustomization as parsed)."""
    import yaml

    name, text, command = readme_install()
    assert command == f"kubectl apply -k {name}", command
    kustomization = yaml.safe_load(text)
    url = INSTALL_URL.format(version=ARGOCD_VERSION)
    assert kustomization["resources"] == [url], (kustomization["resources"], url)
    (workdir / "raygitops").symlink_to(REPO, target_is_directory=True)
    overlay = workdir / name
    overlay.mkdir()
    (overlay / "install.yaml").write_text(install_yaml.read_text())
    (overlay / "kustomization.yaml").write_text(text.replace(url, "install.yaml"))
    return overlay, kustomization
