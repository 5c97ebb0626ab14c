#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install, build the real control plane (cached
# outside the repo), run every test. With CI=true (or RAYGITOPS_REQUIRE_E2E=1) a skipped
# end-to-end test is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
if [ "${CI:-}" = "true" ]; then export RAYGITOPS_REQUIRE_E2E=1; fi
if [ -f tests/e2e/build.sh ] && command -v go >/dev/null 2>&1; then
  bash tests/e2e/build.sh
fi
exec python3 -m pytest "$@"
