"""Render settings: defaults < app config file ``raygitops.yaml`` < Argo CD parameters < CLI flags.

The app config file lives in the app directory, so it is untrusted input: unknown keys and
wrong types are errors naming the file and line.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from raygitops import __version__
from raygitops.errors import RaygitopsError
from raygitops.yamlio import decode, library_error

CONFIG_NAMES = ("raygitops.yaml", "raygitops.yml")
DEFAULT_IMAGE = f"ghcr.io/raygitops/raygitops:{__version__}"


@dataclass
class Settings:
    """Everything that shapes a render besides the manifests themselves."""

    values_files: list[str] = field(default_factory=list)
    # Dotted-key overrides from the Argo CD `values` map parameter ("image.tag" -> "v2").
    value_overrides: dict[str, str] = field(default_factory=dict)
    namespace: str | None = None
    exclude: list[str] = field(default_factory=list)
    keep_upgrade_strategy: bool = False
    hook_image: str = DEFAULT_IMAGE
    drain_grace_seconds: int = 60
    timeout_seconds: int = 900
    max_parallel: int = 4
    wait_ready: bool = True
    # Flux applies hooks as plain objects: a Job is immutable, so its name carries the plan hash.
    hook_name_suffix: bool = False


def _positive_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a positive integer")
    number = int(value)
    if number <= 0:
        raise ValueError("expected a positive integer")
    return number


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    raise ValueError("expected true or false")


def _string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("expected a non-empty string")
    return value


def _string_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError("expected a list of strings")
    return list(value)


# config-file key -> (Settings field, converter); "hook" keys are nested under `hook:`.
_TOP_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "values": ("values_files", _string_list),
    "namespace": ("namespace", _string),
    "exclude": ("exclude", _string_list),
    "keepUpgradeStrategy": ("keep_upgrade_strategy", _boolean),
}
_HOOK_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "image": ("hook_image", _string),
    "drainGraceSeconds": ("drain_grace_seconds", _positive_int),
    "timeoutSeconds": ("timeout_seconds", _positive_int),
    "maxParallel": ("max_parallel", _positive_int),
    "waitReady": ("wait_ready", _boolean),
    "jobNameWithPlanHash": ("hook_name_suffix", _boolean),
}
# Argo CD parameter name -> (Settings field, converter); `values-files` and `values` handled apart.
PARAMETERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "namespace": ("namespace", _string),
    "keep-upgrade-strategy": ("keep_upgrade_strategy", _boolean),
    "hook-image": ("hook_image", _string),
    "drain-grace-seconds": ("drain_grace_seconds", _positive_int),
    "timeout-seconds": ("timeout_seconds", _positive_int),
    "max-parallel": ("max_parallel", _positive_int),
    "wait-ready": ("wait_ready", _boolean),
}


def find_config(app_dir: Path) -> Path | None:
    for name in CONFIG_NAMES:
        candidate = app_dir / name
        if candidate.is_file():
            return candidate
    return None


def _apply_mapping(
    settings: Settings,
    node: yaml.MappingNode,
    keys: Mapping[str, tuple[str, Callable[[Any], Any]]],
    path: str,
    prefix: str,
) -> None:
    for key_node, value_node in node.value:
        key = key_node.value
        line = key_node.start_mark.line + 1
        if prefix == "" and key == "hook":
            if not isinstance(value_node, yaml.MappingNode):
                raise RaygitopsError("hook: expected a mapping", path, line)
            _apply_mapping(settings, value_node, _HOOK_KEYS, path, "hook.")
            continue
        if key not in keys:
            known = ", ".join(sorted([*keys, *(["hook"] if prefix == "" else [])]))
            raise RaygitopsError(f"unknown setting '{prefix}{key}' (known: {known})", path, line)
        attr, convert = keys[key]
        try:
            value = yaml.load(yaml.serialize(value_node), Loader=yaml.SafeLoader)
        except (yaml.YAMLError, ValueError, OverflowError) as err:  # !!python/..., 2001-13-45
            problem = getattr(err, "problem", None) or f"invalid value: {str(err).split(';')[0]}"
            raise RaygitopsError(f"{prefix}{key}: {problem}", path, line) from None
        try:
            setattr(settings, attr, convert(value))
        except (ValueError, TypeError) as err:
            raise RaygitopsError(f"{prefix}{key}: {err}", path, line) from None


def load_config(settings: Settings, config: Path, display: str) -> None:
    """Apply the app config file onto ``settings``."""
    from raygitops.yamlio import check_nesting

    text = decode(config.read_bytes(), display)
    try:
        check_nesting(text)
    except RaygitopsError as err:
        raise err.located(display) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        raise library_error(err).located(display) from None
    if node is None:
        return
    if not isinstance(node, yaml.MappingNode):
        raise RaygitopsError("expected a mapping of settings", display, node.start_mark.line + 1)
    _apply_mapping(settings, node, _TOP_KEYS, display, "")


def argocd_parameters(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The parsed ``ARGOCD_APP_PARAMETERS`` (a JSON list), or [] when unset.

    Argo CD sends the JSON literal ``null`` for an Application without parameters
    (argo-cd #11900): that is "no parameters", like unset or empty.
    """
    raw = env.get("ARGOCD_APP_PARAMETERS")
    if not raw or not raw.strip():
        return []
    try:
        params = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as err:
        msg = err.msg if isinstance(err, json.JSONDecodeError) else "nests too deeply"
        raise RaygitopsError(f"ARGOCD_APP_PARAMETERS is not JSON: {msg}") from None
    if params is None:
        return []
    if not isinstance(params, list) or not all(isinstance(p, dict) for p in params):
        raise RaygitopsError("ARGOCD_APP_PARAMETERS is not a list of parameters")
    return params


def apply_parameters(settings: Settings, params: list[dict[str, Any]]) -> None:
    """Apply the Argo CD parameters this plugin announces (see argocd/plugin.yaml)."""
    for param in params:
        name = param.get("name")
        where = f"ARGOCD_APP_PARAMETERS: parameter {name!r}"
        if not isinstance(name, str):
            raise RaygitopsError(f"{where}: the name is not a string")
        if name == "values-files":
            try:
                files = _string_list(param.get("array") or param.get("string") or [])
            except ValueError as err:
                raise RaygitopsError(f"{where}: {err}") from None
            settings.values_files = settings.values_files + files
        elif name == "values":
            mapping = param.get("map") or {}
            if not isinstance(mapping, dict):
                raise RaygitopsError(f"{where}: expected a map")
            settings.value_overrides.update({str(k): str(v) for k, v in mapping.items()})
        elif name in PARAMETERS:
            attr, convert = PARAMETERS[name]
            try:
                setattr(settings, attr, convert(param.get("string")))
            except (ValueError, TypeError) as err:
                raise RaygitopsError(f"{where}: {err}") from None
        else:
            raise RaygitopsError(f"{where}: unknown parameter (known: values-files, values, "
                                 + ", ".join(sorted(PARAMETERS)) + ")")


def apply_overrides(settings: Settings, **overrides: Any) -> None:
    """CLI flags; None means "not given"."""
    names = {f.name for f in dataclasses.fields(Settings)}
    for name, value in overrides.items():
        if name not in names:
            raise TypeError(name)
        if value is None:
            continue
        if name == "values_files":
            settings.values_files = settings.values_files + list(value)
        else:
            setattr(settings, name, value)


def default_namespace(settings: Settings, env: Mapping[str, str] = os.environ) -> str:
    """Where namespace-less objects land: the setting, Argo CD's destination, else default."""
    return settings.namespace or env.get("ARGOCD_APP_NAMESPACE") or "default"
