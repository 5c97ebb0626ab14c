"""The JSON report (pure): a documented, versioned schema (docs/preview.md).

``schemaVersion`` changes only when a field is removed or changes meaning; new fields may be
added within a version.
"""

from __future__ import annotations

from typing import Any

from raygitops.model import jsondoc
from raygitops.preview.impact import CLASSES, Report
from raygitops.preview.workloads import CLASSES as WORKLOAD_CLASSES
from raygitops.preview.wording import verdict

SCHEMA_VERSION = 1


def to_json(report: Report, base: Any, head: Any) -> dict[str, Any]:
    return jsondoc.document(
        SCHEMA_VERSION,
        base=base.to_json(),
        head=head.to_json(),
        verdict=report.verdict,
        summary={
            "text": verdict(report),
            "clusters": {klass: report.count(klass) for klass in CLASSES},
            "pods": {klass: report.pods(klass).to_json() for klass in CLASSES},
            "workloads": {klass: len(report.workloads_of(klass)) for klass in WORKLOAD_CLASSES},
        },
        clusters=[c.to_json() for c in report.clusters],
        workloads=[w.to_json() for w in report.workloads],
        otherObjects=[k.to_json() for k in report.others],
        notes=list(report.notes),
    )


def render(report: Report, base: Any, head: Any) -> str:
    return jsondoc.dumps(to_json(report, base, head))
