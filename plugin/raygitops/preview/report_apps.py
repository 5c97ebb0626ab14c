"""One report for every app under a root (pure): each app's report in its format, one
summary over them.  The JSON has one entry per app, each in the single-app shape."""

from __future__ import annotations

from typing import Any

from raygitops.model import jsondoc
from raygitops.preview import report_json, report_markdown, report_text
from raygitops.preview.impact import Report
from raygitops.preview.wording import plural

VERDICTS = ("recreate", "delete", "stale", "changes", "none")  # most serious first

AppReport = tuple[Report, Any, Any]  # (report, base side, head side)


def worst(reports: list[AppReport]) -> str:
    found = {r.verdict for r, _, _ in reports}
    return next((v for v in VERDICTS if v in found), "none")


def summary(root: str, reports: list[AppReport]) -> str:
    serious = [head.path for r, _, head in reports if r.verdict in ("recreate", "delete", "stale")]
    line = f"{plural(len(reports), 'app')} under {root}"
    return line + (f": {len(serious)} need a look ({', '.join(serious)})" if serious else ": no pod is recreated")


def render_json(root: str, reports: list[AppReport]) -> str:
    return jsondoc.dumps(jsondoc.document(
        report_json.SCHEMA_VERSION, root=root, verdict=worst(reports),
        summary={"text": summary(root, reports), "apps": len(reports)},
        apps=[dict(report_json.to_json(r, b, h), app=h.path) for r, b, h in reports]))


def render_markdown(root: str, reports: list[AppReport]) -> str:
    """A summary line, then each app's section; the whole stays under GitHub's comment limit
    (each app gets an equal share of it)."""
    budget = (report_markdown.DEFAULT_BUDGET - 1000) // max(1, len(reports))
    parts = [f"**raygitops diff: {summary(root, reports)}**", ""]
    parts += [report_markdown.render(r, b, h, budget=budget) for r, b, h in reports]
    return "\n".join(parts)


def render_text(root: str, reports: list[AppReport], *, color: bool = False) -> str:
    parts = [f"raygitops diff: {summary(root, reports)}", ""]
    parts += [report_text.render(r, b, h, color=color) for r, b, h in reports]
    return "\n".join(parts)
