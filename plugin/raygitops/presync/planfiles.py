"""Reading the hook's plan and secrets files (the Job mounts them from the plan ConfigMap
and the hook's Secret; ``<file>.gz`` beside them when render had to compress them)."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any, Callable, TypeVar

from raygitops.errors import RaygitopsError, no_collection_at_the_limit
from raygitops.model.plan import Plan, secrets_from_json

T = TypeVar("T")


def _read_json(path: str, what: str, parse: Callable[[Any], T]) -> T:
    """Read a JSON file the hook's Job mounts (``<path>.gz`` beside it when render had to
    compress it), parsed by ``parse``; errors name the file."""
    for candidate in (Path(path), Path(path + ".gz")):
        if candidate.is_file():
            try:
                raw = candidate.read_bytes()
                if candidate.suffix == ".gz":
                    raw = gzip.decompress(raw)
                with no_collection_at_the_limit():
                    document = json.loads(raw)
                return parse(document)
            except json.JSONDecodeError as err:
                raise RaygitopsError(f"{what} is not JSON: {err.msg}", str(candidate), err.lineno) from None
            except UnicodeDecodeError:
                raise RaygitopsError(f"{what} is not UTF-8 JSON", str(candidate)) from None
            except RecursionError:
                raise RaygitopsError(f"{what} nests too deeply", str(candidate)) from None
            except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
                raise RaygitopsError(f"cannot read the {what}: {err}", str(candidate)) from None
            except RaygitopsError as err:
                raise err.located(str(candidate)) from None
    raise RaygitopsError(f"{what} file not found", path)


def load_plan(path: str) -> Plan:
    """Read a plan file (or ``plan.json.gz`` beside it)."""
    return _read_json(path, "plan", Plan.from_json)


def load_secrets(path: str) -> tuple[str | None, dict[str, dict[str, Any]]]:
    """Read a secrets file (or its ``.gz``): its plan's namespace and the Secrets' content."""
    return _read_json(path, "secrets", secrets_from_json)
