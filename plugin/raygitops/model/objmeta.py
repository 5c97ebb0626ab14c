"""Reading and writing a Kubernetes object's metadata, tolerant of what hostile or partial
input holds (a missing or non-mapping ``metadata``, ``labels`` or ``annotations`` reads as
empty).  Pure."""

from __future__ import annotations

from typing import Any


def meta(obj: Any) -> dict[str, Any]:
    value = obj.get("metadata") if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def annotations(obj: Any) -> dict[str, Any]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, dict) else {}


def labels(obj: Any) -> dict[str, Any]:
    value = meta(obj).get("labels")
    return value if isinstance(value, dict) else {}


def set_annotation(obj: dict[str, Any], key: str, value: str) -> None:
    """Set one annotation, creating ``metadata`` and ``annotations`` as needed (mutates)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = obj["metadata"] = {}
    if not isinstance(metadata.get("annotations"), dict):
        metadata["annotations"] = {}
    metadata["annotations"][key] = value
