"""The cycle's ``jobs`` step: before anything that takes pods down, ask the cluster's Ray head
which jobs run and follow the cluster's policy (:mod:`raygitops.model.jobs` decides; this
module asks, waits and words).

It runs with our lock held in phase ``locked`` (or ``replacing``, for a replacement taken
over), so that no other hook starts on the cluster meanwhile; every wait renews the lease
when due and is cut short by a stop request. It ends in one of three ways: the cycle goes on
(no job, a head that cannot be running one, the jobs ended, policy proceed), or it raises
:class:`JobsHeld` (policy fail; a wait whose bound or budget is up; a stop request while
waiting), after which the lock is dropped and nothing else was touched.
"""

from __future__ import annotations

from raygitops.kube.rayhead import ask_jobs
from raygitops.model import jobs
from raygitops.presync import events, lease, polling
from raygitops.presync.context import Context, Interrupted, State, Untouched

POLL_FIRST_SECONDS = 1.0  # a job that is about to end is seen soon
POLL_CAP_SECONDS = 5.0  # then at most every 5 s: two requests (the pods, the head) each time


class JobsHeld(Untouched):
    """Running (or unknown) Ray jobs keep the cycle from starting: the sync fails, naming them."""


def check(c: Context, s: State) -> None:
    """Ask, decide, and wait while the policy says so (simulated time in the unit tests)."""
    policy = c.plan.jobs_policy
    if policy.action == jobs.PROCEED:
        c.log.info(c.key, "jobs", "policy proceed: running Ray jobs are not asked for")
        s.jobs_cleared = True
        return
    dashboard = c.plan.head_dashboard()
    started = c.clock.monotonic()
    delays = polling.delays(POLL_FIRST_SECONDS, POLL_CAP_SECONDS)
    said: tuple[str, ...] | None = None  # what the last "waiting" line was about (not how long it ran)
    while True:
        seen = ask_jobs(c.kube, c.ns, dashboard, s.live, c.pods())
        waited = c.clock.monotonic() - started
        room = jobs.room(policy, waited, c.room_for_waiting())
        decision = jobs.decide(policy, seen, c.clock.now(), waited, room)
        if decision.action == jobs.PROCEED:
            c.log.info(c.key, "jobs", f"going on: {decision.reason}",
                       **({"waited": round(waited, 1)} if said is not None else {}))
            s.jobs_cleared = True
            return
        if decision.action == jobs.FAIL:
            c.log.error(c.key, "jobs", decision.reason)
            c.event(s, events.JOBS_RUNNING, decision.reason)
            raise JobsHeld(decision.reason)
        about = (seen.state, seen.detail, *(f"{j.id} {j.status}" for j in seen.jobs))
        if about != said:
            if said is None:
                c.event(s, events.WAITING_FOR_JOBS, f"raygitops waits before it recreates: {decision.reason}")
            c.log.info(c.key, "jobs", f"waiting: {decision.reason}", policy=policy.words())
            said = about
        _pause(c, s, min(next(delays, POLL_CAP_SECONDS), room), decision.reason)  # ask once more at the bound


def _pause(c: Context, s: State, seconds: float, why: str) -> None:
    """Sleep until the next question, renewing the lease whenever it is due meanwhile; a
    stop request ends the wait with the cluster untouched."""
    until = c.clock.monotonic() + seconds
    try:
        while (left := until - c.clock.monotonic()) > 0:
            c.sleep(max(0.05, min(left, c.renew_at - c.clock.monotonic())))
            c.check_stop()
            lease.renew_if_due(c, s)
    except Interrupted:
        raise JobsHeld(f"interrupted (SIGTERM/SIGINT) while waiting for Ray jobs ({why}): not touched") from None
