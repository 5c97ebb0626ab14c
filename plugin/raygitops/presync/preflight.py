"""The cycle's ``preflight`` step: before the suspend (or, under ReplaceGroups, the first
deletion), look up live what the new pods need and let :mod:`raygitops.model.preflight`
judge it (docs/presync.md, "Preflight"); :mod:`raygitops.kube.preflightlive` reads. This
module only runs the step and words it.

It runs with our lock held in phase ``locked``, after the jobs step; a failed check raises
:class:`PreflightFailed`, after which the lock is dropped and nothing else was touched.
"""

from __future__ import annotations

from raygitops.kube.preflightlive import gather
from raygitops.model import preflight as model
from raygitops.presync import events
from raygitops.presync.context import Context, State, Untouched


class PreflightFailed(Untouched):
    """A preflight check failed (or could not be made, under policy fail): not touched."""


def check(c: Context, s: State) -> None:
    """Look, judge, and fail closed on what the policy does not let pass."""
    policy = c.plan.preflight_policy
    if not policy.enabled:
        c.log.info(c.key, "preflight", "preflight off for this cluster: not checked")
        s.preflight_cleared = True
        return
    needs = c.plan.preflight_needs(s.groups if s.replace else None)
    failures = model.check(needs, gather(c.kube, c.ns, needs, c.pods))
    stopping = model.blocking(failures, policy)
    for failure in failures:
        if failure not in stopping:
            c.log.warn(c.key, "preflight", f"not checked, going on (preflight-unknown: proceed): {failure.line()}")
    if stopping:
        message = f"preflight failed, not touched: {model.summary(stopping)}"
        for failure in stopping:
            c.log.error(c.key, "preflight", failure.line(), node=failure.node)
        c.event(s, events.PREFLIGHT_FAILED, message)
        raise PreflightFailed(message)
    c.log.info(c.key, "preflight", f"passed: checked {needs.describe()}")
    s.preflight_cleared = True
