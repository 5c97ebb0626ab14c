"""One hook run: decide for every cluster of the plan(s), run the cycles, summarise.

API cost of a run with nothing to do: two LIST requests per namespace (RayClusters, and
pods with label ``ray.io/cluster``), whatever the number of clusters; a plan that names its
app adds one GET (the fixed-name ConfigMap of the upgrade, :mod:`raygitops.presync.legacy`)
and, the first time, a PATCH per cluster (its claim, :mod:`raygitops.presync.claims`).

Each cluster is decided and cycled in isolation: a cluster that cannot be evaluated (a live
spec that cannot be hashed, an API error in its namespace) is reported ``failed`` and every
other cluster still gets its turn; the exit status says so at the end.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from raygitops.clock import SYSTEM, Clock
from raygitops.kube import retry
from raygitops.kube.client import ApiError
from raygitops.model import configrefs, names, objmeta, pods, verdict
from raygitops.model import lock as locks
from raygitops.model.plan import ClusterPlan, Plan
from raygitops.presync import claims, cycle, legacy, patches, polling
from raygitops.presync.budget import Budget
from raygitops.presync.context import Context, Options, Outcome
from raygitops.presync.logs import RUN, Log


@dataclass
class RunOptions:
    timeout: int
    drain_grace: int
    max_parallel: int
    wait_ready: bool
    dry_run: bool = False
    lease_seconds: int = locks.DEFAULT_LEASE_SECONDS
    stop: threading.Event = field(default_factory=threading.Event)  # set by SIGTERM/SIGINT
    clock: Clock = SYSTEM
    started: float = field(init=False)  # clock.monotonic() when the run's --timeout began

    def __post_init__(self) -> None:
        self.started = self.clock.monotonic()

    @property
    def deadline(self) -> float:
        """The ``clock.monotonic()`` instant by which the run ends (the API client's too)."""
        return self.started + self.timeout


@dataclass
class Report:
    decisions: list[verdict.Verdict] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    dry_run: bool = False
    seconds: float = 0.0
    requests: int = 0
    requests_by_verb: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False  # stopped by SIGTERM/SIGINT: never a success

    def counts(self) -> dict[str, int]:
        out = {"recreated": 0, "inSync": 0, "skipped": 0, "failed": 0, "deferred": 0}
        if self.dry_run:
            out["wouldRecreate"] = 0
        for d in self.decisions:
            result = self._result(d)
            name = {"in-sync": "inSync"}.get(result, result)
            out[name] = out.get(name, 0) + 1
        return out

    @property
    def failed(self) -> bool:
        """Exit status 1: a cluster failed, or was deferred (not done; the sync must not pass)."""
        c = self.counts()
        return self.interrupted or c["failed"] + c["deferred"] > 0

    def line(self) -> str:
        c = self.counts()
        parts = [f"{c['recreated']} recreated", f"{c['inSync']} in sync", f"{c['skipped']} skipped",
                 f"{c['failed']} failed"]
        if c.get("replaced"):
            parts.insert(1, f"{c['replaced']} replaced (worker groups only)")
        if c["deferred"]:
            parts.append(f"{c['deferred']} deferred")
        if self.dry_run:
            parts.insert(0, f"{c['wouldRecreate']} would be recreated")
        prefix = "dry run: " if self.dry_run else ""
        return f"{prefix}{', '.join(parts)} ({self.requests} API requests, {self.seconds:.2f}s)"

    def _result(self, d: verdict.Verdict) -> str:
        o = self.outcomes.get(d.key)
        return o.result if o else {
            verdict.SKIP: cycle.SKIPPED, verdict.IN_SYNC: cycle.IN_SYNC, verdict.RELEASE: cycle.SKIPPED,
            verdict.VERIFY: cycle.IN_SYNC, verdict.FAIL: cycle.FAILED,
        }.get(d.action, "wouldRecreate" if self.dry_run else cycle.FAILED)

    def failure_reason(self) -> str:
        """Why the run failed, in one line: each failed or deferred cluster and its reason."""
        reasons = []
        for d in self.decisions:
            if self._result(d) in (cycle.FAILED, cycle.DEFERRED):
                o = self.outcomes.get(d.key)
                reasons.append(f"{d.key}: {o.message if o else d.reason}")
        if self.interrupted:
            reasons.append("stopped by a signal")
        return " ".join("; ".join(reasons).split())  # one line

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
            "interrupted": self.interrupted,
            "seconds": round(self.seconds, 3),
            "apiRequests": self.requests,
            "apiRequestsByVerb": dict(sorted(self.requests_by_verb.items())),
            "clusters": clusters,
        }


def decide_namespace(kube: Any, plan: Plan, log: Log, dry_run: bool = False) -> list[verdict.Verdict]:
    """Two LIST calls for the whole namespace, the app's claim on its clusters
    (:mod:`raygitops.presync.claims`: a PATCH per cluster the first time only; a dry run only
    looks), then a pure
    decision per cluster.  Whatever fails here fails the clusters it concerns (the
    namespace's, or one), never the run."""
    ns = plan.namespace
    try:
        live = {objmeta.meta(c).get("name"): c for c in kube.list_clusters(ns)}
        pod_list, _ = kube.list_pods(ns, names.CLUSTER_LABEL)
    except ApiError as err:
        if err.status == 401:
            raise  # the credentials, not this namespace: nothing else can work either
        return [_failed(log, verdict.Verdict(ns, e.name, verdict.FAIL, f"cannot read namespace {ns}: {err}"))
                for e in plan.clusters]
    try:
        claimed = claims.claim(kube, plan, live, write=not dry_run)
    except ApiError as err:
        if err.status == 401:
            raise
        return [_failed(log, verdict.Verdict(ns, e.name, verdict.FAIL, f"cannot claim the clusters of app {plan.app}: "
                                             f"{err}")) for e in plan.clusters]
    by_cluster = pods.by_cluster(pod_list)
    crd_knows, probe_problem = _native_probe(kube, ns, [e.name for e in plan.clusters if e.native and e.name in live])
    decisions = []
    for entry in plan.clusters:
        cluster, cluster_pods = live.get(entry.name), by_cluster.get(entry.name, [])
        try:
            d = (verdict.Verdict(ns, entry.name, verdict.FAIL, claimed[entry.name]) if entry.name in claimed
                 else verdict.decide(ns, entry, cluster, cluster_pods))
        except Exception as err:  # noqa: BLE001 - one unexpected live object fails one cluster
            d = verdict.Verdict(ns, entry.name, verdict.FAIL, f"cannot evaluate: {type(err).__name__}: {err}")
        if d.action == verdict.FAIL:
            _failed(log, d)
        else:
            level = "warn" if (d.action == verdict.SKIP and "owned by" in d.reason) or d.outside_git else "info"
            log.emit(level, d.key, "decide", f"{d.action}: {d.reason}", pods=d.pods.min)
            if probe_problem and entry.native:
                d.warnings.append(probe_problem)
            d.warnings += verdict.native_warnings(entry, d, cluster, cluster_pods, crd_knows)
            for warning in d.warnings:
                log.warn(d.key, "native", warning)
        decisions.append(d)
    return decisions


def _native_probe(kube: Any, ns: str, names: list[str]) -> tuple[bool | None, str | None]:
    """Whether the RayCluster CRD knows ``spec.upgradeStrategy``, probed on the first live
    cluster of the plan that asks for the operator's own Recreate (None: no such cluster, or
    the probe failed and the second item says why).  Only ever a warning: it never fails the
    run."""
    if not names:
        return None, None
    try:
        return bool(kube.knows_upgrade_strategy(ns, names[0])), None
    except ApiError as err:
        return None, f"could not check whether the RayCluster CRD knows spec.upgradeStrategy: {err}"


def _failed(log: Log, d: verdict.Verdict) -> verdict.Verdict:
    log.error(d.key, "decide", f"failed: {d.reason}")
    return d


def verify(kube: Any, plan: ClusterPlan, d: verdict.Verdict, opts: RunOptions, log: Log) -> Outcome:
    """A cluster whose pods run the desired template after a recreate that was not seen ready:
    in sync only once it is ready now (then the record says Completed); without
    ``--wait-ready`` it says that readiness was not checked."""
    ns, key = d.namespace, d.key
    if not opts.wait_ready:
        return Outcome(ns, d.name, cycle.IN_SYNC, d.reason.split(":")[0] + "; readiness not checked (--no-wait-ready)")

    def look() -> tuple[bool, str] | None:
        """Read, judge, and record Completed when ready (all again on a 409); None: deleted."""
        live = kube.get_cluster(ns, d.name)
        if live is None:
            return None
        pod_list, _ = kube.list_pods(ns, f"{names.CLUSTER_LABEL}={d.name}")
        ok, message = verdict.ready_for(plan, live, pod_list)
        if ok:
            record = verdict.last_recreate(objmeta.annotations(live)) or {}
            record["outcome"] = locks.COMPLETED
            kube.patch_cluster(ns, d.name, {"metadata": {
                "resourceVersion": objmeta.meta(live).get("resourceVersion"),
                "annotations": patches.record_annotations(locks.json_record(record))}})
        return ok, message

    last = ""
    while True:
        seen = retry.on_conflict(look, "recording the verified recreate")
        if seen is None:
            return Outcome(ns, d.name, cycle.SKIPPED, "the RayCluster was deleted")
        ok, message = seen
        if ok:
            log.info(key, "verify", f"ready now: {message}")
            return Outcome(ns, d.name, cycle.IN_SYNC, f"verified ready ({message}) after a recreate that had not been")
        if message != last:
            log.info(key, "verify", f"waiting: {message}")
            last = message
        if opts.clock.monotonic() >= opts.deadline or opts.stop.is_set():
            why = "interrupted" if opts.stop.is_set() else "timed out"
            return Outcome(ns, d.name, cycle.FAILED, f"{why} waiting for the recreated cluster to be "
                           f"ready ({message}); the recreate to this target is still unverified")
        opts.clock.wait(polling.WAIT_CAP_SECONDS, opts.stop)


def release(kube: Any, ns: str, name: str, resume: bool, log: Log) -> Outcome:
    """Drop a raygitops lock without a recreate: the cluster does not opt in (any more), or is
    desired suspended.  With ``resume``, a cluster an earlier raygitops run suspended (lock
    past phase ``locked``) is resumed as it is: ``spec.suspend: false`` and nothing else in
    the same write; no pod is deleted."""
    key = f"{ns}/{name}"

    def write() -> Outcome:
        live = kube.get_cluster(ns, name)
        text = objmeta.annotations(live).get(names.LOCK_ANNOTATION) if live else None
        if text is None:
            return Outcome(ns, name, cycle.SKIPPED, "no raygitops lock left")
        lock = locks.parse(text)
        wake = resume and (live.get("spec") or {}).get("suspend") is True and (lock is None or lock.phase != locks.LOCKED)
        kube.patch_cluster(ns, name, patches.wake_patch(live, None) if wake else patches.unlock_patch(live, None))
        message = "raygitops lock dropped" + (
            "; the cluster an earlier raygitops run suspended is resumed as it is" if wake
            else "; the cluster stays suspended as desired" if not resume else "") + "; no pod deleted"
        log.warn(key, "unlock", message, holder=lock.holder if lock else "unreadable",
                 phase=lock.phase if lock else None)
        return Outcome(ns, name, cycle.SKIPPED, message)

    return retry.on_conflict(write, "dropping the lock")


def run(kube: Any, plans: list[Plan], opts: RunOptions, log: Log) -> Report:
    """Decide for every cluster of the plans, then run the cycles, ``opts.max_parallel`` at a
    time. The API client is bounded by ``opts.deadline`` too (it is made with it)."""
    start = opts.clock.monotonic()
    report = Report(dry_run=opts.dry_run)
    by_key = {}
    contents: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for plan in plans:
        legacy.remove(kube, plan, log, opts.dry_run)
        contents[plan.namespace] = {configrefs.CONFIGMAP: plan.config_maps, configrefs.SECRET: plan.secrets}
        for entry in plan.clusters:
            by_key[f"{plan.namespace}/{entry.name}"] = entry
        report.decisions.extend(decide_namespace(kube, plan, log, opts.dry_run))

    todo = [d for d in report.decisions if d.action in (*verdict.CYCLES, verdict.RELEASE, verdict.VERIFY)]
    if opts.dry_run:
        for d in todo:
            what = {verdict.RELEASE: "drop the lock", verdict.VERIFY: "wait for readiness",
                    verdict.REPLACE: "replace worker groups"}.get(d.action, "recreate")
            log.info(d.key, "dry-run", f"would {what}: {d.reason}", pods=d.pods.min)
    elif todo:
        holder = locks.new_holder()
        copts = Options(deadline=opts.deadline, drain_grace=opts.drain_grace,
                        wait_ready=opts.wait_ready, lease_seconds=opts.lease_seconds,
                        resume_reserve=min(15.0, opts.timeout / 10), stop=opts.stop,
                        budget=Budget(opts.deadline, opts.timeout, opts.clock))
        log.info(RUN, "start", f"{len(todo)} clusters to recreate, up to {opts.max_parallel} at a time",
                 holder=holder)

        def one(d: verdict.Verdict) -> Outcome:
            if opts.stop.is_set():
                return Outcome(d.namespace, d.name, cycle.DEFERRED,
                               "not started: interrupted (SIGTERM/SIGINT) before its turn; not touched")
            try:
                if d.action == verdict.RELEASE:
                    return release(kube, d.namespace, d.name, not by_key[d.key].suspend, log)
                if d.action == verdict.VERIFY:
                    return verify(kube, by_key[d.key], d, opts, log)
                context = Context(kube, log, d.namespace, by_key[d.key], copts, holder, opts.clock,
                                  contents[d.namespace])
                return cycle.run(context, d)
            except Exception as err:  # noqa: BLE001 - one cluster's bug must not hide the others
                log.error(d.key, "failed", f"{type(err).__name__}: {err}")
                return Outcome(d.namespace, d.name, cycle.FAILED, f"{type(err).__name__}: {err}")

        with ThreadPoolExecutor(max_workers=max(1, opts.max_parallel), thread_name_prefix="cycle") as pool:
            for outcome in pool.map(one, todo):
                report.outcomes[f"{outcome.namespace}/{outcome.name}"] = outcome
    report.seconds = opts.clock.monotonic() - start
    report.requests = getattr(kube, "requests", 0)
    report.requests_by_verb = dict(getattr(kube, "by_verb", {}))
    return report
