"""Phase 3: the full sync (render -> presync through the fault proxy -> kubectl apply) under
faults, SIGKILLs at random moments, and several hooks at once; invariants after every run.

Default: one round per campaign (a random mix of every fault kind; three kills; three
concurrent hooks on overlapping plans).  ``RAYGITOPS_SLOW=1``: every fault kind alone,
several seeds of the mix, more kills, and a flaky operator.
"""

from __future__ import annotations

import os

import pytest

from reliability.campaigns import KIND_RULES, HookFigures, kill_schedule, mixed_rules, sync_round
from reliability.fleet import Fleet

pytestmark = pytest.mark.e2e
SEED = int(os.environ.get("RAYGITOPS_SEED", "1"))


@pytest.fixture(scope="module")
def fleet(control_plane, tmp_path_factory):
    import controlplane

    ns = control_plane.create_namespace(controlplane.unique_name("relfleet"))
    foreign = control_plane.create_namespace(controlplane.unique_name("relforeign"))
    f = Fleet(control_plane, ns, foreign, tmp_path_factory.mktemp("fleet"))
    f.setup()
    yield f
    for name in (ns, foreign):
        control_plane.delete_namespace(name, wait=False)


@pytest.fixture(scope="module")
def module_proxy(control_plane):
    from reliability.faultproxy import FaultProxy

    with FaultProxy(control_plane.kubeconfig, seed=SEED) as p:
        yield p


def _check(figures: HookFigures) -> None:
    print(f"\n{figures.as_dict()}")
    assert not figures.violations, "\n".join(figures.violations)
    assert figures.clusters_left_suspended == 0 and figures.pods_wrongly_deleted == 0
    assert figures.internal_errors == 0 and figures.recreated_twice == 0


def test_fault_mix(fleet, module_proxy) -> None:
    figures = HookFigures()
    sync_round(fleet, module_proxy, figures, rules=mixed_rules(), seed=SEED)
    _check(figures)
    assert figures.cycles == 2
    assert sum(figures.faults.values()) > 0, figures.requests


def test_crash_at_random_moments(fleet, module_proxy) -> None:
    figures = HookFigures()
    sync_round(fleet, module_proxy, figures, kill=kill_schedule(SEED, kills=4, max_delay=6.0), max_attempts=8)
    _check(figures)
    assert figures.cycles == 2 and figures.kills >= 1


def test_concurrent_hooks_on_overlapping_plans(fleet, module_proxy) -> None:
    figures = HookFigures()
    sync_round(fleet, module_proxy, figures, concurrent=3, subset=True, rules=mixed_rules(0.5), seed=SEED)
    _check(figures)
    assert figures.cycles == 2


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KIND_RULES))
def test_each_fault_kind(fleet, module_proxy, kind: str) -> None:
    figures = HookFigures()
    sync_round(fleet, module_proxy, figures, rules=KIND_RULES[kind], seed=SEED)
    _check(figures)
    assert figures.cycles == 2 and figures.faults[kind] > 0, figures.faults


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_fault_mix_seeds(fleet, module_proxy, seed: int) -> None:
    figures = HookFigures()
    sync_round(fleet, module_proxy, figures, rules=mixed_rules(1.5), seed=seed)
    _check(figures)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [5, 6, 7])
def test_crash_seeds(fleet, module_proxy, seed: int) -> None:
    figures = HookFigures()
    sync_round(fleet, module_proxy, figures, kill=kill_schedule(seed, kills=6, max_delay=10.0),
               rules=mixed_rules(0.5), seed=seed, max_attempts=10)
    _check(figures)


@pytest.mark.slow
def test_flaky_operator_with_faults(fleet, module_proxy) -> None:
    figures = HookFigures()
    sync_round(fleet, module_proxy, figures, rules=mixed_rules(), seed=SEED, flaky_operator=True,
               concurrent=2)
    _check(figures)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_hostile_api(fleet, module_proxy, seed: int) -> None:
    """Half the writes lose their answer after taking effect, every watch is refused with
    410, a third of all requests get 503: the hook still converges, exactly once."""
    from reliability.faultproxy import Rule

    rules = [Rule("reset-after", probability=0.5, verbs={"patch", "delete"}),
             Rule("http-410", probability=1.0), Rule("503", probability=0.3, retry_after=0)]
    figures = HookFigures()
    sync_round(fleet, module_proxy, figures, rules=rules, seed=seed, max_attempts=10)
    _check(figures)
    assert figures.cycles == 2
