"""Phase 3: the full sync (render -> presync through the fault proxy -> kubectl apply) of the
fleet (fleet.py) under faults on the hook's requests and on the operator's, SIGKILLs at random
moments, operator outages and several hooks at once; invariants after every run and round.

Default: one round each (a random mix of every fault kind; kills; three concurrent hooks on
overlapping plans; faults on the operator's requests with the operator stopped mid-cycle).
``RAYGITOPS_SLOW=1``: every fault kind alone, a hostile API, a slow operator.  The soak
(test_soak.py, soak.py) draws many more rounds from a fresh seed.
"""

from __future__ import annotations

import os
import random

import pytest

from reliability.campaigns import HOSTILE, KIND_RULES, HookFigures, RoundPlan, fleet_with_proxies, mixed_rules, sync_round
from reliability.chaos import Outage, periodic_outages
from reliability.fleet import DRIFTING

pytestmark = pytest.mark.e2e
SEED = int(os.environ.get("RAYGITOPS_SEED", "1"))
# each round: both Recreate clusters, one group of the ReplaceGroups cluster and the ConfigMap change
CHANGED = (*DRIFTING, "replace.big")


@pytest.fixture(scope="module")
def setup(control_plane, tmp_path_factory):
    with fleet_with_proxies(control_plane, tmp_path_factory.mktemp("fleet")) as fleet_and_proxies:
        yield fleet_and_proxies


def _round(setup, **kw) -> HookFigures:
    fleet, proxy, operator_proxy = setup
    rev = fleet.revision.bump(CHANGED).with_(settings=f"mode-{fleet.round + 1}")
    figures = HookFigures()
    sync_round(fleet, proxy, figures, RoundPlan(rev, **{"seed": SEED, **kw}), operator_proxy)
    print(f"\n{figures.as_dict()}")
    assert not figures.violations, "\n".join(figures.violations)
    assert figures.clusters_left_suspended == 0 and figures.pods_wrongly_deleted == 0
    assert figures.internal_errors == 0 and figures.recreated_twice == 0
    assert figures.cycles == 4, figures.as_dict()  # drift-a, drift-b, replace (big), config (its worker's ConfigMap)
    return figures


def _kills(seed: int, count: int, within: float) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.2, within) for _ in range(count)]


def test_fault_mix(setup) -> None:
    figures = _round(setup, rules=mixed_rules())
    assert sum(figures.faults.values()) > 0, figures.requests


def test_crash_at_random_moments(setup) -> None:
    figures = _round(setup, kills=_kills(SEED, 4, 8.0), max_attempts=8)
    assert figures.kills >= 1


def test_concurrent_hooks_on_overlapping_plans(setup) -> None:
    _round(setup, concurrent=3, rules=mixed_rules(0.5))


def test_faults_on_the_operators_requests_and_the_operator_stopped_mid_cycle(setup) -> None:
    """The operator's own requests go through a fault proxy (a mix of every kind); it is
    stopped twice while the hook runs, once with SIGKILL."""
    figures = _round(setup, operator_rules=mixed_rules(), outages=[Outage(1.0, 3.0), Outage(6.0, 2.0, kill=True)])
    assert sum(figures.operator_faults.values()) > 0, figures.operator_requests
    assert figures.operator_outages >= 1 and sum(figures.operator_requests.values()) > 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KIND_RULES))
def test_each_fault_kind(setup, kind: str) -> None:
    figures = _round(setup, rules=list(KIND_RULES[kind]))
    assert figures.faults[kind] > 0, figures.faults


@pytest.mark.slow
def test_slow_operator_with_faults(setup) -> None:
    _round(setup, rules=mixed_rules(), concurrent=2,
           outages=periodic_outages(random.Random(SEED), down=2.0, period=5.0, within=60.0))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_hostile_api(setup, seed: int) -> None:
    """Half the writes lose their answer after taking effect, every watch is refused with
    410, a third of all requests get 503: the hook still converges, exactly once."""
    _round(setup, rules=list(HOSTILE), seed=seed)
