"""Campaigns on the PreSync hook: sync rounds under faults (on the hook's API requests and on
the operator's), SIGKILLs, operator outages and concurrent hooks, with the invariants checked
after every hook run and every round (see invariants.py and fleet.py).  A round is a
:class:`RoundPlan`; test_hook_campaigns.py and tests/bench/bench_reliability.py write theirs,
the soak (soak.py) draws them from a seed.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from reliability import invariants as inv
from reliability.chaos import OperatorOutages, Outage, start_operator
from reliability.faultproxy import FaultProxy, Rule
from reliability.fleet import BOUNDS, DRIFTING, REPLICAS, UNTOUCHABLE, Fleet, Rendered, Revision
from reliability.recorder import Recorder

# One rule set per fault kind, tuned so a hook run sees several faults but can still finish.
KIND_RULES: dict[str, list[Rule]] = {
    "429": [Rule("429", probability=0.3, retry_after=1)],
    "500": [Rule("500", probability=0.25)],
    "503": [Rule("503", probability=0.25, retry_after=1)],
    "reset": [Rule("reset", probability=0.2)],
    "reset-after": [Rule("reset-after", probability=0.25, verbs={"patch", "delete", "create"})],
    "latency": [Rule("latency", probability=0.5, delay=0.4)],
    "watch-end": [Rule("watch-end", probability=1.0, events=1, after=1.0)],
    "watch-410": [Rule("watch-410", probability=0.7, events=1)],
    "http-410": [Rule("http-410", probability=0.5)],
}
# The operator's traffic: the same, but a watch ends after a second, not after its first event.
# KubeRay 1.6.2's informers take their initial list as a watch (client-go's streamed list, up to
# its bookmark) and start it again from scratch when the stream ends early: ended after every
# event, the operator never syncs and never makes a pod (soak seed 1950742106 round 513 on
# v1.6.2: 19,597 pod watches in 15 min), which no API server does to it.
OPERATOR_KIND_RULES: dict[str, list[Rule]] = {
    **KIND_RULES, "watch-end": [Rule("watch-end", probability=1.0, events=100_000, after=1.0)]}
HOSTILE = [Rule("reset-after", probability=0.5, verbs={"patch", "delete"}),
           Rule("http-410", probability=1.0), Rule("503", probability=0.3, retry_after=0)]
HOOK_MANAGED = (*DRIFTING, "replace", "config", "stable")  # clusters the hook brings to their target
SUBSET = {"drift-a", "replace", "stable"}  # the overlapping plan of a concurrent round


INVARIANTS = (  # every invariant the campaigns check, by name (the soak's table has a row for each)
    "no cluster left suspended", "no lock left after a successful run",
    "the hook changes only the pod-shaping spec, suspend and its annotations",
    "no run reports a success that is not", "no pod of a cluster the hook leaves alone is deleted",
    "no cluster recreated twice for one target", "every pod runs its target after the sync",
    "every old pod of a drifted cluster is deleted", "the cycle records its target (last-recreate)",
    "a replacement keeps the head's and the other groups' pods",
    "a replacement keeps each group within its max-unavailable",
    "no pod starts before its ConfigMap is written", "no pod starts before its Secret is written",
    "a Secret's value appears nowhere but in Secrets", "a RecreateFailed Event only from a run that failed",
    "at most one RecreateStarted Event per attempt", "at most one Resumed Event per attempt",
    "a failed run leaves a cluster suspended only under its lock", "the sync succeeds within its attempts",
    "converges after the sync", "the native Recreate replaces the pods after the sync",
    "the hook never fails internally", "the hook never hangs", "the round runs to its end",
)


@contextlib.contextmanager
def fleet_with_proxies(plane: Any, tmp: Path, rev: Revision | None = None) -> Iterator[tuple[Fleet, FaultProxy, FaultProxy]]:
    """A fleet set up (at ``rev``) in two fresh namespaces, a fault proxy for the hook's
    requests and one for the operator's (restarted with its requests through it; back to
    the admin kubeconfig after)."""
    import controlplane

    ns = plane.create_namespace(controlplane.unique_name("fleet"))
    foreign = plane.create_namespace(controlplane.unique_name("foreign"))
    with FaultProxy(plane.kubeconfig) as proxy, FaultProxy(plane.kubeconfig) as operator_proxy:
        plane.restart_operator(operator_proxy.write_kubeconfig())
        try:
            fleet = Fleet(plane, ns, foreign, tmp)
            fleet.setup(rev)
            yield fleet, proxy, operator_proxy
        finally:
            plane.restart_operator(plane.kubeconfig)
            for name in (ns, foreign):
                plane.delete_namespace(name, wait=False)


def mixed_rules(scale: float = 1.0) -> list[Rule]:
    """Every kind at once, each at a fraction of its single-kind probability."""
    rules = []
    for kind_rules in KIND_RULES.values():
        for r in kind_rules:
            rules.append(Rule(r.kind, probability=min(1.0, r.probability * scale / 3), verbs=r.verbs,
                              retry_after=r.retry_after, delay=r.delay, events=r.events, after=r.after))
    return rules


def fresh(rules: list[Rule]) -> list[Rule]:
    """Copies with their counters at zero (a rule counts what it fired)."""
    return [Rule(r.kind, r.probability, r.verbs, r.resources, r.limit, r.retry_after, r.delay, r.events, r.after)
            for r in rules]


@dataclass
class RoundPlan:
    """One sync round: the app's revision, the faults on the hook's requests (``rules``) and
    on the operator's (``operator_rules``), the SIGKILLs (attempt ``i`` of the hook killed
    after ``kills[i]`` s), the operator's outages during the hook runs, how many hooks at
    once (from 2, every second one on an overlapping plan), ``--wait-ready`` or not."""

    revision: Revision
    seed: int = 0
    label: str = "round"
    rules: list[Rule] = field(default_factory=list)
    operator_rules: list[Rule] = field(default_factory=list)
    kills: list[float] = field(default_factory=list)
    outages: list[Outage] = field(default_factory=list)
    concurrent: int = 1
    wait_ready: bool = True
    max_attempts: int = 10

    def to_json(self) -> dict[str, Any]:
        def rules(rs: list[Rule]) -> list[str]:
            return [f"{r.kind}@{r.probability:.2f}" for r in rs]
        return {"label": self.label, "seed": self.seed, "revision": self.revision.to_json(), "rules": rules(self.rules),
                "operatorRules": rules(self.operator_rules), "kills": [round(k, 3) for k in self.kills],
                "outages": [o.to_json() for o in self.outages], "concurrent": self.concurrent,
                "waitReady": self.wait_ready}


@dataclass
class HookFigures:
    rounds: int = 0
    syncs: int = 0  # hook runs
    kills: int = 0
    cycles: int = 0  # drifted clusters brought onto their target, exactly once
    clusters_left_suspended: int = 0
    pods_wrongly_deleted: int = 0
    recreated_twice: int = 0
    internal_errors: int = 0
    operator_outages: int = 0
    takeovers: int = 0  # hook runs that took a lock over (log step "takeover")
    ordered_pods: int = 0  # new pods ordered after the write of the config they read
    unordered_pods: int = 0  # ... that could not be (first seen in a list, not a watch event)
    violations: list[str] = field(default_factory=list)
    invariants: collections.Counter = field(default_factory=collections.Counter)  # invariant -> violations
    paths: collections.Counter = field(default_factory=collections.Counter)  # path -> rounds that took it
    faults: collections.Counter = field(default_factory=collections.Counter)  # on the hook's requests
    operator_faults: collections.Counter = field(default_factory=collections.Counter)  # on the operator's
    kill_phases: collections.Counter = field(default_factory=collections.Counter)  # lock phase a kill left
    requests: collections.Counter = field(default_factory=collections.Counter)
    operator_requests: collections.Counter = field(default_factory=collections.Counter)
    most_unavailable: dict[str, int] = field(default_factory=dict)  # replaced group -> most pods missing
    failed_runs: list[str] = field(default_factory=list)  # warn/error lines of runs that did not exit 0
    seconds: float = 0.0

    COUNTS = ("rounds", "syncs", "kills", "cycles", "clusters_left_suspended", "pods_wrongly_deleted",
              "recreated_twice", "internal_errors", "operator_outages", "takeovers", "ordered_pods",
              "unordered_pods", "seconds")
    COUNTERS = ("invariants", "paths", "faults", "operator_faults", "kill_phases", "requests", "operator_requests")

    def violate(self, invariant: str, messages: list[str], where: str = "") -> None:
        assert invariant in INVARIANTS, invariant
        self.invariants[invariant] += len(messages)
        self.violations += [f"{where}{invariant}: {m}" for m in messages]

    def merge(self, other: "HookFigures") -> None:
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in self.COUNTERS:
            getattr(self, name).update(getattr(other, name))
        self.violations += other.violations
        self.failed_runs += other.failed_runs
        for group, n in other.most_unavailable.items():
            self.most_unavailable[group] = max(self.most_unavailable.get(group, 0), n)

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for name in self.COUNTERS:
            d[name] = dict(getattr(self, name))
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HookFigures":
        f = cls(**{k: v for k, v in d.items() if k not in cls.COUNTERS})
        for name in cls.COUNTERS:
            setattr(f, name, collections.Counter(d.get(name) or {}))
        return f


@dataclass
class _Round:
    """What one round knows while it runs."""

    fleet: Fleet
    plan: RoundPlan
    figures: HookFigures
    main: Rendered
    want: dict[str, dict[str, inv.Stamp]]  # every planned cluster's target
    drifting: dict[str, str]  # cluster -> how it reaches its target: "recreate" | "replace"
    untouchable: list[str]
    old: dict[str, dict[str, dict[str, Any]]]  # cluster -> uid -> pod, at the start
    passwords: list[str]
    abandoned: collections.Counter = field(default_factory=collections.Counter)  # cluster -> failed/deferred runs
    texts: dict[str, str] = field(default_factory=dict)  # where a Secret must never appear

    def where(self, attempt: int | None = None) -> str:
        return f"round {self.fleet.round}" + (f" attempt {attempt}" if attempt else "") + ": "

    def violate(self, invariant: str, messages: list[str], attempt: int | None = None) -> None:
        self.figures.violate(invariant, messages, self.where(attempt))


def sync_round(fleet: Fleet, proxy: FaultProxy, figures: HookFigures, plan: RoundPlan,
               operator_proxy: FaultProxy | None = None, passwords: list[str] | None = None) -> None:
    """One sync of ``plan.revision``: the hook is run (and rerun, as Argo CD retries a failed
    sync) until it exits 0, the manifests are applied, the pods converge, and every
    invariant is checked (after each hook run and after the round).  ``passwords``: every
    Secret value the fleet has had (none may appear anywhere)."""
    start = time.monotonic()
    fleet.round += 1
    ns = fleet.namespace
    previous = fleet.revision
    fleet.revision = plan.revision
    fleet.write(plan.revision)
    main = fleet.render()
    pairs = [(main.plan, main.secrets)]
    if plan.concurrent > 1:  # an overlapping plan: another render holding only some of the clusters
        sub = fleet.render(fleet.write(plan.revision, only=SUBSET, app=fleet.tmp / f"sub-{fleet.round}"), tag="-sub")
        pairs = [(main.plan, main.secrets) if i % 2 == 0 else (sub.plan, sub.secrets) for i in range(plan.concurrent)]
        texts = {"the overlapping render": _rendered_text(sub)}
    else:
        texts = {}
    want = inv.targets(main.clusters(), ns)
    pods = fleet.live_pods()
    clusters = {inv.key(c): c for c in fleet.live_clusters()}
    old = {c: {p["metadata"]["uid"]: p for p in pods if inv.pod_cluster(p) == c} for c in want}
    drifting = {}
    for name in HOOK_MANAGED:
        c = f"{ns}/{name}"
        if any(inv.stamp(p) != want[c].get(inv.pod_group(p)) for p in old[c].values()):
            drifting[c] = "replace" if name == "replace" and _only_workers(old[c], want[c]) else "recreate"
    untouchable = [f"{ns}/{n}" for n in UNTOUCHABLE] + [f"{fleet.foreign_namespace}/drift-a"]
    untouchable += [f"{ns}/{n}" for n in HOOK_MANAGED if f"{ns}/{n}" not in drifting]
    r = _Round(fleet, plan, figures, main, want, drifting, untouchable, old,
               sorted(set((passwords or []) + [plan.revision.password])), texts=texts)
    r.texts["the render (every object but Secrets)"] = _rendered_text(main)
    _count_paths(r, previous, clusters)
    last_before = {c: inv.annotations(clusters[c]).get(inv.LAST) for c in drifting}
    events_before = {reason: fleet.event_counts(reason) for reason in ("RecreateStarted", "Resumed", "RecreateFailed")}
    proxy.set_rules(fresh(plan.rules), seed=plan.seed)
    proxy.reset_stats()
    if operator_proxy is not None:
        operator_proxy.set_rules(fresh(plan.operator_rules), seed=plan.seed + 1)
        operator_proxy.reset_stats()
    kubeconfig = proxy.write_kubeconfig()
    try:
        with Recorder(fleet.plane.kubeconfig, [ns, fleet.foreign_namespace]) as rec:
            with OperatorOutages(fleet.plane, plan.outages) as outages:
                converged = _hook_until_success(r, pairs, kubeconfig)
                if operator_proxy is not None:  # the faults end with the hook runs, then the outages
                    stats = operator_proxy.reset_stats()
                    figures.operator_faults.update(stats.faults)
                    figures.operator_requests.update(stats.requests)
                    operator_proxy.clear()
            hook_done = time.monotonic()
            figures.operator_outages += outages.done
            stats = proxy.reset_stats()
            figures.faults.update(stats.faults)
            figures.requests.update(stats.requests)
            proxy.clear()
            fleet.apply(main.objs)
            final = {c: t for c, t in want.items() if c.split("/")[1] in (*HOOK_MANAGED, "native")}
            try:
                live_pods = fleet.wait_converged(main, final, timeout=120)
            except TimeoutError as err:
                r.violate("converges after the sync", [str(err)[:600]])
                live_pods = fleet.live_pods()
            rec.settle(1.5)
            if converged:
                _check_round(r, rec, hook_done, live_pods, last_before, events_before)
    finally:
        proxy.clear()
        if operator_proxy is not None:
            operator_proxy.clear()
        if not fleet.plane.operator_running:
            start_operator(fleet.plane)
    figures.rounds += 1
    figures.seconds += time.monotonic() - start


def _only_workers(pods: dict[str, dict[str, Any]], target: dict[str, inv.Stamp]) -> bool:
    """ReplaceGroups replaces (rather than recreates) when the head runs its target."""
    return all(inv.stamp(p) == target["head"] for p in pods.values() if inv.pod_group(p) == "head")


def _count_paths(r: _Round, previous: Revision, clusters: dict[str, dict[str, Any]]) -> None:
    """Which paths of the hook this round takes (for the figures)."""
    ns, paths, rev = r.fleet.namespace, r.figures.paths, r.plan.revision
    for c, how in r.drifting.items():
        name = c.split("/")[1]
        groups = {inv.pod_group(p) for p in r.old[c].values()}
        changed = {kind for p in r.old[c].values() for kind, i in (("template", 0), ("ConfigMap", 1), ("Secret", 2))
                   if inv.stamp(p)[i] != (r.want[c].get(inv.pod_group(p)) or (None, None, None))[i]
                   and inv.pod_group(p) in r.want[c]}
        if name == "replace":
            paths["ReplaceGroups: groups replaced" if how == "replace" else "ReplaceGroups: head changed, full cycle"] += 1
            if groups - set(r.want[c]):
                paths["ReplaceGroups: worker group removed"] += 1
        else:
            paths[f"Recreate: {name}"] += 1
        for kind in sorted(changed - {"template"}):
            paths[f"{kind} written before new pods ({name})"] += 1
    if "extra" in r.want.get(f"{ns}/replace", {}) and not previous.extra:
        paths["ReplaceGroups: worker group added"] += 1
    for name in ("noopt", "jobowned", "jobref", "native"):
        if dict(previous.images).get(name) != dict(rev.images).get(name) and f"{ns}/{name}" in r.want:
            paths[{"noopt": "not opted in, image changed", "jobowned": "RayJob-owned (plan), image changed",
                   "jobref": "RayJob-owned (live ownerReference), image changed",
                   "native": "native Recreate by KubeRay 1.6, beside the hook"}[name]] += 1
    if r.plan.concurrent > 1:
        paths[f"{r.plan.concurrent} hooks at once, overlapping plans"] += 1
    if not r.plan.wait_ready:
        paths["--no-wait-ready"] += 1


def _rendered_text(rendered: Rendered) -> str:
    return json.dumps([o for o in rendered.objs + rendered.hooks if o["kind"] != "Secret"])


def _hook_until_success(r: _Round, pairs: list, kubeconfig: str) -> bool:
    """Run the hook (rerun as Argo CD retries) until every run exits 0; per-run invariants.
    Whether it ended in a successful run."""
    fleet, plan, figures = r.fleet, r.plan, r.figures
    waited = plan.wait_ready and fleet.wait_ready
    for attempt in range(1, plan.max_attempts + 1):
        before = fleet.live_clusters()
        kill = plan.kills[attempt - 1] if attempt <= len(plan.kills) else None
        runs = fleet.hook([p for p, _ in pairs], kubeconfig, secrets=[s for _, s in pairs], kill_after=kill,
                          wait_ready=plan.wait_ready)
        figures.syncs += len(runs)
        figures.kills += sum(run.killed for run in runs)
        after = fleet.live_clusters()
        pods = fleet.live_pods()
        if any(run.killed for run in runs):
            for obj in after:
                if inv.key(obj) in r.drifting:
                    lock = inv.annotations(obj).get(inv.LOCK)
                    figures.kill_phases[json.loads(lock).get("phase", "?") if lock else "unlocked"] += 1
        r.violate("the hook changes only the pod-shaping spec, suspend and its annotations",
                  inv.hook_only_changes(before, after), attempt)
        for i, run in enumerate(runs):
            figures.takeovers += '"step": "takeover"' in run.stderr
            r.texts[f"the log and report of attempt {attempt} hook {i}"] = run.stdout + run.stderr
            if run.killed:
                continue
            for item in (run.report or {}).get("clusters") or []:
                if item.get("outcome") in ("failed", "deferred"):
                    r.abandoned[f"{item['namespace']}/{item['name']}"] += 1
            r.violate("no run reports a success that is not", inv.false_successes(run.report, after, pods, {
                c: t for c, t in r.want.items() if c.split("/")[1] in HOOK_MANAGED}, waited), attempt)
            if run.code != 0:
                figures.failed_runs += [f"{r.where(attempt)}{line}" for line in _trouble(run.stderr)]
            if run.code not in (0, 1, None):
                figures.internal_errors += 1
                r.violate("the hook never fails internally", [f"exit {run.code}: {run.stderr.strip().splitlines()[-1:]}"],
                          attempt)
            if run.code is None:
                r.violate("the hook never hangs", ["hung past its own timeout"], attempt)
        if all(run.code == 0 for run in runs):
            left = inv.suspended_clusters(after)
            figures.clusters_left_suspended += len(left)
            r.violate("no cluster left suspended", left, attempt)
            r.violate("no lock left after a successful run", inv.locks_left(after), attempt)
            return True
        r.violate("a failed run leaves a cluster suspended only under its lock",
                  inv.suspended_clusters(after, allow_locked=True), attempt)
    r.violate("the sync succeeds within its attempts", [
        f"no successful hook run in {plan.max_attempts} attempts: "
        + " | ".join(run.stderr.strip().splitlines()[-1][:300] for run in runs if run.stderr.strip())])
    return False


def _check_round(r: _Round, rec: Recorder, hook_done: float, pods: list[dict[str, Any]],
                 last_before: dict[str, str | None], events_before: dict[str, dict[str, int]]) -> None:
    fleet, figures = r.fleet, r.figures
    changes, initial = rec.changes(), rec.initial
    live = {inv.key(c): c for c in fleet.live_clusters()}
    left = inv.suspended_clusters(live.values())
    figures.clusters_left_suspended += len(left)
    r.violate("no cluster left suspended", left)
    native = [c for c in r.want if c.endswith("/native")]
    wrong = inv.wrongly_deleted(changes, r.untouchable) + inv.wrongly_deleted(changes, native, until=hook_done)
    figures.pods_wrongly_deleted += len(wrong)
    r.violate("no pod of a cluster the hook leaves alone is deleted", wrong)
    for c in native:  # KubeRay's own Recreate after the apply: the pods run the new spec
        r.violate("the native Recreate replaces the pods after the sync", inv.pods_on_target(pods, c, r.want[c]))
    for cluster, how in r.drifting.items():
        target = r.want[cluster]
        twice = inv.recreated_twice(changes, cluster, target, initial.get("rayclusters", ()), initial.get("pods", ()))
        figures.recreated_twice += bool(twice)
        r.violate("no cluster recreated twice for one target", twice)
        r.violate("every pod runs its target after the sync", inv.pods_on_target(pods, cluster, target))
        deleted = {c.uid for c in inv.deletions(changes)}
        old = r.old[cluster]
        if how == "replace":
            replaced = {g for g in target if g != "head" and any(
                inv.pod_group(p) == g and inv.stamp(p) != target[g] for p in old.values())}
            gone = {u for u, p in old.items() if inv.pod_group(p) in replaced or inv.pod_group(p) not in target}
            kept = set(old) - gone
            r.violate("a replacement keeps the head's and the other groups' pods",
                      [f"{cluster}: pod {old[u]['metadata']['name']} of group {inv.pod_group(old[u])} deleted"
                       for u in sorted(kept & deleted)])
            worst = inv.unavailability(
                [p for p in initial.get("pods", []) if inv.pod_cluster(p) == cluster], changes, cluster,
                {g: REPLICAS[g] for g in replaced if g in REPLICAS}, until=hook_done)
            for group, n in worst.items():
                figures.most_unavailable[group] = max(figures.most_unavailable.get(group, 0), n)
            r.violate("a replacement keeps each group within its max-unavailable",
                      [f"{cluster}: group {g}: {n} pods unavailable at once, at most {BOUNDS[g]}"
                       for g, n in sorted(worst.items()) if n > BOUNDS[g]])
        else:
            gone = set(old)
        missing = gone - deleted
        r.violate("every old pod of a drifted cluster is deleted",
                  [f"{cluster}: old pods never deleted: {sorted(old[u]['metadata']['name'] for u in missing)}"]
                  if missing else [])
        last = inv.annotations(live[cluster]).get(inv.LAST)
        recorded = last != last_before[cluster] and bool(last) and set(
            [json.loads(last)["to"]["head"], *json.loads(last)["to"]["workers"].values()]) == {
            t for t, _, _ in target.values()}
        if not recorded:
            r.violate("the cycle records its target (last-recreate)", [f"{cluster}: {last}"])
        if recorded and not twice and not missing:
            figures.cycles += 1
    _check_config_order(r, rec)
    _check_events(r, events_before)
    r.texts["the namespace's Events"] = json.dumps(fleet.events())
    r.texts["the RayClusters' annotations"] = json.dumps([inv.annotations(c) for c in live.values()])
    r.texts["the pods' annotations"] = json.dumps([inv.annotations(p) for p in pods])
    r.violate("a Secret's value appears nowhere but in Secrets", inv.leaks(r.passwords, r.texts))


def _check_config_order(r: _Round, rec: Recorder) -> None:
    """Every new pod made from a changed config was created after the hook wrote it."""
    rev = r.plan.revision
    wanted = {("configmaps", "settings", 1): {"MODE": rev.settings},
              ("secrets", "creds", 2): {"PASSWORD": base64.b64encode(rev.password.encode()).decode()}}
    for (resource, name, slot), data in wanted.items():
        written = inv.first_content(rec.initial.get(resource, []), rec.changes(resource), resource, name, data)
        if written == 0:
            continue  # held it already: nothing new for a pod to wait for
        for cluster in r.drifting:
            groups = {g: s for g, s in r.want[cluster].items() if s[slot] is not None and any(
                inv.pod_group(p) == g and inv.stamp(p)[slot] != s[slot] for p in r.old[cluster].values())}
            if not groups:
                continue
            bad, unordered = inv.created_before_config(rec.changes("pods"), cluster, groups, written)
            r.figures.unordered_pods += unordered
            r.figures.ordered_pods += sum(1 for c in inv.created(rec.changes("pods")) if inv.pod_cluster(c.obj) == cluster
                                          and groups.get(inv.pod_group(c.obj)) == inv.stamp(c.obj)) - unordered
            r.violate(f"no pod starts before its {'ConfigMap' if slot == 1 else 'Secret'} is written", bad)


def _check_events(r: _Round, events_before: dict[str, dict[str, int]]) -> None:
    new = {reason: collections.Counter({c: n - before.get(c, 0) for c, n in r.fleet.event_counts(reason).items()})
           for reason, before in events_before.items()}
    for cluster, failed in new["RecreateFailed"].items():
        # a RecreateFailed Event only from a run that reported the cluster failed
        if failed > r.abandoned[cluster]:
            r.violate("a RecreateFailed Event only from a run that failed",
                      [f"{cluster}: {failed} RecreateFailed Events, {r.abandoned[cluster]} failed runs"])
    for reason in ("RecreateStarted", "Resumed"):
        # Events are for people, best effort (a lost one is fine), but never doubled: one per
        # attempt on a drifted cluster (an attempt that failed was rolled back and said so with
        # RecreateFailed; the next run starts a new one), none for the others.
        for cluster, n in new[reason].items():
            allowed = 1 + new["RecreateFailed"][cluster] if cluster in r.drifting else 0
            if n > allowed:
                r.violate(f"at most one {reason} Event per attempt",
                          [f"{cluster}: {n} {reason} Events in one round ({new['RecreateFailed'][cluster]} RecreateFailed)"])


def _trouble(stderr: str, limit: int = 12) -> list[str]:
    """The warn/error lines of a hook's JSON log, shortened (what a failed run met)."""
    lines = []
    for text in stderr.splitlines():
        try:
            doc = json.loads(text)
        except ValueError:
            doc = {"level": "error", "cluster": "-", "step": "-", "msg": text}
        if isinstance(doc, dict) and doc.get("level") in ("warn", "error"):
            lines.append(f"{doc.get('level')} {doc.get('cluster')} {doc.get('step')}: {str(doc.get('msg'))[:200]}")
    return lines[:limit]
