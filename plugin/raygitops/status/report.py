"""``raygitops status`` output (pure): text, Markdown or JSON from the clusters' statuses."""

from __future__ import annotations

from collections import Counter

from raygitops.model import jsondoc
from raygitops.status.assess import IN_SYNC, STATES, ClusterStatus

SCHEMA_VERSION = 1


def summary(statuses: list[ClusterStatus]) -> str:
    counts = Counter(s.state for s in statuses)
    if not statuses:
        return "no RayCluster in this app"
    if counts[IN_SYNC] == len(statuses):
        return f"all {len(statuses)} RayClusters in sync" if len(statuses) > 1 else "1 RayCluster, in sync"
    parts = [f"{counts[s]} {s}" for s in STATES if counts[s]]
    return f"{len(statuses)} RayClusters: " + ", ".join(parts)


def _extra(s: ClusterStatus) -> list[str]:
    lines = []
    if s.last_recreate:
        r = s.last_recreate
        lines.append(f"last recreate: {r.get('outcome')} at {r.get('finishedAt', '?')}")
    if s.operator_version:
        lines.append(f"head pod made by KubeRay {s.operator_version}")
    lines += [f"warning: {w}" for w in s.warnings]
    return lines


def text(app: str, statuses: list[ClusterStatus]) -> str:
    out = [f"raygitops status {app}: {summary(statuses)}"]
    width = max([len("CLUSTER")] + [len(s.key) for s in statuses])
    out.append(f"{'CLUSTER':{width}}  {'STATE':11}  DETAIL")
    for s in statuses:
        out.append(f"{s.key:{width}}  {s.state:11}  {s.detail}")
        out += [f"{'':{width}}  {'':11}  {line}" for line in _extra(s)]
    return "\n".join(out) + "\n"


def markdown(app: str, statuses: list[ClusterStatus]) -> str:
    out = [f"**raygitops status `{app}`: {summary(statuses)}**", "",
           "| cluster | state | detail |", "|---|---|---|"]
    for s in statuses:
        detail = "<br>".join([s.detail, *_extra(s)]).replace("|", "\\|")
        out.append(f"| `{s.key}` | {s.state} | {detail} |")
    return "\n".join(out) + "\n"


def as_json(app: str, statuses: list[ClusterStatus]) -> str:
    return jsondoc.dumps(jsondoc.document(
        SCHEMA_VERSION, app=app,
        summary={"text": summary(statuses), "states": {st: sum(s.state == st for s in statuses) for st in STATES}},
        clusters=[s.to_json() for s in statuses]))
