"""YAML in and out: libyaml's C parser with the safe constructor, and nothing looser.

Loading keeps each document's first line (for error messages), rejects duplicate keys
(Kubernetes would silently take one of them) and refuses alias bombs before anything
walks the expanded tree.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence, TextIO

import yaml

from raygitops.errors import RaygitopsError

try:
    _Loader: type = yaml.CSafeLoader
    _Dumper: type = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader
    _Dumper = yaml.SafeDumper

# An expanded document larger than this many nodes is an alias bomb, not a manifest.
MAX_EXPANDED_NODES = 1_000_000
MAX_DEPTH = 200

# Where a block collection can start on a line: after the indentation and any compact
# indicators ("- - ", "? ", ": ") or node properties ("&a ", "!!seq ").
_BLOCK_START = re.compile(r"^[ ]*(?:(?:[-?:]|---|&\S*|!\S*)[ \t]+)*", re.MULTILINE)


# Finds the lines of fields of a document (``spec.workerGroupSpecs[0].minReplica``): parses
# the document's text again, so only an error pays for it.
Locator = Callable[[Sequence[str]], "list[int | None]"]


@dataclass(frozen=True)
class Document:
    """One parsed document with where it came from (``locate``: the lines of fields in it)."""

    obj: Any
    path: str
    line: int
    locate: Locator | None = field(default=None, compare=False, repr=False)

    def lines_of(self, paths: Sequence[str]) -> list[int | None]:
        """The line of each field path (as :mod:`raygitops.model.crdschema` writes one) in
        this document: where the deepest part of it that exists is written; None unknown."""
        return self.locate(paths) if self.locate is not None else [None] * len(paths)

    def locate_error(self, err: RaygitopsError) -> RaygitopsError:
        """``err`` placed in this document: at the line of its ``field`` when it names one
        (and each of its ``also``), else at the document's first line."""
        for one in (err, *err.also):
            if one.line is None and one.field is not None:
                one.line = self.lines_of([one.field])[0]
        return err.located(self.path, self.line)

    def shifted(self, lines: int) -> "Document":
        """The same document read from a part of a text that starts ``lines`` further down."""
        locate = self.locate
        if locate is None:
            return Document(self.obj, self.path, self.line + lines)
        return Document(self.obj, self.path, self.line + lines,
                        lambda paths: [None if n is None else n + lines for n in locate(paths)])


_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
# a key "=" resolves to the value tag, which the safe constructor reads as a string key
_STR_KEY_TAGS = frozenset({_STR_TAG, "tag:yaml.org,2002:value"})


# Scalar tags remembered per loader or dumper: enough for an app's repeated keys and values,
# bounded so a dumper writing a whole app does not keep every distinct string.
_MAX_REMEMBERED_TAGS = 4096


class _RememberedTags:
    """Tag resolution remembered per scalar text.

    libyaml's composer and emitter ask the Python resolver for the tag of every scalar (the
    emitter twice): PyYAML's own matches the implicit-type regular expressions each time,
    about a fifth of a render.  Manifests repeat their keys and most values, so the tag is
    remembered by text.  The safe loader and dumper have no path resolvers, so a scalar's
    tag depends on its text alone: the regular expressions' match, else ``str``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tags: dict[str, str] = {}

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode:
            if not implicit[0]:
                return _STR_TAG
            tags = self._tags
            tag = tags.get(value)
            if tag is None:
                if len(tags) >= _MAX_REMEMBERED_TAGS:
                    tags.clear()
                tag = tags[value] = super().resolve(kind, value, implicit)  # type: ignore[misc]
            return tag
        return _MAP_TAG if kind is yaml.MappingNode else _SEQ_TAG

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        """No path resolvers: nothing to track."""

    def ascend_resolver(self) -> None:
        """No path resolvers: nothing to track."""


class _StrictLoader(_RememberedTags, _Loader):  # type: ignore[misc, valid-type]
    """Safe loader that rejects duplicate mapping keys.

    A key that overrides one brought in by a ``<<`` merge key is not a duplicate (that is
    what merge keys are for); two keys written in the same mapping are.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # Merge keys are rare: only then track which keys each mapping wrote itself.
        merges = isinstance(stream, str) and ("<<" in stream or "merge" in stream)
        self._own_keys: dict[int, tuple[yaml.Node, set[int]]] | None = {} if merges else None
        # Neither merge keys nor aliases (most manifests): every node is met once, in a tree
        self._plain = isinstance(stream, str) and not merges and "*" not in stream

    def construct_document(self, node: yaml.Node) -> Any:
        """A plain document (:meth:`_build`), or PyYAML's way (merge keys, aliases)."""
        if not self._plain:
            return super().construct_document(node)
        try:
            return self._build(node)
        finally:
            self.constructed_objects = {}

    def _build(self, node: yaml.Node) -> Any:
        """The object of a node of a plain document, built directly: strings, mappings and
        lists (most of a manifest) without the safe constructor's generic dispatch, its
        bookkeeping of every node and its generators (render loads faster than PyYAML's own
        CSafeLoader, tests/bench/bench_render.py); anything else by the safe constructor.
        The same objects as its (tests/unit/test_yaml_fastpaths.py).  Recursive: the
        document is at most MAX_DEPTH deep (:func:`check_nesting` ran) and has no alias."""
        cls = node.__class__
        if cls is yaml.ScalarNode:
            if node.tag == _STR_TAG:
                return sys.intern(node.value)  # interned: see _construct
            return self.construct_object(node)
        if cls is yaml.MappingNode and node.tag == _MAP_TAG:
            build = self._build
            mapping: dict = {}
            for key_node, value_node in node.value:
                if key_node.__class__ is yaml.ScalarNode and key_node.tag in _STR_KEY_TAGS:
                    key = sys.intern(key_node.value)
                else:
                    key = build(key_node)
                    try:
                        hash(key)
                    except TypeError:
                        raise RaygitopsError("mapping key is not a scalar", line=key_node.start_mark.line + 1) from None
                if key in mapping:
                    raise RaygitopsError(f"duplicate key {key!r}", line=key_node.start_mark.line + 1)
                mapping[key] = build(value_node)
            return mapping
        if cls is yaml.SequenceNode and node.tag == _SEQ_TAG:
            build = self._build
            return [build(child) for child in node.value]
        return self.construct_object(node, deep=True)  # !!set, !!omap, !!binary, an unknown tag...

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Remember the keys written in this mapping before merges are spliced in (a merged
        # mapping is flattened, in place, by whoever merges it first).
        owned = self._own_keys
        if owned is not None and id(node) not in owned:
            owned[id(node)] = (node, {id(k) for k, _ in node.value if k.tag != _MERGE_TAG})
        super().flatten_mapping(node)

    def _construct(self, node: yaml.Node, deep: bool) -> Any:
        """Most scalars are strings, for which the safe constructor returns the node's value
        after a generic dispatch: taking it directly gives an equal string, loading faster
        than PyYAML's own CSafeLoader (tests/bench/bench_render.py).  Interned: an app of
        many clusters repeats its keys and most values, and one copy of each is half the
        memory its documents take (the render peak-RSS figure, tests/bench/bench_render.py)."""
        if node.__class__ is yaml.ScalarNode and node.tag == _STR_TAG:
            return sys.intern(node.value)
        return self.construct_object(node, deep=deep)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        self.flatten_mapping(node)  # resolves "<<" merge keys first (merged pairs come first)
        own = self._own_keys[id(node)][1] if self._own_keys is not None else None
        mapping: dict = {}
        written: set = set()
        for key_node, value_node in node.value:
            key = self._construct(key_node, deep)
            try:
                hash(key)
            except TypeError:
                raise RaygitopsError(
                    "mapping key is not a scalar", line=key_node.start_mark.line + 1
                ) from None
            if own is None:
                if key in mapping:
                    raise RaygitopsError(
                        f"duplicate key {key!r}", line=key_node.start_mark.line + 1
                    )
            elif id(key_node) in own:
                if key in written:
                    raise RaygitopsError(
                        f"duplicate key {key!r}", line=key_node.start_mark.line + 1
                    )
                written.add(key)
            mapping[key] = self._construct(value_node, deep)
        return mapping


class _BlockDumper(_RememberedTags, _Dumper):  # type: ignore[misc, valid-type]
    """The safe dumper, block style only, without anchors, faster.

    Strings, dicts and lists become the nodes the safe representer makes for them (with
    ``default_flow_style=False``), without its generic dispatch; anything else goes to it.
    A Kubernetes manifest never needs anchors, so an object met twice is written twice
    (documents with cycles are refused when loaded).  The output is byte-identical to the
    safe dumper's on acyclic, unshared data (tests/unit/test_yaml_fastpaths.py).
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_data(self, data: Any) -> yaml.Node:
        cls = data.__class__
        if cls is str:
            return yaml.ScalarNode(_STR_TAG, data)
        if cls is dict:
            represent = self.represent_data
            return yaml.MappingNode(_MAP_TAG, [(represent(k), represent(v)) for k, v in data.items()],
                                    flow_style=False)
        if cls is list:
            represent = self.represent_data
            return yaml.SequenceNode(_SEQ_TAG, [represent(item) for item in data], flow_style=False)
        return super().represent_data(data)


def _check_expansion(root: yaml.Node) -> None:
    """Refuse node graphs whose alias expansion is huge or deep (billion laughs)."""
    # id(node) -> (expanded size, height): an alias reached again deeper must still be
    # checked for depth (a chain of anchors each nesting the previous one).
    known: dict[int, tuple[int, int]] = {}

    def too_deep(node: yaml.Node) -> RaygitopsError:
        return RaygitopsError(
            f"document nests deeper than {MAX_DEPTH} levels", line=node.start_mark.line + 1
        )

    def size(node: yaml.Node, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise too_deep(node)
        seen = known.get(id(node))
        if seen is not None:
            if depth + seen[1] > MAX_DEPTH:
                raise too_deep(node)
            return seen
        total, height = 1, 0
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        for child in children:
            child_total, child_height = size(child, depth + 1)
            total += child_total
            height = max(height, child_height + 1)
        if total > MAX_EXPANDED_NODES:
            raise RaygitopsError(
                f"document expands to more than {MAX_EXPANDED_NODES} nodes through aliases",
                line=node.start_mark.line + 1,
            )
        known[id(node)] = (total, height)
        return total, height

    size(root, 0)


# What the bound reads otherwise than its text, one character for one (every index kept):
# libyaml's line breaks besides "\n" (a lone "\r", NEL, LS, PS) as "\n", which its regular
# expressions know; a byte order mark as a space (libyaml skips one at a line's start, and the
# line's column goes on from 1).
_AS_LIBYAML_SEES = str.maketrans({"\r": "\n", "\x85": "\n", "\u2028": "\n", "\u2029": "\n", "\ufeff": " "})
# A document marker at the start of a line (after the "\n" matched), never inside a scalar
# (the parser refuses one there): libyaml ends every open collection there, or fails ("---"
# inside a flow collection is an error), so no document nests across one.
_DOCUMENT_MARKER = re.compile(r"\n(?:---|\.\.\.)(?=[ \t\r\n]|$)")
# What a block-start prefix is made of when it holds no node property (&anchor, !tag)
_PREFIX_CHARS = " \t?:-"
# columns -> a line starting with more than that many of them (at most MAX_DEPTH patterns)
_LONG_PREFIX: dict[int, re.Pattern[str]] = {}
# More anchors and tags than this: measure every prefix rather than look at each of them
_MAX_PROPERTIES_LOOKED_AT = 1000
# More documents over the bound than this: walk the whole text once rather than each alone
_MAX_PART_WALKS = 8


def _part_bounds(text: str, limit: int = MAX_DEPTH) -> list[tuple[int, int, int]]:
    """Cheap upper bounds of how deep the documents of ``text`` nest, without parsing it:
    ``(start, end, bound)`` of parts of the text that hold whole documents.

    A block collection nested in another starts at a greater column (a block sequence that is
    a mapping value may share its key's column, but its entries cannot), so block depth is at
    most twice the furthest column a block collection can start at; flow collections add at
    most one level per bracket, and only the brackets of the same document count: the parts
    are cut at document markers.  When a quick look shows every part within ``limit``, one
    part (the whole text) with that bound; else each part's own.  Ordinary manifests, however
    deeply indented, take the quick look: a regular-expression search and two counts per
    document, no pass of the parser.
    """
    scan = text.translate(_AS_LIBYAML_SEES) if any(c in text for c in "\r\x85\u2028\u2029\ufeff") else text
    whole = _within(scan, 0, len(scan), scan.count("[") + scan.count("{"), limit)
    if whole is not None:  # all the brackets in one document would still be within
        return [(0, len(text), whole)]
    cuts = [0, *(m.start() + 1 for m in _DOCUMENT_MARKER.finditer(scan)), len(scan)]
    parts = [(start, end, scan.count("[", start, end) + scan.count("{", start, end))
             for start, end in zip(cuts, cuts[1:])]
    whole = _within(scan, 0, len(scan), max(brackets for _, _, brackets in parts), limit)
    if whole is not None:
        return [(0, len(text), whole)]
    bounds = []
    for start, end, brackets in parts:
        bound = _within(scan, start, end, brackets, limit)
        if bound is None:
            bound = 2 * (_furthest_block_start(scan, start, end) + 1) + 1 + brackets
        bounds.append((start, end, bound))
    return bounds


def _within(text: str, start: int, end: int, brackets: int, limit: int) -> int | None:
    """A bound no greater than ``limit`` for ``text[start:end]`` (which starts a line and
    holds ``brackets``), if a quick look finds one: no block collection there starts further
    right than the columns left after the brackets."""
    columns = (limit - 3 - brackets) // 2  # the bound's 2 * (columns + 1) + 1 + brackets <= limit
    if columns < 0 or _prefix_longer_than(text, start, end, columns):
        return None
    return 2 * (columns + 1) + 1 + brackets


def _furthest_block_start(text: str, start: int, end: int) -> int:
    """The furthest column a block collection can start at in ``text[start:end]`` (a line's
    indentation, compact indicators and node properties: :data:`_BLOCK_START`)."""
    return max((m.end() - m.start() for m in _BLOCK_START.finditer(text, start, end)), default=0)


def _prefix_longer_than(text: str, start: int, end: int, columns: int) -> bool:
    """Whether a block collection may start further right than ``columns`` in
    ``text[start:end]`` (False only when sure).  Without node properties a block-start prefix
    is made of spaces, tabs and ``-?:`` only, so a line that starts with no more than
    ``columns`` of them starts none further; a line whose prefix holds an anchor or a tag (an ``&`` or ``!``
    after those characters only) is measured."""
    pattern = _LONG_PREFIX.get(columns)
    if pattern is None:
        pattern = _LONG_PREFIX[columns] = re.compile(r"\n[ \t?:-]{%d}" % (columns + 1))
    # a part after the first starts right after a "\n": the search starts on it
    if pattern.search(text, max(start - 1, 0), end) is not None:
        return True
    if start == 0 and end > columns and not text[:columns + 1].strip(_PREFIX_CHARS):
        return True
    if text.count("&", start, end) + text.count("!", start, end) > _MAX_PROPERTIES_LOOKED_AT:
        return _furthest_block_start(text, start, end) > columns
    for char in "&!":
        at = text.find(char, start, end)
        while at >= 0:
            line = max(text.rfind("\n", start, at) + 1, start)
            if not text[line:at].strip(_PREFIX_CHARS):
                line_end = text.find("\n", at, end)
                if _furthest_block_start(text, line, end if line_end < 0 else line_end) > columns:
                    return True
            at = text.find(char, at + 1, end)
    return False


def _nesting_bound(text: str, limit: int = MAX_DEPTH) -> int:
    """The cheap bound of the deepest document of ``text`` (:func:`_part_bounds`)."""
    return max(bound for _, _, bound in _part_bounds(text, limit))


def _too_deep(line: int) -> RaygitopsError:
    return RaygitopsError(f"document nests deeper than {MAX_DEPTH} levels", line=line)


def _walk_depth(loader_class: type, text: str, until: int | None = None) -> None:
    """Walk the parser's events (iterative: no recursion in C or Python) up to character
    ``until`` (default: the end) and refuse a collection nested deeper than MAX_DEPTH."""
    parser = loader_class(text)
    depth = 0
    try:
        while True:
            event = parser.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return
            if until is not None and event.start_mark.index > until:
                return
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(event.start_mark.line + 1)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    finally:
        parser.dispose()


def check_nesting(text: str) -> None:
    """Refuse documents nesting deeper than MAX_DEPTH *before* composing them.

    libyaml's composer recurses in C (about 25,000 levels overflow the stack: a segfault,
    not an exception) and everything after it (constructor, hashing, dumpers) recurses in
    Python.  The documents whose cheap bound (:func:`_part_bounds`) cannot rule it out have
    the parser's events walked, each alone (a document's nesting does not depend on the
    others); when one is too deep or does not parse alone, the whole text is walked for the
    error as libyaml reads it (:func:`_walk_text`).
    """
    deep = [(start, end) for start, end, bound in _part_bounds(text) if bound > MAX_DEPTH]
    if not deep:
        return
    if len(deep) > _MAX_PART_WALKS or deep == [(0, len(text))]:
        _walk_text(text)
        return
    for start, end in deep:
        try:
            _walk_depth(_Loader, text[start:end])
        except (yaml.YAMLError, RaygitopsError):
            _walk_text(text)
            return


def _walk_text(text: str) -> None:
    """Walk the whole text's events: its first document deeper than MAX_DEPTH, or its
    parse error.

    The product's limit, not the library's, decides: libyaml scans ahead of the events it
    returns and, in newer builds (PyYAML 6.0.4's wheels), stops at its own nesting limit with
    its own message before this walk sees level MAX_DEPTH.  So when the C walk fails, the
    text up to libyaml's error is walked again with PyYAML's pure-Python parser (no depth
    limit, no recursion, a lookahead of one simple key): deeper than MAX_DEPTH there is the
    product's error; otherwise libyaml's problem is reported as invalid YAML.  The slow walk
    only runs on input that is already an error.
    """
    try:
        _walk_depth(_Loader, text)
    except yaml.YAMLError as libyaml_error:
        mark = getattr(libyaml_error, "problem_mark", None)
        try:  # deeper than MAX_DEPTH before libyaml's error: the product's error
            _walk_depth(yaml.SafeLoader, text, until=mark.index if mark is not None else None)
        except yaml.YAMLError:
            pass
        raise library_error(libyaml_error) from None


def library_error(err: yaml.YAMLError) -> RaygitopsError:
    """A library parse error as the product's one-line error, with its line if known."""
    if not isinstance(err, yaml.MarkedYAMLError):
        return RaygitopsError(f"invalid YAML: {err}")
    mark = err.problem_mark or err.context_mark
    problem = err.problem or err.context or "invalid YAML"
    return RaygitopsError(f"invalid YAML: {problem}", line=mark.line + 1 if mark is not None else None)


def _node_lines(root: yaml.Node, paths: Sequence[str]) -> list[int | None]:
    """For each field path (``spec.a[0].b``, keys joined by ``.``, list indexes in ``[]``,
    maybe followed by ``: message``), the line of the deepest part written in ``root``: a
    key's own line where the key exists, else its parent's.  Keys may hold dots: the path
    is matched against the keys the document has."""
    found: list[int | None] = []
    for path in paths:
        node, rest, line = root, "." + path, root.start_mark.line + 1
        while rest:
            if rest[0] == "[" and isinstance(node, yaml.SequenceNode) and "]" in rest:
                index = rest[1:rest.index("]")]
                if not index.isdigit() or int(index) >= len(node.value):
                    break
                node, rest = node.value[int(index)], rest[rest.index("]") + 1:]
                line = node.start_mark.line + 1
            elif rest[0] == "." and isinstance(node, yaml.MappingNode):
                keys = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)
                        and rest[1:].startswith(k.value) and rest[1 + len(k.value):][:1] in ("", ".", "[", ":")]
                if not keys:
                    break
                key, node = max(keys, key=lambda kv: len(kv[0].value))
                rest, line = rest[1 + len(key.value):], key.start_mark.line + 1
            else:
                break
        found.append(line)
    return found


def _locator(text: str, start: int, prefix: str = "") -> Locator:
    """Lines of fields in the document of ``text`` that starts at character ``start``
    (``prefix``: the path of a List item in its List)."""

    def locate(paths: Sequence[str]) -> list[int | None]:
        loader = _StrictLoader(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node.start_mark.index == start:
                    return _node_lines(node, [prefix + p for p in paths])
        except (yaml.YAMLError, RaygitopsError):
            pass
        finally:
            loader.dispose()
        return [None] * len(paths)

    return locate


def _list_items(obj: Any, node: yaml.Node, path: str, text: str, start: int, prefix: str = ""
                ) -> Iterator[Document] | None:
    """The items of a List (``kind: List``, ``ConfigMapList``, ...: a kind ending in ``List``
    with an ``items`` list), each at its own line, Lists in it flattened, as kubectl reads
    them; None when ``obj`` is not one.  ``start``: where the List's document starts in
    ``text``; ``prefix``: the path of ``obj`` in it."""
    if not (isinstance(obj, dict) and isinstance(obj.get("kind"), str) and obj["kind"].endswith("List")
            and isinstance(obj.get("apiVersion"), str) and isinstance(obj.get("items"), list)):
        return None
    nodes: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        nodes = next((v.value for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "items"
                      and isinstance(v, yaml.SequenceNode)), [])
    if len(nodes) != len(obj["items"]):  # items through an alias or a merge: the List's own line
        nodes = [node] * len(obj["items"])

    def items() -> Iterator[Document]:
        for index, (item, item_node) in enumerate(zip(obj["items"], nodes)):
            where = f"{prefix}items[{index}]."
            nested = _list_items(item, item_node, path, text, start, where)
            if nested is not None:
                yield from nested
            elif item is not None:
                yield Document(item, path, item_node.start_mark.line + 1, _locator(text, start, where))

    return items()


def load_documents(text: str, path: str, lists: bool = False) -> Iterator[Document]:
    """Parse a multi-document YAML (or JSON) stream; empty documents are skipped; with
    ``lists`` (manifests), a List document is read as its items (kubectl's way).

    ``text`` must already be decoded; errors carry ``path`` and the line.
    """
    loader = _StrictLoader(text)
    may_alias = "*" in text
    try:
        check_nesting(text)
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1
            if may_alias:
                _check_expansion(node)
            try:
                obj = loader.construct_document(node)
            except RecursionError:
                raise RaygitopsError("document nests too deeply", line=line) from None
            except (ValueError, OverflowError) as err:
                # a scalar Python refuses: an int of more than 4300 digits, 2001-13-45, ...
                problem = str(err).split(";")[0].split(": value has")[0]
                raise RaygitopsError(f"invalid value: {problem}", line=line) from None
            if obj is None:
                continue
            items = _list_items(obj, node, path, text, node.start_mark.index) if lists else None
            if items is not None:
                yield from items
            else:
                yield Document(obj, path, line, _locator(text, node.start_mark.index))
    except yaml.YAMLError as err:
        raise library_error(err).located(path) from None
    except RecursionError:
        raise RaygitopsError("document nests too deeply", path) from None
    except RaygitopsError as err:
        raise err.located(path) from None
    finally:
        loader.dispose()


@dataclass(frozen=True)
class TextDocuments:
    """The documents of one text (stdin, a single file), parsed anew each time they are
    iterated: a render holds the text and one document at a time, not every document."""

    text: str
    path: str

    def __iter__(self) -> Iterator[Document]:
        return load_documents(self.text, self.path, lists=True)

    def holding(self, words: tuple[str, ...]) -> Iterator[Document]:
        """Only the documents in which a scalar may be one of ``words`` (:func:`documents_holding`)."""
        return documents_holding(self.text, self.path, words)

    def unparsed_holding(self, words: tuple[str, ...]) -> list[Unparsed]:
        """The same, not parsed yet (:func:`unparsed_holding`)."""
        return unparsed_holding(self.text, self.path, words)


def may_spell(text: str, words: tuple[str, ...], start: int = 0, end: int | None = None) -> bool:
    """Whether a scalar of the YAML or JSON ``text`` (or of ``text[start:end]``) may be one of
    ``words``.  Both spell a scalar's characters as themselves, but for backslash escapes
    (double quotes) and line folding, which never joins two lines without a space or a line
    break; so a text that holds neither a word nor a backslash has no scalar equal to one."""
    end = len(text) if end is None else end
    return text.find("\\", start, end) >= 0 or any(text.find(word, start, end) >= 0 for word in words)


@dataclass(frozen=True)
class Unparsed:
    """Documents of a file not parsed yet: the part of its text from one document marker to
    the next (or the whole text), and the lines before it."""

    text: str
    path: str
    line: int

    def documents(self) -> list[Document]:
        """Parsed, lines counted in the whole text (errors as the part's: its lines)."""
        return [Document(d.obj, self.path, d.line + self.line)
                for d in load_documents(self.text, self.path, lists=True)]


def unparsed_holding(text: str, path: str, words: tuple[str, ...]) -> list[Unparsed]:
    """The documents of ``text`` in which a scalar may be one of ``words`` (:func:`may_spell`),
    each alone, unparsed: the others are dropped unread.  A text with directives (``%YAML``,
    ``%TAG``: they belong to the document after them) is one part, whole."""
    if not may_spell(text, words):
        return []
    if text.startswith("%") or "\n%" in text:
        return [Unparsed(text, path, 0)]
    cuts = [0, *(m.start() + 1 for m in _DOCUMENT_MARKER.finditer(text)), len(text)]
    found = []
    line = counted = 0  # the lines before text[counted:]
    for start, end in zip(cuts, cuts[1:]):
        if may_spell(text, words, start, end):
            line += text.count("\n", counted, start)
            counted = start
            found.append(Unparsed(text[start:end], path, line))
    return found


def documents_holding(text: str, path: str, words: tuple[str, ...]) -> Iterator[Document]:
    """The manifests (Lists read as their items) of ``text`` in which a scalar may be one of
    ``words`` (:func:`may_spell`), each parsed alone (:func:`unparsed_holding`): the others are
    not parsed.  A text whose parts do not parse alone is parsed whole (and its errors are
    those of the whole)."""
    found: list[Document] = []
    try:
        for part in unparsed_holding(text, path, words):
            found += part.documents()
    except RaygitopsError:
        yield from load_documents(text, path, lists=True)
        return
    yield from found


def decode(data: bytes, path: str) -> str:
    """Decode UTF-8 (a BOM is allowed); a bad byte is an error naming its line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise RaygitopsError(
            f"not UTF-8 (byte 0x{data[err.start]:02x})", path, line
        ) from None


def dump_stream(objs: Iterable[Any], stream: TextIO | None = None) -> str | None:
    """A YAML stream in document order; keys keep the order they were given.  Written to
    ``stream`` when given (nothing returned), else returned."""
    return yaml.dump_all(
        objs,
        stream,
        Dumper=_BlockDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        explicit_start=True,
        width=1 << 16,
    )


def dump(obj: Any) -> str:
    """One YAML document."""
    return yaml.dump(
        obj,
        Dumper=_BlockDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 16,
    )
