"""What one recreate cycle works with: its :class:`Context` (who and what it talks to, for how
long; fixed for the cycle) and its :class:`State` (what it has seen and done so far; every
step reads and updates it), the failures that end it, and its :class:`Outcome`.

The cycle's steps (:mod:`raygitops.presync.cycle`), its lease (:mod:`~raygitops.presync.lease`),
its prompting of the operator (:mod:`~raygitops.presync.prompt`) and its recovery
(:mod:`~raygitops.presync.recovery`) all take these two.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from raygitops.clock import Clock
from raygitops.kube.client import ApiError
from raygitops.model import lock as locks
from raygitops.model import objmeta, verdict
from raygitops.model.names import CLUSTER_LABEL, LOCK_ANNOTATION
from raygitops.model.plan import ClusterPlan
from raygitops.presync import configlive, events, polling
from raygitops.presync.budget import Budget
from raygitops.presync.logs import Log

PAUSE_ENV = "RAYGITOPS_TEST_PAUSE_AT"
DEFAULT_PAUSE_SECONDS = 120  # RAYGITOPS_TEST_PAUSE_SECONDS unset


class CycleError(Exception):
    """The cycle cannot go on (timeout, lost lock, API error)."""


class LostLock(CycleError):
    """Another hook took the lock over: it finishes the cycle, not us."""


class Interrupted(CycleError):
    """A stop was requested (SIGTERM/SIGINT): no new step; resume and report."""


class Untouched(CycleError):
    """The cycle ends having changed nothing but its own lock (still in phase ``locked``),
    which is dropped without a record: a deferral, running Ray jobs."""


class Deferred(Untouched):
    """Not enough of the run's time budget left to start the cycle."""


class SuspendUndone(Exception):
    """``spec.suspend`` was seen false again during the drain: suspend again (bounded)."""


@dataclass
class Options:
    deadline: float  # clock.monotonic() by which the run must end
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


@dataclass
class State:
    """What the cycle has seen and done: the only thing its steps change."""

    decision: verdict.Verdict  # why it runs (re-made when it checks the drift again)
    live: dict[str, Any] | None = None  # the RayCluster as last read or written
    replace: bool = False  # ReplaceGroups: only the worker groups in ``groups``
    groups: tuple[str, ...] = ()
    recheck: bool = False  # another hook may have done our work: check the drift before acquiring
    recreated: bool = False  # our spec was written (resumed, or replacing): what is left is to finish
    replaced: bool = False  # a replacement deleted every stale pod: wait for readiness, then unlock
    failure: str | None = None  # the cycle ends failed, after its unlock
    started: float | None = None  # clock.monotonic() of our first write
    suspend_writes: int = 0
    drain_zero_at: float | None = None  # when the drain saw no pod left
    drain_to_resume: float | None = None
    paused_draining: bool = False
    jobs_cleared: bool = False  # the jobs step let this run's cycle go on (presync/runningjobs.py)
    preflight_cleared: bool = False  # the new pods can come up, or the policy lets it pass (presync/preflight.py)
    deleted: dict[str, int] = field(default_factory=dict)  # ReplaceGroups: pods deleted per group
    removed_deleted: int = 0  # pods of removed groups deleted
    written_generation: int | None = None  # metadata.generation of our last spec write
    observe: int | None = None  # the generation the operator must have observed before a success
    progress: str = ""  # the replacement's last progress line
    replace_delays: Iterator[float] = field(default_factory=polling.waiting)  # its next sleeps

    @classmethod
    def of(cls, decision: verdict.Verdict) -> "State":
        return cls(decision, replace=decision.replaces, groups=decision.replaced_groups())

    def lock(self) -> locks.Lock | None:
        return held_lock(self.live)


def held_lock(live: dict[str, Any] | None) -> locks.Lock | None:
    if live is None:
        return None
    return locks.parse(objmeta.annotations(live).get(LOCK_ANNOTATION))


class Context:
    """One cluster's cycle: the API, the log, the plan entry, who we are and the clock."""

    def __init__(self, kube: Any, log: Log, namespace: str, plan: ClusterPlan, opts: Options, holder: str,
                 clock: Clock, config: dict[str, dict[str, dict[str, Any]]] | None = None) -> None:
        self.kube, self.log, self.ns, self.plan, self.opts = kube, log, namespace, plan, opts
        self.holder, self.clock = holder, clock
        self.config = config or {}  # ConfigMap and Secret contents by kind, name (configlive)
        self.key = f"{namespace}/{plan.name}"
        self.target = plan.hashes.to_json()
        self.renew_at = 0.0  # clock.monotonic() when our lease is due (lease.written)

    # --- the API ------------------------------------------------------------------------------

    def get(self, s: State) -> dict[str, Any] | None:
        s.live = self.kube.get_cluster(self.ns, self.plan.name)
        return s.live

    def patch(self, s: State, body: dict[str, Any]) -> dict[str, Any]:
        s.live = self.kube.patch_cluster(self.ns, self.plan.name, body)
        return s.live

    def pods(self) -> list[dict[str, Any]]:
        found, _ = self.kube.list_pods(self.ns, f"{CLUSTER_LABEL}={self.plan.name}")
        return found

    def make_config_live(self) -> None:
        """The desired ConfigMaps and Secrets, before any write that lets new pods start."""
        written = configlive.make_live(self.kube, self.ns, self.plan, self.config)
        if written:
            self.log.info(self.key, "config", f"wrote the desired content of {', '.join(written)} "
                          "before new pods start")

    def event(self, s: State, reason: str, message: str) -> None:
        """An Event on the cluster; one that cannot be written is logged, never a failure."""
        if s.live is None:
            return
        try:
            self.kube.create_event(self.ns, events.event_body(s.live, reason, message, self.clock.now()))
        except ApiError as err:
            self.log.warn(self.key, "event", f"cannot record Event {reason}: {err}")

    # --- the lock, time and stop requests -----------------------------------------------------

    def my_lock(self, s: State) -> locks.Lock:
        lock = s.lock()
        if lock is None or lock.holder != self.holder:
            raise LostLock(f"lock taken over by {lock.holder if lock else 'nobody'}")
        return lock

    def left(self) -> float:
        return self.opts.deadline - self.clock.monotonic()

    def room_for_waiting(self) -> float:
        """Seconds a wait before the cycle may still take: what is left of the run but the
        time one cycle is expected to take (the budget's estimate)."""
        return self.left() - (self.opts.budget.estimate() if self.opts.budget else self.opts.resume_reserve)

    def check_stop(self) -> None:
        if self.opts.stop.is_set():
            raise Interrupted("interrupted (SIGTERM/SIGINT): no new step started")

    def sleep(self, seconds: float) -> None:
        """Sleep, waking at once on a stop request (which then ends the step)."""
        if self.clock.wait(seconds, self.opts.stop):
            self.check_stop()

    def check_budget(self) -> None:
        why = self.opts.budget.shortfall() if self.opts.budget else None
        if why:
            raise Deferred(f"deferred, not touched: {why}; the next sync picks it up")

    def test_pause(self, step: str) -> None:
        """RAYGITOPS_TEST_PAUSE_AT=<step>: sleep at that step so a test can SIGKILL the hook
        deterministically (steps: locked, suspended, draining, resumed, replacing, recovering).
        Real time, tests only; bounded, so a test that dies before its kill leaves no hook
        behind."""
        if os.environ.get(PAUSE_ENV) == step:
            self.log.warn(self.key, step, f"{PAUSE_ENV}={step}: pausing (test hook)")
            threading.Event().wait(float(os.environ.get("RAYGITOPS_TEST_PAUSE_SECONDS", DEFAULT_PAUSE_SECONDS)))
