"""The envelope every JSON report shares (diff, diff over several apps, status): a
``schemaVersion`` first, then the ``generator``, then the report's own fields."""

from __future__ import annotations

import json
from typing import Any

from raygitops import __version__

GENERATOR = f"raygitops {__version__}"


def document(schema_version: int, **fields: Any) -> dict[str, Any]:
    """A report's top-level object, envelope first (key order is part of the output)."""
    return {"schemaVersion": schema_version, "generator": GENERATOR, **fields}


def dumps(doc: dict[str, Any]) -> str:
    """The report as printed: indented, UTF-8 kept as is, one trailing newline."""
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"
