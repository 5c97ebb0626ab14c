"""Reading KubeRay's suspend conditions (raygitops.presync.prompt) and the waits between reads (polling); pure."""

from __future__ import annotations

import pytest

from raygitops.presync import prompt


def _live(**conditions: bool) -> dict:
    return {"status": {"conditions": [{"type": t, "status": "True" if v else "False"} for t, v in conditions.items()]}}


@pytest.mark.parametrize("live, state", [
    (_live(RayClusterSuspending=False, RayClusterSuspended=False), prompt.RUNNING),
    (_live(RayClusterSuspending=True, RayClusterSuspended=False), prompt.SUSPENDING),
    (_live(RayClusterSuspending=False, RayClusterSuspended=True), prompt.SUSPENDED),
    (_live(HeadPodReady=True), prompt.RUNNING),
    ({"status": {"conditions": "garbage"}}, prompt.RUNNING),
    ({"status": None}, prompt.RUNNING),
    (None, prompt.RUNNING),
])
def test_suspend_state(live, state):
    assert prompt.suspend_state(live) == state


def test_has_suspend_conditions():
    assert prompt.has_suspend_conditions(_live(RayClusterSuspended=False))
    assert not prompt.has_suspend_conditions(_live(HeadPodReady=True))
    assert not prompt.has_suspend_conditions({"status": {"state": "ready"}})


def test_the_operator_has_work_unless_suspended_as_meant():
    assert not prompt.operator_has_work(prompt.SUSPENDED, suspend=True)
    assert prompt.operator_has_work(prompt.SUSPENDED, suspend=False)  # next: mark it resumed
    assert prompt.operator_has_work(prompt.SUSPENDING, suspend=True)  # next: delete the pods
    assert prompt.operator_has_work(prompt.RUNNING, suspend=False)  # next: create the pods
    assert prompt.SUSPEND_DONE < prompt.SUSPEND_TAKEN_IN and prompt.RUNNING in prompt.RESUME_TAKEN_IN


def test_waiting_delays_double_up_to_their_cap_without_end():
    from itertools import islice

    from raygitops.presync import polling

    assert list(islice(polling.delays(0.1, 1.0), 7)) == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert list(polling.delays(0.1, 1.0, total=0.75)) == [0.1, 0.2, 0.4]
    assert next(polling.waiting()) == polling.WAIT_FIRST_SECONDS
