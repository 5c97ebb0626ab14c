#!/usr/bin/env bash
# The work of action.yml (tested by tests/unit/test_action.py with a stand-in `gh`):
# `raygitops diff` of every app under INPUT_ROOT, base = the merge-base of BASE_SHA and
# HEAD_SHA (what merging the pull request changes), as Markdown; the comment that starts with
# the marker is updated in place, or posted; the job summary gets the report too. Exit 1 when
# INPUT_FAIL_ON is set and the report has a RayCluster of those classes (after commenting),
# the diff's own exit status when it fails.
set -uo pipefail
marker="<!-- raygitops-diff-comment -->"
work=$(mktemp -d "${RUNNER_TEMP:-/tmp}/raygitops-diff.XXXXXX")
args=(--base "$BASE_SHA" --head "$HEAD_SHA" "${INPUT_ROOT:-.}" --output markdown)
for g in ${INPUT_APPS:-}; do args+=(--app "$g"); done
for v in ${INPUT_VALUES:-}; do args+=(--values "$v"); done
if [ -n "${INPUT_FAIL_ON:-}" ]; then args+=(--fail-on "$INPUT_FAIL_ON"); fi

raygitops diff "${args[@]}" > "$work/report.md"
rc=$?
case $rc in
  0|3) ;;
  *) echo "::error::raygitops diff failed (exit $rc)"; exit "$rc" ;;
esac
{ echo "$marker"; cat "$work/report.md"; } > "$work/body.md"
# GitHub refuses comments over 65,536 characters (the report keeps under it; this is a guard)
if [ "$(wc -m < "$work/body.md")" -gt 65000 ]; then
  printf '%s\nThe preview is too long for one comment: see the job summary.\n' "$marker" > "$work/body.md"
fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$work/report.md" >> "$GITHUB_STEP_SUMMARY"; fi

set -e
id=$(gh api --paginate "repos/$REPO/issues/$PR/comments" \
       --jq ".[] | select(.body | startswith(\"$marker\")) | .id" | head -n 1)
if [ -n "$id" ]; then
  gh api --method PATCH "repos/$REPO/issues/comments/$id" -F body=@"$work/body.md" > /dev/null
  echo "updated comment $id"
else
  gh api --method POST "repos/$REPO/issues/$PR/comments" -F body=@"$work/body.md" > /dev/null
  echo "posted a new comment"
fi
attention=$([ "$rc" = 3 ] && echo 1 || echo 0)
if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "attention=$attention" >> "$GITHUB_OUTPUT"; fi
if [ "$attention" = 1 ]; then
  echo "::error::This merge has RayClusters of classes $INPUT_FAIL_ON (see the pull request comment)."
  exit 1
fi
