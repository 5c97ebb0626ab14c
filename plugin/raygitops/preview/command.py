"""``raygitops diff``: the pull-request preview (CLI only; the work is in the sibling modules).

Exit codes: 0 success (with ``--fail-on``: and no cluster of those classes); 3 with
``--fail-on`` (``--exit-code`` = ``--fail-on recreate,replace``) when a cluster of those classes is in
the report; 1 on a user error (either side fails to render,
unknown revision, …) with one ``raygitops: base: path:line: message`` line on stderr and
nothing on stdout.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from raygitops.cli.failures import guarded
from raygitops.cli.options import app_path, kuberay_version_option, output_option, values_option
from raygitops.errors import RaygitopsError
from raygitops.model import operators

EXIT_RECREATE = 3
# --fail-on names: the impact classes but "unchanged" (RayClusters', RayServices' and RayJobs');
# "recreate" covers KubeRay's native one and a RayService's new cluster
FAIL_CLASSES = ("recreate", "replace", "native-recreate", "new-cluster", "next-cluster", "delete", "stale", "create",
                "in-place")


def fail_classes(text: str | None, exit_code: bool) -> set[str]:
    """The classes ``--fail-on`` / ``--exit-code`` fail on (empty: exit 0 whatever changes)."""
    names = {n.strip() for n in (text or "").split(",") if n.strip()}
    if "any" in names:
        names = (names - {"any"}) | set(FAIL_CLASSES)
    unknown = sorted(names - set(FAIL_CLASSES))
    if unknown:
        raise RaygitopsError(f"--fail-on: unknown class {', '.join(unknown)} (one of {', '.join(FAIL_CLASSES)}, any)")
    if exit_code:
        names |= {"recreate", "replace"}  # pods restart either way
    if "recreate" in names:
        names |= {"native-recreate", "new-cluster"}
    return names


def use_color(stream: Any, choice: bool | None) -> bool:
    """``--color/--no-color`` wins; else colour only on a tty, and never with NO_COLOR set."""
    if choice is not None:
        return choice
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@click.command()
@click.option("--base", required=True, metavar="DIR|REV",
              help="The merge target: a directory, or a git revision of PATH.")
@click.option("--head", required=True, metavar="DIR|REV",
              help="The proposed change: a directory, or a git revision of PATH.")
@app_path(default=".", metavar="PATH")
@values_option("Values file for *.j2 templates, used on both sides (repeatable, later wins).")
@click.option("--app", "app_globs", multiple=True, metavar="GLOB",
              help="Preview every app under PATH: directories matching GLOB (relative to PATH; "
                   "repeatable), besides those holding a raygitops.yaml.")
@click.option("--two-tip", is_flag=True,
              help="Two revisions: compare their tips (default: head against its merge-base with base, "
                   "what merging head changes, as `git diff base...head`).")
@click.option("--keep-upgrade-strategy/--move-upgrade-strategy", default=None,
              help="As for render: keep spec.upgradeStrategy (KubeRay >= 1.6).")
@kuberay_version_option("The KubeRay operator the app runs on (e.g. 1.6.2), as for render.")
@output_option(["markdown", "json", "text"], "text",
               "Print the report as text, markdown (a pull-request comment) or JSON (docs/preview.md).")
@click.option("--exit-code", is_flag=True,
              help="Exit 3 when at least one RayCluster is recreated or has worker groups replaced (= --fail-on recreate,replace).")
@click.option("--fail-on", "fail_on", default=None, metavar="CLASSES",
              help="Exit 3 when a RayCluster of these classes is in the report: comma-separated "
                   f"from {', '.join(FAIL_CLASSES)}, or 'any' (every class but unchanged).")
@click.option("--color/--no-color", "color", default=None,
              help="Colour the text format (default: on a terminal, unless NO_COLOR is set).")
@guarded
def diff(base: str, head: str, path: str, values: tuple[str, ...], fmt: str, exit_code: bool,
         fail_on: str | None, color: bool | None, two_tip: bool, app_globs: tuple[str, ...],
         **overrides: Any) -> None:
    """Preview what merging HEAD into BASE does to each RayCluster of the app at PATH (or of
    every app under PATH: each directory holding a raygitops.yaml, or matching --app).

    A directory side renders DIR/PATH; a revision renders PATH as committed at that
    revision, from a temporary checkout (the working tree is never touched).
    """
    from raygitops.preview.apps import discover
    from raygitops.preview.impact import classify
    from raygitops.preview.revisions import render_sides

    failing = fail_classes(fail_on, exit_code)

    def preview(app: str) -> Any:
        base_side, head_side = render_sides(base, head, app, cli_values=list(values), overrides=overrides,
                                            two_tip=two_tip)
        report = classify(base_side.result, head_side.result)
        report.notes.extend(base_side.notes + head_side.notes)
        report.notes.extend(operators.upgrade_notes(*(s.result.settings.kuberay_version
                                                      if s.result and s.result.settings else None
                                                      for s in (base_side, head_side))))
        return report, base_side.side, head_side.side

    apps = discover(base, head, path, app_globs)
    colored = use_color(sys.stdout, color)
    if apps is None:  # PATH is one app
        report, base_side, head_side = preview(path)
        reports = [(report, base_side, head_side)]
        if fmt == "json":
            from raygitops.preview import report_json

            text = report_json.render(report, base_side, head_side)
        elif fmt == "markdown":
            from raygitops.preview import report_markdown

            text = report_markdown.render(report, base_side, head_side)
        else:
            from raygitops.preview import report_text

            text = report_text.render(report, base_side, head_side, color=colored)
    else:
        from raygitops.preview import report_apps

        reports = [preview(app) for app in apps]
        if fmt == "json":
            text = report_apps.render_json(path, reports)
        elif fmt == "markdown":
            text = report_apps.render_markdown(path, reports)
        else:
            text = report_apps.render_text(path, reports, color=colored)
    sys.stdout.write(text)
    sys.stdout.flush()
    if failing and any(r.fails(failing) for r, _, _ in reports):
        sys.exit(EXIT_RECREATE)
