"""Every app under a root, on both sides of a diff (I/O: lists directories or git trees).

An app is a directory holding ``raygitops.yaml`` (or ``.yml``), or a directory matching an
``--app`` glob (relative to the root, e.g. ``apps/*``).  Apps are found on each side and
the union is previewed, so an app a pull request adds or removes is in the report too.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import PurePosixPath

from raygitops.preview.revisions import DIRECTORY, REVISION, Side, resolve_side, run_git
from raygitops.sources.settings import CONFIG_NAMES


def _tree_paths(side: Side) -> list[str]:
    """Files below the root at this side, relative to the root (POSIX)."""
    if side.kind == DIRECTORY:
        out = []
        for top, dirs, files in os.walk(side.path):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            rel = os.path.relpath(top, side.path)
            out += [PurePosixPath(rel, f).as_posix() if rel != "." else f for f in files]
        return out
    if side.kind == REVISION:
        assert side.repo_root is not None and side.commit
        args = ["ls-tree", "-r", "-z", "--name-only", "--full-tree", side.commit]
        if side.repo_path:
            args += ["--", side.repo_path]
        names = run_git(args, side.repo_root).stdout.decode("utf-8", "surrogateescape").split("\0")
        prefix = f"{side.repo_path}/" if side.repo_path else ""
        return [n[len(prefix):] for n in names if n and n.startswith(prefix)]
    return []


def apps_of(side: Side, globs: tuple[str, ...]) -> set[str]:
    """App directories below the root at one side, relative to the root ("" = the root)."""
    apps: set[str] = set()
    for path in _tree_paths(side):
        parent = PurePosixPath(path).parent.as_posix()
        parent = "" if parent == "." else parent
        if PurePosixPath(path).name in CONFIG_NAMES:
            apps.add(parent)
        while parent:
            if any(fnmatch.fnmatchcase(parent, g.rstrip("/")) for g in globs):
                apps.add(parent)
            parent = PurePosixPath(parent).parent.as_posix()
            parent = "" if parent == "." else parent
    return apps


def discover(base: str, head: str, root: str, globs: tuple[str, ...]) -> list[str] | None:
    """The app paths (``root/<app>``) to preview one by one, or None when ``root`` is itself
    one app (it holds ``raygitops.yaml`` on a side and no ``--app`` glob was given, or no
    app is found below it): the single-app preview of today."""
    sides = [resolve_side(name, spec, root) for name, spec in (("base", base), ("head", head))]
    found = [apps_of(side, globs) for side in sides]
    if (not globs and any("" in f for f in found)) or not any(found):
        return None
    return [os.path.normpath(os.path.join(root, app)) for app in sorted(found[0] | found[1])]
