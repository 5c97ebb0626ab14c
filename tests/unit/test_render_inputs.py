"""What render reads of an app, and that nothing the user wrote is left out without a line on
stderr: Lists read as kubectl reads them (raygitops' own `-o json` included), symlinked
directories followed inside the app and refused outside it, objects in values files named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from test_render import RECREATE, cluster

REPO = Path(__file__).resolve().parents[2]


def render(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`raygitops render ARGS` with a hook image a registry serves (no warning about it)."""
    return subprocess.run([sys.executable, "-m", "raygitops", "render", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, cwd=cwd,
                          env={**os.environ, "RAYGITOPS_HOOK_IMAGE": "registry.example.com/raygitops:0.1.0"})


def documents(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def names(text: str) -> list[tuple[str, str]]:
    return [(d["kind"], d["metadata"]["name"]) for d in documents(text)]


# ----------------------------------------------------------------------------- Lists


def test_raygitops_own_json_output_renders_to_the_same_stream(tmp_path: Path) -> None:
    """`render -o json` is one v1/List; rendering it again (a file, or stdin) gives the same
    manifests as rendering the app: the hook objects in it are made anew, not doubled."""
    app = REPO / "examples" / "plain"
    as_json = render(str(app), "-o", "json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["kind"] == "List"
    (tmp_path / "rendered.json").write_text(as_json.stdout)
    again = render(str(tmp_path / "rendered.json"))
    piped = render("-", stdin=as_json.stdout)
    direct = render(str(app))
    assert again.returncode == 0 and piped.returncode == 0, again.stderr + piped.stderr
    assert again.stdout == piped.stdout == direct.stdout


def test_a_list_of_any_kind_is_read_as_its_items_each_at_its_line(tmp_path: Path) -> None:
    """kind: List and kind: ConfigMapList (kubectl flattens both, and Lists inside Lists);
    an error in an item names the item's own line."""
    config_maps = {"apiVersion": "v1", "kind": "ConfigMapList", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
        {"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}]}]}
    listed = {"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(cluster(meta=RECREATE)), config_maps]}
    app = tmp_path / "app"
    app.mkdir()
    (app / "list.yaml").write_text(yaml.safe_dump(listed, sort_keys=False))
    res = render(str(app))
    assert res.returncode == 0, res.stderr
    assert names(res.stdout)[:3] == [("RayCluster", "c"), ("ConfigMap", "a"), ("ConfigMap", "b")]
    assert ("Job", "raygitops-presync") in names(res.stdout)
    # the second ConfigMap has no name: refused at its own line in the List
    config_maps["items"][1]["items"][0]["metadata"] = {}
    text = yaml.safe_dump(listed, sort_keys=False)
    (app / "list.yaml").write_text(text)
    res = render(str(app))
    line = next(n for n, l in enumerate(text.splitlines(), 1) if l.strip() == "metadata: {}")
    assert res.returncode == 1 and res.stderr.startswith(f"raygitops: {app}/list.yaml:{line - 2}: "), (line, res.stderr)


def test_a_list_is_not_mistaken_for_a_kind_that_merely_ends_in_list(tmp_path: Path) -> None:
    """Only a kind ending in List with an items list is one (a custom resource called
    AllowList with a spec stays itself)."""
    obj = {"apiVersion": "example.com/v1", "kind": "AllowList", "metadata": {"name": "x"}, "spec": {"items": ["a"]}}
    app = tmp_path / "app"
    app.mkdir()
    (app / "o.yaml").write_text(yaml.safe_dump(obj))
    res = render(str(app))
    assert res.returncode == 0 and names(res.stdout) == [("AllowList", "x")], res.stderr


# ----------------------------------------------------------------------------- symlinks


def test_a_symlinked_directory_inside_the_app_is_read(tmp_path: Path) -> None:
    app = tmp_path / "app"
    (tmp_path / "shared").mkdir()
    (app / "clusters").mkdir(parents=True)
    (app / "clusters" / "c.yaml").write_text(cluster("inside", meta=RECREATE))
    os.symlink("clusters", app / "linked")  # the same directory twice: read once
    res = render(str(app))
    assert res.returncode == 0 and names(res.stdout).count(("RayCluster", "inside")) == 1, res.stderr
    # a hidden directory is not read, but a visible link to it is (before: neither, silently)
    (app / ".common").mkdir()
    (app / ".common" / "d.yaml").write_text(cluster("through-a-link", meta=RECREATE))
    os.symlink(".common", app / "common")
    res = render(str(app))
    assert res.returncode == 0 and ("RayCluster", "through-a-link") in names(res.stdout), res.stderr


def test_a_symlinked_directory_leading_outside_the_app_is_an_error(tmp_path: Path) -> None:
    """Before: neither followed nor reported (its clusters silently missing: with prune, deleted)."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "c.yaml").write_text(cluster("outside", meta=RECREATE))
    app = tmp_path / "app"
    app.mkdir()
    (app / "c.yaml").write_text(cluster(meta=RECREATE))
    os.symlink("../outside", app / "more")
    res = render(str(app))
    assert (res.returncode, res.stdout) == (1, ""), res.stdout
    assert res.stderr == f"raygitops: {app}/more: path leads outside the app directory\n"


# ----------------------------------------------------------------------------- values files


def test_an_object_in_a_values_file_is_named_on_stderr(tmp_path: Path) -> None:
    """Files named values*.yaml or under values/ are never manifests: a RayCluster moved
    into one is not rendered (Argo CD's prune would delete it), and render says so; a values
    file the app reads, or one the user excluded, is not warned about."""
    app = tmp_path / "app"
    (app / "values").mkdir(parents=True)
    (app / "c.yaml").write_text(cluster(meta=RECREATE))
    (app / "values-clusters.yaml").write_text("# moved here by mistake\n" + cluster("lost"))
    (app / "values" / "more.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
    (app / "values.yaml").write_text("image: x\n")  # plain values: nothing to say
    (app / "values-used.yaml").write_text("apiVersion: v1\nkind: Thing\n")  # read as values
    (app / "values-excluded.yaml").write_text(cluster("ignored"))
    (app / "raygitops.yaml").write_text("values: [values-used.yaml]\nexclude: [values-excluded.yaml]\n")
    res = render(str(app))
    assert res.returncode == 0, res.stderr
    assert ("RayCluster", "lost") not in names(res.stdout)
    assert res.stderr.splitlines() == [
        f"raygitops: warning: {app}/values-clusters.yaml:2: RayCluster lost is not rendered: files named "
        "values*.yaml or under values/ are never manifests (rename the file, or add it to exclude)",
        f"raygitops: warning: {app}/values/more.yaml:1: ConfigMap cm is not rendered: files named "
        "values*.yaml or under values/ are never manifests (rename the file, or add it to exclude)",
    ], res.stderr
