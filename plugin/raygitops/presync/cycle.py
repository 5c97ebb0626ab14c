"""The recreate cycle of one RayCluster: a short list of named steps over a state that lives
on the RayCluster (the Deployment controller's ``recreate.go`` is the model).

:func:`next_step` is pure: from the live object (its lock annotation and ``spec.suspend``),
who we are and what this run has done (:class:`~raygitops.presync.context.State`), it names
the step; :func:`run` reads the cluster, runs that step, and again, so that a 409 (someone
else wrote in between) is just another turn of the loop and any hook run can finish a cycle
another one started:

    (no lock) ─ACQUIRE→ locked ─JOBS (the Ray head's running jobs: go on, wait, or fail
        touching nothing)→ ─PREFLIGHT (can the new pods come up? if not, fail touching
        nothing)→ ─SUSPEND→ suspended ─DRAIN (to 0 pods, then the resume write)→
        resumed ─WAIT_READY (then the unlock write)→ (no lock: FINISHED)

After the suspend and after the resume write the operator is prompted
(:func:`raygitops.presync.prompt.prompt_operator`), so that it deletes and creates the pods
without waiting for its own requeue; the resume waits until it reports the suspend finished.

ReplaceGroups (docs/presync.md) takes a shorter path on the same machinery; nothing is
suspended:

    (no lock) ─ACQUIRE→ locked ─JOBS→ ─PREFLIGHT→ ─REPLACE (desired spec + lock ``replacing``, one
        write)→ replacing ─REPLACE (stale pods of the changed groups deleted in batches of
        max-unavailable, until none is left)→ ─WAIT_READY (then the unlock write)→ (no lock:
        FINISHED)

A lock held by someone else is waited for (WAIT) while its lease is being renewed, and taken
over (TAKEOVER) once it is not; after waiting, or after finishing another hook's cycle, the
drift is checked again (CHECK) before a cycle of ours starts. On failure, a signal or a
deadline after the suspend the cluster is resumed before the hook reports it
(:mod:`raygitops.presync.recovery`); never left suspended.

Bounds (docs/presync.md, "Guarantees"): a cycle starts only when the run's
:class:`~raygitops.presync.budget.Budget` covers it; ``spec.suspend`` is written at most
:data:`MAX_SUSPEND_WRITES` times per cycle (a webhook or controller that undoes it fails the
cycle instead of an endless loop); a write that keeps meeting a 409 gives up the same way
everywhere (:class:`raygitops.kube.retry.ConflictsExhausted`); a stop request (SIGTERM/SIGINT)
is seen within :data:`~raygitops.presync.drain.WATCH_SECONDS` and no new step starts after it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from raygitops.kube import retry
from raygitops.kube.client import ApiError, Conflict
from raygitops.model import lock as locks
from raygitops.model import objmeta, operators, pods, verdict
from raygitops.model.names import CLUSTER_LABEL, LOCK_ANNOTATION
from raygitops.model.strategy import DEFAULT_MAX_UNAVAILABLE
from raygitops.presync import drain, events, lease, patches, polling, preflight, prompt, recovery, replace, runningjobs
from raygitops.presync.context import (
    Context,
    CycleError,
    Deferred,
    LostLock,
    Outcome,
    State,
    SuspendUndone,
    Untouched,
    held_lock,
)

# Steps
GONE = "gone"
FINISHED = "finished"
CHECK = "check"
ACQUIRE = "acquire"
WAIT = "wait"
TAKEOVER = "takeover"
JOBS = "jobs"
PREFLIGHT = "preflight"
SUSPEND = "suspend"
DRAIN = "drain"
REPLACE = "replace"
WAIT_READY = "wait-ready"

# Steps after which state.live is the server's answer to our own write, or a read just made
# (no GET needed before the next step); the preflight reads no RayCluster: the read before it
# stands (a write on it that is stale meets a 409 and reads again).
NO_READ_NEEDED = frozenset({CHECK, ACQUIRE, TAKEOVER, PREFLIGHT, SUSPEND, DRAIN, WAIT_READY})

# Outcomes
RECREATED = "recreated"
REPLACED = "replaced"
IN_SYNC = "in-sync"
FAILED = "failed"
SKIPPED = "skipped"
DEFERRED = "deferred"

MAX_SUSPEND_WRITES = 3
HOLDER_POLL_SECONDS = 1.0  # how often a lock held by another hook is looked at


def next_step(live: dict[str, Any] | None, holder: str, s: State, unchanged_for: float = 0.0) -> str:
    """The step to run on the cluster as ``live`` shows it (pure)."""
    if live is None:
        return GONE
    if objmeta.annotations(live).get(LOCK_ANNOTATION) is None:
        if s.recreated:
            return FINISHED
        stale = objmeta.meta(live).get("resourceVersion") != s.decision.resource_version
        return CHECK if s.recheck or stale else ACQUIRE
    lock = held_lock(live)
    if lock is None:
        return TAKEOVER  # unreadable: no live holder can be renewing it
    if lock.holder != holder:
        return TAKEOVER if lock.expired(unchanged_for) else WAIT
    if lock.phase in (locks.LOCKED, locks.REPLACING):
        if s.replace and s.replaced:
            return WAIT_READY
        if not s.jobs_cleared:
            return JOBS  # before anything takes pods down: what runs on the cluster's Ray head?
        if not s.preflight_cleared:
            return PREFLIGHT  # ... and can the new pods come up?
        # a replacement this run does not make (the head drifted meanwhile) becomes a full
        # cycle: nothing was suspended, so it can start from its suspend
        return REPLACE if s.replace else SUSPEND
    if lock.phase == locks.SUSPENDED:
        return DRAIN if (live.get("spec") or {}).get("suspend") is True else SUSPEND
    return WAIT_READY


def run(c: Context, decision: verdict.Verdict) -> Outcome:
    """The cycle for one cluster, whatever happens: its outcome (never raises)."""
    s = State.of(decision)
    start = c.clock.monotonic()
    try:
        result, message = _loop(c, s)
        if result in (RECREATED, REPLACED) and s.started is not None and c.opts.budget is not None:
            c.opts.budget.record(c.clock.monotonic() - s.started)
    except Exception as err:  # noqa: BLE001 - whatever broke, never leave the cluster suspended
        message = str(err) if isinstance(err, (CycleError, ApiError)) else f"{type(err).__name__}: {err}"
        result = DEFERRED if isinstance(err, Deferred) else FAILED
        c.log.emit("warn" if result == DEFERRED else "error", c.key, result, message)
        if not isinstance(err, LostLock):
            message += recovery.recover(c, s, message, untouched=isinstance(err, Untouched))
    return Outcome(c.ns, c.plan.name, result, message, c.clock.monotonic() - start, s.drain_to_resume)


def _loop(c: Context, s: State) -> tuple[str, str]:
    """Read the cluster, name the step, run it; until a step returns the outcome. Every step
    is idempotent and resumable from the live state alone."""
    observed = lease.Observed(c.clock)
    conflicts, read = 0, True  # conflicts of the whole cycle
    while True:
        c.check_stop()
        if read:
            c.get(s)
        step = next_step(s.live, c.holder, s, observed.unchanged_for(s.live))
        try:
            outcome = STEPS[step](c, s)
        except SuspendUndone:
            read = True  # decide again: SUSPEND, bounded by MAX_SUSPEND_WRITES
            continue
        except Conflict:
            conflicts += 1
            if conflicts > retry.MAX_CONFLICTS:
                raise retry.ConflictsExhausted(409, "Conflict", f"gave up after {conflicts} write conflicts") from None
            c.log.info(c.key, step, "the RayCluster changed meanwhile (409): reading it again")
            read = True
            continue
        if outcome is not None:
            return outcome
        read = step not in NO_READ_NEEDED


# ---------------------------------------------------------------------------------------------
# The steps


def gone(c: Context, s: State) -> tuple[str, str]:
    if s.recreated:
        return RECREATED, "recreated (the RayCluster was deleted since)"
    return SKIPPED, "the RayCluster was deleted"


def finished(c: Context, s: State) -> tuple[str, str]:
    unchecked = "" if c.opts.wait_ready else "; readiness not checked (--no-wait-ready)"
    if s.failure:
        return FAILED, s.failure
    if s.replace:
        return REPLACED, _summary(c, s) + unchecked
    return RECREATED, ("resumed a cluster suspended outside Git" if s.decision.outside_git else "recreated") + unchecked


def check(c: Context, s: State) -> tuple[str, str] | None:
    """The cluster changed since the run decided, or another hook held it: drifted still?"""
    decision = verdict.decide(c.ns, c.plan, s.live, c.pods())
    c.log.info(c.key, "check", f"re-checked after waiting: {decision.action}: {decision.reason}")
    if decision.action not in verdict.CYCLES:
        return IN_SYNC, "in sync (another hook recreated it)"
    s.decision, s.replace, s.groups, s.recheck = decision, decision.replaces, decision.replaced_groups(), False
    return None


def acquire(c: Context, s: State) -> None:
    """Take the lock (phase ``locked``: nothing changed yet), for either strategy."""
    c.check_budget()
    lock = locks.new_lock(c.holder, c.target, s.decision.source, c.clock.now(), c.opts.lease_seconds)
    c.patch(s, patches.lock_patch(s.live, lock))
    lease.written(c)
    what = "replacing worker groups" if s.replace else "a recreate"
    c.log.info(c.key, "lock", f"locked for {what}: {s.decision.reason}", holder=c.holder)
    if not s.replace:
        c.event(s, events.STARTED, f"raygitops recreates the pods: {s.decision.reason}")
    c.test_pause("locked")


def check_jobs(c: Context, s: State) -> None:
    """Ask the cluster's Ray head which jobs run, and follow its policy
    (:mod:`raygitops.presync.runningjobs`)."""
    runningjobs.check(c, s)


def check_preflight(c: Context, s: State) -> None:
    """Check that the new pods can come up before any is taken down, and fail closed
    touching nothing when they cannot (:mod:`raygitops.presync.preflight`)."""
    preflight.check(c, s)


def wait_for_holder(c: Context, s: State) -> None:
    lock = s.lock()
    if c.left() <= 0:
        raise CycleError(f"timed out waiting for the recreate lock held by {lock.holder if lock else '?'}")
    if not s.recheck:
        c.log.info(c.key, "wait", "another hook holds the recreate lock: waiting for it",
                   holder=lock.holder if lock else None, phase=lock.phase if lock else None)
    s.recheck = True
    c.sleep(HOLDER_POLL_SECONDS)


def take_over(c: Context, s: State) -> None:
    old = s.lock()
    now = c.clock.now()
    if old is None:
        lock = locks.new_lock(c.holder, c.target, s.decision.source, now, c.opts.lease_seconds)
        if (s.live.get("spec") or {}).get("suspend") is True:  # unreadable, on a suspended cluster
            lock = lock.at(locks.SUSPENDED, now)
    else:
        lock = old.taken_over(c.holder, now, c.target)
    previous = old.holder if old else "unreadable"
    if s.replace and lock.phase == locks.REPLACING:
        s.groups = tuple(sorted(set(s.groups) | set(lock.groups)))
        _start_replacing(c, s, lock)
        c.log.warn(c.key, "takeover", "took over a replacement whose holder stopped renewing its lock",
                   previous=previous)
        return
    c.patch(s, patches.lock_patch(s.live, lock))
    lease.written(c)
    c.log.warn(c.key, "takeover", "took over the lock of a holder that stopped renewing it",
               previous=previous, phase=lock.phase)
    if lock.target != c.target:
        s.recheck = True  # finish its cycle, then see whether ours is still needed


def suspend(c: Context, s: State) -> None:
    lock = c.my_lock(s)
    if lock.phase == locks.LOCKED:
        c.check_budget()  # the last moment a cycle can still be left undone
    if s.suspend_writes >= MAX_SUSPEND_WRITES:
        raise CycleError(f"spec.suspend does not stick: written {s.suspend_writes} times and set back to "
                         "false each time (a mutating webhook or another controller undoes it)")
    if s.suspend_writes:
        c.log.warn(c.key, "suspend", "spec.suspend was set back to false by someone else: suspending "
                   f"again ({s.suspend_writes + 1} of at most {MAX_SUSPEND_WRITES})")
        c.sleep(2.0 ** (s.suspend_writes - 1))
    foreign = pods.foreign_pods(s.live, c.pods())
    if foreign:
        # KubeRay deletes EVERY pod with the label when it sees the suspend.
        raise CycleError(f"refusing to suspend: pods {', '.join(foreign[:5])} carry label "
                         f"{CLUSTER_LABEL}={c.plan.name} but are not this RayCluster's, and the operator "
                         "deletes every pod with that label on suspend; remove the label or the pods")
    if s.started is None:
        s.started = c.clock.monotonic()
    c.patch(s, patches.suspend_patch(s.live, lock.at(locks.SUSPENDED, c.clock.now())))
    if operators.suspend_dropped(s.live):  # a KubeRay < 1.1 CRD: refused before any pod goes
        raise CycleError(operators.SUSPEND_DROPPED)
    s.suspend_writes += 1
    lease.written(c)
    c.log.info(c.key, "suspend", "spec.suspend set to true: the operator deletes the pods")
    c.test_pause("suspended")
    prompt.prompt_operator(c, s, prompt.SUSPEND_TAKEN_IN)


def drain_and_resume(c: Context, s: State) -> None:
    """Wait until every pod the cluster owns is gone (:mod:`raygitops.presync.drain`), until
    the operator says the suspend is finished, then resume with the desired spec."""
    run_drain = drain.Drain(c.kube, c.log, c.key, c.ns, c.plan.name, objmeta.meta(s.live).get("uid", ""),
                            c.opts.drain_grace, c.opts.deadline - c.opts.resume_reserve, lambda: _drain_tick(c, s),
                            c.clock, c.opts.stop)
    try:
        s.drain_zero_at = run_drain.run()
    except drain.DrainTimeout as err:
        raise CycleError(str(err)) from None
    prompt.prompt_operator(c, s, prompt.SUSPEND_DONE)  # never resume a cluster still suspending
    if s.live is not None:  # else deleted meanwhile: the loop sees it gone
        _resume(c, s)


def replace_batch(c: Context, s: State) -> None:
    """One turn: delete what :func:`~raygitops.presync.replace.next_batch` allows, then wait a
    poll; when nothing is stale any more, the replacement is done (WAIT_READY is next). The
    first turn, on our ``locked`` lock, writes the desired spec (:func:`_start_replacing`)."""
    lock = c.my_lock(s)
    if lock.phase == locks.LOCKED:
        what = _start_replacing(c, s, lock)
        c.event(s, events.STARTED, f"raygitops replaces the pods of {what} (head kept): {s.decision.reason}")
        return
    batch = replace.next_batch(c.plan, s.live, c.pods(), lock.groups)
    if batch.done and operators.unobserved(s.live, s.observe) is None:
        s.replaced = True  # read after the operator observed our spec: it makes no stale pod any more
        return
    if c.left() <= 0:
        s.failure = f"timed out replacing worker pods: {_replace_progress(s, batch)}"
        c.log.error(c.key, "replace", s.failure)
        s.replaced = True  # no more batches: unlock, recording the failure
        return
    for pod in batch.delete:
        name, group = objmeta.meta(pod).get("name", ""), (pods.group_key(pod) or ":").split(":", 1)[1]
        if c.kube.delete_pod(c.ns, name, objmeta.meta(pod).get("uid")):
            s.observe = s.written_generation  # the operator fills the gap from its own view of the spec
            if group in s.groups or group in c.plan.spec.workers:
                s.deleted[group] = s.deleted.get(group, 0) + 1
            else:
                s.removed_deleted += 1
            c.log.info(c.key, "replace", f"deleted pod {name} of group {group}")
    progress = _replace_progress(s, batch)
    if progress != s.progress or batch.delete:
        if progress != s.progress:
            c.log.info(c.key, "replace", f"waiting: {progress}")
        s.progress = progress
        s.replace_delays = polling.waiting()  # something moved: look soon
    if batch.delete:
        c.test_pause("replacing")
    c.sleep(next(s.replace_delays))
    lease.renew_if_due(c, s)


def wait_ready_and_unlock(c: Context, s: State) -> None:
    if s.failure is None:
        _verify(c, s)
    _unlock(c, s)


STEPS: dict[str, Callable[[Context, State], tuple[str, str] | None]] = {
    GONE: gone, FINISHED: finished, CHECK: check, ACQUIRE: acquire, WAIT: wait_for_holder, TAKEOVER: take_over,
    JOBS: check_jobs, PREFLIGHT: check_preflight, SUSPEND: suspend, DRAIN: drain_and_resume, REPLACE: replace_batch, WAIT_READY: wait_ready_and_unlock,
}


# ---------------------------------------------------------------------------------------------
# Parts of the steps


def _drain_tick(c: Context, s: State) -> None:
    """Between two watch calls of the drain: stop request, lease, and whether the suspend
    still holds (one GET)."""
    if not s.paused_draining:
        s.paused_draining = True
        c.test_pause("draining")
    c.check_stop()
    if lease.due(c):
        lease.renew(c, s)
    else:
        c.get(s)
        c.my_lock(s)
    if (s.live.get("spec") or {}).get("suspend") is not True:
        c.log.warn(c.key, "drain", "spec.suspend is false again: someone else resumed the cluster")
        raise SuspendUndone()


def _resume(c: Context, s: State) -> None:
    """ONE write: the desired pod-shaping spec and ``spec.suspend: false`` (the lock moves to
    ``resumed``), after the desired config is live."""
    c.make_config_live()
    read = False

    def write() -> None:
        nonlocal read
        if read:
            c.get(s)
        read = True
        c.patch(s, patches.resume_patch(s.live, c.plan, c.my_lock(s).at(locks.RESUMED, c.clock.now())))

    retry.on_conflict(write, "resuming")
    s.written_generation = objmeta.meta(s.live).get("generation")
    # The operator makes every pod from here on; with --wait-ready its word comes with them. Without
    # it the run claims no more than the lock's Unverified (the next run verifies), and an operator
    # that is down must not fail it: only a view older than the suspend could make an old pod.
    s.observe = s.written_generation if c.opts.wait_ready else None
    if s.drain_zero_at is not None and s.drain_to_resume is None:
        s.drain_to_resume = c.clock.monotonic() - s.drain_zero_at
    s.recreated = True
    c.log.info(c.key, "resume", "desired pod-shaping spec written and spec.suspend set to false "
               "in one patch", latency=round(s.drain_to_resume or 0, 3))
    if s.drain_zero_at is not None:
        c.event(s, events.DRAINED, "all pods of the RayCluster are gone")
    c.event(s, events.RESUMED, "desired templates written and the RayCluster resumed")
    c.test_pause("resumed")
    prompt.prompt_operator(c, s, prompt.RESUME_TAKEN_IN)


def _start_replacing(c: Context, s: State, lock: locks.Lock) -> str:
    """One write: the desired spec (every template stamped with its desired hash, the scaling
    fields kept from the live object) and the ``replacing`` lock; from here on every pod the
    operator creates runs the new template. What is replaced, in words (the first turn of
    :func:`replace_batch` announces it in Event ``RecreateStarted``; a takeover of a
    replacement is no new start)."""
    taken_over = lock.phase == locks.REPLACING  # its holder may have deleted pods the operator refills
    lock = replace_lock(lock, s.groups, c.clock.now())
    if s.started is None:
        s.started = c.clock.monotonic()
    c.make_config_live()
    c.patch(s, patches.resume_patch(s.live, c.plan, lock))
    s.written_generation = objmeta.meta(s.live).get("generation")
    if taken_over:
        s.observe = s.written_generation
    lease.written(c)
    kept = ["head"] + [f"group {g}" for g in sorted(c.plan.spec.workers) if g not in s.groups]
    what = f"worker groups {', '.join(s.groups) or '(removed groups only)'}"
    c.log.info(c.key, "replace", f"desired spec written; replacing the pods of {what} "
               f"(max unavailable {_limits(c, s)}); {', '.join(kept)} kept")
    return what


def replace_lock(lock: locks.Lock, groups: tuple[str, ...], now: float) -> locks.Lock:
    """The lock of a replacement: phase ``replacing``, recording the groups it replaces."""
    return dataclasses.replace(lock.at(locks.REPLACING, now), groups=groups)


def _limits(c: Context, s: State) -> str:
    """``2``, or ``big 1, small 100%`` when a group has a bound of its own."""
    if not any(g in c.plan.max_unavailable_by_group for g in s.groups):
        return c.plan.max_unavailable or DEFAULT_MAX_UNAVAILABLE
    return ", ".join(f"{g} {c.plan.limit_of(g)}" for g in s.groups)


def _summary(c: Context, s: State) -> str:
    return replace.summary(s.deleted, s.groups, s.removed_deleted,
                           [g for g in c.plan.spec.workers if g not in s.groups])


def _replace_progress(s: State, batch: replace.Batch) -> str:
    """Where a replacement stands: its groups, and whether the operator has observed the spec
    (no stale pod left is not done before it has: it may still refill from an older one)."""
    waiting = operators.unobserved(s.live, s.observe)
    if waiting is None:
        return batch.describe()
    return f"no stale pod left; {waiting}" if batch.done else f"{batch.describe()}; {waiting}"


def _verify(c: Context, s: State) -> None:
    """Until the end state the run will report holds live (:func:`raygitops.model.verdict.end_state`:
    the operator observed our spec, no pod of a removed group or an old template left, and,
    with ``--wait-ready``, the pods Ready); at the deadline or a stop request the run fails,
    saying what did not hold. Another hook's cycle finished by this run is not ours to verify:
    the drift is checked again after it."""
    lock = c.my_lock(s)
    if lock.target != c.target:
        return
    cycled = frozenset(f"worker:{g}" for g in s.groups) if s.replace else None
    last = ""
    delays = polling.waiting()
    while True:
        held, message = verdict.end_state(c.plan, s.live, c.pods(), s.observe, c.opts.wait_ready, cycled)
        if held:
            c.log.info(c.key, "end-state", f"seen live: {message}")
            return
        if message != last:
            c.log.info(c.key, "end-state", f"waiting: {message}")
            last = message
            delays = polling.waiting()  # something moved: look soon
        if c.left() <= 0 or c.opts.stop.is_set():
            why = "interrupted (SIGTERM/SIGINT)" if c.opts.stop.is_set() else "timed out"
            s.failure = f"{why} waiting for the end state, the cluster ready with no old pod left ({message})"
            c.log.error(c.key, "end-state", s.failure)
            c.get(s)
            return
        c.clock.wait(next(delays), c.opts.stop)
        lease.renew_if_due(c, s)
        c.get(s)


def _unlock(c: Context, s: State) -> None:
    lock = c.my_lock(s)
    outcome = locks.FAILED if s.failure else locks.COMPLETED if c.opts.wait_ready else locks.UNVERIFIED
    summary = _summary(c, s) if lock.phase == locks.REPLACING else None
    c.patch(s, patches.unlock_patch(s.live, locks.last_recreate(lock, c.clock.now(), outcome, summary)))
    if lock.target != c.target:
        s.recheck, s.replaced = True, False
        c.log.info(c.key, "unlock", "finished another hook's cycle; checking ours")
        return
    s.recreated = True
    if s.failure:
        c.event(s, events.FAILED, s.failure)
    else:
        c.log.info(c.key, "unlock", summary or "recreate completed")
        c.event(s, events.COMPLETED, f"raygitops {summary}" if summary else
                "raygitops recreated the pods with the desired templates")
