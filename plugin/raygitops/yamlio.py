"""YAML in and out: libyaml's C parser with the safe constructor, and nothing looser.

Loading keeps each document's first line (for error messages), rejects duplicate keys
(Kubernetes would silently take one of them) and refuses alias bombs before anything
walks the expanded tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

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


@dataclass(frozen=True)
class Document:
    """One parsed document with where it came from."""

    obj: Any
    path: str
    line: int


class _StrictLoader(_Loader):  # type: ignore[misc, valid-type]
    """Safe loader that rejects duplicate mapping keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        self.flatten_mapping(node)  # resolves "<<" merge keys first
        mapping: dict = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise RaygitopsError(
                    "mapping key is not a scalar", line=key_node.start_mark.line + 1
                ) from None
            if key in mapping:
                raise RaygitopsError(
                    f"duplicate key {key!r}", line=key_node.start_mark.line + 1
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _check_expansion(root: yaml.Node) -> None:
    """Refuse node graphs whose alias expansion is huge or deep (billion laughs)."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise RaygitopsError(
                f"document nests deeper than {MAX_DEPTH} levels",
                line=node.start_mark.line + 1,
            )
        known = sizes.get(id(node))
        if known is not None:
            return known
        total = 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k, depth + 1) + size(v, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            for v in node.value:
                total += size(v, depth + 1)
        if total > MAX_EXPANDED_NODES:
            raise RaygitopsError(
                f"document expands to more than {MAX_EXPANDED_NODES} nodes through aliases",
                line=node.start_mark.line + 1,
            )
        sizes[id(node)] = total
        return total

    size(root, 0)


def load_documents(text: str, path: str) -> Iterator[Document]:
    """Parse a multi-document YAML (or JSON) stream; empty documents are skipped.

    ``text`` must already be decoded; errors carry ``path`` and the line.
    """
    loader = _StrictLoader(text)
    may_alias = "*" in text
    try:
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1
            if may_alias:
                _check_expansion(node)
            try:
                obj = loader.construct_document(node)
            except RecursionError:
                raise RaygitopsError("document nests too deeply", line=line) from None
            if obj is None:
                continue
            yield Document(obj, path, line)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = err.problem or err.context or "invalid YAML"
        raise RaygitopsError(f"invalid YAML: {problem}", path, line) from None
    except yaml.YAMLError as err:
        raise RaygitopsError(f"invalid YAML: {err}", path) from None
    except RecursionError:
        raise RaygitopsError("document nests too deeply", path) from None
    except RaygitopsError as err:
        raise err.located(path) from None
    finally:
        loader.dispose()


def decode(data: bytes, path: str) -> str:
    """Decode UTF-8 (a BOM is allowed); a bad byte is an error naming its line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise RaygitopsError(
            f"not UTF-8 (byte 0x{data[err.start]:02x})", path, line
        ) from None


def dump_stream(objs: list[Any]) -> str:
    """A YAML stream in document order; keys keep the order they were given."""
    return yaml.dump_all(
        objs,
        Dumper=_Dumper,
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
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 16,
    )
