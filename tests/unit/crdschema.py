"""A small structural validator for CRD openAPIV3Schema (tests only).

Checks what the API server would reject or silently prune: types, required fields, enums,
and unknown fields (pruned by the server, which would lose our annotations or spec).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def load_schema(crd_file: Path, version: str = "v1") -> dict[str, Any]:
    crd = yaml.load(crd_file.read_text(), Loader=yaml.CSafeLoader)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return v["schema"]["openAPIV3Schema"]
    raise KeyError(version)


def validate(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Problems found, as JSON-pointer-ish paths with a reason."""
    problems: list[str] = []
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            problems.append(f"{path}: expected int or string")
        return problems
    expected = schema.get("type")
    if expected:
        py = _TYPES[expected]
        if not isinstance(value, py) or (expected in ("integer", "number") and isinstance(value, bool)):
            return [f"{path}: expected {expected}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties")
        for req in schema.get("required", []):
            if req not in value:
                problems.append(f"{path}/{req}: required")
        for key, child in value.items():
            if props is not None and key in props:
                problems += validate(child, props[key], f"{path}/{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += validate(child, schema["additionalProperties"], f"{path}/{key}")
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                problems.append(f"{path}/{key}: unknown field (would be pruned)")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{path}/{i}")
    return problems
