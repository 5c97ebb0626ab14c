"""The pod oracle (docs/pod-fields.md): which fields make the KubeRay operator build different
pods, measured field by field on the real operators, and what ``raygitops diff`` says of each.

Shared by ``tests/e2e/test_pod_oracle.py`` (builds, per operator, a base cluster and one that
differs in one field side by side, compares the pods the operator builds) and
``tests/unit/test_podrules.py`` (every field of each shipped CRD has a sample here and an entry
in the pod rules; the documented table is what raygitops predicts today).

- :func:`fields` walks a RayCluster CRD schema: every field of ``spec``, of the head group and
  of a worker group, and one level into the objects among them (KubeRay's option structs, the
  head Service, ``scaleStrategy``), the pod templates aside. Not a hand list: a new CRD field
  is a new row, and the test fails until it has a sample.
- :data:`SAMPLES`: per field, one or more representative changes, each in a context (the base
  cluster it is applied to: plain, with the autoscaler, with GCS fault tolerance, ...), and a
  sample of template fields and of the RayCluster annotations the pod builder reads.
- :func:`shape`: a pod as the operator built it, names, node placement and the service
  account token volume aside (and the operator's own bookkeeping: its spec hash on the head
  pod, the per-pod multi-host index labels, which are identities like names).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

DOC = Path(__file__).resolve().parents[1] / "docs" / "pod-fields.md"
MARK = "<!-- pod-fields-table -->"
STRATEGY_ANNOTATION = "raygitops.dev/upgrade-strategy"

# The operators the oracle runs on: every line the e2e control plane builds
# (bin/ray-operator-<version>; tests/e2e/versions.env: KUBERAY_OLDER_VERSIONS, KUBERAY_VERSION,
# KUBERAY_NEXT_VERSION).
OPERATORS = ("v1.1.1", "v1.2.2", "v1.3.2", "v1.4.2", "v1.5.0", "v1.6.2")

# ---------------------------------------------------------------------------------------------
# The fields of a CRD

STRUCT_DEPTH = 2  # spec.X.Y / group.X.Y, no deeper (autoscalerOptions.resources is one field)


def fields(spec_schema: dict[str, Any]) -> list[str]:
    """Every field of a RayCluster ``spec`` schema outside the pod templates, as paths
    relative to ``spec`` (``rayVersion``, ``autoscalerOptions.image``, ``headGroupSpec.labels``,
    ``workerGroupSpecs[].scaleStrategy.workersToDelete``)."""
    out: list[str] = []

    def walk(node: dict[str, Any], prefix: str, depth: int) -> None:
        for name, child in sorted((node.get("properties") or {}).items()):
            if name == "template" and prefix:
                continue
            if prefix == "" and name == "headGroupSpec":
                walk(child, "headGroupSpec.", 1)
                continue
            if prefix == "" and name == "workerGroupSpecs":
                walk(child.get("items") or {}, "workerGroupSpecs[].", 1)
                continue
            if child.get("properties") and depth < STRUCT_DEPTH:
                walk(child, f"{prefix}{name}.", depth + 1)
            else:
                out.append(prefix + name)

    walk(spec_schema, "", 1)
    return out


# ---------------------------------------------------------------------------------------------
# The clusters


def _container(name: str) -> dict[str, Any]:
    return {"name": name, "image": "rayproject/ray:2.52.0",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}


def base_doc(name: str) -> dict[str, Any]:
    """The plain base: a head and two worker groups of one pod each (group ``a`` is the one a
    group-level change touches; ``b`` shows that other groups keep their pods)."""
    def group(group_name: str) -> dict[str, Any]:
        return {"groupName": group_name, "replicas": 1, "minReplicas": 0, "maxReplicas": 3, "rayStartParams": {},
                "template": {"spec": {"containers": [_container("ray-worker")]}}}

    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "annotations": {}},
        "spec": {
            "rayVersion": "2.52.0",
            "headGroupSpec": {"rayStartParams": {},
                              "template": {"spec": {"containers": [_container("ray-head")],
                                                    "volumes": [{"name": "scratch", "emptyDir": {}}]}}},
            "workerGroupSpecs": [group("a"), group("b")],
        },
    }


def _spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]


def _head(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["headGroupSpec"]


def _a(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["workerGroupSpecs"][0]


def _pod(group: dict[str, Any]) -> dict[str, Any]:
    return group["template"]["spec"]


def _ray(group: dict[str, Any]) -> dict[str, Any]:
    return group["template"]["spec"]["containers"][0]


def _autoscaling(doc: dict[str, Any]) -> None:
    _spec(doc)["enableInTreeAutoscaling"] = True


def _autoscaling_v2(doc: dict[str, Any]) -> None:
    _autoscaling(doc)
    _spec(doc)["autoscalerOptions"] = {"version": "v2"}


def _ft(doc: dict[str, Any]) -> None:
    _spec(doc)["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}


def _token(doc: dict[str, Any]) -> None:
    _spec(doc)["authOptions"] = {"mode": "token"}


def _token_k8s_ready(doc: dict[str, Any]) -> None:
    _token(doc)
    _spec(doc)["rayVersion"] = "2.55.0"


def _head_init(doc: dict[str, Any]) -> None:
    _pod(_head(doc))["initContainers"] = [{"name": "prepare", "image": "busybox:1.36", "command": ["true"]}]


# context -> what it adds to the plain base
CONTEXTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "plain": lambda doc: None,
    "autoscaler": _autoscaling,
    "autoscaler v2": _autoscaling_v2,
    "GCS FT": _ft,
    "token auth": _token,
    "token auth, Ray 2.55": _token_k8s_ready,
    "head init container": _head_init,
}


@dataclass(frozen=True)
class Sample:
    """One representative change: to the field at ``path`` (a path of :func:`fields`, or
    ``template: ...`` / ``metadata: ...`` for the sampled others), in a context."""

    path: str
    change: str  # what the change is, for the table
    context: str
    apply: Callable[[dict[str, Any]], None]  # mutates a cluster of the context

    @property
    def key(self) -> str:
        return f"{self.path} | {self.change} | {self.context}"


def _set(getter: Callable[[dict[str, Any]], dict[str, Any]], key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        getter(doc)[key] = copy.deepcopy(value(doc) if callable(value) else value)
    return apply


def _struct(name: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        _spec(doc).setdefault(name, {})[key] = copy.deepcopy(value)
    return apply


def _head_service(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        _head(doc).setdefault("headService", {})[key] = copy.deepcopy(value(doc) if callable(value) else value)
    return apply


def _annotation(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        doc["metadata"]["annotations"][key] = value
    return apply


def _s(path: str, change: str, context: str, apply: Callable[[dict[str, Any]], None]) -> Sample:
    return Sample(path, change, context, apply)


AUTOSCALER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}
H, W = "headGroupSpec.", "workerGroupSpecs[]."

SAMPLES: list[Sample] = [
    # --- cluster level
    _s("authOptions.enableK8sTokenAuth", "true", "token auth, Ray 2.55", _struct("authOptions", "enableK8sTokenAuth", True)),
    _s("authOptions.enableK8sTokenAuth", "true without mode token", "plain", _struct("authOptions", "enableK8sTokenAuth", True)),
    _s("authOptions.mode", "token", "plain", _struct("authOptions", "mode", "token")),
    _s("authOptions.mode", "disabled", "plain", _struct("authOptions", "mode", "disabled")),
    _s("authOptions.secretName", "ray-token", "token auth", _struct("authOptions", "secretName", "ray-token")),
    _s("authOptions.secretName", "ray-token", "plain", _struct("authOptions", "secretName", "ray-token")),
    _s("autoscalerOptions.env", "one variable", "autoscaler", _struct("autoscalerOptions", "env", [{"name": "X", "value": "1"}])),
    _s("autoscalerOptions.env", "one variable", "plain", _struct("autoscalerOptions", "env", [{"name": "X", "value": "1"}])),
    _s("autoscalerOptions.envFrom", "a ConfigMap", "autoscaler",
       _struct("autoscalerOptions", "envFrom", [{"configMapRef": {"name": "autoscaler-env"}}])),
    _s("autoscalerOptions.idleTimeoutSeconds", "60 → 300", "autoscaler", _struct("autoscalerOptions", "idleTimeoutSeconds", 300)),
    _s("autoscalerOptions.image", "another image", "autoscaler", _struct("autoscalerOptions", "image", "rayproject/ray:2.53.0")),
    _s("autoscalerOptions.image", "another image", "plain", _struct("autoscalerOptions", "image", "rayproject/ray:2.53.0")),
    _s("autoscalerOptions.imagePullPolicy", "Always", "autoscaler", _struct("autoscalerOptions", "imagePullPolicy", "Always")),
    _s("autoscalerOptions.resources", "1 CPU, 1Gi", "autoscaler", _struct("autoscalerOptions", "resources", AUTOSCALER_RESOURCES)),
    _s("autoscalerOptions.securityContext", "allowPrivilegeEscalation false", "autoscaler",
       _struct("autoscalerOptions", "securityContext", {"allowPrivilegeEscalation": False})),
    _s("autoscalerOptions.upscalingMode", "Aggressive", "autoscaler", _struct("autoscalerOptions", "upscalingMode", "Aggressive")),
    _s("autoscalerOptions.version", "v2", "autoscaler", _struct("autoscalerOptions", "version", "v2")),
    _s("autoscalerOptions.version", "v2", "plain", _struct("autoscalerOptions", "version", "v2")),
    _s("autoscalerOptions.volumeMounts", "a mount", "autoscaler",
       _struct("autoscalerOptions", "volumeMounts", [{"name": "scratch", "mountPath": "/scratch"}])),
    _s("enableInTreeAutoscaling", "true", "plain", _set(_spec, "enableInTreeAutoscaling", True)),
    _s("gcsFaultToleranceOptions.externalStorageNamespace", "ns-1", "GCS FT",
       _struct("gcsFaultToleranceOptions", "externalStorageNamespace", "ns-1")),
    _s("gcsFaultToleranceOptions.redisAddress", "redis:6379", "plain",
       _struct("gcsFaultToleranceOptions", "redisAddress", "redis:6379")),
    _s("gcsFaultToleranceOptions.redisAddress", "another Redis", "GCS FT",
       _struct("gcsFaultToleranceOptions", "redisAddress", "redis-2:6379")),
    _s("gcsFaultToleranceOptions.redisPassword", "a value", "GCS FT",
       _struct("gcsFaultToleranceOptions", "redisPassword", {"value": "pw"})),
    _s("gcsFaultToleranceOptions.redisUsername", "a value", "GCS FT",
       _struct("gcsFaultToleranceOptions", "redisUsername", {"value": "ray"})),
    _s("headServiceAnnotations", "one annotation", "plain", _set(_spec, "headServiceAnnotations", {"example.com/lb": "internal"})),
    _s("managedBy", "ray.io/kuberay-operator", "plain", _set(_spec, "managedBy", "ray.io/kuberay-operator")),
    _s("rayVersion", "2.52.0 → 2.52.1", "plain", _set(_spec, "rayVersion", "2.52.1")),
    _s("rayVersion", "2.52.0 → 2.53.0", "plain", _set(_spec, "rayVersion", "2.53.0")),
    _s("suspend", "true", "plain", _set(_spec, "suspend", True)),
    _s("upgradeStrategy.type", "Recreate", "plain", _struct("upgradeStrategy", "type", "Recreate")),
    # --- the head group
    _s(H + "enableIngress", "true", "plain", _set(_head, "enableIngress", True)),
    _s(H + "headService.apiVersion", "v1", "plain", _head_service("apiVersion", "v1")),
    _s(H + "headService.kind", "Service", "plain", _head_service("kind", "Service")),
    _s(H + "headService.metadata", "a name", "plain", _head_service("metadata", lambda d: {"name": f"{d['metadata']['name']}-svc2"})),
    _s(H + "headService.metadata", "a name", "head init container",
       _head_service("metadata", lambda d: {"name": f"{d['metadata']['name']}-svc2"})),
    _s(H + "headService.metadata", "a label", "plain", _head_service("metadata", {"labels": {"team": "ml"}})),
    _s(H + "headService.spec", "sessionAffinity ClientIP", "plain", _head_service("spec", {"sessionAffinity": "ClientIP"})),
    _s(H + "headService.status", "a load balancer", "plain", _head_service("status", {"loadBalancer": {}})),
    _s(H + "labels", "team: ml", "plain", _set(_head, "labels", {"team": "ml"})),
    _s(H + "rayStartParams", "num-cpus: 2", "plain", _set(_head, "rayStartParams", {"num-cpus": "2"})),
    _s(H + "rayStartParams", "num-cpus: 1, as derived", "plain", _set(_head, "rayStartParams", {"num-cpus": "1"})),
    _s(H + "rayStartParams", "port: 6380", "plain", _set(_head, "rayStartParams", {"port": "6380"})),
    _s(H + "rayStartParams", "block: false", "plain", _set(_head, "rayStartParams", {"block": "false"})),
    _s(H + "resources", "custom: 1", "plain", _set(_head, "resources", {"custom": "1"})),
    _s(H + "serviceType", "NodePort", "plain", _set(_head, "serviceType", "NodePort")),
    # --- a worker group
    _s(W + "groupName", "a → c", "plain", _set(_a, "groupName", "c")),
    _s(W + "idleTimeoutSeconds", "60", "plain", _set(_a, "idleTimeoutSeconds", 60)),
    _s(W + "idleTimeoutSeconds", "60", "autoscaler", _set(_a, "idleTimeoutSeconds", 60)),
    _s(W + "idleTimeoutSeconds", "60", "autoscaler v2", _set(_a, "idleTimeoutSeconds", 60)),
    _s(W + "labels", "team: ml", "plain", _set(_a, "labels", {"team": "ml"})),
    _s(W + "maxReplicas", "3 → 5", "plain", _set(_a, "maxReplicas", 5)),
    _s(W + "minReplicas", "0 → 1", "plain", _set(_a, "minReplicas", 1)),
    _s(W + "numOfHosts", "1 → 2", "plain", _set(_a, "numOfHosts", 2)),
    _s(W + "rayStartParams", "num-cpus: 2", "plain", _set(_a, "rayStartParams", {"num-cpus": "2"})),
    _s(W + "rayStartParams", "num-cpus: 1, as derived", "plain", _set(_a, "rayStartParams", {"num-cpus": "1"})),
    _s(W + "replicas", "1 → 2", "plain", _set(_a, "replicas", 2)),
    _s(W + "resources", "custom: 1", "plain", _set(_a, "resources", {"custom": "1"})),
    _s(W + "scaleStrategy.workersToDelete", "a pod name", "plain",
       _set(_a, "scaleStrategy", {"workersToDelete": ["no-such-pod"]})),
    _s(W + "suspend", "true", "plain", _set(_a, "suspend", True)),
    # --- a sample of the pod templates
    _s("template: image", "another image (group a)", "plain", lambda d: _ray(_a(d)).update(image="rayproject/ray:2.53.0")),
    _s("template: env", "one more variable (head)", "plain",
       lambda d: _ray(_head(d)).setdefault("env", []).append({"name": "EXTRA", "value": "1"})),
    _s("template: resources", "100m → 0.1 (the same quantity)", "plain",
       lambda d: _ray(_a(d))["resources"]["requests"].update(cpu="0.1")),
    _s("template: tolerations", "one toleration (group a)", "plain",
       lambda d: _pod(_a(d)).update(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])),
    _s("template: metadata.labels", "team: ml (group a)", "plain",
       lambda d: _a(d)["template"].setdefault("metadata", {}).update(labels={"team": "ml"})),
    _s("template: metadata.annotations", "one annotation (head)", "plain",
       lambda d: _head(d)["template"].setdefault("metadata", {}).update(annotations={"example.com/owner": "ml"})),
    _s("template: metadata.name", "a name (group a)", "plain",
       lambda d: _a(d)["template"].setdefault("metadata", {}).update(name="fixed-name")),
    _s("template: restartPolicy", "Never (group a)", "plain", lambda d: _pod(_a(d)).update(restartPolicy="Never")),
    # --- the RayCluster annotations the pod builder reads
    _s("metadata: ray.io/ft-enabled", "true", "plain", _annotation("ray.io/ft-enabled", "true")),
    _s("metadata: ray.io/overwrite-container-cmd", "true", "plain", _annotation("ray.io/overwrite-container-cmd", "true")),
]

# CI's sample (quick mode): one of each kind of answer, a few minutes at most
QUICK = (
    "autoscalerOptions.idleTimeoutSeconds | 60 → 300 | autoscaler",
    "autoscalerOptions.image | another image | autoscaler",
    "autoscalerOptions.image | another image | plain",
    "rayVersion | 2.52.0 → 2.53.0 | plain",
    "headServiceAnnotations | one annotation | plain",
    H + "headService.metadata | a name | plain",
    H + "rayStartParams | block: false | plain",
    W + "idleTimeoutSeconds | 60 | plain",
    W + "replicas | 1 → 2 | plain",
    "template: image | another image (group a) | plain",
    "template: resources | 100m → 0.1 (the same quantity) | plain",
    "metadata: ray.io/ft-enabled | true | plain",
)


# Disagreements left, each with why (docs/pod-fields.md names them too): sample key -> why
_DERIVED = ("the operator derives num-cpus 1 from the Ray container's CPU request (100m, rounded up: "
            "generateRayStartCommand) when rayStartParams name none: the value written equals the derived one. "
            "raygitops hashes rayStartParams as written, so it recreates for a change the pods do not show")
KNOWN: dict[str, str] = {
    H + "rayStartParams | num-cpus: 1, as derived | plain": _DERIVED,
    W + "rayStartParams | num-cpus: 1, as derived | plain": _DERIVED,
}


def sample(key: str) -> Sample:
    (found,) = [s for s in SAMPLES if s.key == key]
    return found


def cluster(name: str, context: str, change: Sample | None = None) -> dict[str, Any]:
    doc = base_doc(name)
    CONTEXTS[context](doc)
    if change is not None:
        change.apply(doc)
    return doc


def in_schema(path: str, spec_schema: dict[str, Any]) -> bool:
    """Whether a sample's field exists in a CRD (a template or metadata sample always does)."""
    if ":" in path:
        return True
    return path in fields(spec_schema) or any(f.startswith(path + ".") for f in fields(spec_schema))


def context_fields(context: str) -> list[str]:
    """The fields (paths of :func:`fields`) a context sets beyond the plain cluster."""

    def flat(node: Any, prefix: str, depth: int) -> dict[str, Any]:
        if not isinstance(node, dict) or depth > STRUCT_DEPTH:
            return {prefix.rstrip("."): node}
        out: dict[str, Any] = {}
        for name, child in node.items():
            if name != "template":
                out.update(flat(child, f"{prefix}{name}.", depth + 1))
        return out

    plain, other = flat(cluster("c", "plain")["spec"], "", 0), flat(cluster("c", context)["spec"], "", 0)
    return sorted(p for p in other if other[p] != plain.get(p))


def applies(s: Sample, spec_schema: dict[str, Any]) -> bool:
    """Whether an operator with this CRD can be asked ``s``: its field and its context's exist
    (an older CRD lacks e.g. ``autoscalerOptions.version``, the "autoscaler v2" context)."""
    return all(in_schema(p, spec_schema) for p in [s.path, *context_fields(s.context)])


# ---------------------------------------------------------------------------------------------
# Pods as the operator built them

# per-pod identities the 1.6 operator writes with the RayMultiHostIndexing gate (on by default)
IDENTITY_LABELS = ("ray.io/worker-group-replica-index", "ray.io/worker-group-replica-name", "ray.io/replica-host-index")
OPERATOR_BOOKKEEPING = ("ray.io/upgrade-strategy-recreate-hash",)  # its spec hash, on the 1.6 head pod
TOKEN_VOLUME = re.compile(r"kube-api-access-[a-z0-9]+")


RAY_START = re.compile(r"(ray start)((?:[ \t]+-[^\s;]+)+)")


def _ray_start_sorted(text: str) -> str:
    """The flags of a ``ray start`` command line in sorted order: KubeRay 1.1 and 1.2 write
    them in a Go map's order, different from one pod to the next (1.3 sorts them)."""
    return RAY_START.sub(lambda m: m.group(1) + "  " + "  ".join(sorted(m.group(2).split())), text)


def shape(pod: dict[str, Any], cluster_name: str, cluster_uid: str) -> str:
    """A pod as comparable text: names, node placement, the ServiceAccount token volume, the
    per-pod identity labels and the operator's spec hash aside, ``ray start``'s flags sorted;
    the cluster's name and uid replaced, so that two clusters' pods compare."""
    meta = pod["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in IDENTITY_LABELS}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in OPERATOR_BOOKKEEPING and not k.startswith("raygitops.dev/")}
    spec = copy.deepcopy(pod["spec"])
    for key in ("nodeName",):
        spec.pop(key, None)
    spec["volumes"] = [v for v in spec.get("volumes") or [] if not TOKEN_VOLUME.fullmatch(v["name"])]
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            container["volumeMounts"] = [m for m in container.get("volumeMounts") or []
                                         if not TOKEN_VOLUME.fullmatch(m["name"])]
            for words in ("command", "args"):
                if container.get(words):
                    container[words] = [_ray_start_sorted(w) for w in container[words]]
            for env in container.get("env") or []:
                if "value" in env:
                    env["value"] = _ray_start_sorted(env["value"])
    text = json.dumps({"labels": labels, "annotations": annotations, "finalizers": meta.get("finalizers"),
                       "spec": spec}, sort_keys=True)
    return text.replace(cluster_uid, "<uid>").replace(cluster_name, "<cluster>")


def group_of(pod: dict[str, Any]) -> str:
    labels = pod["metadata"].get("labels") or {}
    return "head" if labels.get("ray.io/node-type") == "head" else f"worker:{labels.get('ray.io/group')}"


def shapes(pods: list[dict[str, Any]], cluster_name: str, cluster_uid: str) -> dict[str, frozenset[str]]:
    """Group -> the distinct pod shapes it has (how many of each is scaling, not shape)."""
    out: dict[str, set[str]] = {}
    for pod in pods:
        out.setdefault(group_of(pod), set()).add(shape(pod, cluster_name, cluster_uid))
    return {k: frozenset(v) for k, v in out.items()}


REFUSED = "refused"
IDENTITY = "identity"
NO_PODS = "no pods"
# render's one line for a cluster the target operator refuses (model/validation)
_REFUSAL = re.compile(r"refuses this RayCluster: (.*) \((\w+), \S+:\d+ at v[0-9.]+\)$")


def compare(base: dict[str, frozenset[str]], changed: dict[str, frozenset[str]]) -> tuple[str, ...]:
    """The groups whose pods differ (a group with pods on one side only is a count, not a
    shape: suspended, scaled to zero; left out)."""
    return tuple(sorted(g for g in set(base) & set(changed) if base[g] != changed[g]))


def verdict_text(groups: tuple[str, ...] | str) -> str:
    """``same pods`` / ``head, worker:a`` / ``refused: ...`` as the table shows it."""
    if isinstance(groups, str):
        return groups
    return ", ".join(g.replace("worker:", "") for g in groups) if groups else "same pods"


# ---------------------------------------------------------------------------------------------
# What raygitops predicts (in-process render and diff: the same code as `raygitops diff`)


@dataclass(frozen=True)
class Answer:
    """What a change does: ``text`` as the table shows it (``same pods``, ``head, a``,
    ``refused (validateWorkerGroupIdleTimeout)``, ``identity``), and a refusal's message."""

    text: str
    message: str | None = None


def predict(s: Sample, operator: str) -> Answer:
    """What ``raygitops diff`` says of the change ``s`` with ``kuberayVersion`` = ``operator``,
    under the opt-in (its class is then recreate exactly when a group's pods change): the
    groups whose hash moved, or the refusal render reports."""
    import yaml

    from raygitops.errors import RaygitopsError
    from raygitops.preview.impact import classify
    from raygitops.render.renderer import render_documents
    from raygitops.sources.settings import Settings
    from raygitops.sources.yamlio import load_documents

    settings = Settings(kuberay_version=operator.lstrip("v"))

    def render(change: Sample | None):
        doc = cluster("oracle", s.context, change)
        doc["metadata"]["annotations"][STRATEGY_ANNOTATION] = "Recreate"
        return render_documents(load_documents(yaml.safe_dump(doc), "c.yaml"), settings, "ns")

    base = render(None)  # every context is a cluster the operator accepts
    try:
        head = render(s)
    except RaygitopsError as err:
        match = _REFUSAL.search(str(err))
        assert match, f"{s.key}: {err}"
        return Answer(f"{REFUSED} ({match.group(2)})", match.group(1))
    if s.path == W + "groupName":
        return Answer(IDENTITY)
    (impact,) = classify(base, head).clusters
    groups = tuple(sorted(g.group for g in impact.groups if g.change == "changed"))
    assert (impact.klass == "recreate") == bool(groups), (s.key, impact.klass, groups)
    if impact.pods_total.is_zero:
        return Answer(NO_PODS)
    return Answer(verdict_text(groups))


# ---------------------------------------------------------------------------------------------
# The documented table


def documented() -> dict[tuple[str, str], str]:
    """(sample key, operator) -> the measured verdict, from the table in docs/pod-fields.md."""
    table = DOC.read_text().split(MARK)[1]
    rows = [r for r in table.strip().splitlines() if r.startswith("|")]
    if not rows:
        return {}
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    operators = [h.split()[-1] for h in header[3:]]
    out = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        key = " | ".join(c.strip("`") for c in cells[:3])
        for operator, cell in zip(operators, cells[3:], strict=True):
            out[(key, operator)] = cell.split(" ⚠")[0]
    return out


def table(measured: dict[tuple[str, str], str], predicted: dict[tuple[str, str], str],
          operators: tuple[str, ...]) -> str:
    """The Markdown table docs/pod-fields.md holds between its markers: per sample and
    operator, the pods the operator built (``same pods``, the groups whose pods differ,
    ``refused: <rule>``), and where ``raygitops diff`` says otherwise, what it says."""
    head = ["field", "change", "context", *[f"KubeRay {o}" for o in operators]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in SAMPLES:
        cells = []
        for o in operators:
            cell = measured.get((s.key, o), "not in this CRD")
            if (s.key, o) in predicted and predicted[s.key, o] != cell:
                cell += f" ⚠ raygitops: {predicted[s.key, o]}"
            cells.append(cell)
        lines.append(f"| `{s.path}` | {s.change} | {s.context} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
