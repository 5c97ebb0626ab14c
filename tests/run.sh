#!/usr/bin/env bash
# The whole test suite, from a fresh machine: a virtualenv from the lock, the real control
# plane built into a cache (see tests/e2e/README.md), every test; then the fast suites again
# with the newest and the lowest dependency versions pyproject.toml allows (tests/venvs.sh).
# Where Go is present the end-to-end tests are required: a skipped one is a failure. Without
# Go they skip, saying so. Arguments: the pytest arguments of a targeted run (those tests in one
# lane, then the newest/lowest runs); without them, every test in two lanes at once.
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
  # Ray for the running-jobs e2e tests (test_running_jobs.py, test_argocd.py): its own venv,
  # made once (about 30-60 s, 384 MB)
  venv_ray >/dev/null
elif [ "${CI:-}" = "true" ]; then
  echo "tests/run.sh: CI needs Go to build the e2e control plane" >&2
  exit 1
fi
# The long reliability campaigns are part of the whole suite (RAYGITOPS_SLOW=0 to skip them
# in a quick local run).
export RAYGITOPS_SLOW=${RAYGITOPS_SLOW:-1}

status=0
if [ "${RAYGITOPS_REQUIRE_E2E:-}" = 1 ]; then
  # The image, once, before the lanes below (two podman builds of one tag at once break each
  # other); the e2e fixture `image` takes it from RAYGITOPS_IMAGE_BUILT.
  if image=$(bash tests/image/build.sh); then
    export RAYGITOPS_IMAGE_BUILT=${image##*$'\n'}
  else
    echo "tests/run.sh: tests/image/build.sh failed" >&2
    status=1
  fi
fi

# Newest and lowest versions: the fast suites (tests/fast.sh's: pure and fake-API tests, no
# packaging), each in its own venv.
compat_runs() {
  local flavour venv failed=0
  [ "${RAYGITOPS_COMPAT:-1}" != 0 ] || return 0
  for flavour in newest lowest; do
    venv=$("venv_$flavour")
    echo "tests/run.sh: fast suites with the $flavour versions:" \
      "$(versions_besides_lock "$venv" | paste -sd, - | sed 's/,/, /g')"
    if ! PATH=$venv/bin:$PATH VIRTUAL_ENV=$venv RAYGITOPS_SLOW=0 \
        python -m pytest -q -p no:cacheprovider -m "not e2e and not packaging and not slow" tests; then
      echo "tests/run.sh: FAILED with the $flavour versions pyproject.toml allows; they differ" \
        "from requirements/test.txt in: $(versions_besides_lock "$venv" | paste -sd, - | sed 's/,/, /g')" >&2
      failed=1
    fi
  done
  return "$failed"
}

if [ $# -gt 0 ]; then  # the tests asked for, in one lane
  python -m pytest "$@" || status=$?
  compat_runs || status=1
else
  # Two lanes at once: most of the e2e time is waiting (operators, pods, Argo CD and Flux
  # polls), so the Job-pod tests (Argo CD, Flux, Helm, the image: their own control plane),
  # every KubeRay version (its own control plane, operators swapped in place), the slow
  # hostile-input campaign (pure CPU) and the newest/lowest runs go beside the rest.
  # Lane B prints as it goes; lane A's output follows it.
  lane_a=(tests/e2e/test_argocd.py tests/e2e/test_flux.py tests/e2e/test_helm.py tests/e2e/test_image.py
          tests/e2e/test_kuberay_versions.py tests/reliability/test_hostile.py)
  lane_a_log=$(mktemp)
  ( lane=0
    python -m pytest -p no:cacheprovider --durations=20 "${lane_a[@]}" || lane=1
    compat_runs || lane=1
    exit "$lane" ) >"$lane_a_log" 2>&1 &
  lane_a_pid=$!
  ignore=()
  for path in "${lane_a[@]}"; do ignore+=(--ignore "$path"); done
  python -m pytest --durations=30 "${ignore[@]}" || status=$?  # where the time goes: the slowest
  wait "$lane_a_pid" || status=1
  echo "tests/run.sh: lane A (${lane_a[*]}; newest and lowest versions):"
  cat "$lane_a_log"
  rm -f "$lane_a_log"
fi

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

exit "$status"
