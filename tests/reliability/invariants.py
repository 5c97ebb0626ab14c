"""Invariants of the hook, checked after every hook run and every round of a campaign
(reusable, pure: objects are plain dicts as the API returns them; a round's history is a
:class:`~reliability.recorder.Recorder`'s list of changes).

Every check returns a list of violations (empty: fine) so a campaign can count them and
report all at once.  A pod's *stamp* is what it was made from: its template hash and, where
its group reads tracked config, the ConfigMaps' and Secrets' hashes (:func:`stamp`); a
cluster's *target* is the stamp of each of its groups in the render being synced
(:func:`targets`).

After each hook run:

- :func:`suspended_clusters`: no cluster left suspended unless desired (a failed run may leave
  one suspended only with a raygitops lock on it, for the next run to finish); :func:`locks_left`;
- :func:`hook_only_changes`: the hook changed nothing but the pod-shaping spec, spec.suspend
  and ``raygitops.dev/*`` annotations (status, managedFields, resourceVersion, generation
  ignored);
- :func:`false_successes`: every cluster a run reports recreated, replaced or in sync runs,
  when the run ends, only pods made from its target (and, when it waited for readiness,
  only Ready ones): a failed recreate is never reported as a success by a later run;
- :func:`leaks`: a Secret's value appears in no log line, report, Event, annotation or
  rendered object other than a Secret.

After each round, over what the recorder saw (:func:`deletions`, :func:`created`):

- :func:`wrongly_deleted`: no pod of a cluster the hook must leave alone deleted;
- :func:`recreated_twice`: no pod made during the round from its target deleted again (but
  for the operator's scale-down of a surplus);
- :func:`pods_on_target`: every live pod of a synced cluster made from its target;
- :func:`unavailability`: during a replacement, per worker group, the pods its spec asks for
  minus its Ready, not terminating pods, at every change: never beyond the group's bound;
- :func:`created_before_config`: no pod made from a new config hash created before the hook
  wrote that content.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any, Iterable

from raygitops.model.hashing import SCALING
from raygitops.model.objmeta import annotations
from raygitops.model.podrules import POD_ANNOTATIONS
from raygitops.model.pods import desired_workers, worker_groups

from reliability.recorder import Change

HASH = "raygitops.dev/template-hash"
HASHES = "raygitops.dev/template-hashes"
CONFIG_HASH = "raygitops.dev/config-hash"
SECRET_HASH = "raygitops.dev/secret-hash"
LOCK = "raygitops.dev/recreate"
LAST = "raygitops.dev/last-recreate"
PREFIX = "raygitops.dev/"
SUCCESS = ("recreated", "replaced", "in-sync")

Stamp = tuple[str | None, str | None, str | None]  # template hash, config hash, secret hash


def key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def desired_hashes(obj: dict[str, Any]) -> set[str]:
    """The hashes of a rendered (or live) RayCluster's ``template-hashes`` annotation."""
    doc = json.loads(annotations(obj)[HASHES])
    return {doc["head"], *doc["workers"].values()}


def pod_hash(pod: dict[str, Any]) -> str | None:
    return annotations(pod).get(HASH)


def stamp(pod_or_template: dict[str, Any]) -> Stamp:
    ann = annotations(pod_or_template)
    return ann.get(HASH), ann.get(CONFIG_HASH), ann.get(SECRET_HASH)


def pod_cluster(pod: dict[str, Any]) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return f"{pod['metadata'].get('namespace', '')}/{labels.get('ray.io/cluster', '')}"


def pod_group(pod: dict[str, Any]) -> str:
    """``head`` or the worker group's name."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return "head" if labels.get("ray.io/node-type") == "head" else labels.get("ray.io/group", "")


def targets(rendered: dict[str, dict[str, Any]], namespace: str) -> dict[str, dict[str, Stamp]]:
    """namespace/cluster -> group -> the stamp of its template in a render (name -> RayCluster)."""
    return {f"{namespace}/{name}": template_stamps(obj) for name, obj in rendered.items()}


def template_stamps(obj: dict[str, Any]) -> dict[str, Stamp]:
    """Group -> the stamp of its template in a RayCluster's spec."""
    spec = obj["spec"]
    groups = {"head": stamp(spec["headGroupSpec"]["template"])}
    groups.update({g["groupName"]: stamp(g["template"]) for g in spec.get("workerGroupSpecs") or []})
    return groups


def owned(pod: dict[str, Any], cluster: dict[str, Any] | None) -> bool:
    uid = (cluster or {}).get("metadata", {}).get("uid")
    return any(r.get("uid") == uid and r.get("controller") for r in pod["metadata"].get("ownerReferences") or [])


def ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def terminating(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


# ----------------------------------------------------------------------------- suspend


def suspended_clusters(live: Iterable[dict[str, Any]], desired_suspended: set[str] = frozenset(),
                       allow_locked: bool = False) -> list[str]:
    """Clusters suspended that should not be.  ``allow_locked``: after a FAILED run, a cluster
    the hook could not resume is allowed while its lock is still on it (the next run
    finishes the cycle); after a successful run nothing is allowed."""
    bad = []
    for obj in live:
        if (obj.get("spec") or {}).get("suspend") is not True or key(obj) in desired_suspended:
            continue
        if allow_locked and LOCK in annotations(obj):
            continue
        lock = annotations(obj).get(LOCK)
        bad.append(f"{key(obj)} left suspended (lock: {lock or 'none'})")
    return bad


def locks_left(live: Iterable[dict[str, Any]]) -> list[str]:
    return [f"{key(o)} still locked: {annotations(o)[LOCK]}" for o in live if LOCK in annotations(o)]


# ----------------------------------------------------------------------------- pods


def pods_on_target(pods: Iterable[dict[str, Any]], cluster: str, target: dict[str, Stamp]) -> list[str]:
    """Every live (not terminating) pod of ``cluster`` made from its group's target (a pod of
    a group the target does not have is not)."""
    bad = []
    for pod in pods:
        if pod_cluster(pod) != cluster or terminating(pod):
            continue
        want = target.get(pod_group(pod))
        if stamp(pod) != want:
            bad.append(f"{cluster}: pod {pod['metadata']['name']} (group {pod_group(pod)}) runs {stamp(pod)}, "
                       f"not {want}")
    return bad


def false_successes(report: dict[str, Any] | None, live: Iterable[dict[str, Any]], pods: list[dict[str, Any]],
                    want: dict[str, dict[str, Stamp]], waited: bool) -> list[str]:
    """What a run reports as done that is not so when it ends: a cluster of ``want`` reported
    in sync (an outcome, or a decision that ran no cycle) with an own, not terminating pod not
    made from its target; one reported recreated or replaced with an own pod not made from its
    target, terminating ones included (the hook reports those only once every old pod is gone);
    with ``waited`` (``--wait-ready``), a recreated or replaced one with a pod not Ready."""
    clusters = {key(c): c for c in live}
    bad = []
    for item in (report or {}).get("clusters") or []:
        name = f"{item['namespace']}/{item['name']}"
        result = item.get("outcome") or {"verify": "in-sync"}.get(item["decision"], item["decision"])
        if name not in want or result not in SUCCESS:
            continue
        cycled = result in ("recreated", "replaced")
        mine = [p for p in pods if pod_cluster(p) == name and owned(p, clusters.get(name))
                and (cycled or not terminating(p))]
        stale = [p["metadata"]["name"] for p in mine if stamp(p) != want[name].get(pod_group(p))]
        if stale:
            bad.append(f"{name} reported {result} ({item.get('message') or item.get('reason')}) while pods "
                       f"{sorted(stale)} run an old template or config")
        unready = [p["metadata"]["name"] for p in mine if not ready(p) and not terminating(p)]
        if waited and cycled and unready:
            bad.append(f"{name} reported {result} after waiting for readiness while pods {sorted(unready)} "
                       "are not Ready")
    return bad


# ----------------------------------------------------------------------------- secrets


def leaks(values: Iterable[str], texts: dict[str, str]) -> list[str]:
    """Each place (name -> text) where a Secret value, or its base64, appears."""
    needles = {v: [v, base64.b64encode(v.encode()).decode()] for v in values if v}
    return [f"a Secret's value appears in {where}" for where, text in texts.items()
            if any(n in text for ns in needles.values() for n in ns)]


# ----------------------------------------------------------------------------- hook-only changes


def _outside_hook_writes(obj: dict[str, Any]) -> dict[str, Any]:
    """What the hook must never change: the object minus status, server-managed metadata,
    raygitops.dev/* annotations and the annotations the pod builder reads (the resume writes
    them), and minus the spec but for what the resume keeps from the live object: managedBy
    and the worker groups' scaling fields (keyed by name: the resume adds new groups and
    drops removed ones, so only groups on both sides are compared: see hook_only_changes)."""
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    meta = obj.setdefault("metadata", {})
    for k in ("managedFields", "resourceVersion", "generation"):
        meta.pop(k, None)
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items()
                           if not k.startswith(PREFIX) and k not in POD_ANNOTATIONS}
    # kubectl's last-applied-configuration is the APPLY's business, not the hook's
    meta["annotations"].pop("kubectl.kubernetes.io/last-applied-configuration", None)
    spec = obj.get("spec") or {}
    kept: dict[str, Any] = {k: v for k, v in spec.items() if k == "managedBy"}
    kept["workerGroupSpecs"] = {
        g.get("groupName"): {k: v for k, v in g.items() if k in SCALING}
        for g in spec.get("workerGroupSpecs") or [] if isinstance(g, dict)}
    obj["spec"] = kept
    return obj


def hook_only_changes(before: Iterable[dict[str, Any]], after: Iterable[dict[str, Any]]) -> list[str]:
    """Fields the hook changed that it must not (compares live objects around a hook run)."""
    after_by_key = {key(o): o for o in after}
    bad = []
    for old in before:
        new = after_by_key.get(key(old))
        if new is None:
            bad.append(f"{key(old)} disappeared")
            continue
        a, b = _outside_hook_writes(old), _outside_hook_writes(new)
        wa, wb = a["spec"].pop("workerGroupSpecs"), b["spec"].pop("workerGroupSpecs")
        for name in set(wa) & set(wb):
            if wa[name] != wb[name]:
                bad.append(f"{key(old)}: worker group {name} scaling fields changed: {wa[name]} -> {wb[name]}")
        if a != b:
            bad.append(f"{key(old)}: fields the hook keeps changed: {_diff(a, b)}")
    return bad


def _diff(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                return _diff(a.get(k), b.get(k), f"{path}.{k}")
        return path
    return f"{path}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}"


# ----------------------------------------------------------------------------- a round's history


def deletions(changes: Iterable[Change], until: float | None = None) -> list[Change]:
    """The pods deleted (``DELETED``), up to ``until`` (a ``time.monotonic()``) when given."""
    return [c for c in changes if c.resource == "pods" and c.type == "DELETED" and (until is None or c.at <= until)]


def created(changes: Iterable[Change]) -> list[Change]:
    """The pods created while recording (exact or not)."""
    return [c for c in changes if c.resource == "pods" and c.type == "ADDED"]


def wrongly_deleted(changes: Iterable[Change], untouchable: Iterable[str], until: float | None = None) -> list[str]:
    """Pods of clusters the hook must leave alone that were deleted."""
    clusters = set(untouchable)
    return [f"{pod_cluster(c.obj)}: pod {c.obj['metadata']['name']} ({c.uid}) deleted"
            for c in deletions(changes, until) if pod_cluster(c.obj) in clusters]


def recreated_twice(changes: Iterable[Change], cluster: str, target: dict[str, Stamp],
                    initial: Iterable[dict[str, Any]] = (), initial_pods: Iterable[dict[str, Any]] = ()) -> list[str]:
    """A pod made from its target after the cluster's spec first held the target (in
    ``initial``, the RayClusters at the start, or in a change) was deleted: a second cycle for
    the same target (or a replacement that deleted its own new pods).  Not counted:

    - a pod made before that from a group the commit left unchanged (the old spec resumed as
      it was after a failed attempt brings it back): the next attempt's cycle deletes it again
      by design;
    - a pod deleted while its group had more pods than its spec asks for: the operator's own
      scale-down of a surplus (KubeRay deletes surplus workers at random without the
      autoscaler; a surplus follows a pod create whose answer was lost, a fault on the
      operator's traffic)."""
    changes = list(changes)
    on_target = spec_on_target(changes, cluster, target, initial)
    if on_target is None:
        return []
    written, spec = on_target
    wanted = {"head": 1, **{g: desired_workers(grp) for g, grp in worker_groups(spec["spec"]).items()}}
    alive = {p["metadata"]["uid"]: pod_group(p) for p in initial_pods
             if pod_cluster(p) == cluster and not terminating(p)}
    new, twice = set(), []
    for c in sorted((c for c in changes if c.resource == "pods" and pod_cluster(c.obj) == cluster), key=lambda c: c.rv):
        group = pod_group(c.obj)
        if c.type == "ADDED" and c.rv > written and stamp(c.obj) == target.get(group):
            new.add(c.uid)
        if c.type != "DELETED" and not terminating(c.obj):
            alive[c.uid] = group
            continue
        if c.uid not in alive:  # its deletion was seen already (terminating, then DELETED)
            continue
        surplus = sum(1 for g in alive.values() if g == group) > wanted.get(group, 0)
        del alive[c.uid]
        if c.uid in new and not surplus:
            twice.append(f"{cluster}: pod {c.obj['metadata']['name']} made from the target {stamp(c.obj)} "
                         "deleted (a second cycle?)")
    return twice


def spec_on_target(changes: Iterable[Change], cluster: str, target: dict[str, Stamp],
                   initial: Iterable[dict[str, Any]] = ()) -> tuple[int, dict[str, Any]] | None:
    """The first revision at which ``cluster``'s spec held the templates of ``target`` (0: at
    the start), with the RayCluster then; None: never while recording."""
    def on_target(obj: dict[str, Any]) -> bool:
        return key(obj) == cluster and template_stamps(obj) == target

    first = next((obj for obj in initial if on_target(obj)), None)
    if first is not None:
        return 0, first
    return next(((c.rv, c.obj) for c in changes
                 if c.resource == "rayclusters" and c.type != "DELETED" and on_target(c.obj)), None)


def unavailability(initial: Iterable[dict[str, Any]], changes: Iterable[Change], cluster: str,
                   want: dict[str, int], until: float | None = None) -> dict[str, int]:
    """Per worker group of ``want`` (name -> pods its spec asks for), the most pods missing
    at any change up to ``until``: asked for, minus its Ready pods that are not terminating."""
    available: dict[str, tuple[str, bool]] = {}  # uid -> (group, available)

    def note(pod: dict[str, Any], gone: bool = False) -> None:
        if pod_cluster(pod) == cluster:
            available[pod["metadata"]["uid"]] = (pod_group(pod), not gone and ready(pod) and not terminating(pod))

    def missing() -> dict[str, int]:
        return {g: n - sum(1 for grp, ok in available.values() if grp == g and ok) for g, n in want.items()}

    for pod in initial:
        note(pod)
    worst = missing()
    for c in changes:
        if c.resource != "pods" or (until is not None and c.at > until):
            continue
        note(c.obj, gone=c.type == "DELETED")
        worst = {g: max(worst[g], n) for g, n in missing().items()}
    return worst


def first_content(initial: Iterable[dict[str, Any]], changes: Iterable[Change], resource: str, name: str,
                  data: dict[str, str]) -> int | None:
    """The revision at which ConfigMap/Secret ``name`` first held ``data`` (0: it did when the
    recording began; None: never)."""
    for obj in initial:
        if obj["metadata"]["name"] == name and obj.get("data") == data:
            return 0
    for c in changes:
        if c.resource == resource and c.obj["metadata"]["name"] == name and c.type != "DELETED" \
                and c.obj.get("data") == data:
            return c.rv
    return None


def created_before_config(changes: Iterable[Change], cluster: str, groups: dict[str, Stamp],
                          written: int | None) -> tuple[list[str], int]:
    """Pods of ``cluster`` made from ``groups`` (group -> stamp, the groups whose config
    changed) created at or before revision ``written`` (when their config first held the
    new content; None: never); and how many could not be ordered (seen first in a list)."""
    bad, unordered = [], 0
    for c in created(changes):
        if pod_cluster(c.obj) != cluster or groups.get(pod_group(c.obj)) != stamp(c.obj):
            continue
        if written is not None and c.rv > written:
            unordered += not c.exact  # listed, not watched: created at or before c.rv, either side of the write
        else:
            bad.append(f"{cluster}: pod {c.obj['metadata']['name']} made from {stamp(c.obj)} created at revision "
                       f"{c.rv}, before its config was written ({written})")
    return bad, unordered
