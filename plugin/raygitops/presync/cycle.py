"""The recreate cycle of one RayCluster: a state machine whose state lives on the RayCluster.

:func:`next_step` is pure: from the live object (its lock annotation and ``spec.suspend``)
and who we are, it says what to do next.  :class:`Cycle` executes steps against the API
(through :mod:`raygitops.kube.client`), re-reading and re-deciding after every write,
so that a 409 (someone else wrote in between) is just another turn of the loop, and any hook
run can finish a cycle another one started:

    (no lock) ─ACQUIRE→ locked ─SUSPEND→ suspended ─DRAIN (to 0 pods, then the resume
        write)→ resumed ─WAIT_READY (then the unlock write)→ (no lock, last-recreate written)

After the suspend and after the resume write the operator is prompted (a lease renewal as
soon as its status shows the change taken in: :mod:`raygitops.presync.prompt`), so that it
deletes and creates the pods without waiting for its own requeue; the resume waits until it
reports the suspend finished.

ReplaceGroups (docs/presync.md) takes a shorter path on the same machinery; nothing is
suspended:

    (no lock) ─ACQUIRE (desired spec + lock ``replacing``, one write)→ replacing ─REPLACE
        (delete stale pods of the changed groups in batches of max-unavailable, wait for
        their replacements, then wait for readiness and the unlock write)→ (no lock)

A lock held by someone else is waited for (WAIT) while its lease is being renewed, and taken
over (TAKEOVER) once it is not.  On failure, a signal or a deadline after the suspend the
cluster is resumed before the hook reports it: with the desired spec when the drain had
finished (no old pod left), else as it is (its old pods come back); never left suspended.

Bounds (docs/presync.md, "Guarantees"): a cycle starts only when the run's
:class:`~raygitops.presync.budget.Budget` covers it; ``spec.suspend`` is written at most
:data:`MAX_SUSPEND_WRITES` times per cycle (a webhook or controller that undoes it fails the
cycle instead of an endless loop); a stop request (SIGTERM/SIGINT) is seen within
:data:`~raygitops.presync.drain.WATCH_SECONDS` and no new step starts after it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from raygitops.model import objmeta
from raygitops.model.plan import ClusterPlan
from raygitops.model import pods as podsmod
from raygitops.model import verdict
from raygitops.presync import configlive, drain, events, patches, polling, prompt, replace
from raygitops.presync.budget import Budget
from raygitops.model import lock as locks
from raygitops.kube.client import ApiError, Conflict, Gone, NotFound, StreamBroken
from raygitops.presync.logs import Log
from raygitops.model.strategy import DEFAULT_MAX_UNAVAILABLE
from raygitops.model import names

# Steps
GONE = "gone"
ACQUIRE = "acquire"
WAIT = "wait"
TAKEOVER = "takeover"
SUSPEND = "suspend"
DRAIN = "drain"
WAIT_READY = "wait-ready"
REPLACE = "replace"

# Steps after which self.live is the server's answer to our own write (no GET needed).
ANSWERED_BY_OUR_WRITE = frozenset({ACQUIRE, TAKEOVER, SUSPEND, DRAIN, WAIT_READY})

# Outcomes
RECREATED = "recreated"
REPLACED = "replaced"
IN_SYNC = "in-sync"
FAILED = "failed"
SKIPPED = "skipped"
DEFERRED = "deferred"

PAUSE_ENV = "RAYGITOPS_TEST_PAUSE_AT"
MAX_CONFLICTS = 50
MAX_SUSPEND_WRITES = 3
MAX_WATCH_RESTARTS = 3  # a RayCluster watch read again after a 410 or a drop, per wait
POLL_SECONDS = 1.0  # the longest sleep between two reads while waiting (polling.delays)
FIRST_POLL_SECONDS = 0.1  # the first: new pods are often Ready, a batch replaced, within it
RECOVER_AFTER_STOP_SECONDS = 20.0  # a signalled run resumes and exits well inside 30 s


class CycleError(Exception):
    """The cycle cannot go on (timeout, lost lock, API error)."""


class LostLock(CycleError):
    """Another hook took the lock over: it finishes the cycle, not us."""


class Interrupted(CycleError):
    """A stop was requested (SIGTERM/SIGINT): no new step; resume and report."""


class Deferred(CycleError):
    """Not enough of the run's time budget left to start the cycle."""


class SuspendUndone(Exception):
    """``spec.suspend`` was seen false again during the drain: suspend again (bounded)."""


def waiting_delays() -> Iterator[float]:
    """Sleeps while waiting for pods (readiness, a replaced batch): from
    :data:`FIRST_POLL_SECONDS` up to :data:`POLL_SECONDS`; restarted whenever something moved."""
    return polling.delays(FIRST_POLL_SECONDS, POLL_SECONDS)


def next_step(live: dict[str, Any] | None, holder: str, unchanged_for: float = 0.0, replace: bool = False) -> str:
    """What to do next with this RayCluster (pure); ``replace``: this run replaces worker
    groups (a ``replacing`` lock it holds turns into a full cycle otherwise: nothing was
    suspended, so the cycle can start from its suspend)."""
    if live is None:
        return GONE
    text = objmeta.annotations(live).get(names.LOCK_ANNOTATION)
    if text is None:
        return ACQUIRE
    lock = locks.parse(text)
    if lock is None:
        return TAKEOVER  # unreadable: no live holder can be renewing it
    if lock.holder != holder:
        return TAKEOVER if lock.expired(unchanged_for) else WAIT
    suspended = (live.get("spec") or {}).get("suspend") is True
    if lock.phase == locks.REPLACING:
        return REPLACE if replace else SUSPEND
    if lock.phase == locks.LOCKED:
        return SUSPEND
    if lock.phase == locks.SUSPENDED:
        return DRAIN if suspended else SUSPEND
    return WAIT_READY


def replace_lock(lock: locks.Lock, groups: tuple[str, ...], now: float) -> locks.Lock:
    """The lock of a replacement: phase ``replacing``, recording the groups it replaces."""
    return dataclasses.replace(lock.at(locks.REPLACING, now), groups=groups)


def held_lock(live: dict[str, Any] | None) -> locks.Lock | None:
    if live is None:
        return None
    return locks.parse(objmeta.annotations(live).get(names.LOCK_ANNOTATION))


@dataclass
class Options:
    deadline: float  # time.monotonic() by which the run must end
    drain_grace: float
    wait_ready: bool
    lease_seconds: int = locks.DEFAULT_LEASE_SECONDS
    resume_reserve: float = 15.0  # drain gives up this long before the deadline
    stop: threading.Event = field(default_factory=threading.Event)  # set by SIGTERM/SIGINT
    budget: Budget | None = None  # None: no cycle is deferred


@dataclass
class Outcome:
    namespace: str
    name: str
    result: str
    message: str
    seconds: float = 0.0
    drain_to_resume: float | None = None  # seconds from "0 pods seen" to the resume write


def test_pause(step: str, log: Log, cluster: str) -> None:
    """RAYGITOPS_TEST_PAUSE_AT=<step>: sleep at that step so a test can SIGKILL the hook
    deterministically.  Steps: locked, suspended, draining, resumed.  Tests only."""
    if os.environ.get(PAUSE_ENV) == step:
        log.warn(cluster, step, f"{PAUSE_ENV}={step}: pausing (test hook)")
        # bounded, so a test that dies before its kill leaves no hook behind for long
        time.sleep(float(os.environ.get("RAYGITOPS_TEST_PAUSE_SECONDS", "120")))


class Cycle:
    def __init__(self, kube: Any, log: Log, namespace: str, plan: ClusterPlan, decision: verdict.Verdict,
                 opts: Options, holder: str, clock: Callable[[], float] = time.time,
                 config: dict[str, dict[str, dict[str, Any]]] | None = None):
        self.kube, self.log, self.ns, self.plan = kube, log, namespace, plan
        self.config = config or {}  # ConfigMap and Secret contents by kind, name (configlive)
        self.decision, self.opts, self.holder, self.clock = decision, opts, holder, clock
        self.key = f"{namespace}/{plan.name}"
        self.target = plan.hashes.to_json()
        self.live: dict[str, Any] | None = None
        self.failure: str | None = None
        self.recheck = False
        self.recreated = False
        self.drain_to_resume: float | None = None
        self._renew_at = 0.0
        self._paused_draining = False
        self.drain_zero_at: float | None = None
        self.suspend_writes = 0
        self.started: float | None = None  # time.monotonic() of our first write
        # ReplaceGroups: the worker groups to replace, and the pods this run deleted per group
        self.replace, self.groups = decision.replaces, decision.replaced_groups()
        self.deleted: dict[str, int] = {}
        self.removed_deleted = 0
        self._progress = ""
        self._replace_delays = waiting_delays()
        self._seen_lock: tuple[str | None, float] = (None, time.monotonic())

    # ------------------------------------------------------------------ helpers

    def _event(self, reason: str, message: str) -> None:
        if self.live is None:
            return
        try:
            self.kube.create_event(self.ns, events.event_body(self.live, reason, message))
        except ApiError as err:
            self.log.warn(self.key, "event", f"cannot record Event {reason}: {err}")

    def _get(self) -> dict[str, Any] | None:
        self.live = self.kube.get_cluster(self.ns, self.plan.name)
        return self.live

    def _patch(self, patch: dict[str, Any]) -> dict[str, Any]:
        self.live = self.kube.patch_cluster(self.ns, self.plan.name, patch)
        return self.live

    def _unchanged_for(self) -> float:
        """How long this run has seen the same lock annotation value (lease by observation)."""
        text = objmeta.annotations(self.live or {}).get(names.LOCK_ANNOTATION)
        if text != self._seen_lock[0]:
            self._seen_lock = (text, time.monotonic())
        return time.monotonic() - self._seen_lock[1]

    def _left(self) -> float:
        return self.opts.deadline - time.monotonic()

    def _check_stop(self) -> None:
        if self.opts.stop.is_set():
            raise Interrupted("interrupted (SIGTERM/SIGINT): no new step started")

    def _sleep(self, seconds: float) -> None:
        """Sleep, waking at once on a stop request."""
        if self.opts.stop.wait(seconds):
            self._check_stop()

    def _check_budget(self) -> None:
        why = self.opts.budget.shortfall() if self.opts.budget else None
        if why:
            raise Deferred(f"deferred, not touched: {why}; the next sync picks it up")

    def _my_lock(self) -> locks.Lock:
        lock = held_lock(self.live)
        if lock is None or lock.holder != self.holder:
            raise LostLock(f"lock taken over by {lock.holder if lock else 'nobody'}")
        return lock

    def _lease_written(self) -> None:
        """Our lock was just written: the next renewal is due a third of a lease from now."""
        self._renew_at = time.monotonic() + self.opts.lease_seconds / 3

    def _renew(self) -> None:
        """Renew the lease when due (GET + PATCH with resourceVersion; 409 → again)."""
        if time.monotonic() < self._renew_at:
            return
        for _ in range(MAX_CONFLICTS):
            self._get()
            lock = self._my_lock()
            try:
                self._patch(patches.lock_patch(self.live, lock.renewed(self.clock())))
                break
            except Conflict:
                continue
        self._lease_written()

    def _prompt_operator(self, goal: frozenset[str]) -> None:
        """Until the operator's status reaches ``goal`` (:mod:`raygitops.presync.prompt`):
        each change it makes (suspending, suspended, neither) is answered with a lease
        renewal when its next reconcile has work to do (delete or create the pods), so that
        reconcile starts now rather than after its 2 s requeue.  At most
        :data:`prompt.PROMPT_SECONDS` after the last change; best effort: an API error only
        costs the operator's requeue."""
        if not prompt.has_suspend_conditions(self.live) or prompt.suspend_state(self.live) in goal:
            return  # no conditions: it suspends and resumes in one reconcile, nothing to prompt
        last: str | None = prompt.suspend_state(self.live)
        since = time.monotonic()
        try:
            for _ in self._versions(lambda: since + prompt.PROMPT_SECONDS):
                if self.live is None:
                    return  # deleted meanwhile: the main loop sees it gone
                lock = self._my_lock()
                state = prompt.suspend_state(self.live)
                if state == last:
                    continue
                last = state
                if not prompt.operator_has_work(state, (self.live.get("spec") or {}).get("suspend") is True):
                    if state in goal:
                        return
                    continue
                try:
                    self._patch(patches.lock_patch(self.live, lock.renewed(self.clock())))
                except Conflict:
                    last = None  # written meanwhile (perhaps only the status): prompt again on that version
                    continue
                except NotFound:
                    self.live = None
                    return  # deleted meanwhile: the main loop sees it gone
                self._lease_written()
                self.log.info(self.key, "prompt", "lease renewed: the operator's next reconcile starts now, "
                              "not after its 2 s requeue", operator=state or "running",
                              seconds=round(time.monotonic() - since, 3))
                if state in goal:
                    return
                since = time.monotonic()  # the next step gets its own time
        except ApiError as err:
            if err.status in (401, 403):
                raise
            self.log.info(self.key, "prompt", f"cannot prompt the operator ({err}): it acts on its own requeue")

    def _versions(self, until: Callable[[], float]) -> Iterator[None]:
        """Each newer version of the cluster, put into ``self.live`` (None once it is
        deleted), until the ``time.monotonic()`` instant ``until()``.  A watch from the
        version in hand, so that a change is seen as it is made and none is missed; after a
        410, a dropped stream or a stream that ends early, one GET and a watch from there, at
        most :data:`MAX_WATCH_RESTARTS` times."""
        restarts = 0
        while (left := until() - time.monotonic()) > 0:
            self._check_stop()
            started, rv = time.monotonic(), objmeta.meta(self.live).get("resourceVersion", "")
            try:
                with closing(self.kube.watch_cluster(self.ns, self.plan.name, rv, math.ceil(left))) as changes:
                    for kind, obj in changes:
                        if kind == "BOOKMARK":
                            continue
                        self.live = None if kind == "DELETED" else obj
                        yield
                        if self.live is None:
                            return
                        if time.monotonic() >= until() or self.opts.stop.is_set():
                            break
                    else:
                        if time.monotonic() - started < left:
                            raise StreamBroken(0, "StreamBroken", "the watch ended early", "WATCH", self.key)
            except (Gone, StreamBroken) as err:
                restarts += 1
                if restarts > MAX_WATCH_RESTARTS:
                    raise
                self.log.info(self.key, "watch", f"reading the RayCluster again: {err}")
                self._get()
                yield

    # ------------------------------------------------------------------ the loop

    def run(self) -> Outcome:
        start = time.monotonic()
        try:
            result, message = self._run()
            if result in (RECREATED, REPLACED) and self.started is not None and self.opts.budget is not None:
                self.opts.budget.record(time.monotonic() - self.started)
        except Exception as err:  # noqa: BLE001 - whatever broke, never leave the cluster suspended
            message = str(err) if isinstance(err, (CycleError, ApiError)) else f"{type(err).__name__}: {err}"
            result = DEFERRED if isinstance(err, Deferred) else FAILED
            self.log.emit("warn" if result == DEFERRED else "error", self.key, result, message)
            if not isinstance(err, LostLock):
                message += self._recover(message, deferred=result == DEFERRED)
        return Outcome(self.ns, self.plan.name, result, message, time.monotonic() - start,
                       self.drain_to_resume)

    def _done(self) -> tuple[str, str]:
        if self.failure:
            return FAILED, self.failure
        if self.replace:
            return REPLACED, self._summary() + ("" if self.opts.wait_ready else
                                                "; readiness not checked (--no-wait-ready)")
        how = "resumed a cluster suspended outside Git" if self.decision.outside_git else "recreated"
        return RECREATED, how + ("" if self.opts.wait_ready else "; readiness not checked (--no-wait-ready)")

    def _run(self) -> tuple[str, str]:
        """Read the cluster, pick the step (:func:`next_step`), run it; until a step returns
        the outcome.  Every step is idempotent and resumable from the live state alone."""
        steps: dict[str, Callable[[], tuple[str, str] | None]] = {
            GONE: self._gone, ACQUIRE: self._acquire_or_finish, WAIT: self._wait_other, TAKEOVER: self._takeover,
            SUSPEND: self._suspend, DRAIN: self._drain_and_resume, WAIT_READY: self._wait_ready_and_unlock,
            REPLACE: self._replace_batch,
        }
        conflicts = 0
        fresh = False  # self.live is the answer to our last write: no need to GET again
        while True:
            self._check_stop()
            if not fresh:
                self._get()
            step = next_step(self.live, self.holder, self._unchanged_for(), self.replace)
            try:
                outcome = steps[step]()
            except SuspendUndone:
                fresh = False  # re-decide: SUSPEND again, bounded by MAX_SUSPEND_WRITES
                continue
            except Conflict:
                conflicts += 1
                if conflicts > MAX_CONFLICTS:
                    raise CycleError(f"gave up after {conflicts} write conflicts") from None
                self.log.info(self.key, step, "the RayCluster changed meanwhile (409): reading it again")
                fresh = False
                continue
            if outcome is not None:
                return outcome
            fresh = step in ANSWERED_BY_OUR_WRITE

    # ------------------------------------------------------------------ steps

    def _gone(self) -> tuple[str, str]:
        if self.recreated:
            return RECREATED, "recreated (the RayCluster was deleted since)"
        return SKIPPED, "the RayCluster was deleted"

    def _acquire_or_finish(self) -> tuple[str, str] | None:
        """No lock on the cluster: ours ended (done), or take it if the cluster still drifts."""
        if self.recreated:
            return self._done()
        stale = objmeta.meta(self.live).get("resourceVersion") != self.decision.resource_version
        if (self.recheck or stale) and not self._still_drifted():
            return IN_SYNC, "in sync (another hook recreated it)"
        self._acquire()
        return None

    def _drain_and_resume(self) -> None:
        self._drain()
        self._prompt_operator(prompt.SUSPEND_DONE)  # never resume a cluster still suspending
        if self.live is not None:  # else deleted meanwhile: the main loop sees it gone
            self._resume()

    def _wait_ready_and_unlock(self) -> None:
        self._wait_ready()
        self._unlock()

    def _still_drifted(self) -> bool:
        pods, _ = self.kube.list_pods(self.ns, f"{names.CLUSTER_LABEL}={self.plan.name}")
        decision = verdict.decide(self.ns, self.plan, self.live, pods)
        self.log.info(self.key, "check", f"re-checked after waiting: {decision.action}: {decision.reason}")
        if decision.action in verdict.CYCLES:
            self.decision = decision
            self.replace, self.groups = decision.replaces, decision.replaced_groups()
            return True
        return False

    def _acquire(self) -> None:
        self._check_budget()
        lock = locks.new_lock(self.holder, self.target, self.decision.source, self.clock(), self.opts.lease_seconds)
        if self.replace:
            self._start_replacing(lock)
            return
        self._patch(patches.lock_patch(self.live, lock))
        self._lease_written()
        self.log.info(self.key, "lock", f"locked for a recreate: {self.decision.reason}", holder=self.holder)
        self._event(events.STARTED, f"raygitops recreates the pods: {self.decision.reason}")
        test_pause("locked", self.log, self.key)

    def _wait_other(self) -> None:
        lock = held_lock(self.live)
        if self._left() <= 0:
            raise CycleError(f"timed out waiting for the recreate lock held by {lock.holder if lock else '?'}")
        if not self.recheck:
            self.log.info(self.key, "wait", "another hook holds the recreate lock: waiting for it",
                          holder=lock.holder if lock else None, phase=lock.phase if lock else None)
        self.recheck = True
        self._sleep(POLL_SECONDS)

    def _takeover(self) -> None:
        old = held_lock(self.live)
        now = self.clock()
        if old is None:
            lock = locks.new_lock(self.holder, self.target, self.decision.source, now, self.opts.lease_seconds)
            suspended = (self.live.get("spec") or {}).get("suspend") is True
            if suspended:  # an unreadable lock on a suspended cluster: finish as if suspended
                lock = lock.at(locks.SUSPENDED, now)
        else:
            lock = old.taken_over(self.holder, now, self.target)
        if self.replace and lock.phase == locks.REPLACING:
            self.groups = tuple(sorted(set(self.groups) | set(lock.groups)))
            self._start_replacing(lock)
            self.log.warn(self.key, "takeover", "took over a replacement whose holder stopped renewing its lock",
                          previous=old.holder if old else "unreadable")
            return
        self._patch(patches.lock_patch(self.live, lock))
        self._lease_written()
        self.log.warn(self.key, "takeover", "took over the lock of a holder that stopped renewing it",
                      previous=old.holder if old else "unreadable", phase=lock.phase)
        if lock.target != self.target:
            self.recheck = True  # finish its cycle, then see whether ours is still needed

    # ------------------------------------------------------------------ ReplaceGroups

    def _make_config_live(self) -> None:
        """The desired ConfigMaps and Secrets, before any write that lets new pods start."""
        written = configlive.make_live(self.kube, self.ns, self.plan, self.config)
        if written:
            self.log.info(self.key, "config", f"wrote the desired content of {', '.join(written)} "
                          "before new pods start")

    def _start_replacing(self, lock: locks.Lock) -> None:
        """One write: the desired spec (every template stamped with its desired hash, the
        scaling fields kept from the live object) and the ``replacing`` lock; from here on
        every pod the operator creates runs the new template."""
        lock = replace_lock(lock, self.groups, self.clock())
        if self.started is None:
            self.started = time.monotonic()
        self._make_config_live()
        self._patch(patches.resume_patch(self.live, self.plan, lock))
        self._lease_written()
        kept = self._kept()
        what = f"worker groups {', '.join(self.groups) or '(removed groups only)'}"
        self.log.info(self.key, "replace", f"desired spec written; replacing the pods of {what} "
                      f"(max unavailable {self._limits()}); {', '.join(kept)} kept")
        self._event(events.STARTED, f"raygitops replaces the pods of {what} (head kept): {self.decision.reason}")

    def _limits(self) -> str:
        """``2``, or ``big 1, small 100%`` when a group has a bound of its own."""
        if not any(g in self.plan.max_unavailable_by_group for g in self.groups):
            return self.plan.max_unavailable or DEFAULT_MAX_UNAVAILABLE
        return ", ".join(f"{g} {self.plan.limit_of(g)}" for g in self.groups)

    def _kept(self) -> list[str]:
        return ["head"] + [f"group {g}" for g in sorted(self.plan.pod_spec.workers) if g not in self.groups]

    def _summary(self) -> str:
        return replace.summary(self.deleted, self.groups, self.removed_deleted,
                               [g for g in self.plan.pod_spec.workers if g not in self.groups])

    def _replace_batch(self) -> None:
        """One turn: delete what :func:`~raygitops.presync.replace.next_batch` allows, then
        wait a poll; when nothing is stale any more, wait for readiness and unlock."""
        lock = self._my_lock()
        pods, _ = self.kube.list_pods(self.ns, f"{names.CLUSTER_LABEL}={self.plan.name}")
        batch = replace.next_batch(self.plan, self.live, pods, lock.groups)
        if batch.done:
            self._wait_ready_and_unlock()
            return
        if self._left() <= 0:
            self.failure = f"timed out replacing worker pods: {batch.describe()}"
            self.log.error(self.key, "replace", self.failure)
            self._unlock()
            return
        for pod in batch.delete:
            name, group = objmeta.meta(pod).get("name", ""), (podsmod.group_key(pod) or ":").split(":", 1)[1]
            if self.kube.delete_pod(self.ns, name, objmeta.meta(pod).get("uid")):
                if group in self.groups or group in self.plan.pod_spec.workers:
                    self.deleted[group] = self.deleted.get(group, 0) + 1
                else:
                    self.removed_deleted += 1
                self.log.info(self.key, "replace", f"deleted pod {name} of group {group}")
        progress = batch.describe()
        if progress != self._progress or batch.delete:
            if progress != self._progress:
                self.log.info(self.key, "replace", f"waiting: {progress}")
            self._progress = progress
            self._replace_delays = waiting_delays()  # something moved: look soon
        if batch.delete:
            test_pause("replacing", self.log, self.key)
        self._sleep(next(self._replace_delays))
        self._renew()

    def _suspend(self) -> None:
        lock = self._my_lock()
        if lock.phase == locks.LOCKED:
            self._check_budget()  # the last moment a cycle can still be left undone
        if self.suspend_writes >= MAX_SUSPEND_WRITES:
            raise CycleError(f"spec.suspend does not stick: written {self.suspend_writes} times and set back to "
                             "false each time (a mutating webhook or another controller undoes it)")
        if self.suspend_writes:
            self.log.warn(self.key, "suspend", "spec.suspend was set back to false by someone else: suspending "
                          f"again ({self.suspend_writes + 1} of at most {MAX_SUSPEND_WRITES})")
            self._sleep(2.0 ** (self.suspend_writes - 1))
        pods, _ = self.kube.list_pods(self.ns, f"{names.CLUSTER_LABEL}={self.plan.name}")
        foreign = podsmod.foreign_pods(self.live, pods)
        if foreign:
            # KubeRay deletes EVERY pod with the label when it sees the suspend.
            raise CycleError(f"refusing to suspend: pods {', '.join(foreign[:5])} carry label "
                             f"{names.CLUSTER_LABEL}={self.plan.name} but are not this RayCluster's, and the "
                             "operator deletes every pod with that label on suspend; remove the label or the pods")
        if self.started is None:
            self.started = time.monotonic()
        self._patch(patches.suspend_patch(self.live, lock.at(locks.SUSPENDED, self.clock())))
        self.suspend_writes += 1
        self._lease_written()
        self.log.info(self.key, "suspend", "spec.suspend set to true: the operator deletes the pods")
        test_pause("suspended", self.log, self.key)
        self._prompt_operator(prompt.SUSPEND_TAKEN_IN)

    def _drain(self) -> None:
        """Wait until every pod the cluster owns is gone (:mod:`raygitops.presync.drain`)."""
        run = drain.Drain(self.kube, self.log, self.key, self.ns, self.plan.name, objmeta.meta(self.live).get("uid", ""),
                          self.opts.drain_grace, self.opts.deadline - self.opts.resume_reserve, self._drain_tick)
        try:
            self.drain_zero_at = run.run()
        except drain.DrainTimeout as err:
            raise CycleError(str(err)) from None

    def _drain_tick(self) -> None:
        """Between two watch calls of the drain: stop request, lease, and whether the suspend
        still holds (one GET)."""
        if not self._paused_draining:
            self._paused_draining = True
            test_pause("draining", self.log, self.key)
        self._check_stop()
        if time.monotonic() >= self._renew_at:
            self._renew()
        else:
            self._get()
            self._my_lock()
        if (self.live.get("spec") or {}).get("suspend") is not True:
            self.log.warn(self.key, "drain", "spec.suspend is false again: someone else resumed the cluster")
            raise SuspendUndone()

    def _resume(self) -> None:
        self._make_config_live()
        for attempt in range(MAX_CONFLICTS):
            if attempt:
                self._get()
            lock = self._my_lock()
            try:
                self._patch(patches.resume_patch(self.live, self.plan, lock.at(locks.RESUMED, self.clock())))
                break
            except Conflict:
                continue
        else:
            raise CycleError("gave up resuming after repeated write conflicts")
        zero_at = self.drain_zero_at
        if zero_at is not None and self.drain_to_resume is None:
            self.drain_to_resume = time.monotonic() - zero_at
        self.recreated = True
        self.log.info(self.key, "resume", "desired pod-shaping spec written and spec.suspend set to false "
                      "in one patch", latency=round(self.drain_to_resume or 0, 3))
        if zero_at is not None:
            self._event(events.DRAINED, "all pods of the RayCluster are gone")
        self._event(events.RESUMED, "desired templates written and the RayCluster resumed")
        test_pause("resumed", self.log, self.key)
        self._prompt_operator(prompt.RESUME_TAKEN_IN)

    def _wait_ready(self) -> None:
        lock = self._my_lock()
        if not self.opts.wait_ready or lock.target != self.target:
            return
        selector = f"{names.CLUSTER_LABEL}={self.plan.name}"
        last = ""
        delays = waiting_delays()
        while True:
            pods, _ = self.kube.list_pods(self.ns, selector)
            pods_ok, pods_msg = verdict.ready_for(self.plan, self.live, pods)
            ready, ready_msg = verdict.cluster_ready(self.live)
            if pods_ok and ready:
                self.log.info(self.key, "wait-ready", f"ready: {pods_msg}, {ready_msg}")
                return
            message = f"{pods_msg}; {ready_msg}"
            if message != last:
                self.log.info(self.key, "wait-ready", f"waiting: {message}")
                last = message
                delays = waiting_delays()  # something moved: look soon
            if self._left() <= 0 or self.opts.stop.is_set():
                why = "interrupted (SIGTERM/SIGINT)" if self.opts.stop.is_set() else "timed out"
                self.failure = f"{why} waiting for the cluster to be ready ({message})"
                self.log.error(self.key, "wait-ready", self.failure)
                self._get()
                return
            self.opts.stop.wait(next(delays))
            self._renew()
            self._get()

    def _unlock(self) -> None:
        lock = self._my_lock()
        outcome = locks.FAILED if self.failure else locks.COMPLETED if self.opts.wait_ready else locks.UNVERIFIED
        summary = self._summary() if lock.phase == locks.REPLACING else None
        self._patch(patches.unlock_patch(self.live, locks.last_recreate(lock, self.clock(), outcome, summary)))
        if lock.target != self.target:
            self.recheck = True
            self.log.info(self.key, "unlock", "finished another hook's cycle; checking ours")
            return
        self.recreated = True
        if self.failure:
            self._event(events.FAILED, self.failure)
        else:
            self.log.info(self.key, "unlock", summary or "recreate completed")
            self._event(events.COMPLETED, f"raygitops {summary}" if summary else
                        "raygitops recreated the pods with the desired templates")

    # ------------------------------------------------------------------ failure

    def _recover(self, message: str, deferred: bool = False) -> str:
        """After a failure, a stop or a deferral: never leave the cluster suspended.  Resume
        it (with the desired spec only if the drain had finished, else as it is), then drop
        our lock.  What was done, as a suffix for the report's message."""
        stopped = self.opts.stop.is_set()
        until = time.monotonic() + RECOVER_AFTER_STOP_SECONDS if stopped else max(self.opts.deadline, time.monotonic()) + 60
        done, failure_recorded = "", False
        while time.monotonic() < until:
            try:
                self._get()
                lock = held_lock(self.live)
                if lock is None or lock.holder != self.holder:
                    return done
                if lock.phase == locks.SUSPENDED or (self.live.get("spec") or {}).get("suspend") is True:
                    resumed = lock.at(locks.RESUMED, self.clock())
                    if self.drain_zero_at is not None:
                        self._make_config_live()
                        self._patch(patches.resume_patch(self.live, self.plan, resumed))
                        done = "; resumed with the desired spec (the drain had finished)"
                    else:
                        self._patch(patches.wake_patch(self.live, resumed))
                        done = "; resumed as it was (its pods come back from the live templates)"
                    self.log.warn(self.key, "resume", done[2:])
                    continue
                if deferred and lock.phase == locks.LOCKED:
                    self._patch(patches.unlock_patch(self.live, None))
                    return done
                if not failure_recorded:  # before the unlock: its answer may be lost after it took effect
                    self._event(events.FAILED, message)
                    failure_recorded = True
                self._patch(patches.unlock_patch(self.live, locks.last_recreate(lock, self.clock(), locks.FAILED)))
                return done
            except Conflict:
                continue
            except ApiError as err:
                self.log.error(self.key, "resume", f"cannot resume after the failure: {err}; "
                               "the next hook run finishes the cycle")
                time.sleep(2)
        self.log.error(self.key, "resume", "gave up resuming: the next hook run finishes the cycle")
        return "; could not resume it: the next hook run finishes the cycle"
