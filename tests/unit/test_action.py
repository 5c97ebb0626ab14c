"""The GitHub Action (action.yml + action/preview.sh) end to end on a Git repository the test
builds: the real ``raygitops`` and ``git``, a stand-in ``gh`` that records the API calls."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_preview_revisions import _app_cluster, git

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- raygitops-diff-comment -->"

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None,
                                reason="git and bash needed")

FAKE_GH = """#!/usr/bin/env bash
# records each call; answers the comment listing from $GH_COMMENTS (a JSON list)
printf '%s\\n' "$*" >> "$GH_LOG"
for a in "$@"; do case $a in body=@*) cp "${a#body=@}" "$GH_BODY";; esac; done
if [ "$2" != "--method" ]; then  # the listing, filtered as the action's --jq does
  python3 -c 'import json,os,sys; [print(c["id"]) for c in json.loads(os.environ["GH_COMMENTS"]) if c["body"].startswith("<!-- raygitops-diff-comment -->")]'
fi
"""


@pytest.fixture
def pr(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with apps/a and apps/b on main, and a branch that changes a's image."""
    root = tmp_path / "repo"
    for app in ("a", "b"):
        (root / "apps" / app).mkdir(parents=True)
        (root / "apps" / app / "cluster.yaml").write_text(_app_cluster(app, "rayproject/ray:2.9.0"))
        (root / "apps" / app / "raygitops.yaml").write_text("namespace: ml\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "main")
    base = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "-b", "feature")
    (root / "apps" / "a" / "cluster.yaml").write_text(_app_cluster("a", "rayproject/ray:2.10.0"))
    git(root, "commit", "-qam", "feature")
    return root, base, git(root, "rev-parse", "HEAD").strip()


def run_action(pr: tuple[Path, str, str], tmp_path: Path, comments: list[dict], **inputs: str):
    root, base, head = pr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    (tmp_path / "gh.log").unlink(missing_ok=True)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "HOME": str(tmp_path), "BASE_SHA": base, "HEAD_SHA": head, "REPO": "org/apps", "PR": "7",
        "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output"), "GH_LOG": str(tmp_path / "gh.log"),
        "GH_BODY": str(tmp_path / "body.md"), "GH_COMMENTS": json.dumps(comments),
        **{f"INPUT_{k.upper()}": v for k, v in inputs.items()},
    }
    res = subprocess.run(["bash", str(REPO / "action" / "preview.sh")], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)
    calls = (tmp_path / "gh.log").read_text().splitlines() if (tmp_path / "gh.log").exists() else []
    return res, calls


def test_posts_one_comment_then_updates_it(pr, tmp_path: Path) -> None:
    res, calls = run_action(pr, tmp_path, [{"id": 1, "body": "someone else"}], root="apps")
    assert res.returncode == 0, res.stderr
    assert calls[0].startswith("api --paginate repos/org/apps/issues/7/comments")
    assert calls[1].startswith("api --method POST repos/org/apps/issues/7/comments")
    body = (tmp_path / "body.md").read_text()
    assert body.startswith(MARKER + "\n**raygitops diff: 2 apps under apps: 1 need a look (apps/a)**")
    assert "This merge recreates 1 RayCluster" in body
    assert "apps/a" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "output").read_text() == "attention=0\n"

    res, calls = run_action(pr, tmp_path, [{"id": 1, "body": "x"}, {"id": 42, "body": MARKER + "\nold"}],
                            root="apps")
    assert res.returncode == 0 and "updated comment 42" in res.stdout, res.stderr
    assert calls[1].startswith("api --method PATCH repos/org/apps/issues/comments/42")


def test_fail_on_fails_the_check_after_commenting(pr, tmp_path: Path) -> None:
    res, calls = run_action(pr, tmp_path, [], root="apps", fail_on="recreate,delete,stale")
    assert res.returncode == 1 and "::error::This merge has RayClusters of classes recreate,delete,stale" in res.stdout
    assert any(c.startswith("api --method POST") for c in calls)  # the comment is there to read
    assert (tmp_path / "output").read_text() == "attention=1\n"


def test_a_broken_app_fails_without_commenting(pr, tmp_path: Path) -> None:
    root, _, _ = pr
    (root / "apps" / "a" / "cluster.yaml").write_text("kind: RayCluster\nmetadata: {name: x\n")
    git(root, "commit", "-qam", "broken")
    broken = (root, pr[1], git(root, "rev-parse", "HEAD").strip())
    res, calls = run_action(broken, tmp_path, [], root="apps")
    assert res.returncode == 1 and "::error::raygitops diff failed (exit 1)" in res.stdout
    assert "apps/a/cluster.yaml:" in res.stderr and calls == []


def test_action_inputs_reach_the_script() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    script = (REPO / "action" / "preview.sh").read_text()
    steps = action["runs"]["steps"]
    assert action["runs"]["using"] == "composite"
    env = steps[-1]["env"]
    for name in action["inputs"]:
        key = f"INPUT_{name.upper().replace('-', '_')}"
        assert env.get(key) == f"${{{{ inputs.{name} }}}}" or name == "token", name
        assert key in script or name == "token", name
    assert env["GH_TOKEN"] == "${{ inputs.token }}"
    assert "requirements/runtime.txt" in steps[0]["run"] and "--require-hashes" in steps[0]["run"]
