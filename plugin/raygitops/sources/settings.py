"""Render settings: defaults < app config file ``raygitops.yaml`` < Argo CD parameters < CLI flags.

The app config file lives in the app directory, so it is untrusted input: unknown keys and
wrong types are errors naming the file and line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from raygitops import __version__
from raygitops.model import convert, hooknames, jobs, operators
from raygitops.model.preflight import FAIL as PREFLIGHT_FAIL, parse_unknown
from raygitops.errors import RaygitopsError, closest, no_collection_at_the_limit
from raygitops.model.hashing import DEFAULT_IGNORED_KEYS
from raygitops.model.plan import HookSettings
from raygitops.sources.yamlio import decode, library_error

CONFIG_NAMES = ("raygitops.yaml", "raygitops.yml")
# The hook image: hook.image, else RAYGITOPS_HOOK_IMAGE (the Argo CD sidecar passes its own
# image, argocd/repo-server-sidecar.yaml), else the name a local build gets
# (`podman build -t raygitops:<version> .`): no registry holds a raygitops image for you.
DEFAULT_IMAGE = f"raygitops:{__version__}"
HOOK_IMAGE_ENV = "RAYGITOPS_HOOK_IMAGE"
APP_NAME_ENV = "ARGOCD_APP_NAME"  # the Application the Argo CD plugin renders for


def unserved_image(image: str) -> bool:
    """Whether ``image`` is the local build's name no registry serves: ``raygitops`` with no
    registry (a node would look for docker.io/library/raygitops, which does not exist)."""
    name = image.split("@", 1)[0]  # without a digest
    if ":" in name.rsplit("/", 1)[-1]:  # without a tag (a registry's port is before a "/")
        name = name.rsplit(":", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/", "library/"):
        name = name[len(prefix):] if name.startswith(prefix) else name
    return name == "raygitops"


@dataclass
class Settings:
    """Everything that shapes a render besides the manifests themselves."""

    values_files: list[str] = field(default_factory=list)
    # Dotted-key overrides from the Argo CD `values` map parameter ("image.tag" -> "v2").
    value_overrides: dict[str, str] = field(default_factory=dict)
    namespace: str | None = None
    exclude: list[str] = field(default_factory=list)
    keep_upgrade_strategy: bool = False
    # The KubeRay operator the app is deployed to, when known: render refuses a kept
    # spec.upgradeStrategy it would drop, diff predicts what that operator does.
    kuberay_version: str | None = None
    hook_image: str = DEFAULT_IMAGE
    # the hook's own defaults (raygitops.model.plan.HookSettings): one source
    drain_grace_seconds: int = HookSettings.drain_grace_seconds
    timeout_seconds: int = HookSettings.timeout_seconds
    max_parallel: int = HookSettings.max_parallel
    wait_ready: bool = HookSettings.wait_ready
    # what the hook does about running Ray jobs, for clusters whose annotation does not say
    # (raygitops.model.jobs; carried per cluster in the plan)
    running_jobs: str = jobs.WAIT
    running_jobs_wait_seconds: int | None = None
    # whether a cycle first checks that the new pods can come up, and what a check the hook
    # cannot make does (raygitops.model.preflight; carried per cluster in the plan)
    preflight: bool = True
    preflight_unknown: str = PREFLIGHT_FAIL
    # The app the hook objects are for (raygitops.model.hooknames): Argo CD's ARGOCD_APP_NAME, or
    # --app-name (a Helm release, a Flux Kustomization); None: the fixed names, one app per namespace.
    app_name: str | None = None
    # Flux applies hooks as plain objects: a Job is immutable, so its name carries the plan hash.
    hook_name_suffix: bool = False
    # Helm's post-renderer: the hook objects are Helm hooks, and objects that name no namespace
    # stay without one (Helm puts them in the release namespace, which it does not tell us).
    helm: bool = False
    # Refuse what the API server, the operator or the hook would refuse or silently ignore: the
    # CRD schema (raygitops.model.crdschema), unknown top-level and metadata fields, near misses
    # of raygitops' annotations, a head whose dashboard no one can ask; diff turns it off for the
    # base revision, which is what runs today whatever it holds.
    validate_schema: bool = True
    # pod-template label/annotation keys (patterns) left out of the template hash
    hash_ignore: list[str] = field(default_factory=lambda: list(DEFAULT_IGNORED_KEYS))
    # raygitops diff: names (globs) whose values are masked / shown beyond the default rule
    mask_names: list[str] = field(default_factory=list)
    unmask_names: list[str] = field(default_factory=list)


# Settings field -> its converter (raygitops.model.convert): every source goes through the same one,
# so a value is refused alike from raygitops.yaml, an Argo CD parameter or a flag.
CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "values_files": convert.string_list,
    "namespace": convert.namespace,
    "exclude": convert.string_list,
    "keep_upgrade_strategy": convert.boolean,
    "kuberay_version": operators.supported_version,
    "hook_image": convert.image,
    "drain_grace_seconds": convert.integer_in(*convert.DRAIN_GRACE_SECONDS),
    "timeout_seconds": convert.integer_in(*convert.TIMEOUT_SECONDS),
    "max_parallel": convert.integer_in(*convert.MAX_PARALLEL),
    "wait_ready": convert.boolean,
    "running_jobs": jobs.parse_policy,
    "running_jobs_wait_seconds": jobs.parse_wait_seconds,
    "preflight": convert.boolean,
    "preflight_unknown": parse_unknown,
    "app_name": hooknames.app_name,
    "hook_name_suffix": convert.boolean,
    "helm": convert.boolean,
    "validate_schema": convert.boolean,
    "hash_ignore": convert.string_list,
    "mask_names": convert.string_list,
    "unmask_names": convert.string_list,
}
# config-file key -> Settings field; "hook" keys are nested under `hook:`.
_TOP_KEYS = {"values": "values_files", "namespace": "namespace", "exclude": "exclude",
             "keepUpgradeStrategy": "keep_upgrade_strategy", "kuberayVersion": "kuberay_version"}
_PREVIEW_KEYS = {"mask": "mask_names", "unmask": "unmask_names"}
_HASH_KEYS = {"ignore": "hash_ignore"}
_HOOK_KEYS = {"image": "hook_image", "drainGraceSeconds": "drain_grace_seconds", "timeoutSeconds": "timeout_seconds",
              "maxParallel": "max_parallel", "waitReady": "wait_ready", "jobNameWithPlanHash": "hook_name_suffix",
              "runningJobs": "running_jobs", "runningJobsWaitSeconds": "running_jobs_wait_seconds",
              "preflight": "preflight", "preflightUnknown": "preflight_unknown"}
# nested sections of the config file: `hook:`, `preview:` and `hash:`
_SECTIONS = {"hook": _HOOK_KEYS, "preview": _PREVIEW_KEYS, "hash": _HASH_KEYS}
# Argo CD parameter name -> Settings field; `values-files` and `values` handled apart.
PARAMETERS = {"namespace": "namespace", "keep-upgrade-strategy": "keep_upgrade_strategy",
              "kuberay-version": "kuberay_version", "hook-image": "hook_image",
              "drain-grace-seconds": "drain_grace_seconds", "timeout-seconds": "timeout_seconds",
              "max-parallel": "max_parallel", "wait-ready": "wait_ready", "running-jobs": "running_jobs",
              "running-jobs-wait-seconds": "running_jobs_wait_seconds", "preflight": "preflight",
              "preflight-unknown": "preflight_unknown"}
# Settings field -> the `raygitops render` flag that sets it (named in errors).
FLAGS = {"namespace": "--namespace", "hook_image": "--hook-image", "drain_grace_seconds": "--drain-grace",
         "timeout_seconds": "--timeout", "max_parallel": "--max-parallel", "wait_ready": "--wait-ready",
         "keep_upgrade_strategy": "--keep-upgrade-strategy", "kuberay_version": "--kuberay-version",
         "app_name": "--app-name", "hook_name_suffix": "--flux", "helm": "--helm", "running_jobs": "--running-jobs",
         "running_jobs_wait_seconds": "--running-jobs-wait-seconds", "preflight": "--preflight",
         "preflight_unknown": "--preflight-unknown"}


def _set(settings: Settings, attr: str, value: Any, where: Callable[[str], RaygitopsError]) -> None:
    """Convert ``value`` for ``attr`` and set it; ``where(reason)`` locates a refusal."""
    try:
        setattr(settings, attr, CONVERTERS[attr](value))
    except (ValueError, TypeError) as err:
        raise where(str(err)) from None


def find_config(app_dir: Path) -> Path | None:
    for name in CONFIG_NAMES:
        candidate = app_dir / name
        if candidate.is_file():
            return candidate
    return None


def _apply_mapping(
    settings: Settings,
    node: yaml.MappingNode,
    keys: Mapping[str, str],
    path: str,
    prefix: str,
) -> None:
    for key_node, value_node in node.value:
        key = key_node.value
        line = key_node.start_mark.line + 1
        if prefix == "" and key in _SECTIONS:
            if not isinstance(value_node, yaml.MappingNode):
                raise RaygitopsError(f"{key}: expected a mapping", path, line)
            _apply_mapping(settings, value_node, _SECTIONS[key], path, f"{key}.")
            continue
        if key not in keys:
            known = ", ".join(sorted([*keys, *(_SECTIONS if prefix == "" else [])]))
            raise RaygitopsError(f"unknown setting '{prefix}{key}'{_setting_hint(key, keys)} (known: {known})",
                                 path, line)
        try:
            value = yaml.load(yaml.serialize(value_node), Loader=yaml.SafeLoader)
        except (yaml.YAMLError, ValueError, OverflowError) as err:  # !!python/..., 2001-13-45
            problem = getattr(err, "problem", None) or f"invalid value: {str(err).split(';')[0]}"
            raise RaygitopsError(f"{prefix}{key}: {problem}", path, line) from None
        _set(settings, keys[key], value, lambda reason: RaygitopsError(f"{prefix}{key}: {reason}", path, line))


def _setting_hint(key: Any, keys: Mapping[str, str]) -> str:
    """Where an unknown setting ``key`` belongs (a key of another section, one indent off), or
    the known key it most likely misspells; empty when neither."""
    homes = [f"under {name}:" for name, section in _SECTIONS.items() if key in section and section is not keys]
    if key in _TOP_KEYS and keys is not _TOP_KEYS:
        homes.append("at the top level")
    if homes:
        return f" (it belongs {homes[0]})"
    close = closest(key, list(keys)) if isinstance(key, str) else None
    return f" (did you mean {close}?)" if close else ""


def load_config(settings: Settings, config: Path, display: str) -> None:
    """Apply the app config file onto ``settings``."""
    from raygitops.sources.yamlio import check_nesting

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
        with no_collection_at_the_limit():
            params = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as err:
        msg = err.msg if isinstance(err, json.JSONDecodeError) else "nests too deeply"
        raise RaygitopsError(f"ARGOCD_APP_PARAMETERS is not JSON: {msg}") from None
    if params is None:
        return []
    if not isinstance(params, list) or not all(isinstance(p, dict) for p in params):
        raise RaygitopsError("ARGOCD_APP_PARAMETERS is not a list of parameters")
    return params


# The kinds of value an Argo CD parameter carries (one key each besides its name)
PARAMETER_KINDS = ("string", "array", "map")


def parameter_kind(name: str) -> tuple[str, ...]:
    """The kinds of value parameter ``name`` takes: ``values`` a map, ``values-files`` an
    array (or one file as a string), every other one a string (argocd/plugin.yaml)."""
    return {"values": ("map",), "values-files": ("array", "string")}.get(name, ("string",))


def _parameter_value(param: dict[str, Any], name: str, where: str) -> Any:
    """The value of one parameter, of the kind it takes; a value of another kind (``values``
    given as a string: Argo CD's ``--plugin-env`` slip, or a wrong ``parameters:`` entry) is
    refused, never dropped."""
    wanted = parameter_kind(name)
    given = [kind for kind in PARAMETER_KINDS if kind in param]
    if len(given) > 1:  # an empty value of another kind beside the value carries nothing
        given = [kind for kind in given if kind in wanted or param[kind] not in ("", [], {}, None)]
    extra = [key for key in param if key != "name" and key not in PARAMETER_KINDS]
    if extra and not given:  # a key Argo CD may add later is let be beside a value, not instead of one
        raise RaygitopsError(f"{where}: unknown key {', '.join(map(repr, extra))} (a parameter has a name "
                             f"and one of {', '.join(PARAMETER_KINDS)})")
    wrong = [kind for kind in given if kind not in wanted]
    if wrong or len(given) > 1:
        example = {"map": '{"name": "values", "map": {"image.tag": "2.46.0"}}',
                   "array": '{"name": "values-files", "array": ["values-prod.yaml"]}'}.get(
            wanted[0], f'{{"name": "{name}", "string": "..."}}')
        raise RaygitopsError(f"{where}: given as {' and '.join(given)}, but it takes {' or '.join(wanted)} "
                             f"(e.g. {example})")
    return param.get(given[0]) if given else None


def apply_parameters(settings: Settings, params: list[dict[str, Any]]) -> None:
    """Apply the Argo CD parameters this plugin announces (see argocd/plugin.yaml)."""
    for param in params:
        name = param.get("name")
        where = f"ARGOCD_APP_PARAMETERS: parameter {name!r}"
        if not isinstance(name, str):
            raise RaygitopsError(f"{where}: the name is not a string")
        if name not in ("values-files", "values", *PARAMETERS):
            close = closest(name, ("values-files", "values", *PARAMETERS))
            raise RaygitopsError(f"{where}: unknown parameter{f' (did you mean {close}?)' if close else ''} (known: "
                                 "values-files, values, " + ", ".join(sorted(PARAMETERS)) + ")")
        value = _parameter_value(param, name, where)
        if name == "values-files":
            try:
                files = convert.string_list(value or [])
            except ValueError as err:
                raise RaygitopsError(f"{where}: {err}") from None
            settings.values_files = settings.values_files + files
        elif name == "values":
            if not isinstance(value or {}, dict):
                raise RaygitopsError(f"{where}: expected a map")
            settings.value_overrides.update({str(k): str(v) for k, v in (value or {}).items()})
        else:
            _set(settings, PARAMETERS[name], value, lambda reason: RaygitopsError(f"{where}: {reason}"))


def apply_environment(settings: Settings, env: Mapping[str, str]) -> None:
    """``RAYGITOPS_HOOK_IMAGE`` over the default hook image (a config file, parameter or flag
    wins); Argo CD's ``ARGOCD_APP_NAME`` as the app (``--app-name`` wins)."""
    for variable, attr in ((HOOK_IMAGE_ENV, "hook_image"), (APP_NAME_ENV, "app_name")):
        if env.get(variable):
            _set(settings, attr, env[variable], lambda reason, v=variable: RaygitopsError(f"{v}: {reason}"))


def apply_overrides(settings: Settings, overrides: Mapping[str, Any]) -> None:
    """Command-line flags (None means "not given")."""
    for name, value in overrides.items():
        if name not in CONVERTERS:
            raise TypeError(name)
        if value is None:
            continue
        if name == "values_files":
            settings.values_files = settings.values_files + list(value)
        else:
            flag = FLAGS.get(name, name)
            _set(settings, name, value, lambda reason: RaygitopsError(f"{flag}: {reason}"))


def default_namespace(settings: Settings, env: Mapping[str, str] = os.environ) -> str | None:
    """Where namespace-less objects land: the setting, Argo CD's destination, else default;
    for Helm (``--helm``) None: they stay namespace-less and Helm places them in the release
    namespace.  Argo CD's destination comes from the environment: checked here, so an invalid
    one is named as such rather than at the first object that lands in it."""
    if settings.namespace:
        return settings.namespace
    destination = env.get("ARGOCD_APP_NAMESPACE")
    if not destination:
        return None if settings.helm else "default"
    try:
        return convert.namespace(destination)
    except ValueError as err:
        raise RaygitopsError(f"ARGOCD_APP_NAMESPACE: {err}") from None
