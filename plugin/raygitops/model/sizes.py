"""The API server's size limit on ConfigMaps and Secrets (pure).

A ConfigMap's ``data`` and ``binaryData``, and a Secret's ``data`` (``stringData`` merged in),
may hold at most 1 MiB together: the values' bytes as stored (binary and Secret values
decoded from base64), keys not counted (Kubernetes' ``ValidateConfigMap`` /
``ValidateSecret``, ``core.MaxSecretSize``).  Render refuses an object the API server would
refuse, naming what made it big.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from raygitops.model.configrefs import CONFIGMAP, SECRET, content

MAX_DATA_BYTES = 1024 * 1024


def _decoded_length(value: Any) -> int:
    if isinstance(value, bytes):  # YAML's !!binary: already decoded
        return len(value)
    if not isinstance(value, str):
        return 0
    try:
        return len(base64.b64decode(value, validate=False))
    except (binascii.Error, ValueError):  # not base64: the API server refuses it on its own
        return len(value)


def stored_sizes(obj: dict[str, Any]) -> dict[str, int]:
    """Bytes of each key of a ConfigMap or Secret as the API server stores and counts it."""
    if obj.get("kind") == SECRET:
        return {str(k): _decoded_length(v) for k, v in content(obj).get("data", {}).items()}
    sizes: dict[str, int] = {}
    data, binary = obj.get("data"), obj.get("binaryData")
    if isinstance(data, dict):
        sizes.update({str(k): len(v.encode()) if isinstance(v, str) else 0 for k, v in data.items()})
    if isinstance(binary, dict):
        sizes.update({str(k): sizes.get(str(k), 0) + _decoded_length(v) for k, v in binary.items()})
    return sizes


def total_size(obj: dict[str, Any]) -> int:
    return sum(stored_sizes(obj).values())


def largest(sizes: dict[str, int], count: int = 3) -> str:
    """``a 760,000, b 420,000`` (and how many more), the largest first."""
    ranked = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{name} {size:,}" for name, size in ranked[:count])
    return shown + (f" and {len(ranked) - count} more" if len(ranked) > count else "")


def size_problem(group: str, kind: str, obj: dict[str, Any]) -> str | None:
    """Why the API server would refuse ``obj`` for its size, naming its largest keys; None
    when it fits (or is not a ConfigMap or Secret)."""
    if group != "" or kind not in (CONFIGMAP, SECRET):
        return None
    sizes = stored_sizes(obj)
    total = sum(sizes.values())
    if total <= MAX_DATA_BYTES:
        return None
    what = "data and binaryData" if kind == CONFIGMAP else "data"
    return (f"{kind} {obj['metadata'].get('name')}: its {what} hold {total:,} bytes, over the {MAX_DATA_BYTES:,} "
            f"the API server allows (largest keys, bytes: {largest(sizes)}): split it")
