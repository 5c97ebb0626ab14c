"""Opt-in: which RayClusters the hook may recreate (docs/design.md "Opt-in").

Pure functions over one parsed object; they return decisions and never touch I/O.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from raygitops.errors import RaygitopsError, closest, printable
from raygitops.model.k8snames import RAY_CLUSTER_SPECS
from raygitops.model.objmeta import annotations, labels, meta, set_annotation
from raygitops.model.names import (
    ANNOTATION_PREFIX,
    CONFIG_HASH_ANNOTATION,
    HASH_ANNOTATION,
    HASHES_ANNOTATION,
    HOOK_OWNED_ANNOTATIONS,
    MAX_UNAVAILABLE_ANNOTATION,
    MAX_UNAVAILABLE_BY_GROUP_ANNOTATION,
    ORIGIN_LABEL,
    RUNNING_JOBS_ANNOTATION,
    RUNNING_JOBS_WAIT_ANNOTATION,
    PREFLIGHT_ANNOTATION,
    PREFLIGHT_UNKNOWN_ANNOTATION,
    SECRET_HASH_ANNOTATION,
    STRATEGY_ANNOTATION,
    TRACK_ANNOTATION,
)
from raygitops.model import jobs, preflight

RECREATE = "Recreate"
REPLACE_GROUPS = "ReplaceGroups"  # only the changed worker groups' pods, in batches (docs/presync.md)
NONE = "None"
STRATEGIES = (RECREATE, NONE)  # the values of KubeRay's own spec.upgradeStrategy.type
ANNOTATION_STRATEGIES = (RECREATE, REPLACE_GROUPS, NONE)
OPTED_IN = (RECREATE, REPLACE_GROUPS)  # the hook acts on the cluster
DEFAULT_MAX_UNAVAILABLE = "100%"
# Where RayJob, RayService and RayCronJob embed a RayCluster spec, under their spec (dotted):
# the kinds whose clusters KubeRay makes and recreates itself, never raygitops.
EMBEDDED_SPEC = {kind: path.removeprefix("spec.") for kind, path in RAY_CLUSTER_SPECS.items() if kind != "RayCluster"}
OWNER_KINDS = tuple(EMBEDDED_SPEC)


def _spec_strategy(spec: Any, where: str = "spec") -> str | None:
    """``upgradeStrategy.type`` of a cluster spec (at field path ``where``), checked."""
    if not isinstance(spec, dict):
        return None
    upgrade = spec.get("upgradeStrategy")
    if upgrade is None:
        return None
    if not isinstance(upgrade, dict):
        raise RaygitopsError(f"{where}.upgradeStrategy is not a mapping", field=f"{where}.upgradeStrategy")
    value = upgrade.get("type")
    if value is None:
        return None
    if value not in STRATEGIES:
        raise RaygitopsError(f"{where}.upgradeStrategy.type {value!r} is not Recreate or None{_did_you_mean(value)}",
                             field=f"{where}.upgradeStrategy.type")
    return value


def opted_in(strategy: str) -> bool:
    """Whether the hook acts on a cluster of this strategy (Recreate or ReplaceGroups)."""
    return strategy in OPTED_IN


def _did_you_mean(value: Any, choices: tuple[str, ...] = STRATEGIES) -> str:
    if not isinstance(value, str):
        return ""
    match = next((s for s in choices if s.lower() == value.strip().lower()), None) or closest(value, choices)
    return f" (did you mean {match}?)" if match else ""


def cluster_strategy(obj: dict[str, Any], keep: bool = False) -> str:
    """Whether raygitops recreates the cluster: the annotation, else ``spec.upgradeStrategy``;
    None if neither.

    With ``keep`` (``keepUpgradeStrategy``: the field stays for a KubeRay >= 1.6 operator)
    the two may differ: the annotation is raygitops' choice and the field the operator's,
    so ``raygitops.dev/upgrade-strategy: None`` leaves a natively recreated cluster to
    KubeRay.  Otherwise the field becomes the annotation and the two must agree."""
    annotation = annotations(obj).get(STRATEGY_ANNOTATION)
    if annotation is not None and annotation not in ANNOTATION_STRATEGIES:
        raise annotation_error(
            STRATEGY_ANNOTATION, f"{printable(repr(annotation))[:80]} is not Recreate, ReplaceGroups or None"
            f"{_did_you_mean(annotation, ANNOTATION_STRATEGIES)}")
    field = _spec_strategy(obj.get("spec"))
    if annotation is not None and field is not None and annotation != field and not keep:
        raise annotation_error(
            STRATEGY_ANNOTATION, f"{annotation} contradicts "
            f"spec.upgradeStrategy.type={field} (to leave the field to a KubeRay >= 1.6 "
            "operator and the annotation to raygitops, set keepUpgradeStrategy: true)")
    return annotation or field or NONE


def annotation_error(key: str, problem: str) -> RaygitopsError:
    """An error about the RayCluster's annotation ``key``, to be shown at that annotation's line."""
    return RaygitopsError(f"annotation {key}: {problem}", field=f"metadata.annotations.{key}")


def parse_max_unavailable(value: Any) -> str:
    """A ``max-unavailable`` value checked: a count of pods (``"2"``, at least 1) or a
    percentage of the group's pods (``"25%"``, 1 to 100); raises ValueError otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"is {type(value).__name__} {printable(repr(value))[:40]}, not a string (quote it)")
    match = re.fullmatch(r"([0-9]{1,7})(%?)", value.strip())
    number = int(match.group(1)) if match else 0
    if match and number >= 1 and (not match.group(2) or number <= 100):
        return f"{number}{match.group(2)}"
    raise ValueError(f"{printable(repr(value))[:80]} is not a pod count (1, 2, ...) or a percentage (1% to 100%)")


def resolve_max_unavailable(value: str, pods: int) -> int:
    """How many of a group's ``pods`` may be missing at once: a count as it is, a percentage
    of the pods rounded down (as a Deployment's maxUnavailable), never below one, so a
    replacement always moves."""
    count = pods * int(value[:-1]) // 100 if value.endswith("%") else int(value)
    return max(1, count)


def _only_with_replace_groups(key: str, value: Any, chosen: str) -> bool:
    """Whether ``key`` applies (ReplaceGroups); refused on another strategy, where it would
    silently do nothing."""
    if chosen != REPLACE_GROUPS and value is not None:
        raise annotation_error(key, f"applies only with {STRATEGY_ANNOTATION}: {REPLACE_GROUPS} "
                                    f"(this cluster's strategy is {chosen})")
    return chosen == REPLACE_GROUPS


def max_unavailable(obj: dict[str, Any], chosen: str) -> str | None:
    """The cluster's ``raygitops.dev/max-unavailable`` under ReplaceGroups (default 100%);
    None for the other strategies."""
    value = annotations(obj).get(MAX_UNAVAILABLE_ANNOTATION)
    if not _only_with_replace_groups(MAX_UNAVAILABLE_ANNOTATION, value, chosen):
        return None
    if value is None:
        return DEFAULT_MAX_UNAVAILABLE
    try:
        return parse_max_unavailable(value)
    except ValueError as err:
        raise annotation_error(MAX_UNAVAILABLE_ANNOTATION, str(err)) from None


def max_unavailable_by_group(obj: dict[str, Any], chosen: str, groups: Iterable[str]) -> dict[str, str]:
    """``raygitops.dev/max-unavailable-by-group`` (``"gpu=1, cpu=50%"``): a bound per worker
    group of the cluster, over its ``max-unavailable``; each value as that one's."""
    key = MAX_UNAVAILABLE_BY_GROUP_ANNOTATION
    value = annotations(obj).get(key)
    if not _only_with_replace_groups(key, value, chosen) or value is None:
        return {}
    if not isinstance(value, str):
        raise annotation_error(key, f"is {type(value).__name__} {printable(repr(value))[:40]}, not a string (quote it)")
    names, out = list(groups), {}
    for part in value.split(","):
        name, sep, limit = (x.strip() for x in part.partition("="))
        if not sep or not name:
            raise annotation_error(key, f"{printable(repr(part.strip()))[:80]} is not "
                                        "<group>=<count or percentage> (e.g. \"gpu=1, cpu=50%\")")
        if name not in names:
            close = closest(name, names)
            hint = f" (did you mean {close}?)" if close else f" (its groups: {', '.join(names) or 'none'})"
            raise annotation_error(key, f"{printable(repr(name))[:80]} is not a worker group of this cluster{hint}")
        if name in out:
            raise annotation_error(key, f"group {name} is given twice")
        try:
            out[name] = parse_max_unavailable(limit)
        except ValueError as err:
            raise annotation_error(key, f"group {name}: {err}") from None
    return out


def _cycle_annotations(obj: dict[str, Any], chosen: str, *keys: str) -> dict[str, Any]:
    """The values of ``keys`` on the cluster (None: not set); refused on a cluster raygitops
    does not recreate, where they would silently do nothing."""
    ann = annotations(obj)
    values = {key: ann.get(key) for key in keys}
    for key, value in values.items():
        if value is not None and not opted_in(chosen):
            raise annotation_error(key, f"applies only to clusters raygitops recreates "
                                        f"({STRATEGY_ANNOTATION}: Recreate or ReplaceGroups; this cluster's is {chosen})")
    return values


def jobs_policy(obj: dict[str, Any], chosen: str, default: jobs.Policy) -> jobs.Policy:
    """The cluster's running-jobs policy: ``raygitops.dev/running-jobs`` and
    ``raygitops.dev/running-jobs-wait-seconds`` over the app's ``default`` (raygitops.yaml,
    Argo CD parameters)."""
    values = _cycle_annotations(obj, chosen, RUNNING_JOBS_ANNOTATION, RUNNING_JOBS_WAIT_ANNOTATION)
    try:
        action = default.action if values[RUNNING_JOBS_ANNOTATION] is None else jobs.parse_policy(
            values[RUNNING_JOBS_ANNOTATION])
    except ValueError as err:
        raise annotation_error(RUNNING_JOBS_ANNOTATION, printable(str(err))[:120]) from None
    text = values[RUNNING_JOBS_WAIT_ANNOTATION]
    if text is not None and not isinstance(text, str):
        raise annotation_error(RUNNING_JOBS_WAIT_ANNOTATION, f"is {type(text).__name__} "
                               f"{printable(repr(text))[:40]}, not a string (quote it: \"600\")")
    try:
        wait = default.wait_seconds if text is None else jobs.parse_wait_seconds(text)
    except ValueError as err:
        raise annotation_error(RUNNING_JOBS_WAIT_ANNOTATION, printable(str(err))[:100]) from None
    if values[RUNNING_JOBS_WAIT_ANNOTATION] is not None and action != jobs.WAIT:
        raise annotation_error(RUNNING_JOBS_WAIT_ANNOTATION, f"applies only with "
                               f"{RUNNING_JOBS_ANNOTATION}: wait (this cluster's is {action})")
    return jobs.Policy(action, wait if action == jobs.WAIT else None)


def preflight_policy(obj: dict[str, Any], chosen: str, default: preflight.Policy) -> preflight.Policy:
    """The cluster's preflight policy: ``raygitops.dev/preflight`` ("true"/"false") and
    ``raygitops.dev/preflight-unknown`` (fail/proceed) over the app's ``default``
    (raygitops.yaml, Argo CD parameters)."""
    values = _cycle_annotations(obj, chosen, PREFLIGHT_ANNOTATION, PREFLIGHT_UNKNOWN_ANNOTATION)
    enabled, unknown = default.enabled, default.unknown
    value = values[PREFLIGHT_ANNOTATION]
    if value is not None:
        if value not in ("true", "false"):
            raise annotation_error(PREFLIGHT_ANNOTATION, f"{printable(repr(value))[:60]} is not \"true\" or \"false\"")
        enabled = value == "true"
    if values[PREFLIGHT_UNKNOWN_ANNOTATION] is not None:
        try:
            unknown = preflight.parse_unknown(values[PREFLIGHT_UNKNOWN_ANNOTATION])
        except ValueError as err:
            raise annotation_error(PREFLIGHT_UNKNOWN_ANNOTATION, printable(str(err))[:100]) from None
    return preflight.Policy(enabled, unknown, default.cluster_reads)


def native_recreate(obj: dict[str, Any]) -> bool:
    """Whether the manifest asks the KubeRay >= 1.6 operator itself to recreate the pods."""
    return _spec_strategy(obj.get("spec")) == RECREATE


# The raygitops.dev/* keys a user writes on a RayCluster's metadata.annotations; with those
# render writes there, every key of raygitops' a RayCluster manifest may carry.
USER_ANNOTATIONS = (STRATEGY_ANNOTATION, MAX_UNAVAILABLE_ANNOTATION, MAX_UNAVAILABLE_BY_GROUP_ANNOTATION,
                    RUNNING_JOBS_ANNOTATION, RUNNING_JOBS_WAIT_ANNOTATION, PREFLIGHT_ANNOTATION,
                    PREFLIGHT_UNKNOWN_ANNOTATION, TRACK_ANNOTATION)
KNOWN_ANNOTATIONS = (*USER_ANNOTATIONS, HASH_ANNOTATION, HASHES_ANNOTATION)
# what render stamps on the group pod templates (their metadata.annotations)
TEMPLATE_ANNOTATIONS = (HASH_ANNOTATION, CONFIG_HASH_ANNOTATION, SECRET_HASH_ANNOTATION)


def _key(key: str) -> str:
    """A key fit for a one-line message (bounded: a key may be long)."""
    return printable(key if len(key) <= 120 else key[:117] + "...")


def _ours(key: Any) -> bool:
    return isinstance(key, str) and key.startswith(ANNOTATION_PREFIX)


def annotation_problems(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """Near misses of raygitops' annotations, which would otherwise pass and change what the
    hook does (a cluster not opted in, a policy left at its default): a ``raygitops.dev/*``
    key that does not exist, or a key one slip off one that does (``raygitops.dev/running-job``,
    ``raygitops.io/upgrade-strategy``); one of them written as a label, or on a group's pod
    template, where raygitops never reads it.  Each ``(field path, message)`` names the fix."""
    out = []
    for key in annotations(obj):
        if not isinstance(key, str) or key in KNOWN_ANNOTATIONS or key in HOOK_OWNED_ANNOTATIONS:
            continue
        # a key cut short (running-jobs-wait) most likely means the one it begins
        close = next((k for k in KNOWN_ANNOTATIONS if _ours(key) and k.startswith(key)), None) or closest(
            key, KNOWN_ANNOTATIONS, cutoff=0.8)
        if _ours(key) or close:
            hint = f"did you mean {close}?" if close else f"raygitops reads {', '.join(USER_ANNOTATIONS)}"
            out.append((f"metadata.annotations.{key}", f"metadata.annotations.{_key(key)}: raygitops has no such "
                                                       f"annotation ({hint}); as written it changes nothing"))
    for key in labels(obj):
        if _ours(key):
            out.append((f"metadata.labels.{key}", f"metadata.labels.{_key(key)}: raygitops reads its settings from "
                                                  "metadata.annotations, never from labels: move it there"))
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    groups = [("spec.headGroupSpec", spec.get("headGroupSpec"))] + [
        (f"spec.workerGroupSpecs[{i}]", g) for i, g in enumerate(spec.get("workerGroupSpecs") or [])]
    for where, group in groups:
        template = group.get("template") if isinstance(group, dict) else None
        for kind in ("annotations", "labels"):
            keys = (meta(template).get(kind) or {}) if isinstance(template, dict) else {}
            for key in keys if isinstance(keys, dict) else ():
                if _ours(key) and not (kind == "annotations" and key in TEMPLATE_ANNOTATIONS):
                    field = f"{where}.template.metadata.{kind}.{key}"
                    out.append((field, f"{field}: raygitops reads its settings from the RayCluster's own "
                                       "metadata.annotations, not from a pod template: move it there"))
    return out


def move_strategy_to_annotation(obj: dict[str, Any], strategy: str) -> None:
    """Operators older than KubeRay 1.6 reject or prune ``spec.upgradeStrategy``: carry the
    strategy in the annotation instead (mutates ``obj``)."""
    spec = obj["spec"]
    if "upgradeStrategy" not in spec:
        return
    del spec["upgradeStrategy"]
    set_annotation(obj, STRATEGY_ANNOTATION, strategy)


def cluster_owner(obj: dict[str, Any]) -> str | None:
    """``Kind/name`` of the RayJob, RayService or RayCronJob owning a RayCluster manifest, if
    any."""
    refs = meta(obj).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:  # a malformed one is refused by object_problem
        if isinstance(ref, dict) and ref.get("kind") in OWNER_KINDS:
            return f"{ref['kind']}/{ref.get('name', '')}"
    origin = labels(obj).get(ORIGIN_LABEL)
    if origin in OWNER_KINDS:
        return f"{origin}/{labels(obj).get('ray.io/originated-from-cr-name', '')}"
    return None


def check_embedded_opt_in(obj: dict[str, Any]) -> None:
    """Opt-in inside a RayJob, RayService or RayCronJob is an error: their clusters are the
    owner's to manage (a RayJob suspend deletes its cluster; KubeRay rejects the field there)."""
    kind = obj.get("kind")
    embedded: Any = obj.get("spec")
    for key in EMBEDDED_SPEC[kind].split(".") if kind in EMBEDDED_SPEC else ():
        embedded = embedded.get(key) if isinstance(embedded, dict) else None
    why = (
        f"{kind} clusters are made and recreated by KubeRay through the {kind}; raygitops only "
        "recreates standalone RayClusters"
    )
    opt_in = annotations(obj).get(STRATEGY_ANNOTATION)
    if opt_in in OPTED_IN:
        raise RaygitopsError(f"{STRATEGY_ANNOTATION}: {opt_in} is not allowed on a {kind}: {why}",
                             field=f"metadata.annotations.{STRATEGY_ANNOTATION}")
    if _spec_strategy(embedded, f"spec.{EMBEDDED_SPEC[kind]}") == RECREATE:
        raise RaygitopsError(f"spec.{EMBEDDED_SPEC[kind]}.upgradeStrategy.type: Recreate is not allowed: {why}",
                             field=f"spec.{EMBEDDED_SPEC[kind]}.upgradeStrategy.type")


def check_no_hook_annotations(obj: dict[str, Any]) -> None:
    """A manifest must not carry the hook's own state annotations."""
    for key in HOOK_OWNED_ANNOTATIONS:
        if key in annotations(obj):
            name = (obj.get("metadata") or {}).get("name")
            raise RaygitopsError(
                f"{obj.get('kind')} {name}: metadata.annotations.{key}: this annotation is written by the raygitops PreSync hook "
                "only (its recreate state); remove it from the manifest", field=f"metadata.annotations.{key}")
