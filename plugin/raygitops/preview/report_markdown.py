"""The markdown report for a pull-request comment (pure).

A one-line verdict, a summary table, then a collapsible ``<details>`` per changed cluster.
It stays under GitHub's comment limit (65,536 characters): details are dropped from the end
with a note first; the table is never cut (only in the extreme case that the table alone
exceeds the limit are in-place / create / delete rows folded into a count line — recreated
and stale clusters are always listed).
"""

from __future__ import annotations

import html
import re
from typing import Any

from raygitops.preview.impact import (
    CREATE,
    DELETE,
    IN_PLACE,
    NATIVE_CLASS,
    RECREATE_CLASS,
    REPLACE_CLASS,
    STALE,
    UNCHANGED,
    ClusterImpact,
    Report,
)
from raygitops.preview.wording import affected, block, change_kind, others_line, plural, pods, value, verdict, \
    verdict_mark

GITHUB_LIMIT = 65536
# Leave room for what a CI step may add around the body.
DEFAULT_BUDGET = GITHUB_LIMIT - 1536
MAX_CHANGES_SHOWN = 100
MARKER = "<!-- raygitops-diff"

ICONS = {RECREATE_CLASS: "🔁", REPLACE_CLASS: "🔀", NATIVE_CLASS: "♻️", STALE: "🟡", IN_PLACE: "✏️", CREATE: "➕", DELETE: "➖",
         UNCHANGED: "·"}


def _code(text: str) -> str:
    """Inline code that survives a table cell (``|`` escaped, backticks avoided)."""
    text = text.replace("|", "\\|")
    if "`" in text:
        return f"<code>{html.escape(text)}</code>"
    return f"`{text}`"


def _text(text: str) -> str:
    """Prose that may carry names from the manifests: no HTML, no markdown emphasis."""
    escaped = html.escape(text, quote=False)
    for char in "\\`*_[]|#":
        escaped = escaped.replace(char, "\\" + char)
    return escaped


def _groups_cell(c: ClusterImpact) -> str:
    parts = []
    for g in c.groups:
        if g.change == "changed":
            parts.append(_code(g.label))
        else:
            parts.append(f"{_code(g.label)} ({g.change})")
    return ", ".join(parts) if parts else "—"


def _row(c: ClusterImpact) -> str:
    return (f"| {_code(c.key)} | {ICONS[c.klass]} {c.klass} | {affected(c) or '—'} | "
            f"{_groups_cell(c)} |")


def _fenced(text: str, language: str) -> str:
    """A code block no backtick run inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _details(c: ClusterImpact) -> str:
    lines = [
        f"<details><summary><code>{html.escape(c.key)}</code> — {c.klass}"
        + (f" ({pods(c.pods)})" if affected(c) else "")
        + "</summary>",
        "",
        f"**Why:** {_text(c.reason)}.",
    ]
    for note in c.notes:
        lines.append(f"- ℹ️ {_text(note)}")
    if c.autoscaling:
        lines.append("- autoscaling on: pod counts are minReplicas..maxReplicas per group")
    if c.groups:
        lines.append("")
        lines.append("| Group | Change | Hash base → head | Pods |")
        lines.append("|---|---|---|---|")
        for g in c.groups:
            lines.append(f"| {_code(g.label)} | {g.change} | {_code(str(g.base_hash or '—'))}"
                         f" → {_code(str(g.head_hash or '—'))} | {g.pods} |")
    if c.changes:
        lines.append("")
        lines.append("| Field | Old | New | |")
        lines.append("|---|---|---|---|")
        for ch in c.changes[:MAX_CHANGES_SHOWN]:
            path = ch.path if ch.from_path is None else f"{ch.path} (moved from {ch.from_path})"
            lines.append(f"| {_code(path)} | {_code(value(ch.old))} | {_code(value(ch.new))} "
                         f"| {change_kind(ch)} |")
        if len(c.changes) > MAX_CHANGES_SHOWN:
            lines.append("")
            lines.append(f"_…and {len(c.changes) - MAX_CHANGES_SHOWN} more field changes "
                         "(see `-o json`)._")
        for ch in c.changes[:MAX_CHANGES_SHOWN]:
            for side, v in (("old", ch.old), ("new", ch.new)):
                text = block(v)
                if text is not None:
                    lines += ["", f"{_code(ch.path)} ({side}):", "", _fenced(text, "yaml")]
    if c.source_head or c.source_base:
        lines.append("")
        lines.append(f"<sub>{html.escape(c.source_head or c.source_base or '')}</sub>")
    lines.append("")
    lines.append("</details>")
    return "\n".join(lines) + "\n"


def render(report: Report, base: Any, head: Any, *, budget: int = DEFAULT_BUDGET) -> str:
    changed = report.changed
    unchanged = report.count(UNCHANGED)
    head_lines = [
        f"{MARKER} path={html.escape(head.path)} -->",
        f"### raygitops diff: {_code(head.path)}",
        f"<sub>base {_code(base.describe())} → head {_code(head.describe())}</sub>",
        "",
        f"{verdict_mark(report)} **{verdict(report)}**",
        "",
    ]
    for note in report.notes:
        head_lines.append(f"- ℹ️ {_text(note)}")
    if report.notes:
        head_lines.append("")
    rows = [_row(c) for c in changed]
    tail: list[str] = []
    if unchanged:
        tail.append(f"{plural(unchanged, 'RayCluster')} unchanged.")
    owned = [w for w in report.workloads if w.klass != UNCHANGED]
    if report.others:
        tail.append(f"Other objects (counted, not detailed): {others_line(report)}.")

    def core(table_rows: list[str], folded: str | None) -> str:
        lines = list(head_lines)
        if table_rows or folded:
            lines += ["| Cluster | Impact | Pods affected | Groups |", "|---|---|---|---|"]
            lines += table_rows
            if folded:
                lines.append(f"| {folded} | | | |")
            lines.append("")
        if owned:
            lines += [f"| RayService / RayJob | What KubeRay {owned[0].kuberay} does | Pods of its new cluster | Why |",
                      "|---|---|---|---|"]
            lines += [f"| {w.kind} {_code(w.key)} | {w.klass} | {'—' if w.pods.is_zero else w.pods} | "
                      f"{_text('; '.join([w.reason, *w.notes]))} |" for w in owned]
            lines.append("")
        if tail:
            lines.append(" ".join(tail))
            lines.append("")
        return "\n".join(lines).rstrip("\n") + "\n"

    text = core(rows, None)
    if len(text) > budget:  # extreme: fold the least serious rows, never recreate/stale
        serious = (RECREATE_CLASS, REPLACE_CLASS, NATIVE_CLASS, STALE)
        keep = [c for c in changed if c.klass in serious]
        fold = [c for c in changed if c.klass not in serious]
        while fold and len(text) > budget:
            fold = fold[: len(fold) - max(1, len(fold) // 10)]
            folded_count = len(changed) - len(keep) - len(fold)
            text = core([_row(c) for c in keep + fold],
                        f"…and {folded_count} more (in-place, created or deleted): "
                        "see `-o json`")
    out = [text]
    size = len(text)
    omitted = 0
    for c in changed:
        block = _details(c)
        if omitted or size + len(block) + 200 > budget:
            omitted += 1
            continue
        out.append(block)
        size += len(block) + 1
    if omitted:
        out.append(f"_Details of {plural(omitted, 'more cluster')} omitted to stay under "
                   "GitHub's comment size limit: run `raygitops diff -o text` "
                   "or `-o json` for all of them._\n")
    return "\n".join(out)
