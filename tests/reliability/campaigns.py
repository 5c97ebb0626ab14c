"""Campaigns on the PreSync hook: faults, kills and concurrency, with the invariants checked
after every hook run (see invariants.py and fleet.py).  Used by test_hook_campaigns.py and
tests/bench/bench_reliability.py.
"""

from __future__ import annotations

import collections
import json
import random
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from reliability import invariants as inv
from reliability.chaos import FlakyOperator
from reliability.faultproxy import FaultProxy, Rule
from reliability.fleet import DRIFTING, UNTOUCHABLE, Fleet

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


def mixed_rules(scale: float = 1.0) -> list[Rule]:
    """Every kind at once, each at a fraction of its single-kind probability."""
    rules = []
    for kind_rules in KIND_RULES.values():
        for r in kind_rules:
            rules.append(Rule(r.kind, probability=min(1.0, r.probability * scale / 3), verbs=r.verbs,
                              retry_after=r.retry_after, delay=r.delay, events=r.events, after=r.after))
    return rules


@dataclass
class HookFigures:
    rounds: int = 0
    syncs: int = 0  # hook runs
    kills: int = 0
    cycles: int = 0  # drifted clusters recreated onto their target, exactly once
    clusters_left_suspended: int = 0
    pods_wrongly_deleted: int = 0
    recreated_twice: int = 0
    internal_errors: int = 0
    violations: list[str] = field(default_factory=list)
    faults: collections.Counter = field(default_factory=collections.Counter)
    kill_phases: collections.Counter = field(default_factory=collections.Counter)  # lock phase a kill left
    requests: collections.Counter = field(default_factory=collections.Counter)
    failed_runs: list[str] = field(default_factory=list)  # warn/error lines of runs that did not exit 0
    seconds: float = 0.0

    def merge(self, other: "HookFigures") -> None:
        for name in ("rounds", "syncs", "kills", "cycles", "clusters_left_suspended", "pods_wrongly_deleted",
                     "recreated_twice", "internal_errors", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.violations += other.violations
        self.failed_runs += other.failed_runs
        self.faults.update(other.faults)
        self.kill_phases.update(other.kill_phases)
        self.requests.update(other.requests)

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["faults"], d["requests"] = dict(self.faults), dict(self.requests)
        d["kill_phases"] = dict(self.kill_phases)
        return d


def _targets(objs: list[dict[str, Any]], namespace: str) -> dict[str, set[str]]:
    return {f"{namespace}/{o['metadata']['name']}": inv.desired_hashes(o) for o in objs
            if o["kind"] == "RayCluster" and o["metadata"]["name"] in DRIFTING}


def sync_round(fleet: Fleet, proxy: FaultProxy, figures: HookFigures, *,
               rules: list[Rule] | None = None, seed: int = 0,
               kill: Callable[[int], float | None] | None = None,
               concurrent: int = 1, subset: bool = False, max_attempts: int = 8,
               flaky_operator: bool = False) -> None:
    """One sync of a new revision (every drifting cluster gets a new image) under faults:
    the hook is run (and rerun, as Argo CD retries a failed sync) until it exits 0, the
    manifests are applied, and every invariant is checked."""
    start = time.monotonic()
    fleet.round += 1
    fleet.write(fleet.round)
    objs, plan = fleet.render()
    plans = [plan]
    if subset:  # an overlapping plan: another render holding only some of the clusters
        sub_app = fleet.write(fleet.round, only={"drift-a", "stable"}, app=fleet.tmp / f"sub-{fleet.round}")
        _, sub_plan = fleet.render(sub_app, tag="-sub")
        plans.append(sub_plan)
    targets = _targets(objs, fleet.namespace)
    untouchable = [f"{fleet.namespace}/{n}" for n in UNTOUCHABLE] + [f"{fleet.foreign_namespace}/drift-a"]
    old_uids = {c: {p["metadata"]["uid"] for p in fleet.live_pods() if inv.pod_cluster(p) == c} for c in targets}
    violations: list[str] = []
    events_before = {r: fleet.events(r) for r in ("RecreateStarted", "Resumed", "RecreateFailed")}
    abandoned: collections.Counter = collections.Counter()  # per cluster: runs that reported it failed/deferred
    proxy.set_rules(rules or [], seed=seed)
    proxy.reset_stats()
    kubeconfig = proxy.write_kubeconfig()
    operator = FlakyOperator(fleet.plane, down=2.0, period=5.0, seed=seed) if flaky_operator else None
    try:
        with inv.PodWatch(fleet.plane.kubeconfig, [fleet.namespace, fleet.foreign_namespace]) as watch:
            if operator:
                operator.__enter__()
            attempt = 0
            while True:
                attempt += 1
                before = fleet.live_clusters()
                if concurrent > 1 or len(plans) > 1:
                    runs = _concurrent(fleet, [plans[i % len(plans)] for i in range(max(concurrent, len(plans)))],
                                       kubeconfig)
                else:
                    runs = [fleet.hook(plan, kubeconfig, kill_after=kill(attempt) if kill else None)]
                figures.syncs += len(runs)
                figures.kills += sum(r.killed for r in runs)
                after = fleet.live_clusters()
                if any(r.killed for r in runs):
                    for obj in after:
                        if inv.key(obj) in targets:
                            lock = inv.annotations(obj).get(inv.LOCK)
                            figures.kill_phases[json.loads(lock).get("phase", "?") if lock else "unlocked"] += 1
                violations += [f"round {fleet.round} attempt {attempt}: {v}" for v in inv.hook_only_changes(before, after)]
                for r in runs:
                    for item in (r.report or {}).get("clusters") or []:
                        if item.get("outcome") in ("failed", "deferred"):
                            abandoned[f"{item['namespace']}/{item['name']}"] += 1
                    if r.code != 0:
                        figures.failed_runs += [f"round {fleet.round} attempt {attempt}: {line}"
                                                for line in _trouble(r.stderr)]
                    if r.code not in (0, 1, None):
                        figures.internal_errors += 1
                        violations.append(f"hook exit {r.code}: {r.stderr.strip().splitlines()[-1:]}")
                    if r.code is None and not r.killed:
                        violations.append("hook hung past its own timeout")
                if all(r.code == 0 for r in runs):
                    left = inv.suspended_clusters(after)
                    figures.clusters_left_suspended += len(left)
                    violations += left + inv.locks_left(after)
                    break
                violations += [f"after a failed/killed run: {v}" for v in inv.suspended_clusters(after, allow_locked=True)]
                if attempt >= max_attempts:
                    violations.append(f"round {fleet.round}: no successful hook run in {attempt} attempts: "
                                      + " | ".join(r.stderr.strip().splitlines()[-1][:300] for r in runs
                                                   if r.stderr.strip()))
                    break
            if operator:
                operator.stop()
            stats = proxy.reset_stats()
            proxy.clear()
            figures.faults.update(stats.faults)
            figures.requests.update(stats.requests)
            fleet.apply(objs)
            want = dict(targets) | {c: None for c in untouchable}
            try:
                fleet.wait_pods(want, timeout=120)
            except TimeoutError as err:
                violations.append(f"round {fleet.round}: did not converge: {err}")
            live = fleet.live_clusters()
            left = inv.suspended_clusters(live)
            figures.clusters_left_suspended += len(left)
            violations += left
            pods = fleet.live_pods()
            watch.settle(1.5)
            wrong = watch.wrongly_deleted(untouchable)
            figures.pods_wrongly_deleted += len(wrong)
            violations += wrong
            new_events = {reason: collections.Counter({c: n - before.get(c, 0) for c, n in fleet.events(reason).items()})
                          for reason, before in events_before.items()}
            for cluster, failed in new_events["RecreateFailed"].items():
                # a RecreateFailed Event only from a run that reported the cluster failed
                if failed > abandoned[cluster]:
                    violations.append(f"{cluster}: {failed} RecreateFailed Events, {abandoned[cluster]} failed runs")
            for reason in ("RecreateStarted", "Resumed"):
                # Events are for people, best effort (a lost one is fine), but never doubled:
                # one per attempt on a drifted cluster (an attempt that failed was rolled back
                # and said so with RecreateFailed; the next run starts a new one), none for the others.
                for cluster, new in new_events[reason].items():
                    allowed = 1 + new_events["RecreateFailed"][cluster] if cluster in targets else 0
                    if new > allowed:
                        violations.append(f"{cluster}: {new} {reason} Events in one round "
                                          f"({new_events['RecreateFailed'][cluster]} RecreateFailed)")
            for cluster, target in targets.items():
                twice = watch.recreated_twice(cluster, target)
                figures.recreated_twice += bool(twice)
                violations += twice
                violations += inv.pods_on_target(pods, cluster, target)
                missing = old_uids[cluster] - watch.deleted_uids(cluster)
                if missing:
                    violations.append(f"{cluster}: old pods never deleted: {sorted(missing)}")
                obj = next(o for o in live if inv.key(o) == cluster)
                last = inv.annotations(obj).get(inv.LAST)
                done = bool(last) and set([json.loads(last)["to"]["head"], *json.loads(last)["to"]["workers"].values()]) == target
                if not done:
                    violations.append(f"{cluster}: last-recreate does not record the target: {last}")
                if done and not twice and not missing:
                    figures.cycles += 1
    finally:
        if operator and not fleet.plane.operator_running:
            fleet.plane.start_operator()
        proxy.clear()
    figures.rounds += 1
    figures.violations += violations
    figures.seconds += time.monotonic() - start


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


def _concurrent(fleet: Fleet, plans, kubeconfig: str):
    from reliability.fleet import HookRun

    start = time.monotonic()
    procs = [fleet.spawn(p, kubeconfig) for p in plans]
    runs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=fleet.hook_timeout + 60)
            code = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            code = None
        runs.append(HookRun(code, out, err, time.monotonic() - start))
    fleet.runs.extend(runs)
    return runs


def kill_schedule(seed: int, kills: int, max_delay: float) -> Callable[[int], float | None]:
    """SIGKILL the first ``kills`` attempts after a random delay in (0.2, max_delay) s."""
    rng = random.Random(seed)

    def delay(attempt: int) -> float | None:
        return rng.uniform(0.2, max_delay) if attempt <= kills else None

    return delay
