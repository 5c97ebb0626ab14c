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


def _nesting_bound(text: str) -> int:
    """A cheap upper bound of how deep ``text`` can nest (without parsing it).

    A nested block collection starts at a greater column than its parent (a block sequence
    that is a mapping value may share its key's column, but its entries cannot), so block
    depth is at most twice the furthest column a block collection can start at; flow
    collections add at most one level per bracket.
    """
    flow = text.count("[") + text.count("{")
    if flow > MAX_DEPTH:
        return flow
    if "&" not in text and "!" not in text:
        # Fast path: the start-of-block prefix is made of " \t-?:" only, so no line starting
        # with that many of them means no block collection starts that far right.
        columns = (MAX_DEPTH - 1 - flow) // 2 - 1
        if columns > 0 and (_LONG_PREFIX.get(columns) or _long_prefix(columns)).search(text) is None:
            return 2 * columns + 1 + flow
    column = max((m.end() - m.start() for m in _BLOCK_START.finditer(text)), default=0)
    return 2 * (column + 1) + 1 + flow


_LONG_PREFIX: dict[int, re.Pattern[str]] = {}


def _long_prefix(columns: int) -> re.Pattern[str]:
    pattern = _LONG_PREFIX[columns] = re.compile(r"^[ \t?:-]{%d}" % (columns + 1), re.MULTILINE)
    return pattern


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
    Python.  When the cheap bound cannot rule it out, walk the parser's events.

    The product's limit, not the library's, decides: libyaml scans ahead of the events it
    returns and, in newer builds (PyYAML 6.0.4's wheels), stops at its own flow-nesting
    limit with its own message before this walk sees level MAX_DEPTH.  So when the C walk
    fails, the text up to libyaml's error is walked again with PyYAML's pure-Python parser
    (no depth limit, no recursion, a lookahead of one simple key): deeper than MAX_DEPTH
    there is the product's error; otherwise libyaml's problem is reported as invalid YAML.
    The slow walk only runs on input that is already an error.
    """
    if _nesting_bound(text) <= MAX_DEPTH:
        return
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


def may_spell(text: str, words: tuple[str, ...]) -> bool:
    """Whether a scalar of the YAML or JSON ``text`` may be one of ``words``.  Both spell a
    scalar's characters as themselves, but for backslash escapes (double quotes) and line
    folding, which never joins two lines without a space or a line break; so a text that
    holds neither a word nor a backslash has no scalar equal to one."""
    return "\\" in text or any(word in text for word in words)


# A document marker: at the start of a line, never inside a scalar (the parser refuses one there).
_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.MULTILINE)


def documents_holding(text: str, path: str, words: tuple[str, ...]) -> Iterator[Document]:
    """The manifests (Lists read as their items) of ``text`` in which a scalar may be one of
    ``words`` (:func:`may_spell`), each document parsed alone: the others are not parsed.  A
    text with directives (``%YAML``, ``%TAG``: they belong to the document after them), or
    whose parts do not parse alone, is parsed whole (and its errors are those of the whole)."""
    if not may_spell(text, words):
        return
    if text.startswith("%") or "\n%" in text:
        yield from load_documents(text, path, lists=True)
        return
    starts = [0, *(m.start() for m in _DOCUMENT_MARKER.finditer(text) if m.start()), len(text)]
    found: list[Document] = []
    line = 0
    try:
        for start, end in zip(starts, starts[1:]):
            part = text[start:end]
            if may_spell(part, words):
                found += [d.shifted(line) for d in load_documents(part, path, lists=True)]
            line += part.count("\n")
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
