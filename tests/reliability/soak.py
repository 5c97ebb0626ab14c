"""The soak: sync rounds of the whole fleet (fleet.py) on KubeRay 1.5.0 and 1.6.2, each round
drawn from a seed: what the app changes (every path the hook has), faults on the hook's API
requests and on the operator's (its requests go through a fault proxy too), SIGKILLs of the
hook at random moments, the operator stopped and started again at random moments of a cycle,
several hooks at once on overlapping plans, with and without ``--wait-ready``.  Every
invariant is checked after every hook run and every round (campaigns.py, invariants.py).

    python tests/reliability/soak.py --rounds 500               # full: both operators, a seed drawn and printed
    python tests/reliability/soak.py --rounds 500 --seed S      # resumes S from its journal (~/.cache/raygitops-soak)
    python tests/reliability/soak.py --seed S --operators v1.5.0 --from-round 301 --rounds 200 --minutes 70
                                                                # one of several processes on disjoint ranges
    python tests/reliability/soak.py --seed S --operators v1.6.2 --from-round 17 --rounds 1   # one round again
    python tests/reliability/soak.py --report --seed S --write-docs   # the figures table into docs/reliability.md

Round ``i`` of operator ``op`` is drawn from ``random.Random(f"{seed}/{op}/{i}")`` alone, the
app's revision before it from the rounds before it (drawn again, not run), so a round is
run again from its seed on a fresh fleet set up at that revision (``--from-round``): the same
change, faults, kills and outages (their timing against the hook's is the machine's).
Each finished round is appended to a journal (one JSON line: its plan, figures, violations),
so a soak that stops is resumed where it stopped, and the figures are summed from it.
CI runs a few rounds per operator with a fresh seed (test_soak.py, ``quick``); a failure
prints the command line that runs its round again.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
for path in (TESTS, TESTS / "e2e"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from reliability.campaigns import (  # noqa: E402
    HOSTILE, INVARIANTS, KIND_RULES, OPERATOR_KIND_RULES, HookFigures, RoundPlan, fleet_with_proxies, mixed_rules,
    sync_round)
from reliability.chaos import draw_outages  # noqa: E402
from reliability.faultproxy import Rule  # noqa: E402
from reliability.fleet import Revision  # noqa: E402

JOURNALS = Path(os.environ.get("RAYGITOPS_SOAK_DIR") or Path.home() / ".cache" / "raygitops-soak")
DOC = REPO / "docs" / "reliability.md"
SECTION = "soak"
KILL_WITHIN = 15.0  # a kill falls in the first seconds of a hook run (a cycle takes about this long)
# how often a round's operator sees RayClusters late (its watch of them behind its watch of the
# pods): the removed-group race of issue 46 lives there (tests/e2e/test_removed_group_race.py)
WATCH_DELAYED = 0.5


# ----------------------------------------------------------------------------- drawing rounds


def round_rng(seed: int, operator: str, index: int) -> random.Random:
    return random.Random(f"{seed}/{operator}/{index}")


def next_revision(rng: random.Random, rev: Revision, native: bool) -> Revision:
    """What the next commit changes (drawn first from the round's generator, so the
    revisions of a soak depend on its seed alone)."""
    bump = [p for p, chance in (("drift-a", 0.8), ("drift-b", 0.5), ("config", 0.15), ("noopt", 0.5),
                                 ("jobowned", 0.5), ("jobref", 0.5), ("native", 0.5 if native else 0.0))
            if rng.random() < chance]
    replace = rng.choices(["none", "small", "big", "small+big", "extra", "extra image", "head"],
                          [0.2, 0.15, 0.15, 0.15, 0.15, 0.1, 0.1])[0]
    extra = rev.extra
    if replace == "extra":
        extra = not rev.extra
    elif replace == "extra image" and rev.extra:
        bump.append("replace.extra")
    elif replace in ("small", "big", "head"):
        bump.append(f"replace.{replace}")
    elif replace == "small+big":
        bump += ["replace.small", "replace.big"]
    config = rng.choices(["none", "ConfigMap", "Secret", "both"], [0.4, 0.25, 0.2, 0.15])[0]
    settings = f"mode-{rng.getrandbits(24):06x}" if config in ("ConfigMap", "both") else rev.settings
    password = Revision.new_password(rng) if config in ("Secret", "both") else rev.password
    label = rev.label + 1 if rng.random() < 0.5 else rev.label
    return rev.bump(bump).with_(extra=extra, settings=settings, password=password, label=label)


def draw_round(rng: random.Random, rev: Revision, native: bool) -> RoundPlan:
    """One round: its revision (:func:`next_revision`), then its faults, kills, outages,
    concurrency and ``--wait-ready``."""
    revision = next_revision(rng, rev, native)
    seed = rng.getrandbits(32)
    rules, hook = _faults(rng, "hook", ["none", "mix", "kind", "hostile"], [0.2, 0.4, 0.3, 0.1], (0.5, 1.5))
    operator_rules, operator = _faults(rng, "operator", ["none", "mix", "kind"], [0.5, 0.3, 0.2], (0.3, 1.0))
    labels = [label for label in (hook, operator) if label]
    kills = [rng.uniform(0.2, KILL_WITHIN) for _ in range(rng.choices([1, 2, 3], [0.6, 0.3, 0.1])[0])] \
        if rng.random() < 0.3 else []
    outages = draw_outages(rng, rng.choice([1, 2]), within=12.0) if rng.random() < 0.3 else []
    concurrent = rng.choice([2, 3]) if rng.random() < 0.15 else 1
    wait_ready = rng.random() < 0.75
    if kills:
        labels.append(f"{len(kills)} kills")
    if outages:
        labels.append(f"{len(outages)} operator outages")
    lag = rng.uniform(0.3, 3.0) if rng.random() < WATCH_DELAYED else 0.0  # drawn last: earlier draws unchanged
    if lag:
        operator_rules = operator_rules + [Rule("watch-delay", verbs={"watch"}, resources={"rayclusters"}, delay=lag)]
        labels.append(f"operator's RayCluster watch {lag:.1f} s behind")
    return RoundPlan(revision, seed, ", ".join(labels) or "no faults", rules, operator_rules, kills, outages,
                     concurrent, wait_ready, max_attempts=10 + len(kills))


def _faults(rng: random.Random, whose: str, kinds: list[str], weights: list[float],
            scale: tuple[float, float]) -> tuple[list[Rule], str | None]:
    """Faults on someone's requests: none, a mix of every kind at a random scale, one kind
    alone, or the hostile API; and how to say so."""
    what = rng.choices(kinds, weights)[0]
    if what == "mix":
        factor = rng.uniform(*scale)
        return mixed_rules(factor), f"{whose} faults: mix x{factor:.1f}"
    if what == "kind":
        table = OPERATOR_KIND_RULES if whose == "operator" else KIND_RULES
        kind = rng.choice(sorted(table))
        return list(table[kind]), f"{whose} faults: {kind}"
    if what == "hostile":
        return list(HOSTILE), f"{whose} faults: hostile API"
    return [], None


def revision_before(seed: int, operator: str, index: int, native: bool) -> Revision:
    """The app's revision before round ``index`` (1-based): rounds 1 .. index-1 drawn again."""
    rev = Revision.first()
    for i in range(1, index):
        rev = next_revision(round_rng(seed, operator, i), rev, native)
    return rev


def passwords_before(seed: int, operator: str, index: int, native: bool) -> list[str]:
    """Every Secret value the app had before round ``index``."""
    rev, seen = Revision.first(), [Revision.first().password]
    for i in range(1, index):
        rev = next_revision(round_rng(seed, operator, i), rev, native)
        seen.append(rev.password)
    return sorted(set(seen))


# ----------------------------------------------------------------------------- running


def commit() -> str:
    res = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (res.stdout.strip() or "unknown") + ("+changes" if dirty else "")


def repro(seed: int, operator: str, index: int) -> str:
    return (f"python tests/reliability/soak.py --seed {seed} --operators {operator} --from-round {index} "
            "--rounds 1 --no-journal")


def run_rounds(plane: Any, seed: int, first: int, count: int, journal: Path | None = None,
               progress: Any = print, budget: float | None = None) -> HookFigures:
    """Rounds ``first`` .. ``first + count - 1`` of ``seed`` on ``plane``'s operator, each
    appended to ``journal`` when given; their figures.  With ``budget`` (seconds), no round
    starts once that much has passed (at least one runs).  A round that raises (the harness,
    not an invariant: a kubectl call timing out, say) is a violation of its own, and the
    next round starts on a fleet set up again."""
    began = time.monotonic()
    operator, native = plane.kuberay, _native(plane)
    figures = HookFigures()
    rev = revision_before(seed, operator, first, native)
    passwords = passwords_before(seed, operator, first, native)
    index, end = first, first + count
    while index < end:
        with tempfile.TemporaryDirectory(prefix="raygitops-soak-") as tmp, \
                fleet_with_proxies(plane, Path(tmp), rev) as (fleet, proxy, operator_proxy):
            fleet.round = index - 1
            crashed = False
            while index < end and not crashed and (budget is None or index == first
                                                   or time.monotonic() - began < budget):
                plan = draw_round(round_rng(seed, operator, index), fleet.revision, fleet.native)
                passwords = sorted(set(passwords + [plan.revision.password]))
                one = HookFigures()
                t0 = time.monotonic()
                try:
                    sync_round(fleet, proxy, one, plan, operator_proxy, passwords)
                except Exception as err:  # noqa: BLE001 - recorded; the next round gets a new fleet
                    one.violate("the round runs to its end", [f"{type(err).__name__}: {err}"[:2000]],
                                f"round {index}: ")
                    crashed = True
                figures.merge(one)
                _record(journal, progress, seed, operator, index, plan, one, time.monotonic() - t0)
                rev, index = plan.revision, index + 1
            if budget is not None and time.monotonic() - began >= budget:
                break
    return figures


def _record(journal: Path | None, progress: Any, seed: int, operator: str, index: int, plan: RoundPlan,
            one: HookFigures, seconds: float) -> None:
    line = {"round": index, "operator": operator, "seed": seed, "commit": commit(),
            "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(seconds, 1), "plan": plan.to_json(), "figures": one.as_dict()}
    if journal is not None:
        with open(journal, "a") as f:
            f.write(json.dumps(line) + "\n")
    status = "ok" if not one.violations else f"{len(one.violations)} VIOLATIONS"
    progress(f"{operator} round {index}: {plan.label}; {one.syncs} runs, {one.kills} kills, "
             f"{sum(one.faults.values())}+{sum(one.operator_faults.values())} faults, {seconds:.0f} s: {status}")
    for v in one.violations:
        progress(f"    {v}")
    if one.violations:
        progress(f"    again: {repro(seed, operator, index)}")


def _native(plane: Any) -> bool:
    return not plane.kuberay.startswith(("v1.5", "v1.4", "v1.3", "v1.2", "v1.1"))


def journal_path(seed: int, operator: str) -> Path:
    return JOURNALS / f"soak-{seed}-{operator}.jsonl"


def read_journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = []
    for text in path.read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            break  # a line cut short by a crash: everything before it counts
    return lines


# ----------------------------------------------------------------------------- the table


def table(seed: int, journals: dict[str, list[dict[str, Any]]]) -> str:
    """The figures of a soak's journals (operator -> lines) as the Markdown docs/reliability.md
    keeps between ``<!-- soak -->`` and ``<!-- /soak -->``."""
    per = {op: _summed(lines) for op, lines in journals.items()}
    total = HookFigures()
    for f in per.values():
        total.merge(f)
    ops = list(per)
    rows: list[tuple[str, list[str]]] = []

    def row(name: str, value: Any) -> None:
        rows.append((name, [value(per[op]) for op in ops] + [value(total)]))

    def kinds(counter: Any) -> str:
        return f"{sum(counter.values()):,}" + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) + ")"
                                                if counter else "")

    row("sync rounds", lambda f: f"{f.rounds:,}")
    row("hook runs", lambda f: f"{f.syncs:,}")
    row("SIGKILLs of the hook (the lock phases they left, one per planned cluster)",
        lambda f: f"{f.kills:,}" + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(f.kill_phases.items())) + ")"
                                    if f.kill_phases else ""))
    row("hook runs that took a dead hook's lock over", lambda f: f"{f.takeovers:,}")
    row("operator stopped and started during a cycle", lambda f: f"{f.operator_outages:,}")
    row("faults on the hook's requests", lambda f: kinds(f.faults))
    row("faults on the operator's requests", lambda f: kinds(f.operator_faults))
    row("API requests: hook / operator (through the proxies)",
        lambda f: f"{sum(f.requests.values()):,} / {sum(f.operator_requests.values()):,}")
    row("drifted clusters brought onto their target exactly once", lambda f: f"{f.cycles:,}")
    for path in sorted(total.paths):
        row(f"path: {path}", lambda f, p=path: f"{f.paths.get(p, 0):,}")
    row("most pods of a replaced group unavailable at once (bound)",
        lambda f: ", ".join(f"{g} {n} ({b})" for g, n, b in _unavailable(f)) or "-")
    row("new pods ordered after the write of the config they read",
        lambda f: f"{f.ordered_pods:,}" + (f" ({f.unordered_pods} seen first in a list)" if f.unordered_pods else ""))
    for name in sorted(set(total.invariants) | set(INVARIANTS)):
        row(f"violations: {name} (must be 0)", lambda f, n=name: f"{f.invariants.get(n, 0)}")
    row("hook internal errors (must be 0)", lambda f: f"{f.internal_errors}")
    row("hours on this machine (2 cores, shared)", lambda f: f"{f.seconds / 3600:.1f}")
    head = "| figure | " + " | ".join(f"KubeRay {op}" for op in ops) + " | total |"
    lines = [head, "|---" * (len(ops) + 2) + "|"] + [f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows]
    commits = sorted({line["commit"] for lines in journals.values() for line in lines})
    first = min((line["at"] for lines in journals.values() for line in lines), default="-")
    last = max((line["at"] for lines in journals.values() for line in lines), default="-")
    return (f"Seed **{seed}** (`python tests/reliability/soak.py --seed {seed} --rounds N`), commit "
            f"{', '.join(commits)}, {first} to {last}.\n\n" + "\n".join(lines))


def _unavailable(f: HookFigures) -> list[tuple[str, int, int]]:
    from reliability.fleet import BOUNDS

    return [(g, n, BOUNDS[g]) for g, n in sorted(f.most_unavailable.items())]


def _summed(lines: list[dict[str, Any]]) -> HookFigures:
    total = HookFigures()
    for line in lines:
        total.merge(HookFigures.from_dict(line["figures"]))
    return total


def write_docs(body: str) -> None:
    sys.path.insert(0, str(TESTS / "bench"))
    from measure import write_doc_section

    write_doc_section(SECTION, body, DOC)


# ----------------------------------------------------------------------------- command line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=500, help="rounds per operator (default 500)")
    parser.add_argument("--seed", type=int, help="default: a fresh one, printed")
    parser.add_argument("--operators", default=None, help="comma-separated (default: KUBERAY_VERSION,KUBERAY_NEXT_VERSION)")
    parser.add_argument("--from-round", type=int, help="start at this round (default: after the journal's last)")
    parser.add_argument("--minutes", type=float, help="start no round after this many minutes (per operator)")
    parser.add_argument("--no-journal", action="store_true", help="record nothing (a round run again)")
    parser.add_argument("--report", action="store_true", help="only print the table of the journals")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/reliability.md")
    args = parser.parse_args()
    import controlplane

    versions = controlplane.load_versions()
    operators = (args.operators or f"{versions['KUBERAY_VERSION']},{versions['KUBERAY_NEXT_VERSION']}").split(",")
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(31)
    print(f"soak seed {seed} (again: --seed {seed}); operators {', '.join(operators)}; commit {commit()}", flush=True)
    JOURNALS.mkdir(parents=True, exist_ok=True)
    failed = False
    if not args.report:
        for operator in operators:
            journal = None if args.no_journal else journal_path(seed, operator)
            done = [line["round"] for line in read_journal(journal)] if journal else []
            first = args.from_round or (max(done) + 1 if done else 1)
            count = args.rounds - first + 1 if args.from_round is None else args.rounds
            if count <= 0:
                print(f"{operator}: {len(done)} rounds in {journal} already", flush=True)
                continue
            print(f"{operator}: rounds {first} to {first + count - 1}" + (f", journal {journal}" if journal else ""),
                  flush=True)
            with controlplane.running(kuberay=operator) as plane:
                figures = run_rounds(plane, seed, first, count, journal, progress=lambda s: print(s, flush=True),
                                     budget=None if args.minutes is None else args.minutes * 60)
            failed = failed or bool(figures.violations) or bool(figures.internal_errors)
    journals = {op: read_journal(journal_path(seed, op)) for op in operators}
    journals = {op: lines for op, lines in journals.items() if lines}
    if journals:
        body = table(seed, journals)
        print("\n" + body)
        if args.write_docs:
            write_docs(body)
            print(f"\nwritten to {DOC}")
        failed = failed or any(HookFigures.from_dict(line["figures"]).violations
                               for lines in journals.values() for line in lines)
        for lines in journals.values():
            for line in lines:
                if line["figures"]["violations"]:
                    print(f"round {line['round']} ({line['operator']}): again: "
                          f"{repro(seed, line['operator'], line['round'])}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
