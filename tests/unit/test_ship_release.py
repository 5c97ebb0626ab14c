"""The release workflow (.github/workflows/release.yml): a GitHub Actions run on a version tag
that builds the repository's Dockerfile for amd64 and arm64, pushes it to the repository's
container registry and signs it by digest. No GitHub here: actionlint (built from the Go module
proxy by tests/e2e/build.sh, ACTIONLINT_VERSION in tests/e2e/versions.env) checks every
workflow, and the checks below tie the workflow to the Dockerfile the suite builds
(tests/image/build.sh) and to the image docs/argocd.md installs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
RELEASE = REPO / ".github" / "workflows" / "release.yml"
sys.path.insert(0, str(Path(__file__).parent))
import ship_support  # noqa: E402


def actionlint() -> str:
    """tests/e2e/build.sh's actionlint; skips only where Go (to build it) is absent."""
    found = ship_support.e2e_binary("actionlint")
    if found is not None:
        return found
    if ship_support.go_binary() is None:
        pytest.skip("no Go toolchain to build actionlint (tests/e2e/build.sh)")
    if os.environ.get("RAYGITOPS_REQUIRE_E2E") == "1":
        pytest.fail("RAYGITOPS_REQUIRE_E2E=1: no actionlint: run tests/e2e/build.sh", pytrace=False)
    pytest.skip("actionlint not built yet: bash tests/e2e/build.sh")


def run_actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([actionlint(), "-no-color", *map(str, files)], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


@pytest.mark.packaging
def test_actionlint_passes_every_workflow() -> None:
    assert RELEASE in WORKFLOWS
    res = run_actionlint(*WORKFLOWS)
    assert res.returncode == 0, res.stdout + res.stderr
    version = subprocess.run([actionlint(), "-version"], capture_output=True, text=True, timeout=60).stdout
    assert version.splitlines()[0] == ship_support.e2e_versions()["ACTIONLINT_VERSION"], version


@pytest.mark.packaging
def test_actionlint_refuses_a_broken_workflow(tmp_path: Path) -> None:
    """The linter reads what the release relies on: a permission scope GitHub does not have
    and an output of a step that does not exist are errors."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    text = RELEASE.read_text()
    broken = workflows / "release.yml"
    broken.write_text(text.replace("id-token: write", "id-tokens: write")
                      .replace("steps.build.outputs.digest", "steps.bulid.outputs.digest"))
    res = run_actionlint(broken)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "id-tokens" in res.stdout and "bulid" in res.stdout, res.stdout


def workflow() -> dict[str, Any]:
    return yaml.safe_load(RELEASE.read_text())


def steps_using(action: str) -> list[dict[str, Any]]:
    (job,) = workflow()["jobs"].values()
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def test_release_runs_on_a_version_tag_with_the_rights_it_needs() -> None:
    flow = workflow()
    trigger = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(trigger) == {"push"} and trigger["push"].keys() == {"tags"}, trigger
    (pattern,) = trigger["push"]["tags"]
    assert pattern.startswith("v"), pattern
    (job,) = flow["jobs"].values()
    assert flow["permissions"] == {"contents": "read"}
    assert job["permissions"] == {"contents": "read", "packages": "write", "id-token": "write"}
    for action in ("actions/checkout", "docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action",
                   "docker/metadata-action", "docker/build-push-action", "sigstore/cosign-installer"):
        assert len(steps_using(action)) == 1, action


def test_release_builds_the_dockerfile_the_tests_build() -> None:
    """build-push-action builds the repository root's Dockerfile, as tests/image/build.sh
    does (its `podman build ... .` from the repository root, no -f), for both platforms, and
    pushes what metadata-action tags."""
    (build,) = steps_using("docker/build-push-action")
    given = build["with"]
    assert (REPO / given["context"]).resolve() == REPO
    assert (REPO / given["context"] / given["file"]).resolve() == REPO / "Dockerfile"
    assert set(given["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert given["push"] is True
    assert given["tags"] == "${{ steps.meta.outputs.tags }}" and given["labels"] == "${{ steps.meta.outputs.labels }}"
    script = (REPO / "tests" / "image" / "build.sh").read_text()
    assert 'cd "$(dirname "$0")/../.."' in script
    (command,) = re.findall(r"^podman build .*?(?<!\\)$", script, re.M | re.S)
    argv = [word for word in shlex.split(command.replace("\\\n", " ")) if not word.startswith(">")]
    assert argv[-1] == "." and not {"-f", "--file"} & set(argv), argv
    (qemu,) = steps_using("docker/setup-qemu-action")
    assert "arm64" in qemu["with"]["platforms"]


def test_release_tags_by_version_and_signs_the_pushed_digest() -> None:
    """ghcr.io/<owner>/<repository> (lowercased: ghcr.io refuses capitals), tagged with the
    tag's version without its `v` (the version the package says), signed by the digest the
    build pushed, never by a tag that could move."""
    (job,) = workflow()["jobs"].values()
    (version,) = [s for s in job["steps"] if s.get("id") == "version"]
    assert 'image=ghcr.io/${GITHUB_REPOSITORY,,}' in version["run"] and "GITHUB_REF_NAME" in version["run"]
    (meta,) = steps_using("docker/metadata-action")
    assert meta["with"]["images"] == "${{ steps.version.outputs.image }}"
    assert "type=semver,pattern={{version}}" in meta["with"]["tags"].splitlines()
    (login,) = steps_using("docker/login-action")
    assert login["with"]["registry"] == "ghcr.io" and login["with"]["password"] == "${{ secrets.GITHUB_TOKEN }}"
    (sign,) = [s for s in job["steps"] if "cosign sign" in s.get("run", "")]
    assert sign["env"] == {"IMAGE": "${{ steps.version.outputs.image }}", "DIGEST": "${{ steps.build.outputs.digest }}"}
    assert sign["run"].strip() == 'cosign sign --yes "$IMAGE@$DIGEST"'
    names = [s.get("uses", "").split("@")[0] or s.get("id") for s in job["steps"]]
    assert names.index("sigstore/cosign-installer") > names.index("docker/build-push-action")


def test_argocd_doc_installs_the_image_the_release_publishes() -> None:
    """docs/argocd.md's install names ghcr.io/<owner>/raygitops:<version>, the version being
    the package's (what a `v<version>` tag must be, the workflow's first step checks)."""
    from raygitops import __version__

    doc = (REPO / "docs" / "argocd.md").read_text()
    install = doc.split("\n## Install", 1)[1]
    assert f"ghcr.io/<owner>/raygitops:{__version__}" in install
    assert ".github/workflows/release.yml" in doc
