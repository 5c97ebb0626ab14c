"""The canonical form of scheme h1 (docs/design.md "Template hash").

Two specs that Kubernetes and KubeRay treat the same must have the same canonical bytes:
JSON with sorted keys; nulls, empty maps and empty lists dropped; resource quantities by
value; rayStartParams values as strings; list order kept; ``raygitops.dev/*``
annotations ignored.  Changing anything here changes every hash: that is a new scheme.
"""

from __future__ import annotations

import json
from typing import Any

from raygitops.model import quantity
from raygitops.model.names import ANNOTATION_PREFIX

_QUANTITY_MAPS = frozenset({"limits", "requests", "overhead", "capacity"})
_QUANTITY_KEYS = frozenset({"sizeLimit"})


def _scalar_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _quantities(mapping: dict) -> dict:
    return {k: quantity.canonical(v) for k, v in mapping.items() if v is not None}


def normalize(value: Any, key: str | None = None) -> Any:
    """The canonical tree of ``value`` (found under ``key``); None means "drop me"."""
    if isinstance(value, dict):
        return _mapping(value, key)
    if isinstance(value, list):
        return _sequence(value)
    if key in _QUANTITY_KEYS:
        return quantity.canonical(value)
    return value


# _mapping and _sequence inline normalize() for a plain scalar (the value itself): most of a
# spec is scalars, and a call per scalar was half of render's time.
def _mapping(value: dict, key: str | None) -> dict | None:
    if key in _QUANTITY_MAPS:
        out = _quantities(value)
    elif key == "resources" and all(not isinstance(v, (dict, list)) for v in value.values()):
        out = _quantities(value)  # a group's Ray resources map: {"CPU": "1", ...}
    elif key == "rayStartParams":
        out = {k: _scalar_str(v) for k, v in value.items() if v is not None}
    else:
        ours_dropped = key == "annotations"
        out = {}
        for k, v in value.items():
            if ours_dropped and isinstance(k, str) and k.startswith(ANNOTATION_PREFIX):
                continue
            if isinstance(v, (dict, list)) or k in _QUANTITY_KEYS:
                v = normalize(v, k)
            if v is not None:
                out[str(k)] = v
    return out or None


def _sequence(value: list) -> list | None:
    items = [normalize(v) if isinstance(v, (dict, list)) else v for v in value]
    items = [v for v in items if v is not None]
    return items or None


def canonical_bytes(value: Any) -> bytes:
    """The bytes that get hashed."""
    tree = normalize(value)
    return json.dumps(
        tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode("utf-8")
