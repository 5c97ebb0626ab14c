"""Config a pod template reads (pure): which ConfigMaps and Secrets a group's pods reference,
and the group's config hashes (docs/design.md "Config hashes").

A ConfigMap or Secret rendered in the same app and namespace and referenced by a group's
template (``env[].valueFrom`` key refs, ``envFrom``, ``configMap``/``secret`` volumes and
``projected`` volume sources; containers and initContainers) contributes a digest of its
content to one of the group's config hashes: ConfigMaps to ``c1-<16 hex>``
(``raygitops.dev/config-hash``), Secrets to ``s1-<16 hex>`` (``raygitops.dev/secret-hash``).
Two annotations, not one: a pod stamped before Secrets were tracked carries the ConfigMap
hash of its day, and a hash that mixed both would call it stale after the upgrade. Render
stamps them on the template (KubeRay copies them onto the pods). The template hash ignores
every ``raygitops.dev/*`` annotation, so h1 hashes stay what they were: a pod without a
config hash is never drift by it.

Not tracked (named once per object by the preview): references to objects the app does not
render (made elsewhere, ExternalSecrets, SealedSecrets).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from raygitops.model.canonical import canonical_bytes
from raygitops.model.names import CONFIG_HASH_ANNOTATION, SECRET_HASH_ANNOTATION

CONFIGMAP, SECRET = "ConfigMap", "Secret"
# the annotation each kind's hash is stamped under, and its scheme
HASH_ANNOTATIONS = {CONFIGMAP: CONFIG_HASH_ANNOTATION, SECRET: SECRET_HASH_ANNOTATION}
SCHEMES = {CONFIGMAP: "c1", SECRET: "s1"}
DRIFTS = {CONFIGMAP: "config-hash", SECRET: "secret-hash"}  # how the hook names a drift by each
RESOURCES = {CONFIGMAP: "configmaps", SECRET: "secrets"}  # the API resource of each kind


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def mentions(template: Any) -> Iterator[tuple[str, str, bool]]:
    """``(kind, name, optional)`` of each ConfigMap and Secret reference of the pod template,
    as written (``optional: true`` marks one the pod starts without; the preflight excepts
    those, model/preflight.py)."""
    spec = _get(template, "spec")

    def ref(kind: str, name: Any, holder: Any) -> Iterator[tuple[str, str, bool]]:
        if isinstance(name, str) and name:
            yield kind, name, _get(holder, "optional") is True

    for container in _dicts(_get(spec, "containers")) + _dicts(_get(spec, "initContainers")):
        for env in _dicts(container.get("env")):
            yield from ref(CONFIGMAP, _get(env, "valueFrom", "configMapKeyRef", "name"),
                           _get(env, "valueFrom", "configMapKeyRef"))
            yield from ref(SECRET, _get(env, "valueFrom", "secretKeyRef", "name"), _get(env, "valueFrom", "secretKeyRef"))
        for source in _dicts(container.get("envFrom")):
            yield from ref(CONFIGMAP, _get(source, "configMapRef", "name"), _get(source, "configMapRef"))
            yield from ref(SECRET, _get(source, "secretRef", "name"), _get(source, "secretRef"))
    for volume in _dicts(_get(spec, "volumes")):
        yield from ref(CONFIGMAP, _get(volume, "configMap", "name"), _get(volume, "configMap"))
        yield from ref(SECRET, _get(volume, "secret", "secretName"), _get(volume, "secret"))
        for source in _dicts(_get(volume, "projected", "sources")):
            yield from ref(CONFIGMAP, _get(source, "configMap", "name"), _get(source, "configMap"))
            yield from ref(SECRET, _get(source, "secret", "name"), _get(source, "secret"))


def references(template: Any) -> list[tuple[str, str]]:
    """``(kind, name)`` of every ConfigMap and Secret the pod template reads, sorted, once each."""
    return sorted({(kind, name) for kind, name, _ in mentions(template)})


def _base64(value: Any) -> Any:
    """A Secret value as the API server stores it (``!!binary`` YAML loads as bytes)."""
    return base64.b64encode(value).decode() if isinstance(value, bytes) else value


def content(obj: dict[str, Any]) -> dict[str, Any]:
    """What of a ConfigMap or Secret reaches a pod. A ConfigMap: ``data`` and ``binaryData``.
    A Secret: ``data`` (base64) with ``stringData`` merged in, encoded, as the API server
    stores it (a key in both takes ``stringData``'s value)."""
    if obj.get("kind") != SECRET:
        return {key: dict(obj[key]) for key in ("data", "binaryData") if isinstance(obj.get(key), dict)}
    data = {k: _base64(v) for k, v in obj["data"].items()} if isinstance(obj.get("data"), dict) else {}
    if isinstance(obj.get("stringData"), dict):
        data.update({k: base64.b64encode(v.encode()).decode() if isinstance(v, str) else v
                     for k, v in obj["stringData"].items()})
    return {"data": data} if data else {}


def secret_problem(obj: dict[str, Any]) -> str | None:
    """What makes a Secret one the API server refuses (and the hook could not carry), naming
    the key, never the value; None when fine."""
    for section, kinds in (("data", (str, bytes)), ("stringData", (str,))):
        value = obj.get(section)
        if value is None:
            continue
        if not isinstance(value, dict):
            return f"{section} is {type(value).__name__}, not a mapping"
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, kinds):
                return f"{section}[{key!r}] is {type(item).__name__}, not a string"[:200]
    return None


def payload(obj: dict[str, Any]) -> dict[str, Any]:
    """What the hook writes to make an object live: its content, and a Secret's ``type``
    (fixed at creation: a Secret the hook creates must have the type the sync applies)."""
    out = content(obj)
    if obj.get("kind") == SECRET and isinstance(obj.get("type"), str):
        out["type"] = obj["type"]
    return out


def digest(obj: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(content(obj))).hexdigest()[:16]


@dataclass
class GroupConfig:
    """One group's config: a hash per kind it reads tracked objects of, and the rest."""

    hashes: dict[str, str] = field(default_factory=dict)  # kind -> "c1-..." / "s1-..."
    tracked: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)
    untracked: list[str] = field(default_factory=list)  # "Kind/name"


def group_config(refs: Iterable[tuple[str, str]], objects: dict[tuple[str, str], dict[str, Any]]) -> GroupConfig:
    """The config of one group template from its :func:`references`, given the app's
    ConfigMaps and Secrets of its namespace by ``(kind, name)``."""
    out = GroupConfig()
    parts: dict[str, list[list[str]]] = {}
    for kind, name in refs:
        if (kind, name) in objects:
            out.tracked.append((kind, name))
            parts.setdefault(kind, []).append([kind, name, digest(objects[kind, name])])
        else:
            out.untracked.append(f"{kind}/{name}")
    for kind, kind_parts in parts.items():
        out.hashes[kind] = f"{SCHEMES[kind]}-{hashlib.sha256(canonical_bytes(kind_parts)).hexdigest()[:16]}"
    return out


def changed_keys(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """The keys whose content differs between two versions of a ConfigMap or Secret (key
    names only: the preview never shows a value)."""
    a, b = content(old or {}), content(new or {})
    keys: set[str] = set()
    for section in ("data", "binaryData"):
        left, right = a.get(section, {}), b.get(section, {})
        keys |= {k for k in set(left) | set(right) if left.get(k) != right.get(k)}
    return sorted(keys)


def tracked_names(groups: Iterable[GroupConfig], kind: str) -> list[str]:
    return sorted({name for g in groups for k, name in g.tracked if k == kind})
