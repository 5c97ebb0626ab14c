"""Revision mode: sides read from a throw-away git repository; the working tree stays as it is."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from raygitops.cli.main import main

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

FIXTURES = Path(__file__).parent / "fixtures" / "preview"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false",
       "-c", "init.defaultBranch=main"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def snapshot(repo: Path) -> dict:
    files = {
        p.relative_to(repo).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in repo.rglob("*") if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    return {
        "files": files,
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "-q", "HEAD"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "stash": git(repo, "stash", "list"),
        "index": (repo / ".git" / "index").read_bytes(),
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """base commit = fixtures/preview/base, head commit = fixtures/preview/head, under app/."""
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    git(root, "init", "-q")
    for f in (FIXTURES / "base").iterdir():
        shutil.copy(f, root / "app" / f.name)
    (root / "README.md").write_text("not part of the app\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    for f in (FIXTURES / "head").iterdir():
        shutil.copy(f, root / "app" / f.name)
    git(root, "commit", "-qam", "head")
    return root


def diff(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(main, ["diff", *args])


def test_revisions_match_directories(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # uncommitted and untracked changes must survive, untouched
    (repo / "app" / "other.yaml").write_text((repo / "app" / "other.yaml").read_text()
                                              + "# local edit\n")
    (repo / "app" / "scratch.txt").write_text("untracked\n")
    before = snapshot(repo)
    result = diff(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "app",
                  "--output", "json")
    assert result.exit_code == 0, result.output
    assert snapshot(repo) == before
    data = json.loads(result.stdout)
    assert data["base"]["kind"] == data["head"]["kind"] == "revision"
    assert data["base"]["commit"] == git(repo, "rev-parse", "HEAD~1").strip()
    classes = {c["name"]: c["class"] for c in data["clusters"]}
    assert classes["training"] == "recreate" and classes["serving"] == "stale"
    # sources name the app as the user knows it, never the temporary checkout
    training = next(c for c in data["clusters"] if c["name"] == "training")
    assert training["source"]["head"] == "app/clusters.yaml:2"

    directories = diff(FIXTURES, monkeypatch, "--base", "base", "--head", "head",
                       "--output", "json")
    by_dir = {c["name"]: (c["class"], c["groups"], c["changes"])
              for c in json.loads(directories.stdout)["clusters"]}
    by_rev = {c["name"]: (c["class"], c["groups"], c["changes"]) for c in data["clusters"]}
    assert by_rev == by_dir


def test_revision_against_working_tree_from_inside_the_app(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # PATH defaults to "."; run from inside the app directory; the head side is the worktree
    result = diff(repo / "app", monkeypatch, "--base", "HEAD~1", "--head", ".", "--exit-code")
    assert result.exit_code == 3, result.output
    assert "This merge recreates 2 RayClusters" in result.stdout


def test_bad_yaml_at_base_revision(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "app" / "clusters.yaml").write_text("apiVersion: v1\nkind: [\n")
    git(repo, "commit", "-qam", "broken")
    shutil.copy(FIXTURES / "head" / "clusters.yaml", repo / "app" / "clusters.yaml")
    git(repo, "commit", "-qam", "fixed")
    before = snapshot(repo)
    result = diff(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "app")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("raygitops: base: app/clusters.yaml:3: invalid YAML")
    assert "raygitops-base-" not in result.stderr  # no temporary path
    assert snapshot(repo) == before


def test_app_missing_at_base_is_all_created(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "new-app").mkdir()
    shutil.copy(FIXTURES / "head" / "clusters.yaml", repo / "new-app" / "c.yaml")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "new app")
    result = diff(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "new-app",
                  "--output", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {c["class"] for c in data["clusters"]} == {"create"}
    assert data["notes"] == ["new-app does not exist at base (HEAD~1)"]


def test_unknown_revision_says_what_to_do(repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result = diff(repo, monkeypatch, "--base", "no-such-branch", "--head", "HEAD", "app")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "raygitops: base: 'no-such-branch' is neither a directory nor a git revision: check the name "
        "(git branch -a lists the branches), or fetch it (git fetch origin NAME)")
    # CI's usual mistake: origin/main in a checkout without the remote, or without the branch
    no_remote = diff(repo, monkeypatch, "--base", "origin/main", "--head", "HEAD", "app")
    assert no_remote.exit_code == 1 and "has no remote (no 'origin')" in no_remote.stderr
    assert "fetch-depth: 0" in no_remote.stderr and no_remote.stderr.count("\n") == 1
    git(repo, "remote", "add", "origin", str(tmp_path / "elsewhere"))
    not_fetched = diff(repo, monkeypatch, "--base", "origin/main", "--head", "HEAD", "app")
    assert not_fetched.stderr.strip().endswith(": fetch it first (git fetch origin main)"), not_fetched.stderr
    # outside any repository
    outside = tmp_path / "outside"
    outside.mkdir()
    result = diff(outside, monkeypatch, "--base", "main", "--head", "HEAD", "app")
    assert result.exit_code == 1 and "is not inside a git repository: run raygitops diff in the repository's " \
        "checkout, or give two directories (--base DIR --head DIR)" in result.stderr, result.stderr


def test_path_at_neither_side(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = diff(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "typo")
    assert result.exit_code == 1
    assert "exists at neither base" in result.stderr


def test_symlinks_and_file_path(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a single file as PATH at two revisions
    result = diff(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "app/clusters.yaml",
                  "--output", "json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["clusters"]) == 11
    # a symlink inside the app is checked out as a symlink
    (repo / "app" / "link.yaml").symlink_to("other.yaml")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "link")
    result = diff(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "app")
    assert result.exit_code == 1  # the linked objects are now defined twice, at head
    assert result.stderr.startswith("raygitops: head: app/")
    assert "defined twice (first at app/link.yaml:1)" in result.stderr
    assert "raygitops-head-" not in result.stderr


def test_two_revisions_compare_from_their_merge_base(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """main moved on after the branch was cut: the preview shows what merging the branch
    does (from the merge-base), not main's own later changes reverted; --two-tip compares
    the tips."""
    git(repo, "branch", "feature", "HEAD~1")  # branch cut at "base"
    fork = git(repo, "rev-parse", "HEAD~1").strip()  # main then got "head" (both clusters changed)
    git(repo, "checkout", "-q", "feature")
    first = (FIXTURES / "base" / "clusters.yaml").read_text().split("\n---")[0]
    (repo / "app" / "extra.yaml").write_text(first.replace("name: training", "name: extra", 1))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "feature: a new cluster")
    git(repo, "checkout", "-q", "main")
    merged = diff(repo, monkeypatch, "--base", "main", "--head", "feature", "app", "--output", "json")
    assert merged.exit_code == 0, merged.output
    data = json.loads(merged.stdout)
    assert data["base"]["commit"] == fork and data["base"]["mergeBaseWith"] == "feature"
    changed = {c["name"]: c["class"] for c in data["clusters"] if c["class"] != "unchanged"}
    assert changed == {"extra": "create"}, changed  # only the branch's own change
    text = diff(repo, monkeypatch, "--base", "main", "--head", "feature", "app")
    assert f"base merge-base of main and feature ({fork[:12]})" in text.stdout
    tips = diff(repo, monkeypatch, "--base", "main", "--head", "feature", "app", "--output", "json", "--two-tip")
    tip_classes = {c["name"]: c["class"] for c in json.loads(tips.stdout)["clusters"]}
    assert tip_classes["training"] == "recreate" and "mergeBaseWith" not in json.loads(tips.stdout)["base"]


def test_no_merge_base_says_how_to_fix(repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "--orphan", "unrelated")
    git(repo, "commit", "-qm", "no common history")
    git(repo, "checkout", "-q", "main")
    result = diff(repo, monkeypatch, "--base", "main", "--head", "unrelated", "app")
    assert result.exit_code == 1 and result.stdout == ""
    assert "no merge-base of main and unrelated (they share no history)" in result.output
    assert "--two-tip" in result.output and len(result.output.strip().splitlines()) == 1
    # a shallow clone: the merge-base is not there
    shallow = tmp_path / "shallow"
    subprocess.run([*GIT, "clone", "-q", "--depth", "1", "--no-single-branch", f"file://{repo}", str(shallow)],
                   check=True, capture_output=True)
    git(shallow, "branch", "-q", "feature", "origin/unrelated")
    result = diff(shallow, monkeypatch, "--base", "origin/main", "--head", "feature", "app")
    assert result.exit_code == 1 and "this clone is shallow" in result.output and "fetch-depth: 0" in result.output


def _app_cluster(name: str, image: str) -> str:
    return (FIXTURES / "base" / "clusters.yaml").read_text().split("\n---")[0].replace(
        "name: training", f"name: {name}", 1).replace("rayproject/ray:2.9.0", image)


def test_every_app_under_a_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One report for every app under apps/: those with a raygitops.yaml, and with --app
    those a glob names; apps added and removed by the branch included."""
    root = tmp_path / "repo"
    for app, image in (("a", "rayproject/ray:2.9.0"), ("b", "rayproject/ray:2.9.0"), ("plain/c", "rayproject/ray:2.9.0")):
        (root / "apps" / app).mkdir(parents=True)
        (root / "apps" / app / "cluster.yaml").write_text(_app_cluster(app.split("/")[-1], image))
        if app != "plain/c":
            (root / "apps" / app / "raygitops.yaml").write_text("namespace: ml\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "main")
    git(root, "checkout", "-q", "-b", "feature")
    (root / "apps" / "a" / "cluster.yaml").write_text(_app_cluster("a", "rayproject/ray:2.10.0"))
    git(root, "rm", "-rq", "apps/b")
    (root / "apps" / "d").mkdir()
    (root / "apps" / "d" / "cluster.yaml").write_text(_app_cluster("d", "rayproject/ray:2.9.0"))
    (root / "apps" / "d" / "raygitops.yaml").write_text("namespace: ml\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "feature")

    result = diff(root, monkeypatch, "--base", "main", "--head", "feature", "apps", "--output", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    by_app = {a["app"]: [c["class"] for c in a["clusters"]] for a in data["apps"]}
    assert by_app == {"apps/a": ["recreate"], "apps/b": ["delete"], "apps/d": ["create"]}, by_app
    assert data["verdict"] == "recreate" and data["summary"]["apps"] == 3
    assert data["summary"]["text"] == "3 apps under apps: 2 need a look (apps/a, apps/b)"
    assert all(a["schemaVersion"] == 1 and "base" in a for a in data["apps"])  # the single-app shape

    globbed = diff(root, monkeypatch, "--base", "main", "--head", "feature", "apps", "--app", "plain/*",
                   "--output", "json")
    assert [a["app"] for a in json.loads(globbed.stdout)["apps"]] == ["apps/a", "apps/b", "apps/d", "apps/plain/c"]
    md = diff(root, monkeypatch, "--base", "main", "--head", "feature", "apps", "--output", "markdown",
              "--fail-on", "delete")
    assert md.exit_code == 3 and md.stdout.count("<!-- raygitops-diff path=") == 3, md.output
    assert md.stdout.startswith("**raygitops diff: 3 apps under apps: 2 need a look")
    # an app directory itself is previewed alone, as before
    single = diff(root, monkeypatch, "--base", "main", "--head", "feature", "apps/a", "--output", "json")
    assert [c["class"] for c in json.loads(single.stdout)["clusters"]] == ["recreate"]
    # directories work the same way
    shutil.copytree(root / "apps", tmp_path / "head" / "apps")
    git(root, "checkout", "-q", "main")
    shutil.copytree(root / "apps", tmp_path / "base" / "apps")
    dirs = diff(tmp_path, monkeypatch, "--base", "base", "--head", "head", "apps", "--output", "json")
    assert dirs.exit_code == 0, dirs.output
    assert {a["app"]: [c["class"] for c in a["clusters"]] for a in json.loads(dirs.stdout)["apps"]} == \
        {"head/apps/a": ["recreate"], "head/apps/b": ["delete"], "head/apps/d": ["create"]}
