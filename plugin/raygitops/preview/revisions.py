"""The two sides of a diff: a directory, a file, or a git revision of PATH, rendered.

A revision is materialised into a temporary directory straight from the object database
(``git ls-tree`` + ``git cat-file --batch``): the working tree, the index and HEAD are never
touched, and no ``.gitattributes`` export filter rewrites what was committed.  Both sides are
rendered with :func:`raygitops.render.pipeline.render_app` and the same values files and environment.

Errors name the side and the file as the user knows it (``base: app/cluster.yaml:3: …``),
never the temporary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from raygitops.errors import RaygitopsError
from raygitops.render.renderer import RenderResult

DIRECTORY = "directory"
FILE = "file"
REVISION = "revision"

_SYMLINK_MODE = "120000"
_SUBMODULE_MODE = "160000"


@dataclass(frozen=True)
class Side:
    """What one side of the diff is: ``--base``/``--head`` resolved."""

    name: str  # "base" or "head"
    spec: str  # as given on the command line
    kind: str  # DIRECTORY, FILE or REVISION
    path: str  # the app as shown to the user (D/PATH for a directory; PATH for a revision)
    commit: str | None = None  # full SHA of a revision
    repo_root: str | None = None  # the git work tree a revision was resolved in
    repo_path: str | None = None  # PATH relative to repo_root ("" for the root)
    merge_base_with: str | None = None  # base only: commit is the merge-base of spec and this

    def describe(self) -> str:
        if self.merge_base_with is not None:
            return f"merge-base of {self.spec} and {self.merge_base_with} ({(self.commit or '')[:12]})"
        if self.kind == REVISION:
            short = (self.commit or "")[:12]
            if self.commit and self.commit.startswith(self.spec.lower()):
                return short  # given as a SHA already
            return f"{self.spec} ({short})"
        return self.path

    def to_json(self) -> dict[str, Any]:
        data = {"spec": self.spec, "kind": self.kind, "path": self.path, "commit": self.commit}
        if self.merge_base_with is not None:
            data["mergeBaseWith"] = self.merge_base_with
        return data


@dataclass
class RenderedSide:
    """A side and its render; ``result`` is None when PATH does not exist at a revision."""

    side: Side
    result: RenderResult | None
    notes: list[str] = field(default_factory=list)


def _side_error(side: str, err: RaygitopsError) -> RaygitopsError:
    also = [_side_error(side, other) for other in err.also]
    if err.path:
        return RaygitopsError(err.message, f"{side}: {err.path}", err.line, also)
    return RaygitopsError(f"{side}: {err.message}", also=also)


def run_git(args: list[str], cwd: str, *, input_bytes: bytes | None = None,
         check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(GIT_LITERAL_PATHSPECS="1", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, input=input_bytes, capture_output=True, env=env
        )
    except FileNotFoundError:
        raise RaygitopsError("git is not installed (needed to read a revision)") from None
    if check and proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RaygitopsError(f"git {args[0]} failed: {detail[-1] if detail else proc.returncode}")
    return proc


def _discovery_dir(path: str) -> str:
    """The nearest existing directory at or above PATH (git is run there)."""
    current = Path(os.path.abspath(path))
    while not current.is_dir():
        if current.parent == current:
            break
        current = current.parent
    return str(current)


def _revision_hint(spec: str, cwd: str) -> str:
    """What to do about a revision git does not know (a remote missing, a branch not fetched)."""
    remotes = run_git(["remote"], cwd, check=False).stdout.decode().split()
    remote = spec.split("/", 1)[0] if "/" in spec else None
    if remote is not None and remote not in remotes and not remotes:
        return (f": this repository has no remote (no {remote!r}); in CI check out with the history and "
                f"the base branch (actions/checkout: fetch-depth: 0), or name a local branch")
    if remote is not None and remote in remotes:
        return f": fetch it first (git fetch {remote} {spec.split('/', 1)[1]})"
    return ": check the name (git branch -a lists the branches), or fetch it (git fetch origin NAME)"


def resolve_side(name: str, spec: str, path: str = ".") -> Side:
    """An existing directory is a directory (the app is ``spec/PATH``); an existing file is
    that file; anything else must be a git revision (``REF^{commit}``) of PATH."""
    if not spec:
        raise RaygitopsError(f"{name}: empty --{name}")
    if os.path.isdir(spec):
        if os.path.isabs(path):
            raise RaygitopsError(f"{name}: PATH must be relative when --{name} is a directory")
        return Side(name, spec, DIRECTORY, os.path.normpath(os.path.join(spec, path)))
    if os.path.isfile(spec):
        if os.path.normpath(path) != ".":
            raise RaygitopsError(f"{name}: --{name} is a file; PATH cannot be given as well")
        return Side(name, spec, FILE, spec)
    if spec.startswith("-"):
        raise RaygitopsError(f"{name}: {spec!r} is neither a directory nor a git revision")
    cwd = _discovery_dir(path)
    top = run_git(["rev-parse", "--show-toplevel"], cwd, check=False)
    if top.returncode != 0:
        raise RaygitopsError(
            f"{name}: {spec!r} is not a directory, and {path!r} is not inside a git repository: "
            "run raygitops diff in the repository's checkout, or give two directories (--base DIR --head DIR)"
        )
    root = top.stdout.decode().strip()
    proc = run_git(["rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}"], cwd, check=False)
    if proc.returncode != 0:
        raise RaygitopsError(f"{name}: {spec!r} is neither a directory nor a git revision{_revision_hint(spec, cwd)}")
    commit = proc.stdout.decode().strip()
    absolute = os.path.realpath(os.path.abspath(path))
    rel = os.path.relpath(absolute, os.path.realpath(root))
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise RaygitopsError(f"{name}: {path!r} is outside the git repository {root}")
    rel = "" if rel == "." else Path(rel).as_posix()
    return Side(name, spec, REVISION, os.path.normpath(path), commit, root, rel)


def merge_base(base: Side, head: Side) -> Side:
    """The base side moved to the merge-base of both revisions: what merging head into base
    changes, as ``git diff base...head`` shows it (changes merged into base since the branch
    point are not the pull request's)."""
    assert base.kind == head.kind == REVISION and base.repo_root
    proc = run_git(["merge-base", str(base.commit), str(head.commit)], base.repo_root, check=False)
    if proc.returncode != 0:
        shallow = run_git(["rev-parse", "--is-shallow-repository"], base.repo_root, check=False).stdout.strip()
        why = "this clone is shallow" if shallow == b"true" else "they share no history"
        raise RaygitopsError(
            f"base: no merge-base of {base.spec} and {head.spec} ({why}): fetch their history "
            "(actions/checkout: fetch-depth: 0; or git fetch --deepen=100, or --unshallow), or "
            "compare the two tips with --two-tip")
    commit = proc.stdout.decode().strip()
    return Side(base.name, base.spec, REVISION, base.path, commit, base.repo_root, base.repo_path, head.spec)


def materialize(side: Side, dest: Path) -> Path | None:
    """Write PATH as it was at ``side.commit`` under ``dest``; returns what to render
    (a directory or a file), or None when PATH did not exist at that revision."""
    assert side.kind == REVISION and side.commit and side.repo_root is not None
    rel = side.repo_path or ""
    args = ["ls-tree", "-r", "-z", "--full-tree", side.commit]
    if rel:
        args += ["--", rel]
    listing = run_git(args, side.repo_root).stdout
    entries: list[tuple[str, str, str]] = []  # (mode, oid, repo path)
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, kind, oid = meta.decode().split(" ")
        if kind != "blob" or mode == _SUBMODULE_MODE:
            continue
        entries.append((mode, oid, name.decode("utf-8", "surrogateescape")))
    if not entries:
        return None
    batch = run_git(["cat-file", "--batch"], side.repo_root,
                 input_bytes="".join(f"{oid}\n" for _, oid, _ in entries).encode()).stdout
    offset = 0
    for mode, oid, name in entries:
        header_end = batch.index(b"\n", offset)
        header = batch[offset:header_end].decode().split(" ")
        if len(header) != 3 or header[0] != oid:
            raise RaygitopsError(f"git cat-file: unexpected answer for {name}")
        size = int(header[2])
        data = batch[header_end + 1 : header_end + 1 + size]
        offset = header_end + 1 + size + 1  # content is followed by a newline
        target = dest / name
        if not target.resolve().is_relative_to(dest.resolve()):
            raise RaygitopsError(f"refusing path {name!r} outside the checkout")
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == _SYMLINK_MODE:
            os.symlink(data.decode("utf-8", "surrogateescape"), target)
        else:
            target.write_bytes(data)
    return dest / rel if rel else dest


def _relocate_text(text: str, temp: str, shown: str) -> str:
    if temp not in text:
        return text
    if shown in ("", "."):
        return text.replace(temp + "/", "").replace(temp, ".")
    return text.replace(temp, shown)


def _relocate_result(result: RenderResult, temp: str, shown: str) -> None:
    result.sources = [_relocate_text(s, temp, shown) for s in result.sources]
    for cluster in result.clusters:
        cluster.source = _relocate_text(cluster.source, temp, shown)


def render_side(
    side: Side, *, cli_values: list[str], env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> RenderedSide:
    """Render one side; every error is re-raised naming the side."""
    from raygitops.render.pipeline import render_app

    if side.kind == DIRECTORY and not os.path.isdir(side.path):  # an app added or removed
        return RenderedSide(side, None, [f"{side.path} does not exist at {side.name}"])
    if side.kind != REVISION:
        try:
            return RenderedSide(side, render_app(side.path, cli_values=cli_values, env=env,
                                                 overrides=overrides))
        except RaygitopsError as err:
            raise _side_error(side.name, err) from None
    temp = tempfile.mkdtemp(prefix=f"raygitops-{side.name}-")
    try:
        try:
            target = materialize(side, Path(temp))
        except RaygitopsError as err:
            raise _side_error(side.name, err) from None
        if target is None:
            note = f"{side.path} does not exist at {side.name} ({side.spec})"
            return RenderedSide(side, None, [note])
        shown_target = str(target)
        try:
            result = render_app(shown_target, cli_values=cli_values, env=env, overrides=overrides)
        except RaygitopsError as err:
            for each in (err, *err.also):
                if each.path:
                    each.path = _relocate_text(each.path, shown_target, side.path)
                each.message = _relocate_text(each.message, shown_target, side.path)
            raise _side_error(side.name, err) from None
        _relocate_result(result, shown_target, side.path)
        return RenderedSide(side, result)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def render_sides(
    base: str, head: str, path: str = ".", *, cli_values: list[str] | None = None,
    env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None,
    two_tip: bool = False,
) -> tuple[RenderedSide, RenderedSide]:
    """Resolve and render both sides with the same settings (``overrides``: render's flags).
    Two revisions are compared from their merge-base unless ``two_tip``."""
    values = list(cli_values or [])
    base_side = resolve_side("base", base, path)
    head_side = resolve_side("head", head, path)
    if not two_tip and base_side.kind == head_side.kind == REVISION:
        base_side = merge_base(base_side, head_side)
    rendered = (
        # the base is what runs today: a field the API server dropped is no reason to refuse it
        render_side(base_side, cli_values=values, env=env, overrides={**(overrides or {}), "validate_schema": False}),
        render_side(head_side, cli_values=values, env=env, overrides=overrides),
    )
    if rendered[0].result is None and rendered[1].result is None:
        raise RaygitopsError(f"{path!r} exists at neither base ({base}) nor head ({head})")
    return rendered
