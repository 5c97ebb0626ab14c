"""The plan: what render tells the PreSync hook, one per namespace (docs/design.md "Hook objects").

It lists every RayCluster of the app in the namespace with its strategy, desired hashes and
desired spec.  Versioned JSON; the hook refuses a plan it does not understand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from raygitops import __version__
from raygitops.model import convert, jobs, podrules, preflight, strategy
from raygitops.model.configrefs import CONFIGMAP, SECRET
from raygitops.errors import RaygitopsError
from raygitops.model.hashing import NEWEST, SCHEME, GroupHashes, HashRules, SpecParts

PLAN_API_VERSION = "raygitops.dev/v1"
PLAN_KIND = "PresyncPlan"
SECRETS_KIND = "PresyncSecrets"


@dataclass(frozen=True)
class ClusterPlan:
    """One RayCluster as the app wants it."""

    name: str
    strategy: str
    hashes: GroupHashes
    spec: SpecParts  # the desired spec: the hook's resume writes it
    suspend: bool = False
    owner: str | None = None
    # The applied spec keeps ``upgradeStrategy.type: Recreate``: a KubeRay >= 1.6 operator
    # recreates the pods itself when its own spec hash changes (docs/kuberay-1.6.md).
    native: bool = False
    # how ``hashes`` were made (the plan's hashIgnore and podRules, h1 for a native cluster;
    # not written per cluster): the hook hashes a live spec with the same rules
    rules: HashRules = field(default=NEWEST, compare=False)
    # the RayCluster annotations the pod builder reads (podrules.POD_ANNOTATIONS), as desired
    pod_annotations: dict[str, str] = field(default_factory=dict)
    # ReplaceGroups only: how many pods of a changed group may be missing at once ("2", "25%"),
    # and per worker group where it differs
    max_unavailable: str | None = None
    max_unavailable_by_group: dict[str, str] = field(default_factory=dict)
    # config hashes by group key ("head", "worker:<name>"), and the app's ConfigMaps the
    # groups read (configrefs): the hook makes their content live before new pods start;
    # the same for Secrets (their content reaches the hook in a Secret, never in the plan)
    config: dict[str, str] = field(default_factory=dict)
    config_maps: tuple[str, ...] = ()
    secret_config: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    # what a cycle does about running Ray jobs (model/jobs.py), and where it asks the head
    # (None: KubeRay's default head service, <name>-head-svc, port "dashboard")
    jobs_policy: jobs.Policy = field(default_factory=jobs.Policy)
    dashboard: jobs.Dashboard | None = None
    # whether a cycle checks first that the new pods can come up, and what a check the hook
    # cannot make does (model/preflight.py)
    preflight_policy: preflight.Policy = field(default_factory=preflight.Policy)

    def head_dashboard(self) -> jobs.Dashboard:
        """Where the hook asks this cluster's head for its running jobs."""
        return self.dashboard or jobs.Dashboard(f"{self.name}-head-svc")

    @property
    def asks(self) -> jobs.Dashboard | None:
        """The head a cycle on this cluster asks for running jobs (the hook's Role then lets it
        reach that dashboard through the head service's proxy); None when it asks none."""
        if strategy.opted_in(self.strategy) and not self.owner and self.jobs_policy.action != jobs.PROCEED:
            return self.head_dashboard()
        return None

    def limit_of(self, group: str) -> str:
        """The max-unavailable bound of worker group ``group``."""
        return self.max_unavailable_by_group.get(group) or self.max_unavailable or strategy.DEFAULT_MAX_UNAVAILABLE

    def preflight_needs(self, replaced: tuple[str, ...] | None = None) -> preflight.Needs:
        """What the new pods need: of every group, or under a replacement of the worker groups
        ``replaced`` (names) only; the ConfigMaps and Secrets the hook makes live itself are
        not looked for."""
        made = [(kind, name) for kind, names in self.config_names().items() for name in names]
        groups = None if replaced is None else [f"worker:{g}" for g in replaced]
        return preflight.needs(self.name, self.spec, groups, made, self.preflight_policy.cluster_reads)

    @property
    def preflights(self) -> bool:
        """Whether this cluster's cycles run the preflight (only clusters the hook recreates)."""
        return strategy.opted_in(self.strategy) and not self.owner and not self.native and self.preflight_policy.enabled

    @property
    def looks(self) -> tuple[tuple[str, str], ...]:
        """``(kind, name)`` of what its preflight looks for (the hook's RBAC names them)."""
        return tuple(self.preflight_needs().objects) if self.preflights else ()

    def config_hashes(self) -> dict[str, dict[str, str]]:
        """The desired config hashes by kind (``configrefs.CONFIGMAP``, ``SECRET``), then group key."""
        return {kind: hashes for kind, hashes in ((CONFIGMAP, self.config), (SECRET, self.secret_config)) if hashes}

    def config_names(self) -> dict[str, tuple[str, ...]]:
        """The ConfigMaps and Secrets the cluster's pods read, by kind."""
        return {CONFIGMAP: self.config_maps, SECRET: self.secrets}

    def to_json(self) -> dict[str, Any]:
        data = {
            "name": self.name,
            "strategy": self.strategy,
            "suspend": self.suspend,
            "owner": self.owner,
            "hashes": self.hashes.to_json(),
            "spec": self.spec.to_json(),
        }
        if self.pod_annotations:
            data["podAnnotations"] = dict(sorted(self.pod_annotations.items()))
        if self.native:  # absent otherwise: plans without it keep their digest
            data["nativeRecreate"] = True
        if self.max_unavailable is not None:
            data["maxUnavailable"] = self.max_unavailable
        if self.max_unavailable_by_group:
            data["maxUnavailableByGroup"] = dict(sorted(self.max_unavailable_by_group.items()))
        if self.config:  # absent otherwise: plans without config keep their digest
            data["configHashes"] = dict(sorted(self.config.items()))
            data["configMaps"] = list(self.config_maps)
        if self.secret_config:
            data["secretHashes"] = dict(sorted(self.secret_config.items()))
            data["secrets"] = list(self.secrets)
        if not self.jobs_policy.is_default:  # absent otherwise: plans without it keep their digest
            data["runningJobs"] = {"policy": self.jobs_policy.action,
                                   **({"waitSeconds": self.jobs_policy.wait_seconds} if self.jobs_policy.wait_seconds else {})}
        if not self.preflight_policy.is_default:  # absent otherwise: plans without it keep their digest
            data["preflight"] = {"enabled": self.preflight_policy.enabled, "unknown": self.preflight_policy.unknown,
                                 "clusterReads": self.preflight_policy.cluster_reads}
        if self.dashboard is not None:
            data["dashboard"] = {"service": self.dashboard.service, "port": self.dashboard.port}
        return data

    @property
    def text(self) -> str:
        """Its entry of the plan's JSON (:meth:`Plan.dumps`)."""
        return _compact(self.to_json())

    def packed(self) -> "PackedCluster":
        return PackedCluster(self.name, self.strategy, self.native, self.config_maps, self.secrets, self.text,
                             self.asks, self.preflights, self.looks)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ClusterPlan":
        return cls(
            name=data["name"],
            strategy=data["strategy"],
            hashes=GroupHashes.from_json(data["hashes"]),
            spec=SpecParts.from_json(data["spec"]),
            pod_annotations={str(k): str(v) for k, v in (data.get("podAnnotations") or {}).items()},
            suspend=bool(data.get("suspend", False)),
            owner=data.get("owner"),
            native=data.get("nativeRecreate") is True,
            max_unavailable=_max_unavailable(data),
            max_unavailable_by_group=_max_unavailable_by_group(data),
            config={str(k): str(v) for k, v in (data.get("configHashes") or {}).items()},
            config_maps=tuple(convert.string_list(data.get("configMaps") or [])),
            secret_config={str(k): str(v) for k, v in (data.get("secretHashes") or {}).items()},
            secrets=tuple(convert.string_list(data.get("secrets") or [])),
            jobs_policy=_jobs_policy(data),
            dashboard=_dashboard(data),
            preflight_policy=_preflight(data),
        )


@dataclass(frozen=True)
class PackedCluster:
    """A ClusterPlan as render keeps it: its entry of the plan's JSON as compact text (the
    templates as a string, not Python objects that share the app's documents: a render need
    not hold the app), with the few fields render itself reads."""

    name: str
    strategy: str
    native: bool
    config_maps: tuple[str, ...]
    secrets: tuple[str, ...]
    text: str
    asks: jobs.Dashboard | None = None  # the head the hook asks for running jobs (ClusterPlan.asks)
    preflights: bool = False  # ClusterPlan.preflights
    looks: tuple[tuple[str, str], ...] = ()  # (kind, name) its preflight looks for (the hook's RBAC)

    def to_json(self) -> dict[str, Any]:
        return json.loads(self.text)


# one encoder for every call: json.dumps with options makes a new one each time, which is
# most of the cost of a small cluster's entry
_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _compact(data: Any) -> str:
    """The plan's JSON form (its digest is over these bytes)."""
    return _COMPACT.encode(data)


def _contents(value: Any, what: str, sections: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``configMaps`` of a plan (``sections`` data, binaryData) or ``secrets`` of a secrets
    file (data; and a string ``type``) read back: name -> string maps."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a mapping")
    out = {}
    for name, body in value.items():
        if not isinstance(body, dict) or not isinstance(body.get("type", ""), str) or not all(
                isinstance(body.get(k, {}), dict) and all(isinstance(v, str) for v in body.get(k, {}).values())
                for k in sections):
            raise ValueError(f"{what}[{name!r}] is not {'/'.join(sections)} string maps")
        out[str(name)] = {k: body[k] if k == "type" else dict(body[k])
                          for k in (*sections, "type") if k in body}
    return out


def _jobs_policy(data: dict[str, Any]) -> jobs.Policy:
    """``runningJobs`` of a plan entry, held to render's rules (absent: the default)."""
    value = data.get("runningJobs")
    if value is None:
        return jobs.Policy()
    if not isinstance(value, dict):
        raise ValueError(f"clusters[{data.get('name')}].runningJobs is not a mapping")
    try:
        action = jobs.parse_policy(value.get("policy"))
        wait = None if value.get("waitSeconds") is None else jobs.parse_wait_seconds(value["waitSeconds"])
    except ValueError as err:
        raise ValueError(f"clusters[{data.get('name')}].runningJobs: {err}") from None
    return jobs.Policy(action, wait)


def _preflight(data: dict[str, Any]) -> preflight.Policy:
    value = data.get("preflight")
    if value is None:
        return preflight.Policy()
    flags = (value.get("enabled", True), value.get("clusterReads", True)) if isinstance(value, dict) else ()
    if not flags or not all(isinstance(f, bool) for f in flags):
        raise ValueError(f"clusters[{data.get('name')}].preflight is not {{enabled, unknown, clusterReads}}")
    try:
        return preflight.Policy(flags[0], preflight.parse_unknown(value.get("unknown", preflight.FAIL)), flags[1])
    except ValueError as err:
        raise ValueError(f"clusters[{data.get('name')}].preflight.unknown: {err}") from None


def _dashboard(data: dict[str, Any]) -> jobs.Dashboard | None:
    value = data.get("dashboard")
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("service"), str) or not (
            value.get("port") is None or isinstance(value.get("port"), str)):
        raise ValueError(f"clusters[{data.get('name')}].dashboard is not {{service, port}} strings")
    return jobs.Dashboard(value["service"], value.get("port"))


def _max_unavailable_by_group(data: dict[str, Any]) -> dict[str, str]:
    value = data.get("maxUnavailableByGroup") or {}
    if not isinstance(value, dict):
        raise ValueError(f"clusters[{data.get('name')}].maxUnavailableByGroup is not a mapping")
    try:
        return {str(group): strategy.parse_max_unavailable(limit) for group, limit in value.items()}
    except ValueError as err:
        raise ValueError(f"clusters[{data.get('name')}].maxUnavailableByGroup: {err}") from None


def _max_unavailable(data: dict[str, Any]) -> str | None:
    """A plan read back is held to render's bounds (a hand-edited plan is input too)."""
    if data.get("maxUnavailable") is None:
        return None
    try:
        return strategy.parse_max_unavailable(data["maxUnavailable"])
    except ValueError as err:
        raise ValueError(f"clusters[{data.get('name')}].maxUnavailable: {err}") from None


@dataclass(frozen=True)
class HookSettings:
    """How the hook runs; defaults for its CLI flags."""

    drain_grace_seconds: int = 60
    timeout_seconds: int = 900
    max_parallel: int = 4
    wait_ready: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "drainGraceSeconds": self.drain_grace_seconds,
            "timeoutSeconds": self.timeout_seconds,
            "maxParallel": self.max_parallel,
            "waitReady": self.wait_ready,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "HookSettings":
        """The bounds render enforces (raygitops.model.convert) hold for a plan read back too."""
        fields = {"drainGraceSeconds": ("drain_grace_seconds", convert.integer_in(*convert.DRAIN_GRACE_SECONDS)),
                  "timeoutSeconds": ("timeout_seconds", convert.integer_in(*convert.TIMEOUT_SECONDS)),
                  "maxParallel": ("max_parallel", convert.integer_in(*convert.MAX_PARALLEL)),
                  "waitReady": ("wait_ready", convert.boolean)}
        values = {}
        for key, (attr, check) in fields.items():
            if key in data:
                try:
                    values[attr] = check(data[key])
                except ValueError as err:
                    raise ValueError(f"settings.{key}: {err}") from None
        return cls(**values)


@dataclass(frozen=True)
class Plan:
    """Every RayCluster of one namespace of the app."""

    # None: the namespace the hook runs in (rendered for Helm, which places namespace-less
    # objects in the release namespace without telling render which one)
    namespace: str | None
    # ClusterPlans when the hook reads a plan back; render makes it of PackedClusters
    clusters: Sequence[ClusterPlan | PackedCluster] = field(default_factory=list)
    settings: HookSettings = field(default_factory=HookSettings)
    app: str | None = None
    # the template keys the desired hashes leave out, and the operator line whose pod rules they
    # follow (HashRules): the hook hashes live specs alike
    hash_ignore: tuple[str, ...] = ()
    pod_rules: str = NEWEST.pods
    # the content (data, binaryData) of the app's ConfigMaps its clusters' pods read, by name
    config_maps: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the same of its Secrets (data, type): never written into the plan's JSON; render puts
    # it in the hook's own Secret (secrets_json), the hook reads it with --secrets
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)

    def _fields(self) -> dict[str, Any]:
        """Every field of the plan's JSON but ``clusters``."""
        data = {
            "apiVersion": PLAN_API_VERSION,
            "kind": PLAN_KIND,
            "scheme": SCHEME,
            "generatedBy": f"raygitops {__version__}",
            "app": self.app,
            "namespace": self.namespace,
            "hashIgnore": list(self.hash_ignore),
            "podRules": self.pod_rules,
            "settings": self.settings.to_json(),
        }
        if self.config_maps:
            data["configMaps"] = self.config_maps
        return data

    def to_json(self) -> dict[str, Any]:
        return {**self._fields(), "clusters": [c.to_json() for c in self.clusters]}

    def dumps(self) -> str:
        """``to_json()`` as compact JSON with sorted keys, made from each cluster's own text
        (a PackedCluster's is kept, not parsed again)."""
        data = self._fields()
        before = _compact({k: v for k, v in data.items() if k < "clusters"})
        after = _compact({k: v for k, v in data.items() if k > "clusters"})
        texts = ",".join(c.text for c in self.clusters)
        return f'{before[:-1]},"clusters":[{texts}],{after[1:]}'

    def digest(self) -> str:
        """Short content hash: names a Flux hook Job, which must change when the plan does."""
        return hashlib.sha256(self.dumps().encode()).hexdigest()[:10]

    @classmethod
    def from_json(cls, data: Any) -> "Plan":
        if not isinstance(data, dict) or data.get("kind") != PLAN_KIND:
            raise RaygitopsError(f"not a raygitops plan (kind {PLAN_KIND} expected)")
        if data.get("apiVersion") != PLAN_API_VERSION:
            raise RaygitopsError(
                f"plan apiVersion {data.get('apiVersion')!r} is not {PLAN_API_VERSION}: "
                "render and hook versions differ"
            )
        try:
            ignore = tuple(convert.string_list(data.get("hashIgnore") or []))
            pods = data.get("podRules")  # absent: a plan of scheme h1 (before raygitops knew pod rules)
            if pods is not None and pods not in podrules.BY_NAME:
                raise ValueError(f"podRules {pods!r} is not one of {', '.join(podrules.BY_NAME)}")
            rules = HashRules(ignore, pods or NEWEST.pods, legacy=pods is None)
            clusters = [ClusterPlan.from_json(c) for c in data.get("clusters") or []]
            return cls(
                namespace=None if data["namespace"] is None else convert.namespace(data["namespace"]),
                clusters=[dataclasses.replace(c, rules=rules.as_legacy() if c.native else rules) for c in clusters],
                settings=HookSettings.from_json(data.get("settings") or {}),
                app=data.get("app"),
                hash_ignore=ignore,
                pod_rules=rules.pods,
                config_maps=_contents(data.get("configMaps") or {}, "configMaps", ("data", "binaryData")),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise RaygitopsError(f"malformed plan: {type(err).__name__}: {err}") from None


def secrets_json(plan: Plan) -> str:
    """The hook's secrets file for ``plan``: the content of the Secrets its clusters' pods
    read, by name (the hook's own Secret carries it; the plan only names them)."""
    return json.dumps({"apiVersion": PLAN_API_VERSION, "kind": SECRETS_KIND, "namespace": plan.namespace,
                       "secrets": plan.secrets}, sort_keys=True, separators=(",", ":"))


def secrets_from_json(data: Any) -> tuple[str | None, dict[str, dict[str, Any]]]:
    if not isinstance(data, dict) or data.get("kind") != SECRETS_KIND or data.get("apiVersion") != PLAN_API_VERSION:
        raise RaygitopsError(f"not a raygitops secrets file ({PLAN_API_VERSION} {SECRETS_KIND} expected)")
    try:
        namespace = None if data.get("namespace") is None else convert.namespace(data["namespace"])
        return namespace, _contents(data.get("secrets") or {}, "secrets", ("data",))
    except ValueError as err:
        raise RaygitopsError(f"malformed secrets file: {err}") from None


def _shown(namespace: str | None) -> str:
    return namespace or "(the hook's own)"


def with_secrets(plans: list[Plan], files: list[tuple[str, str | None, dict[str, dict[str, Any]]]]) -> list[Plan]:
    """Each plan with the Secret content of the secrets file of its namespace (``files``:
    path, namespace, content). Fails closed: a plan naming a Secret the files do not carry
    would let new pods start with the old content under the new hash."""
    by_namespace: dict[str | None, dict[str, dict[str, Any]]] = {}
    for path, namespace, content in files:
        if namespace in by_namespace or namespace not in {p.namespace for p in plans}:
            raise RaygitopsError(f"secrets file for namespace {_shown(namespace)}: "
                                 + ("given twice" if namespace in by_namespace else "no --plan for it"), path)
        by_namespace[namespace] = content
    out = []
    for plan in plans:
        content = by_namespace.get(plan.namespace, {})
        missing = sorted({s for c in plan.clusters for s in c.secrets} - set(content))
        if missing:
            raise RaygitopsError(f"the plan of namespace {_shown(plan.namespace)} names Secret "
                                 f"{', '.join(missing)} but no --secrets file carries its content: refusing "
                                 "(new pods would start with the old content)")
        out.append(dataclasses.replace(plan, secrets=content))
    return out
