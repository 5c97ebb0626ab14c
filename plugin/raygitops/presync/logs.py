"""Log lines of the hook: every line names the cluster and the step.

``text``:  ``2026-12-02T17:00:00.123Z INFO  ray/demo drain: 3 pods left``
``json``:  ``{"ts": "...", "level": "info", "cluster": "ray/demo", "step": "drain", "msg": "...", ...}``

Lines about the run as a whole use cluster ``*``.  Log lines go to stderr; the final summary
(text line or JSON document) goes to stdout, so ``--dry-run --log-format json | jq`` works.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import IO, Any

RUN = "*"


def _timestamp() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


class Log:
    def __init__(self, fmt: str = "text", stream: IO[str] | None = None):
        if fmt not in ("text", "json"):
            raise ValueError(f"log format {fmt!r}")
        self.fmt = fmt
        self.stream = stream
        self._lock = threading.Lock()

    def line(self, level: str, cluster: str, step: str, msg: str, **fields: Any) -> str:
        """The formatted line (no newline)."""
        if self.fmt == "json":
            doc = {"ts": _timestamp(), "level": level, "cluster": cluster, "step": step, "msg": msg}
            doc.update({k: v for k, v in fields.items() if v is not None})
            return json.dumps(doc, sort_keys=False, default=str)
        extra = " ".join(f"{k}={_text(v)}" for k, v in fields.items() if v is not None)
        text = f"{_timestamp()} {level.upper():<5} {cluster} {step}: {msg}"
        return f"{text} {extra}" if extra else text

    def emit(self, level: str, cluster: str, step: str, msg: str, **fields: Any) -> None:
        text = self.line(level, cluster, step, " ".join(str(msg).split()), **fields)
        with self._lock:
            stream = self.stream or sys.stderr
            stream.write(text + "\n")
            stream.flush()

    def info(self, cluster: str, step: str, msg: str, **fields: Any) -> None:
        self.emit("info", cluster, step, msg, **fields)

    def warn(self, cluster: str, step: str, msg: str, **fields: Any) -> None:
        self.emit("warn", cluster, step, msg, **fields)

    def error(self, cluster: str, step: str, msg: str, **fields: Any) -> None:
        self.emit("error", cluster, step, msg, **fields)


def _text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    text = str(value)
    return json.dumps(text) if (" " in text or not text) else text
