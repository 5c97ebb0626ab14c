"""Config a pod template reads (pure): which ConfigMaps and Secrets a group's pods reference,
and the group's config hash (docs/design.md "Config hash").

A ConfigMap rendered in the same app and namespace and referenced by a group's template
(``env[].valueFrom.configMapKeyRef``, ``envFrom[].configMapRef``, a ``configMap`` volume or a
``projected`` volume's ``configMap`` source; containers and initContainers) contributes a
digest of its content to the group's config hash, ``c1-<16 hex>``. Render stamps it on the
template as ``raygitops.dev/config-hash`` (KubeRay copies it onto the pods). The template
hash ignores every ``raygitops.dev/*`` annotation, so h1 hashes stay what they were: pods
stamped before config hashing existed carry no config hash and are never drift by it.

Not tracked (named once per object by the preview): references to objects the app does not
render (made elsewhere, ExternalSecrets, SealedSecrets) and, for now, every Secret — the
hook would have to carry its values to make them live before new pods start, and a plan
ConfigMap must never hold a Secret's values.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable

from raygitops.canonical import canonical_bytes

CONFIG_HASH_ANNOTATION = "raygitops.dev/config-hash"
TRACK_ANNOTATION = "raygitops.dev/hash-config"  # "false": this cluster's config is not hashed
CONFIG_SCHEME = "c1"
CONFIGMAP, SECRET = "ConfigMap", "Secret"


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def references(template: Any) -> list[tuple[str, str]]:
    """``(kind, name)`` of every ConfigMap and Secret the pod template reads, sorted, once each."""
    spec = _get(template, "spec")
    found: set[tuple[str, str]] = set()

    def add(kind: str, name: Any) -> None:
        if isinstance(name, str) and name:
            found.add((kind, name))

    for container in _dicts(_get(spec, "containers")) + _dicts(_get(spec, "initContainers")):
        for env in _dicts(container.get("env")):
            add(CONFIGMAP, _get(env, "valueFrom", "configMapKeyRef", "name"))
            add(SECRET, _get(env, "valueFrom", "secretKeyRef", "name"))
        for source in _dicts(container.get("envFrom")):
            add(CONFIGMAP, _get(source, "configMapRef", "name"))
            add(SECRET, _get(source, "secretRef", "name"))
    for volume in _dicts(_get(spec, "volumes")):
        add(CONFIGMAP, _get(volume, "configMap", "name"))
        add(SECRET, _get(volume, "secret", "secretName"))
        for source in _dicts(_get(volume, "projected", "sources")):
            add(CONFIGMAP, _get(source, "configMap", "name"))
            add(SECRET, _get(source, "secret", "name"))
    return sorted(found)


def content(obj: dict[str, Any]) -> dict[str, Any]:
    """What of a ConfigMap reaches a pod: ``data`` and ``binaryData``."""
    return {key: dict(obj[key]) for key in ("data", "binaryData") if isinstance(obj.get(key), dict)}


def digest(obj: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(content(obj))).hexdigest()[:16]


@dataclass
class GroupConfig:
    """One group's config: its hash (None when it reads no tracked object) and the rest."""

    hash: str | None = None
    tracked: list[str] = field(default_factory=list)  # ConfigMap names
    untracked: list[str] = field(default_factory=list)  # "Kind/name"


def group_config(template: Any, configmaps: dict[str, dict[str, Any]]) -> GroupConfig:
    """The config of one group template, given the app's ConfigMaps of its namespace by name."""
    out = GroupConfig()
    parts = []
    for kind, name in references(template):
        if kind == CONFIGMAP and name in configmaps:
            out.tracked.append(name)
            parts.append([kind, name, digest(configmaps[name])])
        else:
            out.untracked.append(f"{kind}/{name}")
    if parts:
        out.hash = f"{CONFIG_SCHEME}-{hashlib.sha256(canonical_bytes(parts)).hexdigest()[:16]}"
    return out


def changed_keys(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """The keys of ``data``/``binaryData`` that differ between two versions of a ConfigMap."""
    a, b = content(old or {}), content(new or {})
    keys: set[str] = set()
    for section in ("data", "binaryData"):
        left, right = a.get(section, {}), b.get(section, {})
        keys |= {k for k in set(left) | set(right) if left.get(k) != right.get(k)}
    return sorted(keys)


def tracked_names(groups: Iterable[GroupConfig]) -> list[str]:
    return sorted({name for g in groups for name in g.tracked})
