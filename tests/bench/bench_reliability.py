"""Reliability figures: the hostile-input campaign against render/diff and, when the e2e
control plane is built, the fault / crash / concurrency campaigns against the PreSync hook.

Run: python tests/bench/bench_reliability.py [--quick] [--no-cluster] [--seed N]
Prints one table (also in docs/reliability.md).  Exit 1 when a must-be-zero figure is not.
--quick: render catalog without its 30 MB app, 500 fuzz inputs, 3 hook rounds (mix, crash,
concurrency); default: the whole catalog, 3,000 fuzz inputs, every fault kind alone, a mix,
kills and concurrency (about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "e2e"))

from reliability import hostile  # noqa: E402


def hostile_figures(quick: bool, seed: int) -> hostile.Figures:
    cases = hostile.catalog()
    if quick:
        cases = [c for c in cases if "30MB-valid" not in c.name]
    t0 = time.monotonic()
    figures = hostile.run_catalog(cases, "subprocess", progress=lambda s: None)
    print(f"  render catalog (subprocesses): {figures.tried} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    t0 = time.monotonic()
    diff = hostile.run_catalog([c for c in cases if not c.args and c.stdin is None], "inprocess", command="diff")
    print(f"  diff catalog (in-process): {diff.tried} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    figures.merge(diff)
    t0 = time.monotonic()
    fuzzed = hostile.fuzz(500 if quick else 3000, seed=seed, progress=lambda s: print("  " + s, file=sys.stderr))
    print(f"  mutation fuzz (in-process): {fuzzed.tried} inputs, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    figures.merge(fuzzed)
    return figures


def hook_figures(quick: bool, seed: int):
    import controlplane

    from reliability.campaigns import KIND_RULES, HookFigures, kill_schedule, mixed_rules, sync_round
    from reliability.faultproxy import FaultProxy
    from reliability.fleet import Fleet

    try:
        controlplane.locate_binaries()
    except controlplane.Unavailable as err:
        print(f"  hook campaigns skipped: {err}", file=sys.stderr)
        return None
    plane = controlplane.ControlPlane()
    plane.start()
    figures = HookFigures()
    try:
        ns = plane.create_namespace(controlplane.unique_name("bench"))
        foreign = plane.create_namespace(controlplane.unique_name("benchforeign"))
        fleet = Fleet(plane, ns, foreign, Path(tempfile.mkdtemp(prefix="raygitops-bench-fleet-")))
        fleet.setup()
        with FaultProxy(plane.kubeconfig, seed=seed) as proxy:
            rounds = [("mix", dict(rules=mixed_rules(), seed=seed))]
            if not quick:
                rounds += [(f"kind {k}", dict(rules=r, seed=seed)) for k, r in KIND_RULES.items()]
                rounds += [("mix x1.5", dict(rules=mixed_rules(1.5), seed=seed + 1))]
            rounds += [("kills", dict(kill=kill_schedule(seed, kills=6, max_delay=6.0), max_attempts=10)),
                       ("concurrent", dict(concurrent=3, subset=True, rules=mixed_rules(0.5), seed=seed))]
            if not quick:
                rounds += [("kills 2", dict(kill=kill_schedule(seed + 2, kills=6, max_delay=6.0), max_attempts=10)),
                           ("kills+mix", dict(kill=kill_schedule(seed + 1, kills=6, max_delay=10.0),
                                              rules=mixed_rules(0.5), seed=seed, max_attempts=10)),
                           ("flaky operator", dict(rules=mixed_rules(), seed=seed, flaky_operator=True, concurrent=2))]
            for name, kwargs in rounds:
                t0 = time.monotonic()
                one = HookFigures()
                sync_round(fleet, proxy, one, **kwargs)
                figures.merge(one)
                status = "ok" if not one.violations else f"{len(one.violations)} violations"
                print(f"  hook round {name}: {one.syncs} runs, {sum(one.faults.values())} faults, "
                      f"{time.monotonic() - t0:.0f} s: {status}", file=sys.stderr)
                for v in one.violations:
                    print(f"    {v}", file=sys.stderr)
    finally:
        plane.cleanup()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-cluster", action="store_true")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("RAYGITOPS_SEED", "1")))
    args = parser.parse_args()
    start = time.monotonic()
    print("hostile inputs ...", file=sys.stderr)
    h = hostile_figures(args.quick, args.seed)
    hook = None
    if not args.no_cluster:
        print("hook campaigns ...", file=sys.stderr)
        hook = hook_figures(args.quick, args.seed)

    rows: list[tuple[str, str]] = []
    if hook is not None:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(hook.faults.items()))
        rows += [
            ("faults injected (per kind)", f"{sum(hook.faults.values())} ({kinds})"),
            ("API requests through the proxy", str(sum(hook.requests.values()))),
            ("sync rounds / hook runs / SIGKILLs", f"{hook.rounds} / {hook.syncs} / {hook.kills}"),
            ("lock phase left by the kills", ", ".join(f"{k} {v}" for k, v in sorted(hook.kill_phases.items())) or "-"),
            ("recreate cycles completed (exactly once)", str(hook.cycles)),
            ("clusters left suspended (must be 0)", str(hook.clusters_left_suspended)),
            ("pods wrongly deleted (must be 0)", str(hook.pods_wrongly_deleted)),
            ("clusters recreated twice (must be 0)", str(hook.recreated_twice)),
            ("hook internal errors (must be 0)", str(hook.internal_errors)),
            ("invariant violations (must be 0)", str(len(hook.violations))),
        ]
    else:
        rows.append(("hook campaigns", "not run (no control plane)"))
    rows += [
        ("hostile inputs tried (render + diff)", str(h.tried)),
        ("crashes: traceback, signal, hang (must be 0)", str(h.crashes)),
        ("other hostile-input failures (must be 0)", str(len(h.failures) - h.crashes)),
        ("peak memory of render on the largest input",
         f"{h.largest_input_rss_kb / 1024:.0f} MiB ({h.largest_input_bytes / 2**20:.0f} MiB input)"),
        ("peak memory of any hostile case", f"{h.peak_rss_kb / 1024:.0f} MiB ({h.peak_rss_case})"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'figure'.ljust(width)}  value")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    print(f"\n({time.monotonic() - start:.0f} s)")
    for failure in h.failures:
        print(f"FAIL {failure}", file=sys.stderr)
    bad = h.crashes or h.failures or (hook is not None and (hook.violations or hook.clusters_left_suspended
                                                             or hook.pods_wrongly_deleted or hook.internal_errors))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
