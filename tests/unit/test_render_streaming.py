"""Render takes an app one document at a time (issue #17, render memory): what it keeps of a
RayCluster once its object is written is the plan's compact text, never its documents; the
app is read a second time only for a ConfigMap or Secret that comes later (or not at all),
and then only its files that may hold one; the streamed YAML is the same as the kept one,
and nothing of it is written when a late document fails."""

from __future__ import annotations

import gc
import io
import json
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from raygitops.sources import files, yamlio
from raygitops.errors import RaygitopsError
from raygitops.model.names import CONFIG_HASH_ANNOTATION
from raygitops.model.names import HASHES_ANNOTATION
from raygitops.render.pipeline import render_app
from raygitops.model.plan import ClusterPlan, Plan
from raygitops.render.renderer import Render, render_documents
from raygitops.sources.settings import Settings
from raygitops.sources.yamlio import Document, load_documents, may_spell

from test_render import RECREATE, cluster, write

READS_SETTINGS = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: {name}
  annotations: {{raygitops.dev/upgrade-strategy: Recreate}}
spec:
  headGroupSpec:
    template:
      spec:
        containers: [{{name: head, image: "rayproject/ray:2.41.0", envFrom: [{{configMapRef: {{name: {map}}}}}]}}]
"""
SETTINGS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {MODE: a}
"""


class Counted:
    """Documents of a text, parsed anew each time they are iterated, counting the passes."""

    def __init__(self, text: str) -> None:
        self.text, self.passes = text, 0

    def __iter__(self) -> Iterator[Document]:
        self.passes += 1
        return load_documents(self.text, "app.yaml")


def _config_hash(obj: dict[str, Any]) -> str | None:
    return obj["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"].get(CONFIG_HASH_ANNOTATION)


@pytest.mark.parametrize("order, passes", [("configmap first", 1), ("configmap last", 2)])
def test_a_configmap_after_its_reader_is_hashed_and_only_then_is_the_app_read_twice(order: str, passes: int):
    docs = [READS_SETTINGS.format(name="c", map="settings"), SETTINGS]
    source = Counted("---\n".join(docs if order == "configmap last" else docs[::-1]))
    result = render_documents(source, Settings(), "default")
    (obj,) = [o for o in result.objects if o["kind"] == "RayCluster"]
    assert _config_hash(obj) and _config_hash(obj).startswith("c1-")
    assert result.clusters[0].plan.config_maps == ("settings",)
    assert source.passes == passes


def test_references_the_app_does_not_have_cost_one_more_pass_in_all():
    source = Counted("---\n".join(READS_SETTINGS.format(name=f"c{i}", map=f"absent-{i}") for i in range(5)))
    result = render_documents(source, Settings(), "default")
    assert [c.untracked for c in result.clusters] == [[f"ConfigMap/absent-{i}"] for i in range(5)]
    assert all(_config_hash(o) is None for o in result.objects if o["kind"] == "RayCluster")
    assert source.passes == 2


class Tracked(dict):
    """A mapping that can be weakly referenced: tells whether render still holds it."""


def _documents(count: int, seen: list[weakref.ref]) -> Iterator[Document]:
    """``count`` RayClusters whose every pod spec is a Tracked mapping, made as they are asked
    for (a weak reference to each in ``seen``)."""
    for i in range(count):
        obj = yaml.safe_load(cluster(f"c{i}", meta=RECREATE))
        for group in [obj["spec"]["headGroupSpec"], *obj["spec"]["workerGroupSpecs"]]:
            group["template"]["spec"] = Tracked(group["template"]["spec"])
            seen.append(weakref.ref(group["template"]["spec"]))
        yield Document(obj, "app.yaml", 1 + 20 * i)


def test_a_streamed_render_holds_no_document_it_has_written():
    seen: list[weakref.ref] = []
    render = Render(_documents(50, seen), Settings(), "default", keep=False)
    written = 0
    for obj in render.objects():
        if obj["kind"] == "RayCluster":
            written += 1
        del obj
        gc.collect()
        # the pod specs of the objects written before this one are gone: only the object
        # just yielded (two of them) may be alive
        assert sum(ref() is not None for ref in seen[:2 * max(written - 1, 0)]) == 0
    assert written == 50 and render.result.objects == [] and render.result.clusters == []
    (plan,) = render.result.plans
    assert [c.name for c in plan.clusters] == [f"c{i}" for i in range(50)]


def test_the_plan_of_packed_clusters_is_byte_for_byte_the_plan_of_cluster_plans():
    result = render_documents(Counted("---\n".join(cluster(f"c{i}", meta=RECREATE) for i in range(3))),
                              Settings(), "ray")
    (packed,) = result.plans
    unpacked = Plan(packed.namespace, [c.plan for c in result.clusters], packed.settings, packed.app,
                    packed.hash_ignore, packed.pod_rules, packed.config_maps)
    assert isinstance(unpacked.clusters[0], ClusterPlan)
    assert packed.dumps() == unpacked.dumps() == json.dumps(unpacked.to_json(), sort_keys=True, separators=(",", ":"))
    assert packed.to_json() == unpacked.to_json() and packed.digest() == unpacked.digest()
    assert Plan.from_json(json.loads(packed.dumps())).clusters == [c.plan for c in result.clusters]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", "render", *args], capture_output=True, text=True)


def test_the_streamed_yaml_is_the_kept_render_and_carries_the_hashes(tmp_path: Path):
    app = write(tmp_path / "app", {"a.yaml": READS_SETTINGS.format(name="a", map="settings"),
                                   "b.yaml": "---\n".join(cluster(f"b{i}", meta=RECREATE) for i in range(3)),
                                   "z.yaml": SETTINGS})
    streamed = _cli(str(app))
    assert streamed.returncode == 0, streamed.stderr
    kept = render_app(str(app), env={})
    assert list(yaml.safe_load_all(streamed.stdout)) == kept.objects
    assert all(HASHES_ANNOTATION in o["metadata"]["annotations"] for o in kept.objects if o["kind"] == "RayCluster")
    assert _config_hash(kept.objects[0]).startswith("c1-")


def test_a_late_bad_document_leaves_stdout_empty(tmp_path: Path):
    clusters = "---\n".join(cluster(f"c{i}", meta=RECREATE) for i in range(200))
    app = write(tmp_path / "app", {"a.yaml": clusters, "z.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n"})
    res = _cli(str(app))
    assert res.returncode != 0 and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("raygitops: ") and line.endswith("z.yaml:1: ConfigMap has no metadata.name")


def test_only_a_text_with_the_word_or_a_backslash_may_spell_it():
    words = ("ConfigMap", "Secret")
    assert may_spell("kind: ConfigMap\n", words) and may_spell('{"kind": "Secret"}', words)
    assert may_spell('kind: "Config\\x4dap"\n', words) and may_spell('{"kind": "\\u0053ecret"}', words)
    assert not may_spell("kind: RayCluster\nspec: {volumes: [{configMap: {name: x}}], secretName: y}\n", words)
    # folding never joins two lines without a space: no scalar here is ConfigMap
    folded = "a: Config\n  Map\nb: 'Config\n  Map'\nc: >-\n  Config\n  Map\n"
    assert not may_spell(folded, words)
    assert "ConfigMap" not in yaml.safe_load(folded).values()


def _reader_and_map(tmp_path: Path, map_text: str, others: int = 3) -> Path:
    files = {"a.yaml": READS_SETTINGS.format(name="a", map="settings"), "z.yaml": map_text}
    files.update({f"m{i}.yaml": cluster(f"m{i}", meta=RECREATE) for i in range(others)})
    return write(tmp_path / "app", files)


@pytest.mark.parametrize("spelling", ["kind: ConfigMap", 'kind: "Config\\x4dap"', 'kind: "Config\\u004dap"'])
def test_a_later_configmap_is_found_however_it_is_spelled(tmp_path: Path, spelling: str):
    app = _reader_and_map(tmp_path, SETTINGS.replace("kind: ConfigMap", spelling))
    result = render_app(str(app), env={})
    assert _config_hash(result.objects[0]).startswith("c1-") and result.clusters[0].plan.config_maps == ("settings",)


def _counting_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text parsed from now on, as "file:its number of kind: lines"."""
    parsed: list[str] = []

    def counting(text: str, path: str, lists: bool = False) -> Iterator[Document]:
        parsed.append(f"{Path(path).name}:{text.count('kind:')}")
        return load_documents(text, path, lists)

    monkeypatch.setattr(yamlio, "load_documents", counting)
    monkeypatch.setattr(files, "load_documents", counting)
    return parsed


def test_the_second_read_parses_only_the_documents_that_may_be_a_configmap_or_secret(tmp_path: Path,
                                                                                    monkeypatch: pytest.MonkeyPatch):
    parsed = _counting_parses(monkeypatch)
    # z.yaml: a RayCluster, then the ConfigMap on line 22 (a comment and a "..." first)
    mixed = cluster("z", meta=RECREATE) + "# ---\n...\n---\n" + SETTINGS
    app = _reader_and_map(tmp_path, mixed)
    result = render_app(str(app), env={})
    assert _config_hash(result.objects[0]).startswith("c1-")
    # the look-ahead parses the ConfigMap of z.yaml alone; the main pass every file once
    assert sorted(parsed) == ["a.yaml:1", "m0.yaml:1", "m1.yaml:1", "m2.yaml:1", "z.yaml:1", "z.yaml:2"]
    assert [o["metadata"]["name"] for o in result.objects[:len(result.sources)]] == ["a", "m0", "m1", "m2", "z", "settings"]
    assert result.sources[-1].endswith("z.yaml:22")


def test_a_document_parsed_alone_keeps_its_line_and_a_text_that_cannot_be_split_is_parsed_whole():
    text = "a: 1\n---\nkind: Service\n---\n# c\nkind: ConfigMap\n...\n---\nkind: Secret\n"
    assert [(d.obj["kind"], d.line) for d in yamlio.documents_holding(text, "t.yaml", ("ConfigMap", "Secret"))] == [
        ("ConfigMap", 6), ("Secret", 9)]
    assert list(yamlio.documents_holding("kind: Service\n", "t.yaml", ("ConfigMap",))) == []
    directive = "%YAML 1.1\n---\nkind: ConfigMap\n---\nkind: Service\n"
    assert [d.obj["kind"] for d in yamlio.documents_holding(directive, "t.yaml", ("ConfigMap",))] == ["ConfigMap", "Service"]
    broken = "kind: ConfigMap\n---\na: 1\n---\nkind: ConfigMap\nb: [\n"
    with pytest.raises(RaygitopsError) as alone:
        list(yamlio.documents_holding(broken, "t.yaml", ("ConfigMap",)))
    with pytest.raises(RaygitopsError) as whole:
        list(load_documents(broken, "t.yaml"))
    assert str(alone.value) == str(whole.value) and "t.yaml:" in str(whole.value)


def _configmaps(names: list[str]) -> str:
    return "---\n".join(SETTINGS.replace("name: settings", f"name: {name}") for name in names)


@pytest.mark.parametrize("source", ["directory", "stdin"])
def test_a_name_the_app_does_not_have_parses_none_of_its_configmaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    source: str):
    """The KubeRay samples read ConfigMaps their app may not have (ray-example, fluentbit-config):
    looking for one reads the app once more and parses only documents whose text holds the
    name; each of those at most once, whoever asks."""
    readers = [READS_SETTINGS.format(name=f"c{i}", map=m) for i, m in enumerate(["absent", "late", "absent", "late"])]
    app = write(tmp_path / "app", {"a.yaml": "---\n".join(readers), "z.yaml": _configmaps([f"cm-{i}" for i in range(20)]
                                                                                          + ["late"])})
    stdin = "---\n".join([(app / "a.yaml").read_text(), (app / "z.yaml").read_text()])
    parsed = _counting_parses(monkeypatch)
    result = render_app("-", env={}, stdin=io.BytesIO(stdin.encode())) if source == "stdin" else \
        render_app(str(app), env={})
    assert [c.untracked for c in result.clusters] == [["ConfigMap/absent"], [], ["ConfigMap/absent"], []]
    assert [c.plan.config_maps for c in result.clusters] == [(), ("late",), (), ("late",)]
    # the main pass, and from the look-ahead the ConfigMap named late alone
    assert sorted(parsed) == (["<stdin>:1", "<stdin>:25"] if source == "stdin" else ["a.yaml:4", "z.yaml:1", "z.yaml:21"])


def test_past_so_many_names_the_rest_is_parsed_at_once(monkeypatch: pytest.MonkeyPatch):
    from raygitops.render import renderer

    monkeypatch.setattr(renderer, "MAX_NAMES_SEARCHED", 2)
    names = [f"m{i}" for i in range(5)]
    text = "---\n".join([READS_SETTINGS.format(name=f"c{i}", map=m) for i, m in enumerate(names)] + [_configmaps(names)])
    parsed = _counting_parses(monkeypatch)
    result = render_documents(yamlio.TextDocuments(text, "app.yaml"), Settings(), "default")
    assert [c.plan.config_maps for c in result.clusters] == [(n,) for n in names]
    # m0, m1 each alone, then the three left at once; the main pass
    assert sorted(parsed) == ["app.yaml:1"] * 5 + ["app.yaml:10"]


def test_a_kept_document_that_does_not_parse_fails_as_its_whole_text(tmp_path: Path):
    broken = _configmaps(["settings"]) + "---\nkind: ConfigMap\nmetadata: {name: settings2}\nb: [\n"
    app = write(tmp_path / "app", {"a.yaml": READS_SETTINGS.format(name="a", map="settings2"), "z.yaml": broken})
    with pytest.raises(RaygitopsError) as err:
        render_app(str(app), env={})
    with pytest.raises(RaygitopsError) as whole:
        list(load_documents(broken, str(app / "z.yaml")))
    assert str(err.value) == str(whole.value)
