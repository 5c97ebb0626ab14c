#!/usr/bin/env bash
# The whole test suite, from a fresh machine: a virtualenv from the lock, the real control
# plane built into a cache (see tests/e2e/README.md), every test; then the fast suites again
# with the newest and the lowest dependency versions pyproject.toml allows (tests/venvs.sh).
# Where Go is present the end-to-end tests are required: a skipped one is a failure. Without
# Go they skip, saying so. Arguments are passed to the main pytest run.
#   RAYGITOPS_SLOW=0        leave out the long reliability campaigns (quick local run)
#   RAYGITOPS_COMPAT=0      leave out the newest/lowest runs (quick local run)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=venvs.sh
source tests/venvs.sh

locked=$(venv_locked)
export PATH=$locked/bin:$PATH VIRTUAL_ENV=$locked
python -c 'import sys, yaml; sys.exit(None if yaml.__with_libyaml__ else "PyYAML without libyaml")'

command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
if command -v go >/dev/null; then
  bash tests/e2e/build.sh
  export RAYGITOPS_REQUIRE_E2E=1
elif [ "${CI:-}" = "true" ]; then
  echo "tests/run.sh: CI needs Go to build the e2e control plane" >&2
  exit 1
fi
# The long reliability campaigns are part of the whole suite (RAYGITOPS_SLOW=0 to skip them
# in a quick local run).
export RAYGITOPS_SLOW=${RAYGITOPS_SLOW:-1}

status=0
python -m pytest "$@" || status=$?

# Benchmarks' quick modes: tripwires for large regressions, not timings (docs/performance.md).
# bench_presync runs on the control plane built above (without Go it is said and left out).
benches=(bench_render bench_diff bench_hook_start)
if [ "${RAYGITOPS_REQUIRE_E2E:-}" = 1 ]; then
  benches+=(bench_presync)
else
  echo "tests/run.sh: no control plane (no Go): tests/bench/bench_presync.py left out"
fi
for bench in "${benches[@]}"; do
  echo "tests/run.sh: tests/bench/$bench.py --quick"
  python "tests/bench/$bench.py" --quick || status=1
done

# Newest and lowest versions: the fast suites (tests/fast.sh's: pure and fake-API tests, no
# packaging), each in its own venv.
if [ "${RAYGITOPS_COMPAT:-1}" != 0 ]; then
  for flavour in newest lowest; do
    venv=$("venv_$flavour")
    echo "tests/run.sh: fast suites with the $flavour versions:" \
      "$(versions_besides_lock "$venv" | paste -sd, - | sed 's/,/, /g')"
    if ! PATH=$venv/bin:$PATH VIRTUAL_ENV=$venv RAYGITOPS_SLOW=0 \
        python -m pytest -q -p no:cacheprovider -m "not e2e and not packaging and not slow" tests; then
      echo "tests/run.sh: FAILED with the $flavour versions pyproject.toml allows; they differ" \
        "from requirements/test.txt in: $(versions_besides_lock "$venv" | paste -sd, - | sed 's/,/, /g')" >&2
      status=1
    fi
  done
fi
exit "$status"
