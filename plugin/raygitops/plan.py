"""The plan: what render tells the PreSync hook, one per namespace (docs/design.md "Hook objects").

It lists every RayCluster of the app in the namespace with its strategy, desired hashes and
desired pod-shaping spec.  Versioned JSON; the hook refuses a plan it does not understand.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raygitops import __version__, convert, strategy
from raygitops.errors import RaygitopsError
from raygitops.hashing import NO_RULES, SCHEME, GroupHashes, HashRules, PodShapingSpec

PLAN_API_VERSION = "raygitops.dev/v1"
PLAN_KIND = "PresyncPlan"


@dataclass(frozen=True)
class ClusterPlan:
    """One RayCluster as the app wants it."""

    name: str
    strategy: str
    hashes: GroupHashes
    pod_spec: PodShapingSpec
    suspend: bool = False
    owner: str | None = None
    # The applied spec keeps ``upgradeStrategy.type: Recreate``: a KubeRay >= 1.6 operator
    # recreates the pods itself when its own spec hash changes (docs/kuberay-1.6.md).
    native: bool = False
    # how ``hashes`` were made (the plan's hashIgnore; not written per cluster): the hook
    # hashes a live spec with the same rules
    rules: HashRules = field(default=NO_RULES, compare=False)
    # ReplaceGroups only: how many pods of a changed group may be missing at once ("2", "25%")
    max_unavailable: str | None = None
    # config hashes by group key ("head", "worker:<name>"), and the app's ConfigMaps the
    # groups read (configrefs): the hook makes their content live before new pods start
    config: dict[str, str] = field(default_factory=dict)
    config_maps: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {
            "name": self.name,
            "strategy": self.strategy,
            "suspend": self.suspend,
            "owner": self.owner,
            "hashes": self.hashes.to_json(),
            "podSpec": self.pod_spec.to_json(),
        }
        if self.native:  # absent otherwise: plans without it keep their digest
            data["nativeRecreate"] = True
        if self.max_unavailable is not None:
            data["maxUnavailable"] = self.max_unavailable
        if self.config:  # absent otherwise: plans without config keep their digest
            data["configHashes"] = dict(sorted(self.config.items()))
            data["configMaps"] = list(self.config_maps)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ClusterPlan":
        return cls(
            name=data["name"],
            strategy=data["strategy"],
            hashes=GroupHashes.from_json(data["hashes"]),
            pod_spec=PodShapingSpec.from_json(data["podSpec"]),
            suspend=bool(data.get("suspend", False)),
            owner=data.get("owner"),
            native=data.get("nativeRecreate") is True,
            max_unavailable=_max_unavailable(data),
            config={str(k): str(v) for k, v in (data.get("configHashes") or {}).items()},
            config_maps=tuple(convert.string_list(data.get("configMaps") or [])),
        )


def _config_maps(value: Any) -> dict[str, dict[str, Any]]:
    """``configMaps`` of a plan read back: name -> {data, binaryData} of string maps."""
    if not isinstance(value, dict):
        raise ValueError("configMaps is not a mapping")
    out = {}
    for name, body in value.items():
        if not isinstance(body, dict) or not all(
                isinstance(body.get(k, {}), dict) and all(isinstance(v, str) for v in body.get(k, {}).values())
                for k in ("data", "binaryData")):
            raise ValueError(f"configMaps[{name!r}] is not data/binaryData string maps")
        out[str(name)] = {k: dict(body[k]) for k in ("data", "binaryData") if k in body}
    return out


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
        """The bounds render enforces (raygitops.convert) hold for a plan read back too."""
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
    clusters: list[ClusterPlan] = field(default_factory=list)
    settings: HookSettings = field(default_factory=HookSettings)
    app: str | None = None
    # the template keys the desired hashes leave out (HashRules): the hook hashes live specs alike
    hash_ignore: tuple[str, ...] = ()
    # the content (data, binaryData) of the app's ConfigMaps its clusters' pods read, by name
    config_maps: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = {
            "apiVersion": PLAN_API_VERSION,
            "kind": PLAN_KIND,
            "scheme": SCHEME,
            "generatedBy": f"raygitops {__version__}",
            "app": self.app,
            "namespace": self.namespace,
            "hashIgnore": list(self.hash_ignore),
            "settings": self.settings.to_json(),
            "clusters": [c.to_json() for c in self.clusters],
        }
        if self.config_maps:
            data["configMaps"] = self.config_maps
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

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
            rules = HashRules(ignore)
            return cls(
                namespace=None if data["namespace"] is None else convert.namespace(data["namespace"]),
                clusters=[dataclasses.replace(ClusterPlan.from_json(c), rules=rules) for c in data.get("clusters") or []],
                settings=HookSettings.from_json(data.get("settings") or {}),
                app=data.get("app"),
                hash_ignore=ignore,
                config_maps=_config_maps(data.get("configMaps") or {}),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise RaygitopsError(f"malformed plan: {type(err).__name__}: {err}") from None


def load_plan(path: str) -> Plan:
    """Read a plan file; ``plan.json.gz`` beside it is read when the ConfigMap had to
    compress a large plan."""
    candidates = [Path(path), Path(path + ".gz")]
    for candidate in candidates:
        if candidate.is_file():
            try:
                raw = candidate.read_bytes()
                if candidate.suffix == ".gz":
                    raw = gzip.decompress(raw)
                return Plan.from_json(json.loads(raw))
            except json.JSONDecodeError as err:
                raise RaygitopsError(f"plan is not JSON: {err.msg}", str(candidate), err.lineno) from None
            except UnicodeDecodeError:
                raise RaygitopsError("plan is not UTF-8 JSON", str(candidate)) from None
            except RecursionError:
                raise RaygitopsError("plan nests too deeply", str(candidate)) from None
            except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
                raise RaygitopsError(f"cannot read the plan: {err}", str(candidate)) from None
            except RaygitopsError as err:
                raise err.located(str(candidate)) from None
    raise RaygitopsError("plan file not found", path)
