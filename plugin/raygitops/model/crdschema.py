"""Check a RayCluster ``spec`` against the CRD schema of the target KubeRay (pure).

A typo (``workerGroupSpec``, ``containres``) renders fine and is then pruned or refused by the
API server, far from the file that holds it.  Render checks every RayCluster against the
structural schema of the CRD the operator installs, as the API server would: unknown fields
(with the closest known name), types, required fields, enums.  What a schema keeps open
(``x-kubernetes-preserve-unknown-fields``) stays open; ``null`` is accepted (the API server
drops it).  Patterns, formats and CEL rules are left to the API server.

The schemas are package data (``schemas/raycluster-<minor>.json.gz``), made from KubeRay's
CRDs by ``scripts/make_crd_schemas.py`` with :func:`strip_schema`, one per minor version
(1.1 to 1.7); the target version (``kuberayVersion``) picks the newest one not newer than it,
no target version the newest one.  What the target's schema refuses but a newer shipped one
accepts (a field added later, a required field made optional, an enum value added) is still
an error, which names the version that accepts it.  For a target newer than every shipped
schema, what its operator may have added or relaxed (an unknown field, a required field
missing, a value outside an enum) is only a warning; a wrong type is an error whatever the
version.
"""

from __future__ import annotations

import datetime
import functools
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raygitops.model.convert import version_tuple
from raygitops.errors import closest

# minor version -> package data file; scripts/make_crd_schemas.py writes them
SCHEMAS = {minor: f"raycluster-{minor}.json.gz" for minor in ("1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7")}
# what the check reads of a schema; the rest (descriptions, defaults, patterns) is dropped
KEPT = frozenset({"type", "properties", "items", "additionalProperties", "required", "enum", "nullable",
                  "default", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields"})
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    # YAML reads an unquoted date as a date; it is written back as the same text
    "string": (str, datetime.date),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}
_NAMES = {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "integer", float: "number"}


def strip_schema(schema: Any) -> Any:
    """The parts of an openAPIV3Schema that :func:`problems` reads."""
    if isinstance(schema, list):
        return [strip_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: strip_schema(child) for name, child in value.items()}
        elif key in KEPT:
            out[key] = strip_schema(value)
    return out


def crd_spec_schema(crd: dict[str, Any]) -> Any:
    """The stripped schema of ``spec`` in a RayCluster CRD (its ``v1``), as the check reads it;
    what scripts/make_crd_schemas.py ships and the tests compare with KubeRay's CRD files."""
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return strip_schema(v1["schema"]["openAPIV3Schema"]["properties"]["spec"])


def schema_version(kuberay_version: str | None) -> tuple[str, bool]:
    """The shipped schema for a target KubeRay version, and whether it is the target's own."""
    shipped = sorted(SCHEMAS, key=version_tuple)
    if kuberay_version is None:  # the newest: an operator older than that is told with kuberayVersion
        return shipped[-1], True
    target = version_tuple(kuberay_version)[:2]
    older = [v for v in shipped if version_tuple(v) <= target] or shipped[:1]
    return older[-1], version_tuple(older[-1]) == target


@functools.lru_cache(maxsize=None)
def spec_schema(minor: str) -> dict[str, Any]:
    """The schema of RayCluster ``spec`` for a shipped minor version."""
    # beside this module (importlib.resources costs the CLI's start-up 2 ms more)
    data = (Path(__file__).parent / "schemas" / SCHEMAS[minor]).read_bytes()
    return json.loads(gzip.decompress(data))


def _shown(value: Any) -> str:
    return _NAMES.get(type(value), type(value).__name__)


UNKNOWN = "unknown field"
REQUIRED = "required field missing"
NOT_ONE_OF = "is not one of"


class _Node:
    """One schema node, read once into what the walk asks of every value (render checks every
    node of every RayCluster: a dict lookup per keyword per value added up).  Properties are
    read when the walk first meets them: a one-cluster render meets about 70 of the schema's
    2,800 nodes, and reading them all was half of its run after the imports."""

    __slots__ = ("types", "no_bool", "expected", "enum", "props", "extra", "closed", "required", "items", "leaf")

    def __init__(self, schema: dict[str, Any]) -> None:
        if schema.get("x-kubernetes-int-or-string"):
            self.types: tuple[type, ...] | None = (int, str)
            self.expected = "integer or string"
        else:
            self.expected = schema.get("type")
            self.types = None if self.expected is None else _TYPES.get(self.expected, (object,))
        self.no_bool = self.expected in ("integer", "number", "integer or string")
        self.enum = schema.get("enum")
        props = schema.get("properties")
        # name -> its _Node, or its schema while not yet met (_walk reads it then)
        self.props: dict[str, _Node | dict[str, Any]] | None = None if props is None else dict(props)
        extra = schema.get("additionalProperties")
        self.extra = _Node(extra) if isinstance(extra, dict) else None
        self.closed = props is not None and not schema.get("x-kubernetes-preserve-unknown-fields")
        # a required field with a default is filled in by the API server before it validates
        self.required = tuple(name for name in schema.get("required", ())
                              if "default" not in (props or {}).get(name, {}))
        items = schema.get("items")
        self.items = _Node(items) if isinstance(items, dict) else None
        # a scalar that passes the type check has nothing more to check
        self.leaf = self.enum is None and self.expected not in ("object", "array", None)

    def accepts(self, value: Any) -> bool:
        return self.types is None or (isinstance(value, self.types) and not (self.no_bool and value.__class__ is bool))


_COMPILED: dict[int, tuple[dict[str, Any], _Node]] = {}


def _compiled(schema: dict[str, Any]) -> _Node:
    """The schema's nodes, read once per schema object (the shipped ones live for the process)."""
    hit = _COMPILED.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = _COMPILED[id(schema)] = (schema, _Node(schema))
    return hit[1]


def problems(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Every ``path: message`` where ``value`` breaks ``schema``, in document order."""
    found: list[str] = []
    _walk(value, _compiled(schema), [path], found)
    return found


def _where(parts: list[Any]) -> str:
    """The path of the stack ``parts``: the root's text, then mapping keys and list indexes
    (an index is a 1-tuple: a mapping key may be an int, never a tuple)."""
    return parts[0] + "".join(f"[{p[0]}]" if isinstance(p, tuple) else f".{p}" for p in parts[1:])


def _walk(value: Any, node: _Node, parts: list[Any], found: list[str]) -> None:
    """:func:`problems` without a new path string per node: ``parts`` is the path as a stack,
    made text on a problem only."""
    if value is None:
        return
    if not node.accepts(value):
        found.append(f"{_where(parts)}: expected {node.expected}, got {_shown(value)}")
        return
    if node.enum is not None and value not in node.enum:
        found.append(f"{_where(parts)}: {value!r} {NOT_ONE_OF} {', '.join(map(str, node.enum))}")
    if isinstance(value, dict):
        props, extra = node.props, node.extra
        for key, child in value.items():
            child_node = props.get(key) if props is not None else None
            if child_node is None:
                child_node = extra
            elif child_node.__class__ is dict:
                child_node = props[key] = _Node(child_node)  # type: ignore[index, arg-type]
            if child_node is not None:
                if child is None or (child_node.leaf and child_node.accepts(child)):
                    continue
                parts.append(key)
                _walk(child, child_node, parts, found)
                parts.pop()
            elif node.closed:
                close = closest(str(key), props or ())
                hint = f" (did you mean {close}?)" if close else ""
                found.append(f"{_where([*parts, key])}: {UNKNOWN}{hint}")
        for name in node.required:
            if value.get(name) is None:
                found.append(f"{_where(parts)}.{name}: {REQUIRED}")
    elif isinstance(value, list) and node.items is not None:
        items = node.items
        for index, item in enumerate(value):
            if item is None or (items.leaf and items.accepts(item)):
                continue
            parts.append((index,))
            _walk(item, items, parts, found)
            parts.pop()


@dataclass(frozen=True)
class Findings:
    """A RayCluster spec's problems for the target KubeRay, split by what they mean."""

    errors: list[str]
    warnings: list[str]


def _relaxable(problem: str) -> bool:
    return f": {UNKNOWN}" in problem or f": {REQUIRED}" in problem or f" {NOT_ONE_OF} " in problem


def _identity(problem: str) -> str:
    """A problem without its hint, to find the same one under another version's schema (the
    closest known name of an unknown field, an enum's values, differ between versions)."""
    return problem.split(" (did you mean ")[0].split(f" {NOT_ONE_OF} ")[0]


def _accepted_from(problem: str, spec: Any, minor: str) -> str | None:
    """The first shipped KubeRay newer than ``minor`` whose schema does not find ``problem``."""
    newer = [v for v in sorted(SCHEMAS, key=version_tuple) if version_tuple(v) > version_tuple(minor)]
    for version in newer:
        if _identity(problem) not in map(_identity, problems(spec, spec_schema(version), "spec")):
            return version
    return None


def _newer(problem: str, since: str, target: str) -> str:
    """``problem`` for a target older than the KubeRay that accepts it: which one does."""
    advice = f"kuberayVersion is {target}: set it to your operator's version"
    if f": {UNKNOWN}" in problem:
        return f"{problem.split(f': {UNKNOWN}')[0]}: exists from KubeRay {since}; {advice}"
    what = "optional" if f": {REQUIRED}" in problem else "accepted"
    return f"{problem} ({what} from KubeRay {since}; {advice})"


def check_spec(spec: Any, kuberay_version: str | None) -> Findings:
    minor, own = schema_version(kuberay_version)
    found = problems(spec, spec_schema(minor), "spec")
    if own:
        errors = []
        for problem in found:
            since = _accepted_from(problem, spec, minor) if _relaxable(problem) else None
            errors.append(problem if since is None else _newer(problem, since, kuberay_version or minor))
        return Findings(errors, [])
    relaxed = [p for p in found if _relaxable(p)]
    return Findings([p for p in found if p not in relaxed],
                    [f"{p}: so says the KubeRay {minor} CRD, the newest raygitops knows; KubeRay "
                     f"{kuberay_version} may {'drop it' if f': {UNKNOWN}' in p else 'accept it'}"
                     for p in relaxed])
