"""Preflight (pure): before the hook takes a cluster down, can its new pods come up?
(docs/presync.md, "Preflight")

From a cluster's desired spec (its plan entry's :class:`~raygitops.model.hashing.SpecParts`)
:func:`needs` lists what the new pods need in the namespace and of the nodes:

- objects: the ConfigMaps and Secrets the templates read (configrefs: volumes, projected
  sources, ``envFrom``, ``env.valueFrom``; ``optional: true`` excepted), ``imagePullSecrets``,
  the PVCs of ``persistentVolumeClaim`` volumes, the ServiceAccount (``serviceAccountName``;
  ``default`` is not looked for: the ServiceAccount controller makes it in every namespace),
  the PriorityClass (the two built-in ``system-*`` ones excepted) and the RuntimeClass. The
  ConfigMaps and Secrets the app renders and the hook makes live itself before new pods
  start (the plan's tracked ones) are not looked for;
- per group: the pod's resource requests as the scheduler computes them (the containers'
  sum, or an init container's if larger, restartable init containers (sidecars) counted with
  the containers; a request left out where a limit is set is the limit, as the API server
  defaults it) and its node constraints (``nodeSelector``, the required node affinity terms,
  tolerations).

:func:`check` then judges what the hook found live (:class:`Live`) and is the one place the
checks are decided: a missing object, or a group whose requests no node allowed by its
constraints can hold (allocatable), is a :class:`Failure`; a check that could not be made
(403, no node visible, no node that its constraints allow: a node autoscaler may make one)
is a failure marked ``unknown``, which the cluster's policy (:class:`Policy`) fails or lets
pass. Allocatable is what a node can hold, not what is free now: the old pods leave first.
Not checked: image pulls, node affinity's preferred terms, pod (anti-)affinity, topology
spread, quotas, pod overhead and what the operator adds to a pod (an autoscaler sidecar).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Iterator

from raygitops.model import quantity
from raygitops.model.configrefs import CONFIGMAP, SECRET, mentions
from raygitops.model.hashing import SpecParts

PVC, SERVICE_ACCOUNT = "PersistentVolumeClaim", "ServiceAccount"
PRIORITY_CLASS, RUNTIME_CLASS = "PriorityClass", "RuntimeClass"
NAMESPACED = (CONFIGMAP, SECRET, PVC, SERVICE_ACCOUNT)  # looked up in the cluster's namespace
CLUSTER_SCOPED = (PRIORITY_CLASS, RUNTIME_CLASS)
# kind -> its API group, version and resource (the reads, and the hook's RBAC for them)
RESOURCES = {CONFIGMAP: ("", "v1", "configmaps"), SECRET: ("", "v1", "secrets"),
             PVC: ("", "v1", "persistentvolumeclaims"), SERVICE_ACCOUNT: ("", "v1", "serviceaccounts"),
             PRIORITY_CLASS: ("scheduling.k8s.io", "v1", "priorityclasses"),
             RUNTIME_CLASS: ("node.k8s.io", "v1", "runtimeclasses")}
BUILTIN_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
DEFAULT_SERVICE_ACCOUNT = "default"
HARD_EFFECTS = ("NoSchedule", "NoExecute")  # the taints that keep a new pod off a node

FAIL, PROCEED = "fail", "proceed"
UNKNOWN_POLICIES = (FAIL, PROCEED)


def parse_unknown(value: Any) -> str:
    """``fail`` or ``proceed``; ValueError otherwise."""
    if isinstance(value, str) and value.strip() in UNKNOWN_POLICIES:
        return value.strip()
    raise ValueError(f"{value!r} is not fail or proceed")


@dataclass(frozen=True)
class Policy:
    """Whether a cluster's cycles preflight, and what a check the hook cannot make does."""

    enabled: bool = True
    unknown: str = FAIL
    # False: render could give the hook no ClusterRole (Helm leaves the namespace to the release,
    # and a ClusterRoleBinding must name its ServiceAccount's): nodes, PriorityClasses and
    # RuntimeClasses are not checked (render warns), rather than failing every recreate
    cluster_reads: bool = True

    @property
    def is_default(self) -> bool:
        return self == Policy()

    def words(self) -> str:
        if not self.enabled:
            return "preflight off"
        return ("a check it cannot make fails the sync" if self.unknown == FAIL
                else "a check it cannot make is reported and passed")


@dataclass(frozen=True)
class GroupNeeds:
    """One group's pod as the scheduler sees it."""

    group: str  # "head", "worker:<name>"
    replicas: int
    requests: dict[str, Fraction]
    node_selector: dict[str, str]
    terms: tuple[dict[str, Any], ...] | None  # required nodeSelectorTerms (any one); None: none required
    tolerations: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Needs:
    """What a cluster's new pods need: objects by ``(kind, name)`` with the groups needing
    each, and each group's pod."""

    cluster: str
    objects: dict[tuple[str, str], tuple[str, ...]]
    groups: tuple[GroupNeeds, ...]
    nodes: bool = True  # whether the groups' fit is checked (Policy.cluster_reads)

    def describe(self) -> str:
        """What the preflight checks, in words (the preview's and status's line)."""
        kinds: dict[str, list[str]] = {}
        for kind, name in self.objects:
            kinds.setdefault(kind, []).append(name)
        objects = ", ".join(f"{', '.join(names)} ({kind})" for kind, names in sorted(kinds.items()))
        exist = f"that {objects} exist" if objects else ""
        groups = ", ".join(g.group for g in self.groups)
        if not self.nodes:
            return (f"{exist or 'no object (none needed)'}; not the nodes, PriorityClasses nor RuntimeClasses "
                    "(the hook has no ClusterRole: its namespace is left to Helm)")
        fits = f"that a node fits each of {groups or 'no group'} (requests, nodeSelector, affinity, taints)"
        return f"{exist}, and {fits}" if exist else fits


def outlook(policy: Policy, needs: Needs | None) -> str:
    """What the hook will check before it takes the cluster down (``needs`` None: it will not),
    in words (``raygitops diff``'s line; ``raygitops status`` adds what it found)."""
    if needs is None or not policy.enabled:
        return "preflight off: the hook does not check that the new pods can come up before it takes the cluster down"
    return f"preflight: before any pod goes the hook checks {needs.describe()}; {policy.words()}"


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _objects(pod: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(kind, name)`` of what a pod template needs to exist (optional references excepted)."""
    spec = _mapping(pod.get("spec"))
    for kind, name, optional in mentions(pod):
        if not optional:
            yield kind, name
    for ref in _dicts(spec.get("imagePullSecrets")):
        if isinstance(ref.get("name"), str) and ref["name"]:
            yield SECRET, ref["name"]
    for volume in _dicts(spec.get("volumes")):
        claim = _mapping(volume.get("persistentVolumeClaim")).get("claimName")
        if isinstance(claim, str) and claim:
            yield PVC, claim
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if isinstance(account, str) and account and account != DEFAULT_SERVICE_ACCOUNT:
        yield SERVICE_ACCOUNT, account
    priority = spec.get("priorityClassName")
    if isinstance(priority, str) and priority and priority not in BUILTIN_PRIORITY_CLASSES:
        yield PRIORITY_CLASS, priority
    runtime = spec.get("runtimeClassName")
    if isinstance(runtime, str) and runtime:
        yield RUNTIME_CLASS, runtime


def _container_requests(container: dict[str, Any]) -> dict[str, Fraction]:
    """A container's requests, a limit standing for a request left out (API defaulting)."""
    resources = _mapping(container.get("resources"))
    out: dict[str, Fraction] = {}
    for section in ("limits", "requests"):  # requests win
        for name, value in _mapping(resources.get(section)).items():
            parsed = quantity.parse(value)
            if parsed is not None:
                out[str(name)] = parsed
    return out


def _add(a: dict[str, Fraction], b: dict[str, Fraction]) -> dict[str, Fraction]:
    return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in set(a) | set(b)}


def _max(a: dict[str, Fraction], b: dict[str, Fraction]) -> dict[str, Fraction]:
    return {k: max(a.get(k, Fraction(0)), b.get(k, Fraction(0))) for k in set(a) | set(b)}


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, Fraction]:
    """The pod's requests as kube-scheduler computes them (``PodRequests``): the sum over its
    containers plus its restartable init containers (sidecars), or, when larger per resource,
    what runs while an init container runs (it plus the sidecars started before it)."""
    running: dict[str, Fraction] = {}
    for container in _dicts(pod_spec.get("containers")):
        running = _add(running, _container_requests(container))
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for init in _dicts(pod_spec.get("initContainers")):
        requests = _container_requests(init)
        if init.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, requests)
            peak = _max(peak, sidecars)
        else:
            peak = _max(peak, _add(sidecars, requests))
    return {k: v for k, v in _max(_add(running, sidecars), peak).items() if v}


def _replicas(group: dict[str, Any]) -> int:
    value = group.get("replicas", group.get("minReplicas", 0))
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _group_needs(key: str, template: Any, replicas: int) -> GroupNeeds:
    spec = _mapping(_mapping(template).get("spec"))
    required = _mapping(_mapping(_mapping(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    terms = tuple(_dicts(required.get("nodeSelectorTerms"))) if required else None
    return GroupNeeds(key, replicas, pod_requests(spec),
                      {str(k): str(v) for k, v in _mapping(spec.get("nodeSelector")).items()},
                      terms, tuple(_dicts(spec.get("tolerations"))))


def needs(name: str, spec: SpecParts, groups: Iterable[str] | None = None,
          made_by_hook: Iterable[tuple[str, str]] = (), cluster_reads: bool = True) -> Needs:
    """What the new pods of cluster ``name`` need (``groups``: the group keys to check, None:
    every group; ``made_by_hook``: the ``(kind, name)`` the hook itself makes live first;
    ``cluster_reads`` False: nothing cluster-scoped, :attr:`Policy.cluster_reads`)."""
    wanted = None if groups is None else set(groups)
    made = set(made_by_hook)
    templates = [("head", spec.head.get("template"), 1)] + [
        (f"worker:{g}", body.get("template"), _replicas(body)) for g, body in spec.workers.items()]
    objects: dict[tuple[str, str], list[str]] = {}
    out = []
    for key, template, replicas in templates:
        if wanted is not None and key not in wanted:
            continue
        for ref in _objects(_mapping(template)):
            if ref in made or (not cluster_reads and ref[0] in CLUSTER_SCOPED):
                continue
            if key not in objects.setdefault(ref, []):
                objects[ref].append(key)
        out.append(_group_needs(key, template, replicas))
    return Needs(name, {ref: tuple(keys) for ref, keys in sorted(objects.items())}, tuple(out), cluster_reads)


# ---------------------------------------------------------------------------------------------
# What the hook found, and the judgement


@dataclass
class Live:
    """What the hook found: per object True (there), False (missing) or a reason it could not
    look (a 403's words); the nodes it could see (None: it could not see any, ``nodes_why``
    says why), and whether they are every node or only those of the cluster's own pods."""

    objects: dict[tuple[str, str], bool | str] = field(default_factory=dict)
    nodes: list[dict[str, Any]] | None = None
    nodes_why: str = ""
    only_pod_nodes: bool = False


@dataclass(frozen=True)
class Failure:
    """One failed check: the cluster, the group(s), what, the node where it matters, and
    whether the check could not be made (``unknown``: the policy decides)."""

    cluster: str
    group: str
    what: str
    node: str | None = None
    unknown: bool = False

    def line(self) -> str:
        node = f" (node {self.node})" if self.node else ""
        return f"cluster {self.cluster}, {self.group}: {self.what}{node}"


def _match_expression(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op = expr.get("key"), expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    have = labels.get(key) if isinstance(key, str) else None
    if op == "In":
        return have is not None and have in values
    if op == "NotIn":
        return have is None or have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and len(values) == 1:
        try:
            a, b = int(have), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def _match_term(term: dict[str, Any], node: dict[str, Any]) -> bool:
    """A nodeSelectorTerm: all its expressions hold (an empty term matches no node)."""
    labels = _labels(node)
    fields = {"metadata.name": str(_mapping(node.get("metadata")).get("name", ""))}
    exprs = _dicts(term.get("matchExpressions"))
    by_field = _dicts(term.get("matchFields"))
    if not exprs and not by_field:
        return False
    return all(_match_expression(e, labels) for e in exprs) and all(_match_expression(e, fields) for e in by_field)


def _labels(node: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in _mapping(_mapping(node.get("metadata")).get("labels")).items()}


def _tolerated(taint: dict[str, Any], tolerations: Iterable[dict[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and str(t.get("value") or "") == str(taint.get("value") or ""):
            return True
    return False


def _allows(g: GroupNeeds, node: dict[str, Any]) -> str | None:
    """Why the group's constraints keep its pod off ``node``; None when they allow it."""
    if _mapping(node.get("spec")).get("unschedulable") is True:
        return "cordoned"
    labels = _labels(node)
    wrong = sorted(k for k, v in g.node_selector.items() if labels.get(k) != v)
    if wrong:
        return f"nodeSelector {', '.join(f'{k}={g.node_selector[k]}' for k in wrong)}"
    if g.terms is not None and not any(_match_term(t, node) for t in g.terms):
        return "required node affinity"
    for taint in _dicts(_mapping(node.get("spec")).get("taints")):
        if taint.get("effect") in HARD_EFFECTS and not _tolerated(taint, g.tolerations):
            return f"taint {taint.get('key')}{'=' + str(taint['value']) if taint.get('value') else ''}:{taint.get('effect')}"
    return None


def _short(resource: str, amount: Fraction) -> str:
    """A quantity in words: ``8`` cpu, ``3.5``, ``64Gi`` of a byte resource when whole."""
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= size and amount % size == 0:
                return f"{amount // size}{unit}"
    if amount.denominator == 1:
        return str(amount.numerator)
    if (amount * 1000).denominator == 1:
        return f"{amount * 1000}m"
    return f"{float(amount):g}"


def _shortfall(requests: dict[str, Fraction], node: dict[str, Any]) -> list[str]:
    allocatable = _mapping(_mapping(node.get("status")).get("allocatable"))
    out = []
    for resource, amount in sorted(requests.items()):
        have = quantity.parse(allocatable.get(resource, 0)) or Fraction(0)
        if amount > have:
            out.append(f"{resource} {_short(resource, amount)} > {_short(resource, have)}")
    return out


def _fit(cluster: str, g: GroupNeeds, live: Live) -> Failure | None:
    if g.replicas <= 0:
        return None  # no pod of it to place now
    if live.nodes is None:
        return Failure(cluster, g.group, f"cannot check that a node fits its pod: {live.nodes_why}", unknown=True)
    allowed = [n for n in live.nodes if _allows(g, n) is None]
    seen = "the nodes of the cluster's pods" if live.only_pod_nodes else "the nodes"
    if not allowed:
        why = sorted({_allows(g, n) or "" for n in live.nodes})
        return Failure(cluster, g.group, f"no node among {len(live.nodes)} of {seen} allows its pod "
                       f"({'; '.join(why[:3]) or 'no node visible'}); a node autoscaler may make one", unknown=True)
    short = [(n, _shortfall(g.requests, n)) for n in allowed]
    if all(s for _, s in short):
        node, missing = min(short, key=lambda x: len(x[1]))
        name = str(_mapping(node.get("metadata")).get("name", "?"))
        requested = ", ".join(f"{r}: {_short(r, v)}" for r, v in sorted(g.requests.items()))
        return Failure(cluster, g.group, f"its pod's requests ({requested}) fit none of the {len(allowed)} nodes "
                       f"its constraints allow; closest: {', '.join(missing)} allocatable",
                       node=name, unknown=live.only_pod_nodes)
    return None


def check(n: Needs, live: Live) -> list[Failure]:
    """Every failed check of cluster ``n.cluster``'s new pods against what the hook found
    (pure; the one place the preflight is decided)."""
    out = []
    for (kind, name), groups in n.objects.items():
        found = live.objects.get((kind, name))
        if found is True:
            continue
        group = ", ".join(groups)
        if found is False:
            out.append(Failure(n.cluster, group, f"{kind} {name} does not exist"))
        else:
            out.append(Failure(n.cluster, group, f"cannot check that {kind} {name} exists: {found or 'not looked at'}",
                               unknown=True))
    for g in n.groups if n.nodes else ():
        failure = _fit(n.cluster, g, live)
        if failure is not None:
            out.append(failure)
    return out


SHOWN_FAILURES = 3  # in a one-line summary; the hook's log has every one


def summary(failures: list[Failure]) -> str:
    """The failures as one line: the first few, and how many more."""
    more = f" (and {len(failures) - SHOWN_FAILURES} more)" if len(failures) > SHOWN_FAILURES else ""
    return "; ".join(f.line() for f in failures[:SHOWN_FAILURES]) + more


def blocking(failures: list[Failure], policy: Policy) -> list[Failure]:
    """The failures that stop the cycle under ``policy`` (an unknown one only with ``fail``)."""
    return [f for f in failures if not f.unknown or policy.unknown == FAIL]
