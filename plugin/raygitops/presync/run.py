"""One hook run: decide for every cluster of the plan(s), run the cycles, summarise.

API cost of a run with nothing to do: two LIST requests per namespace (RayClusters, and
pods with label ``ray.io/cluster``), whatever the number of clusters.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from raygitops.plan import Plan
from raygitops.presync import cycle, drift
from raygitops.presync import lock as locks
from raygitops.presync.kubeapi import Conflict
from raygitops.presync.logs import RUN, Log


@dataclass
class RunOptions:
    timeout: int
    drain_grace: int
    max_parallel: int
    wait_ready: bool
    dry_run: bool = False
    lease_seconds: int = locks.DEFAULT_LEASE_SECONDS


@dataclass
class Report:
    decisions: list[drift.Decision] = field(default_factory=list)
    outcomes: dict[str, cycle.Outcome] = field(default_factory=dict)
    dry_run: bool = False
    seconds: float = 0.0
    requests: int = 0
    requests_by_verb: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out = {"recreated": 0, "inSync": 0, "skipped": 0, "failed": 0}
        if self.dry_run:
            out["wouldRecreate"] = 0
        for d in self.decisions:
            o = self.outcomes.get(d.key)
            result = o.result if o else {
                drift.SKIP: cycle.SKIPPED, drift.IN_SYNC: cycle.IN_SYNC, drift.RELEASE: cycle.SKIPPED,
            }.get(d.action, "wouldRecreate" if self.dry_run else cycle.FAILED)
            name = {"in-sync": "inSync"}.get(result, result)
            out[name] = out.get(name, 0) + 1
        return out

    @property
    def failed(self) -> bool:
        return self.counts().get("failed", 0) > 0

    def line(self) -> str:
        c = self.counts()
        parts = [f"{c['recreated']} recreated", f"{c['inSync']} in sync", f"{c['skipped']} skipped",
                 f"{c['failed']} failed"]
        if self.dry_run:
            parts.insert(0, f"{c['wouldRecreate']} would be recreated")
        prefix = "dry run: " if self.dry_run else ""
        return f"{prefix}{', '.join(parts)} ({self.requests} API requests, {self.seconds:.2f}s)"

    def to_json(self) -> dict[str, Any]:
        clusters = []
        for d in self.decisions:
            item = d.to_json()
            o = self.outcomes.get(d.key)
            if o is not None:
                item["outcome"] = o.result
                item["message"] = o.message
                item["seconds"] = round(o.seconds, 3)
                if o.drain_to_resume is not None:
                    item["drainToResumeSeconds"] = round(o.drain_to_resume, 4)
            clusters.append(item)
        return {
            "kind": "PresyncReport",
            "dryRun": self.dry_run,
            "summary": self.counts(),
            "failed": self.failed,
            "seconds": round(self.seconds, 3),
            "apiRequests": self.requests,
            "apiRequestsByVerb": dict(sorted(self.requests_by_verb.items())),
            "clusters": clusters,
        }


def decide_namespace(kube: Any, plan: Plan, log: Log) -> list[drift.Decision]:
    """Two LIST calls for the whole namespace, then a pure decision per cluster."""
    ns = plan.namespace
    live = {drift.meta(c).get("name"): c for c in kube.list_clusters(ns)}
    pods, _ = kube.list_pods(ns, drift.CLUSTER_LABEL)
    by_cluster = drift.pods_by_cluster(pods)
    decisions = []
    for entry in plan.clusters:
        d = drift.decide(ns, entry, live.get(entry.name), by_cluster.get(entry.name, []))
        level = "warn" if d.action == drift.SKIP and "owned by" in d.reason else "info"
        log.emit(level, d.key, "decide", f"{d.action}: {d.reason}", pods=d.pods)
        decisions.append(d)
    return decisions


def release(kube: Any, ns: str, name: str, resume: bool, log: Log) -> cycle.Outcome:
    """Drop a raygitops lock without a recreate: the cluster does not opt in (any more), or is
    desired suspended.  With ``resume``, a cluster an earlier raygitops run suspended (lock
    past phase ``locked``) is resumed as it is: ``spec.suspend: false`` and nothing else in
    the same write; no pod is deleted."""
    key = f"{ns}/{name}"
    for _ in range(cycle.MAX_CONFLICTS):
        live = kube.get_cluster(ns, name)
        text = drift.annotations(live).get(locks.LOCK_ANNOTATION) if live else None
        if text is None:
            return cycle.Outcome(ns, name, cycle.SKIPPED, "no raygitops lock left")
        lock = locks.parse(text)
        patch: dict[str, Any] = {"metadata": {"resourceVersion": drift.meta(live).get("resourceVersion"),
                                              "annotations": {locks.LOCK_ANNOTATION: None}}}
        wake = resume and (live.get("spec") or {}).get("suspend") is True and (lock is None or lock.phase != locks.LOCKED)
        if wake:
            patch["spec"] = {"suspend": False}
        try:
            kube.patch_cluster(ns, name, patch)
        except Conflict:
            continue
        message = "raygitops lock dropped" + (
            "; the cluster an earlier raygitops run suspended is resumed as it is" if wake
            else "; the cluster stays suspended as desired" if not resume else "") + "; no pod deleted"
        log.warn(key, "unlock", message, holder=lock.holder if lock else "unreadable",
                 phase=lock.phase if lock else None)
        return cycle.Outcome(ns, name, cycle.SKIPPED, message)
    raise cycle.CycleError("gave up dropping the lock after repeated write conflicts")


def run(kube: Any, plans: list[Plan], opts: RunOptions, log: Log) -> Report:
    start = time.monotonic()
    report = Report(dry_run=opts.dry_run)
    by_key = {}
    for plan in plans:
        for entry in plan.clusters:
            by_key[f"{plan.namespace}/{entry.name}"] = entry
        report.decisions.extend(decide_namespace(kube, plan, log))

    todo = [d for d in report.decisions if d.action in (drift.RECREATE_ACTION, drift.RELEASE)]
    if opts.dry_run:
        for d in todo:
            log.info(d.key, "dry-run", f"would {'drop the lock' if d.action == drift.RELEASE else 'recreate'}: "
                     f"{d.reason}", pods=d.pods)
    elif todo:
        holder = locks.new_holder()
        copts = cycle.Options(deadline=start + opts.timeout, drain_grace=opts.drain_grace,
                              wait_ready=opts.wait_ready, lease_seconds=opts.lease_seconds,
                              resume_reserve=min(15.0, opts.timeout / 10))
        log.info(RUN, "start", f"{len(todo)} clusters to recreate, up to {opts.max_parallel} at a time",
                 holder=holder)

        def one(d: drift.Decision) -> cycle.Outcome:
            try:
                if d.action == drift.RELEASE:
                    return release(kube, d.namespace, d.name, not by_key[d.key].suspend, log)
                return cycle.Cycle(kube, log, d.namespace, by_key[d.key], d, copts, holder).run()
            except Exception as err:  # noqa: BLE001 - one cluster's bug must not hide the others
                log.error(d.key, "failed", f"{type(err).__name__}: {err}")
                return cycle.Outcome(d.namespace, d.name, cycle.FAILED, f"{type(err).__name__}: {err}")

        with ThreadPoolExecutor(max_workers=max(1, opts.max_parallel), thread_name_prefix="cycle") as pool:
            for outcome in pool.map(one, todo):
                report.outcomes[f"{outcome.namespace}/{outcome.name}"] = outcome
    report.seconds = time.monotonic() - start
    report.requests = getattr(kube, "requests", 0)
    report.requests_by_verb = dict(getattr(kube, "by_verb", {}))
    return report
