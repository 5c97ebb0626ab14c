#!/usr/bin/env bash
# Refresh the locks of exact versions and hashes from the ranges in pyproject.toml:
#   bash requirements/lock.sh            (then run bash tests/run.sh and commit both files)
# test.txt:    runtime + test dependencies (tests/run.sh, the README's install command)
# runtime.txt: runtime dependencies only, the same versions (the Dockerfile)
# pip-tools runs in a throwaway virtualenv: it is a tool for this script, not a dependency.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools/venv"
"$tools/venv/bin/pip" install --quiet --disable-pip-version-check 'pip-tools==7.6.2'
compile=("$tools/venv/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras
         --no-emit-index-url --no-emit-find-links --newline=lf)
"${compile[@]}" --extra test --all-build-deps --output-file requirements/test.txt pyproject.toml
# runtime.txt takes its versions from test.txt, so the image runs what the suite tested
"${compile[@]}" --constraint requirements/test.txt --output-file requirements/runtime.txt pyproject.toml
echo "requirements/lock.sh: wrote requirements/test.txt and requirements/runtime.txt"
