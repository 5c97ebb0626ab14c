"""Rendered objects out: a YAML stream, a JSON List, or one file per object (``--output-dir DIR``).

Nothing is written where the user reads before all of it is made: a directory is only
touched once the render succeeded, and stdout gets the YAML stream from a spool file once
it is whole (a big app's stream, as large as the app, on disk rather than in memory).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from raygitops.errors import RaygitopsError
from raygitops.model.plan import secrets_json
from raygitops.model.scope import namespaced
from raygitops.sources.yamlio import dump, dump_stream
from raygitops.model.names import OUT_MARKER

SPOOL_IN_MEMORY = 4 << 20
CLUSTER_SCOPED_DIR = "_cluster"


def yaml_stream(objects: Iterable[dict[str, Any]]) -> str:
    return dump_stream(objects)


def write_yaml_stream(objects: Iterable[dict[str, Any]], out: TextIO, before: Callable[[], None] = lambda: None) -> None:
    """The YAML stream of ``objects`` into ``out``, all of it or (when making or dumping one
    fails) nothing: it is spooled as the objects come (they may be made one at a time), then
    ``before`` runs (it may still fail), then the spool is copied.  A stream of up to
    :data:`SPOOL_IN_MEMORY` bytes never touches the disk (a sidecar without a writable
    ``/tmp`` still renders ordinary apps)."""
    with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY, "w+", encoding="utf-8") as spool:
        dump_stream(objects, spool)
        before()
        spool.seek(0)
        shutil.copyfileobj(spool, out)


def json_list(objects: list[dict[str, Any]]) -> str:
    """A ``v1/List``: one JSON document kubectl and Argo CD both accept."""
    try:
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2, default=str,
                          allow_nan=False)
    except ValueError:  # YAML's .inf / .nan: json.dumps would write Infinity / NaN (not JSON)
        raise RaygitopsError("a value is .inf or .nan, which JSON cannot hold (quote it)") from None
    return text + "\n"


def _file_names(objects: list[dict[str, Any]], default_namespace: str) -> list[str]:
    """``<namespace>/<kind>-<name>.yaml``; the API group joins the kind only on a clash."""

    def name(obj: dict[str, Any], qualified: bool) -> str:
        meta = obj.get("metadata", {})
        kind = obj["kind"].lower()
        if qualified and "/" in obj["apiVersion"]:
            kind = f"{kind}.{obj['apiVersion'].split('/')[0]}"
        folder = (meta.get("namespace") or default_namespace) if namespaced(obj) else CLUSTER_SCOPED_DIR
        return f"{folder}/{kind}-{meta.get('name') or meta.get('generateName')}.yaml"

    for obj in objects:
        meta = obj.get("metadata", {})
        for part in (obj["kind"], meta.get("namespace"), meta.get("name") or meta.get("generateName")):
            if isinstance(part, str) and (part in (".", "..") or any(c in part for c in "/\\\0")):
                raise RaygitopsError(f"{obj['kind']} {meta.get('name')!r}: {part!r} cannot name a file "
                                     "(it is not a valid Kubernetes name either)")

    plain = [name(o, False) for o in objects]
    clashes = {n for n in plain if plain.count(n) > 1}
    names = [name(o, True) if n in clashes else n for o, n in zip(objects, plain)]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise RaygitopsError(f"two objects would be written to {sorted(dupes)[0]}")
    return names


def _file_mode() -> int:
    """0644 under the usual umask: what a plain ``open(..., "w")`` would create (mkstemp's
    0600 would make committed manifests unreadable to others)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return  # unchanged: keep the mtime, so rendered-manifest repos see no churn
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, _file_mode() if mode is None else mode)
    os.replace(tmp, path)


def write_out_dir(objects: list[dict[str, Any]], out_dir: str, default_namespace: str) -> list[str]:
    """Write one file per object; remove files of objects no longer rendered.

    Refuses a non-empty directory that raygitops did not make (it would delete files there).
    """
    root = Path(out_dir)
    names = _file_names(objects, default_namespace)
    texts = {n: dump(o) for n, o in zip(names, objects)}
    if root.exists():
        if not root.is_dir():
            raise RaygitopsError("--output-dir is not a directory", out_dir)
        if any(root.iterdir()) and not (root / OUT_MARKER).is_file():
            raise RaygitopsError(
                f"--output-dir is not empty and has no {OUT_MARKER} marker: "
                "refusing to manage files raygitops did not write", out_dir)
    root.mkdir(parents=True, exist_ok=True)
    (root / OUT_MARKER).write_text("managed by raygitops render --output-dir\n", encoding="utf-8")
    for name, text in texts.items():
        _write_atomic(root / name, text)
    for stale in sorted(root.rglob("*.yaml")):
        if stale.relative_to(root).as_posix() not in texts:
            stale.unlink()
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return names


def write_plans(plans: list[Any], plan_dir: str) -> list[Path]:
    """``<namespace>.json`` per plan (``plan.json`` for one left to Helm): what the hook's
    ConfigMap holds, for ``raygitops presync --plan`` run by hand; and, when the clusters'
    pods read Secrets of the app, ``<namespace>.secrets.json`` (the hook Secret's content,
    for ``--secrets``; mode 0600)."""
    if not plans:
        raise RaygitopsError("--plan-out: no RayCluster opts in (or asks for KubeRay's Recreate): there is no plan")
    root = Path(plan_dir)
    if root.exists() and not root.is_dir():
        raise RaygitopsError("--plan-out is not a directory", plan_dir)
    written = []
    for plan in plans:
        path = root / f"{plan.namespace or 'plan'}.json"
        _write_atomic(path, json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
        written.append(path)
        if plan.secrets:
            secrets = root / f"{plan.namespace or 'plan'}.secrets.json"
            _write_atomic(secrets, secrets_json(plan) + "\n", mode=0o600)
            written.append(secrets)
    return written
