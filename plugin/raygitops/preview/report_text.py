"""The text report for a terminal (pure): coloured only when asked to (the command decides:
a tty, and NO_COLOR unset)."""

from __future__ import annotations

from typing import Any

import click

from raygitops.preview.impact import (
    CREATE,
    DELETE,
    IN_PLACE,
    NATIVE_CLASS,
    RECREATE_CLASS,
    REPLACE_CLASS,
    STALE,
    UNCHANGED,
    Report,
)
from raygitops.preview.wording import affected, block, change_kind, others_line, plural, pods, value, verdict, \
    workload_line

COLOURS = {RECREATE_CLASS: "red", REPLACE_CLASS: "blue", NATIVE_CLASS: "red", STALE: "yellow", IN_PLACE: "cyan", CREATE: "green",
           DELETE: "magenta", UNCHANGED: None}
OP_MARKS = {"add": "+", "remove": "-", "replace": "~", "move": ">", "copy": "+"}


def render(report: Report, base: Any, head: Any, *, color: bool = False) -> str:
    def style(text: str, fg: str | None = None, bold: bool = False, dim: bool = False) -> str:
        if not color or (fg is None and not bold and not dim):
            return text
        # only what is asked: click turns bold=False / dim=False into "normal intensity" codes
        return click.style(text, fg=fg, bold=bold or None, dim=dim or None)

    out: list[str] = []
    out.append(f"raygitops diff {head.path}: base {base.describe()} -> head {head.describe()}")
    v = report.verdict
    out.append(style(verdict(report), fg={"recreate": "red", "replace": "red", "delete": "red", "stale": "yellow"}.get(v, "green"),
                     bold=True))
    for note in report.notes:
        out.append(f"note: {note}")
    changed = report.changed
    if changed:
        rows = [("CLUSTER", "IMPACT", "PODS", "GROUPS")]
        for c in changed:
            groups = ", ".join(g.label if g.change == "changed" else f"{g.label} ({g.change})"
                               for g in c.groups) or "-"
            rows.append((c.key, c.klass, affected(c) or "-", groups))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        out.append("")
        for i, row in enumerate(rows):
            cells = [row[j].ljust(widths[j]) for j in range(3)] + [row[3]]
            if i == 0:
                line = style("  ".join(cells).rstrip(), bold=True)
            else:
                cells[1] = style(cells[1], fg=COLOURS[row[1]])
                line = "  ".join(cells).rstrip()
            out.append(line)
    unchanged = report.count(UNCHANGED)
    if unchanged:
        out.append("")
        out.append(f"{plural(unchanged, 'RayCluster')} unchanged.")
    owned = [w for w in report.workloads if w.klass != UNCHANGED]
    if owned:
        out.append("")
        out.append(style(f"RayServices and RayJobs (what KubeRay {owned[0].kuberay} does with the change):", bold=True))
        for w in owned:
            out.append(f"  {workload_line(w)}")
            for note in w.notes:
                out.append(f"    note: {note}")
    if report.others:
        out.append(f"Other objects: {others_line(report)}")
    for c in changed:
        out.append("")
        title = f"{c.key}: {c.klass}"
        if affected(c):
            title += f" ({pods(c.pods)})"
        out.append(style(title, fg=COLOURS[c.klass], bold=True))
        out.append(f"  {c.reason}")
        for note in c.notes:
            out.append(f"  note: {note}")
        for g in c.groups:
            out.append(f"  group {g.label}: {g.change} {g.base_hash or '-'} -> "
                       f"{g.head_hash or '-'} ({pods(g.pods)})")
        for ch in c.changes:
            mark = OP_MARKS.get(ch.op, "~")
            where = ch.path if ch.from_path is None else f"{ch.path} (from {ch.from_path})"
            kind = change_kind(ch)
            out.append(f"  {style(mark, fg={'+': 'green', '-': 'red'}.get(mark, 'yellow'))} "
                       f"{where}: {value(ch.old)} -> {value(ch.new)}  "
                       + style(f"[{kind}]", dim=kind != "pod-shaping",
                               fg="red" if kind == "pod-shaping" else None))
            for side, v in (("old", ch.old), ("new", ch.new)):
                lines = block(v)
                if lines is not None:
                    out.append(f"    {side}:")
                    out.extend(f"      {line}" for line in lines.splitlines())
        source = c.source_head or c.source_base
        if source:
            out.append(style(f"  at {source}", dim=True))
    return "\n".join(out) + "\n"
