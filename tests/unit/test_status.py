"""``raygitops status``, the pure parts: the CRD check, the spec after a sync, the formats.
tests/e2e/test_status.py runs the command on the real control plane."""

from __future__ import annotations

import json

import pytest
import yaml

from raygitops.status import report
from raygitops.status.assess import ClusterStatus, crd_knows_upgrade_strategy, overlay

try:
    from sharedpaths import CRDS
except ImportError:  # pragma: no cover
    CRDS = None


@pytest.mark.parametrize("version,knows", [("kuberay-v1.5.0", False), ("kuberay-v1.6.2", True)])
def test_crd_knows_upgrade_strategy(version: str, knows: bool) -> None:
    crd = CRDS / version / "ray.io_rayclusters.yaml" if CRDS else None
    if crd is None or not crd.is_file():
        pytest.skip(f"CRD not found: {crd}")
    assert crd_knows_upgrade_strategy(yaml.safe_load(crd.read_text())) is knows


def test_overlay_keeps_what_git_does_not_set() -> None:
    live = {"suspend": False, "headGroupSpec": {"serviceType": "ClusterIP", "rayStartParams": {"a": "1"}},
            "workerGroupSpecs": [{"groupName": "x", "replicas": 3}]}
    desired = {"headGroupSpec": {"rayStartParams": {"b": "2"}}, "workerGroupSpecs": [{"groupName": "x"}]}
    assert overlay(live, desired) == {
        "suspend": False, "headGroupSpec": {"serviceType": "ClusterIP", "rayStartParams": {"a": "1", "b": "2"}},
        "workerGroupSpecs": [{"groupName": "x"}]}  # lists are replaced whole
    assert live["headGroupSpec"]["rayStartParams"] == {"a": "1"}  # not mutated


def _status(state: str, **kw) -> ClusterStatus:
    return ClusterStatus("ns", state.replace("-", ""), state, f"{state} detail", "Recreate", False, **kw)


def test_summary_and_formats() -> None:
    ok = [_status("in-sync")]
    assert report.summary(ok) == "1 RayCluster, in sync"
    assert report.summary(ok * 2) == "all 2 RayClusters in sync"
    assert report.summary([]) == "no RayCluster in this app"
    mixed = [_status("failed", last_recreate={"outcome": "Failed", "finishedAt": "2026-12-04T07:00:00Z"}),
             _status("drifted", warnings=["w|1"]), _status("in-sync")]
    assert report.summary(mixed) == "3 RayClusters: 1 failed, 1 drifted, 1 in-sync"
    text = report.text("app", mixed)
    assert "ns/failed   failed " in text and "last recreate: Failed at 2026-12-04T07:00:00Z" in text
    md = report.markdown("app", mixed)
    assert "| `ns/drifted` | drifted | drifted detail<br>warning: w\\|1 |" in md  # a pipe cannot split the row
    doc = json.loads(report.as_json("app", mixed))
    assert doc["summary"]["states"]["failed"] == 1 and doc["clusters"][0]["lastRecreate"]["outcome"] == "Failed"


def test_json_reports_share_one_envelope() -> None:
    """status and diff JSON start with the same schemaVersion + generator, and keep UTF-8."""
    from raygitops import __version__
    from raygitops.preview import report_apps

    status_doc = report.as_json("app-é", [_status("in-sync")])
    diff_doc = report_apps.render_json("root", [])
    for text in (status_doc, diff_doc):
        doc = json.loads(text)
        assert list(doc)[:2] == ["schemaVersion", "generator"] and doc["generator"] == f"raygitops {__version__}"
    assert '"app": "app-é"' in status_doc
