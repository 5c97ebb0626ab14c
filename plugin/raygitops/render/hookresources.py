"""The PreSync hook objects render appends for a namespace (docs/design.md "Hook objects").

ServiceAccount, Role and RoleBinding (waves -3..-2; and a ClusterRole and ClusterRoleBinding
for the preflight's reads of nodes, PriorityClasses and RuntimeClasses), the plan ConfigMap
(-1; and a Secret beside it when pods read Secrets of the app) and the Job (0),
each an Argo CD PreSync hook deleted before it is created again, or for Helm (``--helm``) a
pre-install/pre-upgrade hook with the same order and policy (Helm 4 reads hooks from the
post-renderer's output; Helm 3 applies them as plain objects).  Least privilege: the Role
allows only what the recreate cycle does, on the app's own clusters where RBAC can say so.
The names are the app's own (:mod:`raygitops.model.hooknames`): apps that share a namespace
never share a hook object.
"""

from __future__ import annotations

import base64
import gzip
from typing import Any

from raygitops.errors import RaygitopsError
from raygitops.model import preflight
from raygitops.model.configrefs import CONFIGMAP, RESOURCES, SECRET
from raygitops.model.hooknames import LEGACY_OBJECTS, HookNames, hook_names
from raygitops.model.sizes import MAX_DATA_BYTES, largest, total_size
from raygitops.model.plan import Plan, secrets_json
from raygitops.model.names import APP_LABEL, HOOK_LABEL, TRACK_ANNOTATION
from raygitops.sources.settings import Settings

PLAN_KEY = "plan.json"
PLAN_MOUNT = "/plan"
# The content of the Secrets the clusters' pods read (presync.configlive), when they read any
# is in a Secret of its own (HookNames.plan_secrets), never the plan ConfigMap.
SECRETS_KEY = "secrets.json"
SECRETS_MOUNT = "/plan-secrets"
HOOK_UID = 999
HASH_CONFIG_OFF = f'{TRACK_ANNOTATION}: "false"'
# Above this the plan is gzip'ed into binaryData: a ConfigMap holds at most 1 MiB.
PLAN_COMPRESS_BYTES = 512 * 1024
# The Job outlives the hook's own timeout by this much, so the hook reports before Kubernetes kills it.
DEADLINE_MARGIN_SECONDS = 120
# SIGTERM to exit: the hook resumes what it suspended within 20 s of a signal
# (presync.recovery.AFTER_STOP_SECONDS) plus one watch call (5 s); the kubelet waits this
# long before SIGKILL.
TERMINATION_GRACE_SECONDS = 45

# Every hook: the namespace's RayClusters listed (one LIST decides them all), its pods (their
# names are the operator's: RBAC cannot name them), Events.
RULES: list[dict[str, Any]] = [
    {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]
# Read, watched (by metadata.name, which RBAC checks against resourceNames) and written: the
# app's own RayClusters only.
CLUSTER_VERBS = ["get", "watch", "patch"]
LABELS = {
    "app.kubernetes.io/name": "raygitops",
    "app.kubernetes.io/component": "presync-hook",
    HOOK_LABEL[0]: HOOK_LABEL[1],
}


def _cluster_rules(plan: Plan) -> list[dict[str, Any]]:
    return [{"apiGroups": ["ray.io"], "resources": ["rayclusters"],
             "resourceNames": sorted({c.name for c in plan.clusters}), "verbs": list(CLUSTER_VERBS)}]


def _legacy_rules(names: HookNames) -> list[dict[str, Any]]:
    """Read and delete the fixed-name hook objects, by name only; the old Secret is deleted,
    never read (it carries the content of Secrets, maybe of another app of the namespace):
    it goes with the old ConfigMap, which the same render made."""
    if names.legacy:
        return []
    return [{"apiGroups": [group], "resources": [resource], "resourceNames": [name],
             "verbs": ["delete"] if resource == RESOURCES[SECRET] else ["get", "delete"]}
            for group, resource, name in LEGACY_OBJECTS]


def _config_rules(plan: Plan) -> list[dict[str, Any]]:
    """The ConfigMaps and Secrets the hook makes live before new pods start
    (presync.configlive): read and patch only those by name; create (which RBAC cannot limit
    by name) for one not there yet."""
    rules = []
    for kind, names in ((CONFIGMAP, plan.config_maps), (SECRET, plan.secrets)):
        if names:
            rules += [{"apiGroups": [""], "resources": [RESOURCES[kind]], "resourceNames": sorted(names),
                       "verbs": ["get", "patch"]},
                      {"apiGroups": [""], "resources": [RESOURCES[kind]], "verbs": ["create"]}]
    return rules


def _jobs_rules(plan: Plan) -> list[dict[str, Any]]:
    """GET through the API server's service proxy, to the dashboard port of the head Service
    of each cluster whose cycle asks its head for running jobs (model/jobs.py): that Service
    and port by name only (the name RBAC sees is ``<service>:<port>``), nothing else."""
    names = sorted({c.asks.proxy_name for c in plan.clusters if c.asks is not None and c.asks.port is not None})
    return [{"apiGroups": [""], "resources": ["services/proxy"], "resourceNames": names, "verbs": ["get"]}] if names else []


def _preflight_rules(plan: Plan, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """GET of the objects of ``kinds`` the clusters' preflights look for (model/preflight.py),
    by name only: never every Secret of the namespace."""
    names: dict[str, set[str]] = {}
    for cluster in plan.clusters:
        for kind, name in cluster.looks:
            if kind in kinds:
                names.setdefault(kind, set()).add(name)
    return [{"apiGroups": [preflight.RESOURCES[kind][0]], "resources": [preflight.RESOURCES[kind][2]],
             "resourceNames": sorted(names[kind]), "verbs": ["get"]} for kind in kinds if kind in names]


def cluster_role_name(plan: Plan) -> str:
    """One per namespace and app (the Role's name, which is the app's, and the namespace)."""
    return f"{hook_names(plan.app).presync}-{plan.namespace}"


def _cluster_reads(plan: Plan, settings: Settings) -> list[dict[str, Any]]:
    """A ClusterRole and its binding when a cluster of the plan preflights: the nodes (their
    allocatable, labels, taints) and the PriorityClasses and RuntimeClasses by name; none
    when the namespace is left to Helm (the binding could not name the ServiceAccount's)."""
    if plan.namespace is None or not any(c.preflights for c in plan.clusters):
        return []
    name = cluster_role_name(plan)
    meta = _meta(name, plan, -3, settings)
    del meta["namespace"]
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                   *_preflight_rules(plan, preflight.CLUSTER_SCOPED)]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {**meta, "annotations": _hook_annotations(-2, settings.helm)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": hook_names(plan.app).presync, "namespace": plan.namespace}]},
    ]


def _hook_annotations(wave: int, helm: bool) -> dict[str, str]:
    if helm:
        return {
            "helm.sh/hook": "pre-install,pre-upgrade",
            "helm.sh/hook-delete-policy": "before-hook-creation",
            "helm.sh/hook-weight": str(wave),
        }
    return {
        "argocd.argoproj.io/hook": "PreSync",
        "argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation",
        "argocd.argoproj.io/sync-wave": str(wave),
    }


def _labels(names: HookNames) -> dict[str, str]:
    return {**LABELS, APP_LABEL: names.app_key} if names.app_key else dict(LABELS)


def _meta(name: str, plan: Plan, wave: int, settings: Settings) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if plan.namespace:  # else the release namespace, where Helm puts it
        meta["namespace"] = plan.namespace
    meta["labels"] = _labels(hook_names(plan.app))
    meta["annotations"] = _hook_annotations(wave, settings.helm)
    return meta


def _packed(key: str, text: str) -> tuple[str, bytes]:
    """A file for the Job: ``key`` as it is, or gzip'ed as ``key.gz`` when large (a
    ConfigMap or Secret holds at most 1 MiB; the hook reads either, presync.planfiles)."""
    if len(text.encode()) > PLAN_COMPRESS_BYTES:
        return key + ".gz", gzip.compress(text.encode(), mtime=0)
    return key, text.encode()


def _too_big(what: str, plan: Plan, key: str, raw: bytes, carried: dict[str, dict[str, Any]], kind: str
             ) -> RaygitopsError:
    """The error for a hook object over the API server's limit, naming what made it big: the
    content of the app's ConfigMaps (Secrets) it carries, else the clusters it lists."""
    where = f"namespace {plan.namespace}" if plan.namespace else "the release namespace"
    if carried:
        sizes = {name: total_size({"kind": kind, **body}) for name, body in carried.items()}
        cause = (f"it carries the content of the {kind}s the RayClusters' pods read, so the hook can make them live "
                 f"before new pods start (bytes: {largest(sizes)}): read fewer or smaller {kind}s, or annotate the "
                 f"clusters {HASH_CONFIG_OFF} (their content is then neither hashed nor carried)")
    else:
        cause = f"it lists {len(plan.clusters)} RayClusters with their pod templates: split the app"
    compressed = " compressed" if key.endswith(".gz") else ""
    names = hook_names(plan.app)
    holder = names.plan if kind == CONFIGMAP else names.plan_secrets
    return RaygitopsError(f"the hook's {what} for {where} ({kind} {holder}) would hold {len(raw):,} bytes{compressed}, "
                          f"over the {MAX_DATA_BYTES:,} the API server allows: {cause}")


def _plan_configmap(plan: Plan, settings: Settings) -> dict[str, Any]:
    key, raw = _packed(PLAN_KEY, plan.dumps())
    if len(raw) > MAX_DATA_BYTES:
        raise _too_big("plan", plan, key, raw, plan.config_maps, CONFIGMAP)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(hook_names(plan.app).plan, plan, -1, settings),
        **({"binaryData": {key: base64.b64encode(raw).decode()}} if key.endswith(".gz") else
           {"data": {key: raw.decode()}}),
    }


def _secrets_secret(plan: Plan, settings: Settings) -> dict[str, Any]:
    key, raw = _packed(SECRETS_KEY, secrets_json(plan))
    if len(raw) > MAX_DATA_BYTES:
        raise _too_big("secrets file", plan, key, raw, plan.secrets, SECRET)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(hook_names(plan.app).plan_secrets, plan, -1, settings),
        "type": "Opaque",
        "data": {key: base64.b64encode(raw).decode()},
    }


def _job_name(plan: Plan, settings: Settings) -> str:
    name = hook_names(plan.app).presync
    return f"{name}-{plan.digest()}" if settings.hook_name_suffix else name


def _job(plan: Plan, settings: Settings) -> dict[str, Any]:
    name = _job_name(plan, settings)
    names = hook_names(plan.app)
    args = [
        "presync",
        "--plan", f"{PLAN_MOUNT}/{PLAN_KEY}",
        *(["--secrets", f"{SECRETS_MOUNT}/{SECRETS_KEY}"] if plan.secrets else []),
        "--timeout", str(settings.timeout_seconds),
        "--drain-grace", str(settings.drain_grace_seconds),
        "--max-parallel", str(settings.max_parallel),
        "--wait-ready" if settings.wait_ready else "--no-wait-ready",
        "--log-format", "json",
        # a failed run writes its reason on this Job, where Argo CD's health check shows it
        "--job", name,
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, plan, 0, settings),
        "spec": {
            # No Job retry: a failed hook run fails this sync (docs/presync.md, "A failed
            # recreate fails the sync"); syncing again reruns it.
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.timeout_seconds + DEADLINE_MARGIN_SECONDS,
            "template": {
                "metadata": {"labels": _labels(names)},
                "spec": {
                    "serviceAccountName": names.presync,
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": HOOK_UID,
                        "runAsGroup": HOOK_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "presync",
                            "image": settings.hook_image,
                            "command": ["raygitops"],
                            "args": args,
                            "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                            "securityContext": {
                                "readOnlyRootFilesystem": True,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "128Mi"},
                                "limits": {"memory": "256Mi"},
                            },
                            "volumeMounts": [
                                {"name": "plan", "mountPath": PLAN_MOUNT, "readOnly": True},
                                *([{"name": "secrets", "mountPath": SECRETS_MOUNT, "readOnly": True}]
                                  if plan.secrets else []),
                            ],
                        }
                    ],
                    "volumes": [{"name": "plan", "configMap": {"name": names.plan}},
                                *([{"name": "secrets", "secret": {"secretName": names.plan_secrets}}]
                                  if plan.secrets else [])],
                },
            },
        },
    }


def hook_resources(plan: Plan, settings: Settings) -> list[dict[str, Any]]:
    """The hook objects for ``plan.namespace``, in apply order: five, six when its
    clusters' pods read Secrets of the app, and a ClusterRole and its binding when they
    preflight."""
    names = hook_names(plan.app)
    subject: dict[str, Any] = {"kind": "ServiceAccount", "name": names.presync}
    if plan.namespace:  # else the RoleBinding's own (the release namespace)
        subject["namespace"] = plan.namespace
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(names.presync, plan, -3, settings)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(names.presync, plan, -3, settings),
            "rules": [*(dict(rule) for rule in RULES), *_cluster_rules(plan),
                      # only its own Job, only to write a failure's reason on it
                      {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": [_job_name(plan, settings)],
                       "verbs": ["patch"]},
                      *_config_rules(plan), *_jobs_rules(plan), *_preflight_rules(plan, preflight.NAMESPACED),
                      *_legacy_rules(names)],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(names.presync, plan, -2, settings),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.presync},
            "subjects": [subject],
        },
        *_cluster_reads(plan, settings),
        _plan_configmap(plan, settings),
        *([_secrets_secret(plan, settings)] if plan.secrets else []),
        _job(plan, settings),
    ]
