"""Render processes share nothing (issue 49): Argo CD's repo-server runs a plugin's generate
for many Applications at once, in one sidecar, with one ``/tmp`` and one ``$HOME``.

N apps (two of them in one namespace) rendered at once, each by its own ``raygitops render``
process with its own ``ARGOCD_APP_NAME``, all sharing ``TMPDIR``, ``HOME`` and
``XDG_CACHE_HOME``, give byte for byte what each gives rendered alone, leave nothing in
those directories, and no two apps' hook objects share a name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from test_render import RECREATE, cluster

APPS = 6
CLUSTERS = 12  # per app; every other one opts in


def write_apps(root: Path) -> list[tuple[str, Path]]:
    """``team-<i>``: its own namespace, but team-0 and team-1 share ``shared``."""
    apps = []
    for i in range(APPS):
        app = root / f"team-{i}"
        app.mkdir(parents=True)
        (app / "raygitops.yaml").write_text(f"namespace: {'shared' if i < 2 else f'ns-{i}'}\n")
        docs = [cluster(f"t{i}-c{j}", meta=RECREATE if j % 2 == 0 else "") for j in range(CLUSTERS)]
        (app / "clusters.yaml").write_text("---\n".join(docs))
        apps.append((f"team-{i}", app))
    return apps


def render(app: Path, name: str, shared: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARGOCD_APP_NAME": name, "TMPDIR": str(shared / "tmp"), "HOME": str(shared / "home"),
           "XDG_CACHE_HOME": str(shared / "cache")}
    env.pop("ARGOCD_APP_NAMESPACE", None)
    env.pop("ARGOCD_APP_PARAMETERS", None)
    # as the Argo CD plugin runs it: in the app directory (argocd/plugin.yaml)
    return subprocess.run([sys.executable, "-m", "raygitops", "render", "."], cwd=app, env=env,
                          capture_output=True, text=True, timeout=300)


def test_apps_rendered_at_once_in_processes_equal_each_rendered_alone(tmp_path: Path) -> None:
    apps = write_apps(tmp_path / "apps")
    shared = tmp_path / "sidecar"
    for part in ("tmp", "home", "cache"):
        (shared / part).mkdir(parents=True)
    alone = {name: render(app, name, shared) for name, app in apps}
    assert all(r.returncode == 0 for r in alone.values()), [r.stderr for r in alone.values()]
    for _ in range(2):
        with ThreadPoolExecutor(max_workers=APPS) as pool:
            at_once = dict(zip([n for n, _ in apps], pool.map(lambda a: render(a[1], a[0], shared), apps)))
        for name in alone:
            assert at_once[name].returncode == 0, at_once[name].stderr
            assert at_once[name].stdout == alone[name].stdout, name
    assert [p for p in shared.rglob("*") if p.is_file()] == []  # nothing left for another process to find
    hooks: dict[tuple[str, str, str], str] = {}
    for name, result in alone.items():
        for obj in yaml.safe_load_all(result.stdout):
            labels = obj["metadata"].get("labels") or {}
            if labels.get("app.kubernetes.io/component") == "presync-hook":
                key = (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])  # "": cluster-scoped
                assert key not in hooks, (key, name, hooks.get(key))
                hooks[key] = name
    assert len(hooks) == APPS * 7  # SA, Role, RoleBinding, ClusterRole, ClusterRoleBinding, plan, Job
