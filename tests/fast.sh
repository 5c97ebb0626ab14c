#!/usr/bin/env bash
# The developer loop: every pure and fake-API test, no control plane, no packaging (under two
# minutes on 2 cores). The same locked virtualenv as tests/run.sh. Arguments go to pytest
# (e.g. `bash tests/fast.sh -x -k verdict`); test paths among them run only those
# (`bash tests/fast.sh tests/unit/test_verdict.py`). The whole set runs on every core
# (pytest-xdist; `-n 0` for one process). The whole suite is tests/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=venvs.sh
source tests/venvs.sh
locked=$(venv_locked)
export PATH=$locked/bin:$PATH VIRTUAL_ENV=$locked RAYGITOPS_SLOW=0
targets=(tests -n auto)
for arg in "$@"; do [[ $arg != -* && -e ${arg%%::*} ]] && targets=(); done
exec python -m pytest -q -p no:cacheprovider -m "not e2e and not packaging and not slow" "${targets[@]}" "$@"
