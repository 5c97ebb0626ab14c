"""The soak (soak.py) as CI runs it: rounds on each operator (KubeRay 1.5 and
KUBERAY_NEXT_VERSION) drawn from a FRESH seed every run, printed, for about
``RAYGITOPS_SOAK_SECONDS`` (75) each, fleet set-up aside (no round starts after that; a round
takes 15 to 90 s); every invariant checked after every hook run and round. A failure says
the seed and, per failed round, the command line that runs that round again
(``RAYGITOPS_SOAK_SEED=<seed>`` runs the same rounds here).
"""

from __future__ import annotations

import os
import random
import shlex

import pytest

from reliability import soak
from reliability.campaigns import HookFigures
from reliability.fleet import Revision

SEED = int(os.environ.get("RAYGITOPS_SOAK_SEED") or random.SystemRandom().getrandbits(31))
SECONDS = float(os.environ.get("RAYGITOPS_SOAK_SECONDS", "75"))


def test_a_round_is_drawn_from_its_seed_alone() -> None:
    """Round i's plan depends on (seed, operator, i) only: the revision before it is drawn
    again, not run, so ``--from-round i`` gets the round the soak ran."""
    rev, plans = Revision.first(), []
    for i in range(1, 13):
        plan = soak.draw_round(soak.round_rng(11, "v1.6.2", i), rev, True)
        plans.append(plan.to_json())
        rev = plan.revision
    again = soak.draw_round(soak.round_rng(11, "v1.6.2", 12), soak.revision_before(11, "v1.6.2", 12, True), True)
    assert again.to_json() == plans[-1]
    other = soak.draw_round(soak.round_rng(12, "v1.6.2", 12), soak.revision_before(12, "v1.6.2", 12, True), True)
    assert other.to_json() != plans[-1]
    assert rev.password in soak.passwords_before(11, "v1.6.2", 13, True)


def test_a_failed_round_prints_the_command_that_runs_it_again(tmp_path) -> None:
    plan = soak.draw_round(soak.round_rng(5, "v1.5.0", 3), soak.revision_before(5, "v1.5.0", 3, False), False)
    one = HookFigures(rounds=1, syncs=2)
    one.violate("no run reports a success that is not", ["drift-a: old pods run"], "round 3: ")
    lines: list[str] = []
    journal = tmp_path / "j.jsonl"
    soak._record(journal, lines.append, 5, "v1.5.0", 3, plan, one, 1.0)
    again = [line.split("again: ", 1)[1] for line in lines if "again: " in line]
    assert again == [soak.repro(5, "v1.5.0", 3)]
    argv = shlex.split(again[0])
    assert argv[argv.index("--seed") + 1] == "5" and argv[argv.index("--from-round") + 1] == "3"
    assert argv[argv.index("--operators") + 1] == "v1.5.0"
    [line] = soak.read_journal(journal)
    assert line["round"] == 3 and line["figures"]["violations"] == one.violations


def test_the_operators_watches_end_after_their_initial_list() -> None:
    """Drawn alone on the operator's traffic, ``watch-end`` ends a watch after a second, never
    after its first event (KubeRay 1.6.2's informers would never finish their streamed
    initial list); on the hook's, after the first event as before."""
    seen = {}
    for i in range(200):
        for whose in ("hook", "operator"):
            rules, label = soak._faults(random.Random(i), whose, ["kind"], [1.0], (1.0, 1.0))
            if label.endswith("watch-end"):
                seen[whose] = rules
    (hook,), (operator,) = seen["hook"], seen["operator"]
    assert hook.events == 1 and operator.events > 1000 and operator.after == 1.0


@pytest.fixture(params=["kuberay", "kuberay-next"])
def plane(request):
    return request.getfixturevalue("control_plane" if request.param == "kuberay" else "control_plane_next")


@pytest.mark.e2e
def test_soak_rounds_from_a_fresh_seed(plane, capsys) -> None:
    with capsys.disabled():  # shown whatever the outcome: the seed of every CI run is in its log
        print(f"\nsoak seed {SEED} on {plane.kuberay} (RAYGITOPS_SOAK_SEED={SEED} runs these rounds again)")
    lines: list[str] = []
    figures = soak.run_rounds(plane, SEED, 1, 1000, progress=lines.append, budget=SECONDS)
    with capsys.disabled():
        print(f"soak seed {SEED} on {plane.kuberay}: {figures.rounds} rounds, {figures.syncs} hook runs, "
              f"{figures.kills} kills, {len(figures.violations)} violations")
    print("\n".join(lines))
    assert figures.rounds >= 1 and figures.syncs >= figures.rounds
    # the figures count the requests through both proxies (a hook run makes at least its list calls)
    assert sum(figures.requests.values()) >= figures.syncs and sum(figures.operator_requests.values()) > 0
    assert not figures.violations and not figures.internal_errors, (
        f"soak seed {SEED} on {plane.kuberay}:\n" + "\n".join(lines))
