# Virtualenvs of the test suite (sourced by tests/run.sh). The suite never runs in the
# machine's site-packages: a package installed there by hand cannot make it pass.
#
#   locked   requirements/test.txt (exact versions and hashes): the suite itself. Cached under
#            $RAYGITOPS_VENV_CACHE by the lock's and the interpreter's hash.
#   newest   the newest versions pyproject.toml's ranges allow, resolved anew on every run:
#            a new upstream release that breaks raygitops fails here, not at a user's.
#   lowest   the lowest versions pyproject.toml declares for its direct dependencies
#            (transitive ones newest). Cached by pyproject.toml's hash.
# Each venv gets raygitops itself as an editable install of this checkout.

venv_cache=${RAYGITOPS_VENV_CACHE:-$HOME/.cache/raygitops-venvs}
# resolved once, before tests/run.sh puts a venv first on PATH: one interpreter, one fingerprint
python=${RAYGITOPS_PYTHON:-$(command -v python3)}
pip_quiet=(--quiet --disable-pip-version-check --no-input)
# Bytecode, pytest's rewritten test modules included, is kept under the cache, never in the
# checkout: a machine-wide PYTHONDONTWRITEBYTECODE=1 made every run rewrite and compile 180
# test modules again (about 10 s of CPU per pytest process).
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-$venv_cache/pycache}

_fingerprint() {  # _fingerprint FILE...: hash of the files, the interpreter and this checkout
  # (the checkout's path: each venv holds an editable install of one checkout, so a second
  # clone or worktree must never test the first one's code)
  { cat "$@"; "$python" -c 'import sys; print(sys.version, sys.executable)'; pwd -P; } |
    sha256sum | cut -c1-16
}

_new_venv() {  # _new_venv DIR: an empty virtualenv, without the machine's site-packages
  rm -rf "$1"
  "$python" -m venv "$1"
}

# venv_locked: print the path of the locked venv, creating it if needed.
venv_locked() {
  local dir
  dir=$venv_cache/locked-$(_fingerprint requirements/test.txt)
  if [[ ! -f $dir/.complete ]]; then
    echo "tests/run.sh: creating $dir from requirements/test.txt" >&2
    _new_venv "$dir" &&
      "$dir/bin/pip" install "${pip_quiet[@]}" --require-hashes --no-deps -r requirements/test.txt >&2 &&
      "$dir/bin/pip" install "${pip_quiet[@]}" --no-deps --no-build-isolation -e . >&2 &&
      touch "$dir/.complete" || return 1
  fi
  echo "$dir"
}

# venv_newest: print the path of a venv with the newest allowed versions (made anew).
venv_newest() {
  local dir
  dir=$venv_cache/newest-$(_fingerprint /dev/null)
  echo "tests/run.sh: creating $dir with the newest versions pyproject.toml allows" >&2
  _new_venv "$dir" &&
    "$dir/bin/pip" install "${pip_quiet[@]}" --upgrade pip setuptools >&2 &&
    "$dir/bin/pip" install "${pip_quiet[@]}" --upgrade --upgrade-strategy eager -e '.[test]' >&2 || return 1
  echo "$dir"
}

# venv_lowest: print the path of a venv with the lowest declared versions.
venv_lowest() {
  local dir
  dir=$venv_cache/lowest-$(_fingerprint pyproject.toml)
  if [[ ! -f $dir/.complete ]]; then
    echo "tests/run.sh: creating $dir with the lowest versions pyproject.toml declares" >&2
    local locked
    locked=$(venv_locked) || return 1
    # (run by the locked venv: it has `packaging`, the machine's python may not)
    _new_venv "$dir" &&
      "$locked/bin/python" tests/lowest_constraints.py >"$dir/constraints.txt" &&
      "$dir/bin/pip" install "${pip_quiet[@]}" --constraint "$dir/constraints.txt" -e '.[test]' >&2 &&
      touch "$dir/.complete" || return 1
  fi
  echo "$dir"
}

# venv_plot: print the path of a venv with requirements/plot.txt (tests/bench/plot_curves.py).
venv_plot() {
  local dir
  dir=$venv_cache/plot-$(_fingerprint requirements/plot.txt)
  if [[ ! -f $dir/.complete ]]; then
    echo "tests/bench: creating $dir from requirements/plot.txt" >&2
    _new_venv "$dir" &&
      "$dir/bin/pip" install "${pip_quiet[@]}" --no-deps -r requirements/plot.txt >&2 &&
      touch "$dir/.complete" || return 1
  fi
  echo "$dir"
}

# venv_ray: print the path of a venv with requirements/ray.txt: Ray itself, for the e2e tests
# of running jobs only (tests/e2e/test_running_jobs.py and test_argocd.py's: a real Ray head
# the hook asks for its jobs; never a dependency of raygitops). Shared by every checkout (no
# editable install in it): keyed by the lock and the interpreter. About 390 MB.
venv_ray() {
  local dir
  dir=$venv_cache/ray-$({ cat requirements/ray.txt; "$python" -c 'import sys; print(sys.version, sys.base_prefix)'; } |
    sha256sum | cut -c1-16)
  if [[ ! -f $dir/.complete ]]; then
    echo "tests/venvs.sh: creating $dir from requirements/ray.txt" >&2
    _new_venv "$dir" &&
      "$dir/bin/pip" install "${pip_quiet[@]}" --require-hashes --no-deps -r requirements/ray.txt >&2 &&
      touch "$dir/.complete" || return 1
  fi
  echo "$dir"
}

# versions_besides_lock VENV: "name version (lock: version)" for each package that differs
versions_besides_lock() {
  "$1/bin/python" - requirements/test.txt <<'PY'
import re, sys
from importlib import metadata
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
locked = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", open(sys.argv[1]).read(), re.M))
locked = {norm(k): v for k, v in locked.items()}
for dist in sorted(metadata.distributions(), key=lambda d: norm(d.metadata["Name"])):
    name = norm(dist.metadata["Name"])
    if name in locked and locked[name] != dist.version:
        print(f"{dist.metadata['Name']} {dist.version} (lock: {locked[name]})")
PY
}
