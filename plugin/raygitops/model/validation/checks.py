"""The rules of KubeRay's own RayCluster validation, one function each (pure).

The operator runs ``ValidateRayClusterSpec`` (and, from 1.6, ``ValidateRayClusterUpgradeOptions``)
in its reconciler, ray-operator ``controllers/ray/utils/validation.go``: the CRD schema does not
carry these rules, so the API server stores such a cluster and the operator then refuses it
(a Warning Event ``InvalidRayClusterSpec``) and builds no pods.  Each function here is one
``return fmt.Errorf(...)`` of that code, returning the operator's own message or None; the
modules ``v1_5`` and ``v1_6`` list them in the order each tag runs them, with the line of the
tag's file that holds each.

They read the spec as the operator does, an absent field as the API server's defaulting
(``minReplicas`` 0, ``maxReplicas`` 2147483647) and ``setDefaults`` (rayStartParams ``{}``)
leave it; they never change the spec.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from raygitops.model import k8snames, podrules
from raygitops.model.names import FT_ANNOTATION, ORIGIN_LABEL, STORAGE_NS_ANNOTATION

UNIFIED_MIN_RAY = (2, 52, 0)  # token auth: "minimum Ray version is 2.52.0"
K8S_TOKEN_MIN_RAY = (2, 55, 0)
V2_ENV = "RAY_enable_autoscaler_v2"  # utils.RAY_ENABLE_AUTOSCALER_V2


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class Cluster:
    """What the checks read of one RayCluster, and the operator's feature gates (what several
    checks read is read once: render checks every cluster)."""

    __slots__ = ("spec", "annotations", "labels", "gates", "head", "workers", "head_env", "autoscaling",
                 "autoscaler_v2", "fault_tolerance", "auth", "token_mode", "k8s_token")

    def __init__(self, spec: dict[str, Any], annotations: dict[str, Any], labels: dict[str, Any],
                 gates: frozenset[str] = frozenset()) -> None:
        self.spec, self.annotations, self.labels = spec, annotations, labels
        self.gates = gates  # feature gates on by default
        self.head = _mapping(spec.get("headGroupSpec"))
        self.workers = [g for g in _list(spec.get("workerGroupSpecs")) if isinstance(g, dict)]
        self.head_env = _env(self.head)  # the env of the head's Ray container (the first)
        self.autoscaling = spec.get("enableInTreeAutoscaling") is True  # utils.IsAutoscalingEnabled
        # utils.IsAutoscalingV2Enabled (the autoscaler itself aside)
        self.autoscaler_v2 = _mapping(spec.get("autoscalerOptions")).get("version") == "v2"
        ft = annotations.get(FT_ANNOTATION)  # utils.IsGCSFaultToleranceEnabled
        self.fault_tolerance = (isinstance(ft, str) and ft.lower() == "true") or spec.get("gcsFaultToleranceOptions") is not None
        self.auth = _mapping(spec.get("authOptions"))
        self.token_mode = self.auth.get("mode") == "token"  # utils.IsAuthEnabled
        self.k8s_token = self.auth.get("enableK8sTokenAuth") is True  # utils.IsK8sAuthEnabled


def _containers(group: dict[str, Any]) -> list[Any]:
    return _list(_mapping(_mapping(group.get("template")).get("spec")).get("containers"))


def _env(group: dict[str, Any]) -> list[dict[str, Any]]:
    containers = _containers(group)
    first = containers[0] if containers and isinstance(containers[0], dict) else {}
    return [e for e in _list(first.get("env")) if isinstance(e, dict)]


def _env_value(name: str, env: list[dict[str, Any]]) -> Any:
    """utils.EnvVarByName: the value of the first variable of that name (None: absent)."""
    for var in env:
        if var.get("name") == name:
            return var.get("value", "")
    return None


def _has_env(name: str, env: list[dict[str, Any]]) -> bool:  # utils.EnvVarExists
    return any(var.get("name") == name for var in env)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _params(group: dict[str, Any]) -> dict[str, str]:
    return {str(k): _text(v) for k, v in _mapping(group.get("rayStartParams")).items()}


def _name(group: dict[str, Any]) -> str:
    return _text(group.get("groupName"))


def _restart_policy(group: dict[str, Any]) -> str:
    return _text(_mapping(_mapping(group.get("template")).get("spec")).get("restartPolicy"))


def _v2_by_env(c: Cluster) -> bool:
    return _env_value(V2_ENV, c.head_env) in ("1", "true")


# --- a group (the head is named "Head" in the messages)

GroupCheck = Callable[[Cluster, dict[str, Any], str], "str | None"]


def head_has_container(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    return None if _containers(g) else "headGroupSpec should have at least one container"


def worker_has_container(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    return None if _containers(g) else "workerGroupSpec should have at least one container"


def group_resources(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    """validateRayGroupResources."""
    params = _params(g)
    in_params = any(params.get(k, "") != "" for k in ("num-cpus", "num-gpus", "memory", "resources"))
    if in_params and _mapping(g.get("resources")):
        return (f"resource fields should not be set in both rayStartParams and Resources for {name} group; "
                "please use only one")
    return None


def group_labels_in_params(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    """validateRayGroupLabels, rayStartParams['labels']."""
    if "labels" in _mapping(g.get("rayStartParams")):
        return (f"rayStartParams['labels'] is not supported for {name} group; please use the top-level Labels "
                "field instead")
    return None


def group_label_syntax(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    """validateRayGroupLabels, the keys and values (Go visits the map in random order: the
    problems are sorted here)."""
    found = []
    for key, value in sorted(_mapping(g.get("labels")).items(), key=lambda kv: str(kv[0])):
        key_problem = k8snames.qualified_name(str(key))
        if key_problem:
            found.append(f"invalid label key for {name} group: '{key}', error: {key_problem}")
        value_problem = k8snames.label_value(_text(value))
        if value_problem:
            found.append(f"invalid label value for key '{key}' in {name} group: '{_text(value)}', error: {value_problem}")
    return "; ".join(found) or None


def replicas_not_negative_min(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    low = g.get("minReplicas")
    return f"worker group {name} has negative minReplicas {low}" if isinstance(low, int) and low < 0 else None


def replicas_not_negative_max(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    high = g.get("maxReplicas")
    return f"worker group {name} has negative maxReplicas {high}" if isinstance(high, int) and high < 0 else None


def replicas_ordered(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    low, high = g.get("minReplicas", 0), g.get("maxReplicas", 2147483647)  # the CRD's defaults
    if isinstance(low, int) and isinstance(high, int) and low > high:
        return f"worker group {name} has minReplicas {low} greater than maxReplicas {high}"
    return None


def idle_timeout_not_negative(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    """validateWorkerGroupIdleTimeout, the sign."""
    value = g.get("idleTimeoutSeconds")
    if isinstance(value, int) and value < 0:
        return f"worker group {name}: idleTimeoutSeconds must be non-negative, got {value}"
    return None


def idle_timeout_needs_v2(c: Cluster, g: dict[str, Any], name: str) -> str | None:
    """validateWorkerGroupIdleTimeout: only autoscaler v2 reads a group's idle timeout."""
    if g.get("idleTimeoutSeconds") is None or c.autoscaler_v2 or _v2_by_env(c):
        return None
    return (f"worker group {name}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please set "
            f".spec.autoscalerOptions.version to 'v2' (or set {V2_ENV} environment variable to 'true' in the head "
            "pod if using KubeRay < 1.4.0)")


# --- the cluster

ClusterCheck = Callable[[Cluster], "str | None"]


def ft_annotation_and_options(c: Cluster) -> str | None:
    if c.annotations.get(FT_ANNOTATION, "") != "" and c.spec.get("gcsFaultToleranceOptions") is not None:
        return (f"{FT_ANNOTATION} annotation and GcsFaultToleranceOptions are both set. Please use only "
                "GcsFaultToleranceOptions to configure GCS fault tolerance")
    return None


def redis_address_without_ft(c: Cluster) -> str | None:
    if not c.fault_tolerance and _has_env("RAY_REDIS_ADDRESS", c.head_env):
        return ("RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions "
                "is not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance")
    return None


def _with_options(message: str, test: Callable[[Cluster], bool]) -> ClusterCheck:
    def check(c: Cluster) -> str | None:
        return message if c.spec.get("gcsFaultToleranceOptions") is not None and test(c) else None
    return check


ft_redis_password_param = _with_options(
    "cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled - use "
    "GcsFaultToleranceOptions.RedisPassword instead", lambda c: _params(c.head).get("redis-password", "") != "")
ft_redis_password_env = _with_options(
    "cannot set `REDIS_PASSWORD` env var in head Pod when GcsFaultToleranceOptions is enabled - use "
    "GcsFaultToleranceOptions.RedisPassword instead", lambda c: _has_env("REDIS_PASSWORD", c.head_env))
ft_redis_address_env = _with_options(
    "cannot set `RAY_REDIS_ADDRESS` env var in head Pod when GcsFaultToleranceOptions is enabled - use "
    "GcsFaultToleranceOptions.RedisAddress instead", lambda c: _has_env("RAY_REDIS_ADDRESS", c.head_env))
ft_storage_namespace_annotation = _with_options(
    "cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions is enabled - use "
    "GcsFaultToleranceOptions.ExternalStorageNamespace instead",
    lambda c: c.annotations.get(STORAGE_NS_ANNOTATION, "") != "")


def redis_username(c: Cluster) -> str | None:
    if _params(c.head).get("redis-username", "") != "" or _has_env("REDIS_USERNAME", c.head_env):
        return ("cannot set redis username in rayStartParams or environment variables - use "
                "GcsFaultToleranceOptions.RedisUsername instead")
    return None


def _suspended(c: Cluster) -> list[str]:
    return [_name(g) for g in c.workers if g.get("suspend") is True]


def _suspend_rule(refused: Callable[[Cluster], bool], message: Callable[[str], str]) -> Callable[[Cluster], str | None]:
    """A check of the suspended worker groups: ``message`` of the first when ``refused``."""

    def rule(c: Cluster) -> str | None:
        groups = _suspended(c)
        return message(groups[0]) if groups and refused(c) else None

    return rule


def _no_deletion_policy_gate(c: Cluster) -> bool:
    return "RayJobDeletionPolicy" not in c.gates  # off by default up to 1.5


# a suspended worker group needs the RayJobDeletionPolicy gate
worker_suspend_gate = _suspend_rule(
    _no_deletion_policy_gate,
    lambda group: f"worker group {group} can be suspended only when the RayJobDeletionPolicy feature gate is enabled")
worker_suspend_gate_1_3 = _suspend_rule(  # 1.3 words it without the group
    _no_deletion_policy_gate,
    lambda group: "suspending worker groups is currently available when the RayJobDeletionPolicy feature gate is enabled")


def v2_env_without_autoscaler(c: Cluster) -> str | None:
    value = _env_value(V2_ENV, c.head_env)
    if not c.autoscaling and value in ("1", "true"):
        return (f"environment variable {V2_ENV} cannot be set to '{value}' when enableInTreeAutoscaling is false. "
                "Please set enableInTreeAutoscaling: true to use autoscaler v2")
    return None


worker_suspend_with_autoscaler = _suspend_rule(
    lambda c: c.autoscaling, lambda group: f"worker group {group} cannot be suspended with Autoscaler enabled")
worker_suspend_with_autoscaler_1_3 = _suspend_rule(  # 1.3 words it without the group
    lambda c: c.autoscaling, lambda group: "suspending worker groups is not currently supported with Autoscaler enabled")


def autoscaler_version_and_env(c: Cluster) -> str | None:
    version = _mapping(c.spec.get("autoscalerOptions")).get("version")
    if c.autoscaling and version is not None and _has_env(V2_ENV, c.head_env):
        return (f"both .spec.autoscalerOptions.version and head Pod env var {V2_ENV} are set, please only use the "
                "former")
    return None


def v2_head_restart_policy(c: Cluster) -> str | None:
    if c.autoscaling and c.autoscaler_v2 and _restart_policy(c.head) not in ("", "Never"):
        return "restartPolicy for head Pod should be Never or unset when using autoscaler V2"
    return None


def v2_worker_restart_policy(c: Cluster) -> str | None:
    if c.autoscaling and c.autoscaler_v2:
        for g in c.workers:
            if _restart_policy(g) not in ("", "Never"):
                return f"restartPolicy for worker group {_name(g)} should be Never or unset when using autoscaler V2"
    return None


def autoscaler_idle_timeout_not_negative(c: Cluster) -> str | None:
    value = _mapping(c.spec.get("autoscalerOptions")).get("idleTimeoutSeconds")
    if isinstance(value, int) and value < 0:
        return f"autoscalerOptions.idleTimeoutSeconds must be non-negative, got {value}"
    return None


def _ray_version(c: Cluster) -> tuple[int, ...] | None:
    return podrules.generic_version(_text(c.spec.get("rayVersion")))


def token_needs_ray_version(c: Cluster) -> str | None:
    if c.token_mode and _text(c.spec.get("rayVersion")) == "":
        return "authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required"
    return None


def _parse_error(text: str) -> str:
    """The error of version.ParseGeneric for a text it refuses."""
    match = re.match(r"^\s*v?([0-9]+(?:\.[0-9]+)*)", text)
    if match is None:
        return f'could not parse "{text}" as version'
    parts = match.group(1).split(".")
    if len(parts) < 2:
        return f'illegal version string "{text}"'
    return f'illegal zero-prefixed version component "{parts[0]}" in "{text}"'


def token_ray_version_format(c: Cluster) -> str | None:
    text = _text(c.spec.get("rayVersion")) if c.token_mode else ""
    if text != "" and _ray_version(c) is None:
        return f"authOptions.mode is 'token' but RayVersion format is invalid: {text}, {_parse_error(text)}"
    return None


def token_min_ray_version(c: Cluster) -> str | None:
    version = _ray_version(c) if c.token_mode else None
    if version is not None and not podrules.at_least(version, UNIFIED_MIN_RAY):
        return f"authOptions.mode is 'token' but minimum Ray version is 2.52.0, got {_text(c.spec.get('rayVersion'))}"
    return None


def k8s_token_min_ray_version(c: Cluster) -> str | None:
    version = _ray_version(c) if c.token_mode and c.k8s_token else None
    if version is not None and not podrules.at_least(version, K8S_TOKEN_MIN_RAY):
        return ("authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got "
                f"{_text(c.spec.get('rayVersion'))}")
    return None


def k8s_token_and_secret(c: Cluster) -> str | None:
    if c.token_mode and c.k8s_token and _text(c.auth.get("secretName")) != "":
        return "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set"
    return None


def k8s_token_needs_token_mode(c: Cluster) -> str | None:
    if not c.token_mode and c.k8s_token:
        return "authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'"
    return None


def upgrade_strategy_on_owned_cluster(c: Cluster) -> str | None:
    """ValidateRayClusterUpgradeOptions: only a cluster a user made may set upgradeStrategy."""
    kind = c.labels.get(ORIGIN_LABEL)
    if _mapping(c.spec.get("upgradeStrategy")).get("type") is not None and kind in ("RayJob", "RayService"):
        return f"upgradeStrategy cannot be set when RayCluster is created by {kind}"
    return None
