"""Setting values from untyped sources to checked, typed ones (pure).

A value arrives as YAML (``raygitops.yaml``), a JSON string (Argo CD parameters, which send
numbers and booleans as strings) or a command-line string.  Each converter accepts exactly
those spellings and raises ``ValueError`` with the reason; the caller adds where the value
came from.  The hook bounds live here too, so render and the hook reading a plan agree.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from raygitops.model import k8snames

# Bounds of the hook settings (docs/validation.md): render refuses a value outside them from
# any source and the hook refuses a plan that holds one.
DRAIN_GRACE_SECONDS = (0, 3600)  # up to an hour for the operator to delete the pods
TIMEOUT_SECONDS = (1, 86400)  # the hook's whole run: at least a second, at most a day
MAX_PARALLEL = (1, 100)  # clusters recreated at once; the hook opens 2 connections per cluster

_DIGITS = re.compile(r"[0-9]{1,12}")


def integer_in(low: int, high: int) -> Callable[[Any], int]:
    """A converter to an integer from ``low`` to ``high``: a YAML/JSON integer or a decimal
    string (never a float, which ``int`` would silently truncate, nor a boolean)."""

    def convert(value: Any) -> int:
        if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"expected an integer from {low} to {high}, got {k8snames.shown(value)}")
        return value

    return convert


def boolean(value: Any) -> bool:
    """A YAML/JSON boolean, or the string ``true`` / ``false`` (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, got {k8snames.shown(value)}")


def string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("expected a non-empty string")
    return value


def string_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError("expected a list of strings")
    return list(value)


def _checked(what: str, problem_of: Callable[[str], str | None]) -> Callable[[Any], str]:
    """A converter to a non-empty string that ``problem_of`` finds no problem with."""

    def convert(value: Any) -> str:
        text = string(value)
        problem = problem_of(text)
        if problem:
            raise ValueError(f"{what} {k8snames.shown(text)} {problem}")
        return text

    return convert


namespace = _checked("namespace", k8snames.dns1123_label)  # the API server's namespace rule
image = _checked("image", k8snames.image_reference)  # the kubelet's reference grammar


_VERSION = re.compile(r"v?(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})(?:\.(0|[1-9][0-9]{0,3}))?")


def kuberay_version(value: Any) -> str:
    """A KubeRay operator version, ``1.6``, ``1.6.2`` or ``v1.6.2``; returned without the ``v``."""
    text = value if isinstance(value, str) else None
    match = _VERSION.fullmatch(text.strip()) if text is not None else None
    if match is None:
        raise ValueError(f"expected a KubeRay version such as 1.6.2, got {k8snames.shown(value)}")
    return ".".join(part for part in match.groups() if part is not None)


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.6.2"`` → ``(1, 6, 2)`` (for a version :func:`kuberay_version` accepted)."""
    return tuple(int(part) for part in version.split("."))
