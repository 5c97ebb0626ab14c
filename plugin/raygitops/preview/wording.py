"""Words shared by the report formats (pure): the verdict, pod counts, values."""

from __future__ import annotations

import json
from typing import Any

import yaml

from raygitops.preview.changes import ABSENT, FieldChange
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
    PodCount,
    Report,
)
from raygitops.model.pods import total
from raygitops.model.workloads import NEW_CLUSTER


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def pods(count: PodCount) -> str:
    word = "pod" if count.min == 1 and count.max == 1 else "pods"
    return f"{count} {word}"


def affected(c: ClusterImpact) -> str | None:
    """The pods a cluster's change touches, as the summary shows them (recreated, left stale,
    created, deleted: ``ClusterImpact.pods``); None when none."""
    return None if c.pods.is_zero else str(c.pods)


def verdict(report: Report) -> str:
    """One line saying what the merge does, most serious first; every recreated, deleted and
    stale cluster is counted in it."""
    recreate, deleted, stale = report.recreated, report.count(DELETE), report.count(STALE)
    serious = []
    if recreate:
        line = f"recreates {plural(recreate, 'RayCluster')} ({pods(report.pods(RECREATE_CLASS, NATIVE_CLASS))})"
        if report.count(NATIVE_CLASS):
            line += f", {report.count(NATIVE_CLASS)} of them by KubeRay's native Recreate after the sync"
        serious.append(line)
    replaced = report.count(REPLACE_CLASS)
    if replaced:
        serious.append(f"replaces worker groups of {plural(replaced, 'RayCluster')} "
                       f"({pods(report.pods(REPLACE_CLASS))}; heads kept)")
    if deleted:
        serious.append(f"deletes {plural(deleted, 'RayCluster')} ({pods(report.pods(DELETE))} go)")
    if stale:
        serious.append(f"leaves {plural(stale, 'RayCluster')} stale ({pods(report.pods(STALE))} keep the old "
                       "template)")
    rolled = report.workloads_of(NEW_CLUSTER)
    if rolled:
        serious.append(f"makes KubeRay move {plural(len(rolled), 'RayService')} to a new cluster "
                       f"({pods(total(w.pods for w in rolled))} created, the old ones deleted)")
    stale_owned = report.workloads_of(STALE)
    if stale_owned:
        serious.append(f"leaves {plural(len(stale_owned), 'RayService')} stale (KubeRay neither updates nor "
                       f"replaces {'its cluster' if len(stale_owned) == 1 else 'their clusters'})")
    if serious:
        return "This merge " + ", ".join(serious[:-1]) + (" and " if len(serious) > 1 else "") + serious[-1]
    parts = []
    for klass, words in ((IN_PLACE, "changed in place"), (CREATE, "created")):
        n = report.count(klass)
        if n:
            parts.append(f"{plural(n, 'RayCluster')} {words}" if not parts else f"{n} {words}")
    owned = [w for w in report.workloads if w.klass != UNCHANGED]
    if owned:
        parts.append(f"{plural(len(owned), 'RayService or RayJob')} changed" if not parts else f"{len(owned)} "
                     "RayServices or RayJobs changed")
    others = sum(k.created + k.changed + k.deleted for k in report.others)
    if others:
        parts.append(f"{plural(others, 'other object')} changed")
    if not parts:
        return "No changes"
    return "No pod is recreated: " + ", ".join(parts)


def verdict_mark(report: Report) -> str:
    return {"recreate": "⚠️", "replace": "⚠️", "delete": "⚠️", "stale": "🟡", "changes": "✅", "none": "✅"}[report.verdict]


VALUE_CHARS = 80
BELOW = "(below)"


def _one_line(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)


def block(v: Any) -> str | None:
    """A mapping or list too long for one line, as YAML lines to show whole below its change
    (an added worker group, a container's env); None for what :func:`value` shows."""
    if not isinstance(v, (dict, list)) or len(_one_line(v)) <= VALUE_CHARS:
        return None
    return yaml.safe_dump(v, sort_keys=False, allow_unicode=True, default_flow_style=False, width=10_000).rstrip("\n")


def value(v: Any) -> str:
    """A value on one line (JSON), a scalar shortened to :data:`VALUE_CHARS`; :data:`BELOW`
    for a :func:`block`."""
    if v is ABSENT:
        return "(none)"
    if block(v) is not None:
        return BELOW
    text = _one_line(v)
    if len(text) > VALUE_CHARS:
        text = text[: VALUE_CHARS - 1] + "…"
    return text


def change_kind(c: FieldChange) -> str:
    if c.hash_ignored:
        return "not hashed (hash.ignore)"
    if c.same_value:
        return "same value"
    return "pod-shaping" if c.pod_shaping else "not pod-shaping"


def others_line(report: Report) -> str:
    parts = []
    for k in report.others:
        bits = [f"{n} {w}" for n, w in ((k.created, "created"), (k.changed, "changed"),
                                        (k.deleted, "deleted")) if n]
        parts.append(f"{k.kind}: {', '.join(bits)}")
    return "; ".join(parts)


def workload_line(w: Any) -> str:
    """``RayService ml/serve: new-cluster (8 pods): <reason>``."""
    count = "" if w.pods.is_zero else f" ({pods(w.pods)})"
    return f"{w.kind} {w.key}: {w.klass}{count}: {w.reason}"
