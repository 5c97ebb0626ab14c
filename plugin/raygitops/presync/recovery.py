"""After a failure, a stop or a deferral: never leave the cluster suspended.

Resume it (with the desired spec only if the drain had finished, else as it is: its old pods
come back from the live templates), record the failure (Event ``RecreateFailed``, before the
unlock: the unlock's answer may be lost after it took effect), then drop our lock with a
``Failed`` record; a cycle that had only locked (deferred, or held back by running Ray jobs)
drops its lock and records nothing.

The resume writes the lock in the phase that says what is now in the spec, for a run that
takes it over should this one die before its unlock: ``resumed`` with the desired spec (the
recreate happened: the takeover only waits for readiness), ``locked`` when resumed as it
was (nothing of the desired spec written, the old pods come back: the takeover starts the
cycle again, from its suspend, and never reports a recreate that did not happen).
Every write is read-and-written again on a 409; an API error is retried every
:data:`RETRY_SECONDS` until the run's deadline plus a minute (after a stop request, for
:data:`AFTER_STOP_SECONDS`: the pod's grace period is 30 s), and then left to the next run,
which finishes the cycle.
"""

from __future__ import annotations

import threading

from raygitops.kube.client import ApiError, Conflict
from raygitops.model import lock as locks
from raygitops.presync import events, patches
from raygitops.presync.context import Context, State

AFTER_STOP_SECONDS = 20.0  # a signalled run resumes and exits well inside 30 s
AFTER_DEADLINE_SECONDS = 60.0
RETRY_SECONDS = 2.0
_never_stopped = threading.Event()  # recovery goes on after a stop request: that is what it is for


def recover(c: Context, s: State, message: str, untouched: bool = False) -> str:
    """Resume and unlock; what was done, as a suffix for the report's message."""
    now = c.clock.monotonic()
    until = now + AFTER_STOP_SECONDS if c.opts.stop.is_set() else max(c.opts.deadline, now) + AFTER_DEADLINE_SECONDS
    done, failure_recorded, resumed = "", False, False
    while c.clock.monotonic() < until:
        try:
            c.get(s)
            lock = s.lock()
            if lock is None or lock.holder != c.holder:
                return done
            if lock.phase == locks.SUSPENDED or (s.live.get("spec") or {}).get("suspend") is True:
                done, resumed = _resume(c, s, lock), True
                c.log.warn(c.key, "resume", done[2:])
                c.test_pause("recovering")
                continue
            if untouched and lock.phase == locks.LOCKED and not resumed:
                c.patch(s, patches.unlock_patch(s.live, None))
                return done
            if not failure_recorded:
                c.event(s, events.FAILED, message)
                failure_recorded = True
            c.patch(s, patches.unlock_patch(s.live, locks.last_recreate(lock, c.clock.now(), locks.FAILED)))
            return done
        except Conflict:
            continue
        except ApiError as err:
            c.log.error(c.key, "resume", f"cannot resume after the failure: {err}; "
                        "the next hook run finishes the cycle")
            c.clock.wait(RETRY_SECONDS, _never_stopped)
    c.log.error(c.key, "resume", "gave up resuming: the next hook run finishes the cycle")
    return "; could not resume it: the next hook run finishes the cycle"


def _resume(c: Context, s: State, lock: locks.Lock) -> str:
    """One resume write: the desired spec when no old pod is left (lock ``resumed``), else
    the cluster as it was (lock ``locked``: the cycle is to be made again)."""
    now = c.clock.now()
    if s.drain_zero_at is not None:
        c.make_config_live()
        c.patch(s, patches.resume_patch(s.live, c.plan, lock.at(locks.RESUMED, now)))
        return "; resumed with the desired spec (the drain had finished)"
    c.patch(s, patches.wake_patch(s.live, lock.at(locks.LOCKED, now)))
    return "; resumed as it was (its pods come back from the live templates)"
