"""What reaches a RayCluster's pods, per KubeRay operator line (pure): the one place that
decides what the template hash (scheme h3) covers.

A field *shapes pods*, for an operator version, when that operator builds different pods for
it.  Each operator line's rules are read in its pod builder (ray-operator
``controllers/ray/common/pod.go``: ``DefaultHeadPodTemplate``, ``DefaultWorkerPodTemplate``,
``BuildPod``, ``configureGCSFaultTolerance``, ``mergeAutoscalerOverrides``,
``setMissingRayStartParams``; ``controllers/ray/raycluster_controller.go``: ``buildHeadPod``,
``buildWorkerPod``; ``controllers/ray/utils/util.go``: ``GenerateHeadServiceName``) and
measured on the real operators: ``tests/e2e/test_pod_oracle.py`` builds a base cluster and one
that differs in one field side by side for every field of the CRD outside the pod templates,
compares the pods the operator builds, and writes the table of docs/pod-fields.md.

:func:`pod_inputs` is, per group, exactly what the operator reads to build that group's pods:
the group's template and Ray settings, and the cluster-wide facts that reach it (the autoscaler
container only on the head and only with the autoscaler on, the head Service's name on the
workers, the Ray version only where it picks the probes ...).  Two specs with equal inputs for
a group make equal pods for it; the template hash is a digest of the input.

Every field of the CRD outside the templates has an entry in its line's :data:`FIELDS`
(``tests/unit/test_podrules.py`` walks the shipped CRD schemas): a field no entry names is
hashed whole, in every group (a newer operator's field is pod-shaping until measured).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable

from raygitops.model.convert import version_tuple
from raygitops.model.names import (
    ANNOTATION_PREFIX, FT_ANNOTATION, OVERWRITE_CMD_ANNOTATION, STORAGE_NS_ANNOTATION)

# How a field outside the pod templates reaches the pods.
PODS = "pods"  # copied into its group's pods (or read by a rule of its own: ``why`` says which)
COUNT = "count"  # how many pods the group has, not what they are (scaling)
NOT_PODS = "none"  # read by something else: Services, the autoscaler, the operator's own control
IDENTITY = "identity"  # names the group: a new name is a removed group and a new one
EFFECTS = (PODS, COUNT, NOT_PODS, IDENTITY)

HEAD = "headGroupSpec"
WORKERS = "workerGroupSpecs[]"
# the RayCluster annotations the pod builder reads
POD_ANNOTATIONS = (FT_ANNOTATION, STORAGE_NS_ANNOTATION, OVERWRITE_CMD_ANNOTATION)
# autoscalerOptions merged into the autoscaler container (mergeAutoscalerOverrides)
AUTOSCALER_CONTAINER = ("env", "envFrom", "image", "imagePullPolicy", "resources", "securityContext", "volumeMounts")
DEFAULT_HEAD_PORT = "6379"  # utils.DefaultGcsServerPort (GetHeadPort)
UNIFIED_HEALTH_CHECK = (2, 53, 0)  # supportsUnifiedHealthCheck (pod.go, 1.6)


class Field:
    """How one field outside the pod templates reaches the pods, and why (a pointer into the
    operator's code, shown in docs/pod-fields.md).  Plain classes here and in the validation
    ports: defining a dataclass costs render's start-up half a millisecond each."""

    __slots__ = ("effect", "why")

    def __init__(self, effect: str, why: str) -> None:
        self.effect, self.why = effect, why


def _fields(*entries: tuple[str, str, str]) -> dict[str, Field]:
    return {path: Field(effect, why) for path, effect, why in entries}


# The fields of KubeRay 1.5's RayCluster outside the pod templates. Paths are relative to
# ``spec`` (``headGroupSpec.X``, ``workerGroupSpecs[].X``), one level into KubeRay's option
# structs and the group's own objects (the walk of tests/e2e/podoracle.py).
_FIELDS_1_5 = _fields(
    ("autoscalerOptions.env", PODS, "the autoscaler container of the head, with the autoscaler on (mergeAutoscalerOverrides)"),
    ("autoscalerOptions.envFrom", PODS, "the autoscaler container of the head, with the autoscaler on"),
    ("autoscalerOptions.image", PODS, "the autoscaler container of the head, with the autoscaler on"),
    ("autoscalerOptions.imagePullPolicy", PODS, "the autoscaler container of the head, with the autoscaler on"),
    ("autoscalerOptions.resources", PODS, "the autoscaler container of the head, with the autoscaler on"),
    ("autoscalerOptions.securityContext", PODS, "the autoscaler container of the head, with the autoscaler on"),
    ("autoscalerOptions.volumeMounts", PODS, "the autoscaler container of the head, with the autoscaler on"),
    ("autoscalerOptions.version", PODS, "v2 with the autoscaler on: RAY_enable_autoscaler_v2 on the head, "
                                        "restartPolicy Never on every pod"),
    ("autoscalerOptions.idleTimeoutSeconds", NOT_PODS, "read by the autoscaler from the RayCluster"),
    ("autoscalerOptions.upscalingMode", NOT_PODS, "read by the autoscaler from the RayCluster"),
    ("enableInTreeAutoscaling", PODS, "the autoscaler container and no-monitor on the head; with v2, every "
                                      "pod's restartPolicy"),
    ("gcsFaultToleranceOptions.externalStorageNamespace", PODS, "the head's Redis settings (configureGCSFaultTolerance)"),
    ("gcsFaultToleranceOptions.redisAddress", PODS, "the head's Redis settings; set at all, GCS fault tolerance "
                                                    "on every pod"),
    ("gcsFaultToleranceOptions.redisPassword", PODS, "the head's Redis settings"),
    ("gcsFaultToleranceOptions.redisUsername", PODS, "the head's Redis settings"),
    ("headServiceAnnotations", NOT_PODS, "the head Service only"),
    ("managedBy", NOT_PODS, "who reconciles the cluster (immutable: the API server refuses a change)"),
    ("rayVersion", NOT_PODS, "not read by the 1.5 pod builder"),
    # fields of later CRDs: the 1.5 CRD prunes them (render refuses them for a 1.5 target)
    ("authOptions.enableK8sTokenAuth", NOT_PODS, "not in the 1.5 CRD"),
    ("authOptions.mode", NOT_PODS, "not in the 1.5 CRD"),
    ("authOptions.secretName", NOT_PODS, "not in the 1.5 CRD"),
    ("upgradeStrategy.type", NOT_PODS, "not in the 1.5 CRD"),
    ("suspend", COUNT, "no pods while suspended"),
    (f"{HEAD}.enableIngress", NOT_PODS, "the Ingress only"),
    (f"{HEAD}.headService.apiVersion", NOT_PODS, "the head Service only"),
    (f"{HEAD}.headService.kind", NOT_PODS, "the head Service only"),
    (f"{HEAD}.headService.metadata", PODS, "its name is the workers' head address (GenerateHeadServiceName), and "
                                           "the head's too when it has init containers"),
    (f"{HEAD}.headService.spec", NOT_PODS, "the head Service only"),
    (f"{HEAD}.headService.status", NOT_PODS, "the head Service only"),
    (f"{HEAD}.labels", PODS, "pod labels and ray start --labels"),
    (f"{HEAD}.rayStartParams", PODS, "the ray start command; its port is the workers' head port too"),
    (f"{HEAD}.resources", PODS, "ray start --num-cpus/--memory/--resources"),
    (f"{HEAD}.serviceType", NOT_PODS, "the head Service only"),
    (f"{WORKERS}.groupName", IDENTITY, "the group's name"),
    (f"{WORKERS}.idleTimeoutSeconds", NOT_PODS, "read by the autoscaler from the RayCluster"),
    (f"{WORKERS}.labels", PODS, "pod labels and ray start --labels"),
    (f"{WORKERS}.maxReplicas", COUNT, "the number of pods"),
    (f"{WORKERS}.minReplicas", COUNT, "the number of pods"),
    (f"{WORKERS}.numOfHosts", COUNT, "pods per replica"),
    (f"{WORKERS}.rayStartParams", PODS, "the ray start command"),
    (f"{WORKERS}.replicas", COUNT, "the number of pods"),
    (f"{WORKERS}.resources", PODS, "ray start --num-cpus/--memory/--resources"),
    (f"{WORKERS}.scaleStrategy.workersToDelete", COUNT, "which pods the operator deletes when scaling down"),
    (f"{WORKERS}.suspend", COUNT, "no pods while suspended"),
)

_FIELDS_1_6 = {
    **_FIELDS_1_5,
    **_fields(
        ("authOptions.enableK8sTokenAuth", PODS, "token auth env, volume and mount on every pod (configureTokenAuth)"),
        ("authOptions.mode", PODS, "token: RAY_AUTH_MODE and the token on every pod (configureTokenAuth)"),
        ("authOptions.secretName", PODS, "the token Secret every pod reads, with mode token"),
        ("rayVersion", PODS, "2.53.0 and later: HTTP probes instead of exec ones, where the Ray container sets "
                             "none (supportsUnifiedHealthCheck)"),
        ("upgradeStrategy.type", NOT_PODS, "whether the operator recreates the pods, not what they are"),
    ),
}


class PodRules:
    """One operator line's pod builder, as far as the template hash needs it."""

    __slots__ = ("name", "fields", "unified_health_check", "token_auth", "measured", "known")

    def __init__(self, name: str, fields: dict[str, Field], *, unified_health_check: bool, token_auth: bool,
                 measured: tuple[str, ...]) -> None:
        self.name = name  # the first KubeRay minor version it describes ("1.5")
        self.fields = fields
        self.unified_health_check = unified_health_check  # rayVersion >= 2.53.0 picks HTTP probes (1.6)
        self.token_auth = token_auth  # authOptions reaches the pods (1.6)
        self.measured = measured  # operator versions tests/e2e/test_pod_oracle.py measured it on
        # every path with an entry and every path above one (autoscalerOptions, headGroupSpec.headService)
        self.known = frozenset(path.rsplit(".", depth)[0] for path in fields for depth in range(path.count(".") + 1))

    def effect(self, path: str) -> str:
        """The effect of the field at ``path`` (:data:`PODS` for a field it does not know)."""
        entry = self.fields.get(path)
        return entry.effect if entry is not None else PODS


# Oldest first. A KubeRay version uses the newest line not newer than it (an older one the
# oldest): operators before 1.5 build pods as 1.5 does for the fields their CRDs have.
RULES = (
    PodRules("1.5", _FIELDS_1_5, unified_health_check=False, token_auth=False, measured=("v1.5.0",)),
    PodRules("1.6", _FIELDS_1_6, unified_health_check=True, token_auth=True, measured=("v1.6.2",)),
)
BY_NAME = {r.name: r for r in RULES}


@functools.lru_cache(maxsize=32)
def rules_for(kuberay_version: str | None) -> PodRules:
    """The rules of a KubeRay version (as :func:`raygitops.model.convert.kuberay_version`
    returns it); None: the newest known."""
    if kuberay_version is None:
        return RULES[-1]
    wanted = version_tuple(kuberay_version)[:2]
    older = [r for r in RULES if version_tuple(r.name) <= wanted]
    return older[-1] if older else RULES[0]


# ---------------------------------------------------------------------------------------------
# The input of each group's pods


_GENERIC_VERSION = re.compile(r"^\s*v?([0-9]+(?:\.[0-9]+)*)")


def generic_version(text: Any) -> tuple[int, ...] | None:
    """k8s.io/apimachinery's ``version.ParseGeneric`` (at least major.minor, a leading ``v``,
    anything after the numbers ignored); None where it fails."""
    match = _GENERIC_VERSION.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    parts = match.group(1).split(".")
    if len(parts) < 2 or (parts[0].startswith("0") and parts[0] != "0"):
        return None
    return tuple(int(p) for p in parts)


def at_least(version: tuple[int, ...] | None, minimum: tuple[int, ...]) -> bool:
    """``Version.AtLeast`` of a generic version (missing components count as zeros)."""
    if version is None:
        return False
    width = max(len(version), len(minimum))
    return version + (0,) * (width - len(version)) >= minimum + (0,) * (width - len(minimum))


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _true(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == "true"


def _known(rules: PodRules, prefix: str, key: str) -> bool:
    """Whether ``prefix + key`` (or something below it) has an entry in the rules."""
    return prefix + key in rules.known


def _unknown(rules: PodRules, prefix: str, mapping: dict[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The entries of ``mapping`` (at ``prefix``) the rules do not know: hashed whole."""
    return {k: v for k, v in mapping.items() if k not in skip and not _known(rules, prefix, str(k))}


def _template(group: dict[str, Any], ignored: Callable[[Any], bool]) -> Any:
    """The pod template as the pod builder uses it: ``metadata.name`` and ``namespace`` are
    overwritten (GenerateName, the cluster's namespace), template label and annotation keys
    the hash leaves out (``hash.ignore``) and raygitops' own annotations dropped."""
    template = group.get("template")
    if not isinstance(template, dict):
        return template
    meta = template.get("metadata")
    if not isinstance(meta, dict):
        return template
    kept = {k: v for k, v in meta.items() if k not in ("name", "namespace", "generateName")}
    for key in ("labels", "annotations"):
        values = meta.get(key)
        if isinstance(values, dict):
            kept[key] = {k: v for k, v in values.items()
                         if not ignored(k) and not (isinstance(k, str) and k.startswith(ANNOTATION_PREFIX))}
    return {**template, "metadata": kept}


def _has_init_containers(group: dict[str, Any]) -> bool:
    spec = _mapping(_mapping(group.get("template")).get("spec"))
    return bool(spec.get("initContainers"))


def _probes_injected(group: dict[str, Any]) -> bool:
    """Whether the operator writes a probe of the Ray container (the first): it does where the
    template sets none (initLivenessAndReadinessProbe)."""
    containers = _mapping(_mapping(group.get("template")).get("spec")).get("containers")
    first = containers[0] if isinstance(containers, list) and containers and isinstance(containers[0], dict) else {}
    return first.get("livenessProbe") is None or first.get("readinessProbe") is None


def _start_params(group: dict[str, Any], head_autoscaler: bool) -> Any:
    """rayStartParams as they reach ``ray start``: ``block`` is always true
    (setMissingRayStartParams), and the head's ``no-monitor`` with the autoscaler on."""
    params = group.get("rayStartParams")
    if not isinstance(params, dict):
        return params
    dropped = ("block", "no-monitor") if head_autoscaler else ("block",)
    return {k: v for k, v in params.items() if k not in dropped}


def _group_input(group: dict[str, Any], prefix: str, rules: PodRules, ignored: Callable[[Any], bool],
                 head_autoscaler: bool = False) -> dict[str, Any]:
    """What the group's own fields put into its pods."""
    out = _unknown(rules, prefix, group, skip=("template", "rayStartParams", "resources", "labels"))
    out.update({
        "template": _template(group, ignored),
        "rayStartParams": _start_params(group, head_autoscaler),
        "resources": group.get("resources"),
        "labels": group.get("labels"),
    })
    return out


class _Cluster:
    """The cluster-wide facts the pod builder reads, derived once per spec."""

    __slots__ = ("autoscaling", "v2", "autoscaler", "ft", "ft_options", "storage_namespace", "overwrite_cmd", "auth",
                 "ray_version", "head_service", "head_port", "unknown")

    def __init__(self, **facts: Any) -> None:
        for key, value in facts.items():
            setattr(self, key, value)


def _cluster(spec: dict[str, Any], cluster_annotations: dict[str, Any], rules: PodRules) -> _Cluster:
    options = _mapping(spec.get("autoscalerOptions"))
    autoscaling = spec.get("enableInTreeAutoscaling") is True  # utils.IsAutoscalingEnabled
    ft_options = spec.get("gcsFaultToleranceOptions")
    auth = _mapping(spec.get("authOptions")) if rules.token_auth else {}
    k8s_token = auth.get("enableK8sTokenAuth") is True
    head = _mapping(spec.get(HEAD))
    unknown = _unknown(rules, "", spec, skip=(HEAD, "workerGroupSpecs"))
    for struct in ("autoscalerOptions", "gcsFaultToleranceOptions", "authOptions", "upgradeStrategy"):
        value = spec.get(struct)
        if isinstance(value, dict) and _known(rules, "", struct):
            unknown.update({f"{struct}.{k}": v for k, v in _unknown(rules, f"{struct}.", value).items()})
    return _Cluster(
        autoscaling=autoscaling,
        v2=autoscaling and options.get("version") == "v2",  # utils.IsAutoscalingV2Enabled
        # the container the head gets with the autoscaler on, its overrides merged in
        autoscaler={"enabled": True, **{k: options.get(k) for k in AUTOSCALER_CONTAINER}} if autoscaling else None,
        # utils.IsGCSFaultToleranceEnabled: the annotation, or the options set at all
        ft=_true(cluster_annotations.get(FT_ANNOTATION)) or ft_options is not None,
        ft_options=ft_options,
        storage_namespace=cluster_annotations.get(STORAGE_NS_ANNOTATION),
        overwrite_cmd=_true(cluster_annotations.get(OVERWRITE_CMD_ANNOTATION)),
        auth={"k8s": k8s_token, "secretName": None if k8s_token else auth.get("secretName") or None}
        if auth.get("mode") == "token" else None,
        ray_version=generic_version(spec.get("rayVersion")) if rules.unified_health_check else None,
        head_service=_mapping(_mapping(head.get("headService")).get("metadata")).get("name") or None,
        head_port=str(_mapping(head.get("rayStartParams")).get("port", DEFAULT_HEAD_PORT)),
        unknown=unknown,
    )


def _shared(c: _Cluster, group: dict[str, Any], rules: PodRules, head: bool) -> dict[str, Any]:
    """The cluster-wide facts one group's pods are built from."""
    out: dict[str, Any] = {
        "ft": c.ft,
        "overwriteCommand": c.overwrite_cmd,
        "auth": c.auth,
        "autoscalerV2": c.v2,
        **({"unifiedHealthCheck": at_least(c.ray_version, UNIFIED_HEALTH_CHECK)}
           if rules.unified_health_check and _probes_injected(group) else {}),
        "unknown": c.unknown,
    }
    if head:
        out["autoscaler"] = c.autoscaler
        if c.ft:
            out["ftOptions"] = c.ft_options
            out["storageNamespace"] = c.storage_namespace
        if _has_init_containers(group):  # setInitContainerEnvVars: FQ_RAY_IP on the head's own
            out["headService"] = c.head_service
    else:
        out["headService"] = c.head_service  # the head address: FQ_RAY_IP, RAY_ADDRESS, wait-gcs-ready
        out["headPort"] = c.head_port
    return out


def pod_annotations(cluster_annotations: dict[str, Any]) -> dict[str, str]:
    """The RayCluster annotations the pod builder reads (:data:`POD_ANNOTATIONS`)."""
    return {k: v for k, v in cluster_annotations.items() if k in POD_ANNOTATIONS and isinstance(v, str)}


def pod_inputs(spec: dict[str, Any], cluster_annotations: dict[str, Any], rules: PodRules,
               ignored: Callable[[Any], bool] = lambda key: False) -> dict[str, dict[str, Any]]:
    """Per group (``head``, ``worker:<groupName>``), what the operator reads to build its pods
    (the spec is the one :func:`raygitops.model.hashing.split_spec` accepted; ``ignored``: the
    template label and annotation keys left out, ``hash.ignore``)."""
    cluster = _cluster(spec, cluster_annotations, rules)
    head = spec[HEAD]
    out = {"head": {"group": _group_input(head, f"{HEAD}.", rules, ignored, head_autoscaler=cluster.autoscaling),
                    "cluster": _shared(cluster, head, rules, head=True)}}
    for group in spec.get("workerGroupSpecs") or []:
        out[f"worker:{group['groupName']}"] = {
            "group": _group_input(group, "workerGroupSpecs[].", rules, ignored),
            "cluster": _shared(cluster, group, rules, head=False),
        }
    return out


def path_shapes_pods(tokens: list[str], rules: PodRules) -> bool:
    """Whether the field at a RayCluster JSON pointer (``["spec", "headGroupSpec", ...]``) can
    reach pods under ``rules`` (some need a context: the autoscaler fields need the autoscaler
    on); for ``raygitops diff``'s marks."""
    if len(tokens) < 2 or tokens[0] != "spec":
        return len(tokens) == 1 and tokens[0] == "spec"
    if tokens[1] == "headGroupSpec":
        prefix, rest = f"{HEAD}.", tokens[2:]
    elif tokens[1] == "workerGroupSpecs":
        prefix, rest = "workerGroupSpecs[].", tokens[3:]
    else:
        prefix, rest = "", tokens[1:]
    if not rest:
        return True
    if prefix and rest[0] == "template":
        return not (len(rest) >= 3 and rest[1] == "metadata" and rest[2] in ("name", "namespace", "generateName"))
    for depth in (2, 1):
        path = prefix + ".".join(rest[:depth])
        if len(rest) >= depth and path in rules.fields:
            return rules.fields[path].effect == PODS
    return not _known(rules, prefix, rest[0]) or rules.effect(prefix + rest[0]) == PODS
