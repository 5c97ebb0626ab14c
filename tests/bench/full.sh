#!/usr/bin/env bash
# The benchmarks' full modes: each figure held to its target, docs/performance.md rewritten,
# the scale curves drawn into docs/perf/scale.svg. By hand, not in CI (about 15 minutes on 2
# cores; CI runs the quick modes from tests/run.sh). Needs the control plane
# (tests/e2e/build.sh) and root (bench_hook_start, bench_presync: a private /run).
#   bash tests/bench/full.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../venvs.sh
source tests/venvs.sh
locked=$(venv_locked) || exit 1
export PATH=$locked/bin:$PATH VIRTUAL_ENV=$locked
status=0
for bench in bench_render bench_hook_start bench_presync; do
  echo "tests/bench/full.sh: tests/bench/$bench.py --write-docs"
  python "tests/bench/$bench.py" --write-docs || status=1
done
echo "tests/bench/full.sh: tests/bench/bench_diff.py"
python tests/bench/bench_diff.py || status=1
plot=$(venv_plot) || exit 1
"$plot/bin/python" tests/bench/plot_curves.py || status=1
exit $status
