#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install, build the real control plane (cached
# outside the repo, see tests/e2e/README.md), run every test. Where Go is present the
# end-to-end tests are required: a skipped one is a failure. Without Go they skip, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
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
exec python3 -m pytest "$@"
