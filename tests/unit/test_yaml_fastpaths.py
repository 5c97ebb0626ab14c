"""The YAML fast paths (yamlio: strings taken from their nodes when loading, the block dumper,
scalar tags remembered by text)
give exactly what PyYAML's own safe loader and dumper give: same objects, same bytes.

Why they exist: render must stay within 1.15x of a plain libyaml load + dump
(tests/bench/bench_render.py), and PyYAML's generic dispatch per scalar was most of the gap.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raygitops.errors import RaygitopsError
from raygitops.sources import yamlio
from raygitops.sources.yamlio import dump, dump_stream, load_documents
from sharedpaths import corpus_files

KW = dict(sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 16)

scalars = st.one_of(
    st.text(max_size=30), st.integers(), st.booleans(), st.none(),
    st.floats(allow_nan=False), st.sampled_from(["yes", "0o17", "1e3", "~", "", "a: b", "- x", "multi\nline\n", "é ✓"]),
)
objects = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), inner, max_size=4)),
    max_leaves=30)


def library_load(text: str) -> list:
    return [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d is not None]


def ours(text: str) -> list:
    return [d.obj for d in load_documents(text, "x.yaml")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(objects, min_size=1, max_size=3))
def test_dump_and_load_match_the_library(docs):
    text = dump_stream(docs)
    assert text == yaml.dump_all(docs, Dumper=yaml.CSafeDumper, explicit_start=True, **KW)
    assert dump(docs[0]) == yaml.dump(docs[0], Dumper=yaml.CSafeDumper, **KW)
    # repr: 1, 1.0 and True are equal in Python, not in a manifest
    assert repr(ours(text)) == repr(library_load(text))


@pytest.mark.parametrize("path", corpus_files() or [pytest.param(None, marks=pytest.mark.skip("../shared absent"))],
                         ids=lambda p: p.name if p else "none")
def test_kuberay_samples_load_and_dump_as_the_library_does(path):
    text = path.read_text()
    docs = ours(text)
    assert repr(docs) == repr(library_load(text))
    assert dump_stream(docs) == yaml.dump_all(docs, Dumper=yaml.CSafeDumper, explicit_start=True, **KW)


def test_tagged_and_quoted_scalars_keep_their_types():
    text = 'a: !!str 1\nb: "2"\nc: 3\nd: !!binary aGk=\ne: 2026-01-02\nf: null\n"g": yes\n'
    assert repr(ours(text)) == repr(library_load(text))


@pytest.mark.parametrize("text", [
    "s: !!set {a, b}\no: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}, {a: 2}]\n",
    "=: x\n2: a\ntrue: b\n~: c\n1.5: d\n2026-01-02: e\n'x': f\n",
    "a: !!seq [1, !!map {b: !!str 2}]\nb: !!binary aGk=\nc: !!float 1\n",
    "{a: [b, {c: d}], e: [[], {}], f: [[[x]]]}\n",
    "- a\n- - b\n  - {c: [d]}\n",
])
def test_plain_documents_build_what_the_safe_constructor_builds(text):
    """Documents without merge keys or aliases are built directly (yamlio._StrictLoader._build):
    the other tags and keys still come out as PyYAML's safe constructor makes them."""
    assert "*" not in text and "<<" not in text
    assert repr(ours(text)) == repr(library_load(text))


def test_plain_documents_refuse_what_the_safe_constructor_refuses():
    with pytest.raises(RaygitopsError, match="could not determine a constructor for the tag '!foo'"):
        ours("a: !foo x\n")
    with pytest.raises(RaygitopsError, match="duplicate key 1"):
        ours("1: a\n0x1: b\n")
    with pytest.raises(RaygitopsError, match="mapping key is not a scalar"):
        ours("? {a: 1}\n: x\n")


def test_a_shared_object_is_written_in_full_twice_without_anchors():
    shared = {"image": "rayproject/ray:2.41.0", "env": [{"name": "A", "value": "1"}]}
    text = dump_stream([{"a": shared, "b": shared}])
    assert "&" not in text and "*" not in text
    assert ours(text) == [{"a": shared, "b": shared}]


def test_duplicate_keys_are_still_refused_and_merge_keys_still_override():
    with pytest.raises(RaygitopsError, match="duplicate key 'a'"):
        ours("a: 1\nb: 2\na: 3\n")
    assert ours("base: &b {a: 1, c: 2}\nx:\n  <<: *b\n  a: 9\n")[0]["x"] == {"a": 9, "c": 2}
    with pytest.raises(RaygitopsError, match="duplicate key 'a'"):
        ours("base: &b {c: 2}\nx:\n  <<: *b\n  a: 1\n  a: 2\n")
    with pytest.raises(RaygitopsError, match="mapping key is not a scalar"):
        ours("? [1, 2]\n: x\n")


def test_repeated_strings_are_one_object():
    """The render peak-RSS figure rests on this: 5,000 clusters repeat the same keys and
    images, and each copy would cost its own ~60 bytes."""
    a, b = ours("---\nimage: rayproject/ray:2.41.0\n---\nimage: rayproject/ray:2.41.0\n")
    (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
    assert ka is kb and va is vb



def test_remembered_tags_stay_bounded_and_right_after_they_are_forgotten(monkeypatch):
    """The loader and the dumper remember each scalar's tag by its text, at most
    _MAX_REMEMBERED_TAGS of them: past the bound they start again, with the same tags."""
    monkeypatch.setattr(yamlio, "_MAX_REMEMBERED_TAGS", 5)
    docs = [{f"k{i}": f"v{i}" for i in range(20)} | {"a": "yes", "b": "1", "c": "null", "d": "~", "e": 2, "f": True}]
    text = dump_stream(docs)
    assert text == yaml.dump_all(docs, Dumper=yaml.CSafeDumper, explicit_start=True, **KW)
    assert repr(ours(text)) == repr(library_load(text)) == repr(docs)
    loader = yamlio._StrictLoader(text)
    try:
        loader.get_single_node()
        assert 0 < len(loader._tags) <= 5
    finally:
        loader.dispose()


# ----------------------------------------------------------------------------- nesting guard
# check_nesting keeps libyaml's recursive composer from deep input (tests/reliability: the
# hostile cases and the bound's properties); here: what it costs ordinary manifests.


def _ordinary_texts() -> dict[str, str]:
    """Manifests as people write them: the KubeRay samples (files as they are, every document
    of them in one stream as `helm template` would give, and re-dumped with a 4-space
    indent), the examples of this repository."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    texts = {str(p.relative_to(repo)): p.read_text(encoding="utf-8") for p in sorted((repo / "examples").rglob("*.yaml"))
             if "templates" not in p.parts}
    samples = [p.read_text(encoding="utf-8") for p in corpus_files()]
    texts.update({p.name: text for p, text in zip(corpus_files(), samples)})
    if samples:
        documents = [d for text in samples for d in text.split("\n---\n")]
        texts["one stream of 400 sample documents"] = "\n---\n".join(documents[i % len(documents)] for i in range(400))
        texts["the samples with a 4-space indent"] = "".join(
            yaml.safe_dump_all(yaml.safe_load_all(text), indent=4, explicit_start=True) for text in samples)
    return texts


def test_ordinary_manifests_take_no_second_pass(monkeypatch):
    """The cheap bound clears real manifests, however many documents share a text (it once
    added up the brackets of all of them) and however deep they are indented: their parser
    events are never walked before the real parse."""
    def walked(*args, **kwargs):
        raise AssertionError("walked")

    monkeypatch.setattr(yamlio, "_walk_depth", walked)
    texts = _ordinary_texts()
    assert len(texts) > (3 if not corpus_files() else 20)
    for name, text in texts.items():
        yamlio.check_nesting(text)
        assert yamlio._nesting_bound(text) <= yamlio.MAX_DEPTH, name


def test_only_the_documents_over_the_bound_are_walked(monkeypatch):
    """A document with more brackets than the bound allows (not deeper) is walked alone, the
    others not at all; one that is too deep is reported at its line in the whole text."""
    walked: list[str] = []
    real_walk = yamlio._walk_depth

    def walk(loader_class, text, until=None):
        walked.append(text)
        return real_walk(loader_class, text, until)

    monkeypatch.setattr(yamlio, "_walk_depth", walk)
    shallow = "".join(f"---\nkind: ConfigMap\nmetadata: {{name: c{i}}}\ndata: {{a: '[x]'}}\n" for i in range(50))
    flat = "---\nkind: ConfigMap\nmetadata: {name: flat}\ndata: {a: [" + "[], " * 250 + "[]]}\n"
    yamlio.check_nesting(shallow + flat + shallow)
    assert walked == [flat]
    walked.clear()
    deep = "---\nkind: ConfigMap\nmetadata: {name: deep}\ndata: {a: " + "[" * 201 + "]" * 201 + "}\n"
    with pytest.raises(RaygitopsError, match=f"nests deeper than {yamlio.MAX_DEPTH}") as err:
        yamlio.check_nesting(shallow + deep)
    assert err.value.line == shallow.count("\n") + 4 and walked == [deep, shallow + deep]
