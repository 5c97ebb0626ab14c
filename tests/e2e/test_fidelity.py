"""Fidelity of ``raygitops diff`` on the real operators (docs/kuberay-1.6.md).

Each regime of ``tests/fidelity.py`` gets its own namespace with one RayCluster per change.
The base is synced and its pods come up; then, as Argo CD would: ``raygitops diff`` predicts,
the PreSync hook runs on the new plan, the new manifests are applied, and the operator is
left to settle.  Who replaced the head pod is observed (the hook's report, the operator's
``DeletedPod`` event for its native Recreate, the head pod's uid) and must be what diff
predicted, and the prediction what the documented table says.  On v1.5.0 and v1.6.2.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import fidelity
from controlplane import unique_name

pytestmark = pytest.mark.e2e
HOOK = "argocd.argoproj.io/hook"


def _raygitops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", *args], capture_output=True, text=True, timeout=300)


def _render(app: Path) -> tuple[list[dict[str, Any]], str | None]:
    """(the objects Argo CD applies in its sync phase, the plan JSON: None without a hook)."""
    res = _raygitops("render", str(app), "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    objs = doc["items"] if isinstance(doc, dict) else doc
    plan = next((o["data"]["plan.json"] for o in objs if o["kind"] == "ConfigMap"
                 and HOOK in (o["metadata"].get("annotations") or {})), None)
    return [o for o in objs if HOOK not in (o["metadata"].get("annotations") or {})], plan


class Regime:
    """One regime's app: base and head directories in one namespace."""

    def __init__(self, plane, key: str, tmp: Path):
        self.plane, self.key, self.regime = plane, key, fidelity.REGIMES[key]
        self.ns = plane.create_namespace(unique_name("fid"))
        self.base_docs, self.head_docs = fidelity.sides(self.regime)
        self.dirs = {side: tmp / key / side for side in ("base", "head")}
        for side, docs in (("base", self.base_docs), ("head", self.head_docs)):
            self.dirs[side].mkdir(parents=True)
            (self.dirs[side] / "raygitops.yaml").write_text(yaml.safe_dump(self.regime.config(self.ns)))
            for doc in docs:
                (self.dirs[side] / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
        self.heads: dict[str, str] = {}
        self.predicted: dict[str, str] = {}
        self.hook: dict[str, Any] = {}

    def apply(self, side: str) -> str:
        objs, plan = _render(self.dirs[side])
        self.plane.kubectl("apply", "-n", self.ns, "-f", "-", input=yaml.safe_dump_all(objs))
        return plan

    def pods(self) -> list[dict[str, Any]]:
        return self.plane.kubectl_json("get", "pods", "-n", self.ns, "-l", "ray.io/cluster")["items"]

    def head_uids(self) -> dict[str, str]:
        return {p["metadata"]["labels"]["ray.io/cluster"]: p["metadata"]["uid"] for p in self.pods()
                if p["metadata"]["labels"].get("ray.io/node-type") == "head" and not p["metadata"].get("deletionTimestamp")}

    def base_running(self) -> bool:
        want = {d["metadata"]["name"]: fidelity.pods_of(d) for d in self.base_docs}
        running: dict[str, int] = {}
        for p in self.pods():
            if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
                name = p["metadata"]["labels"]["ray.io/cluster"]
                running[name] = running.get(name, 0) + 1
        return running == want

    def predict(self) -> None:
        res = _raygitops("diff", "--base", str(self.dirs["base"]), "--head", str(self.dirs["head"]),
                         "--output", "json")
        assert res.returncode == 0, res.stderr
        self.predicted = {c["name"]: c["class"] for c in json.loads(res.stdout)["clusters"]}

    def presync(self, plan: str | None, tmp: Path) -> None:
        if plan is None:  # no cluster opts in or asks for the native recreate: no hook
            self.hook = {d["metadata"]["name"]: {} for d in self.base_docs}
            return
        path = tmp / f"{self.key}-plan.json"
        path.write_text(plan)
        res = _raygitops("presync", "--plan", str(path), "--kubeconfig", self.plane.kubeconfig,
                         "--log-format", "json", "--no-wait-ready", "--drain-grace", "5",
                         "--timeout", "180", "--max-parallel", "20")
        assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
        self.hook = {c["name"]: c for c in json.loads(res.stdout)["clusters"]}

    def operator_recreated(self) -> set[str]:
        events = self.plane.kubectl_json("get", "events", "-n", self.ns)["items"]
        return {e["involvedObject"]["name"] for e in events
                if e["reason"] == "DeletedPod" and "upgradeStrategy" in (e.get("message") or "")}

    def observe(self) -> dict[str, str]:
        now, by_operator = self.head_uids(), self.operator_recreated()
        out = {}
        for doc in self.base_docs:
            name = doc["metadata"]["name"]
            outcome = self.hook[name].get("outcome")
            who = [w for w, yes in (("hook", outcome == "recreated"), ("hook-groups", outcome == "replaced"),
                                    ("operator", name in by_operator)) if yes]
            replaced = now.get(name) != self.heads[name]
            out[name] = "+".join(who) if who else ("kept" if not replaced else "replaced by nobody known")
            if who and who != ["hook-groups"] and not replaced:
                out[name] += " (but the head pod was not replaced)"
            if "hook-groups" in who and replaced:
                out[name] += " (but the head pod was replaced too)"
        return out


def _settle(plane, regimes: list[Regime], quiet: float = 10, timeout: float = 150) -> None:
    """Until no pod of any regime is terminating and the pod set has not changed for
    ``quiet`` seconds (a native recreate follows the apply within a reconcile)."""
    time.sleep(3)
    last, since, end = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < end:
        pods = [p for r in regimes for p in r.pods()]
        state = sorted((p["metadata"]["uid"], bool(p["metadata"].get("deletionTimestamp"))) for p in pods)
        if state != last or any(t for _, t in state):
            last, since = state, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(1)
    raise AssertionError("pods did not settle")


def _run(plane, keys: list[str], tmp: Path) -> None:
    regimes = [Regime(plane, key, tmp) for key in keys]
    try:
        for r in regimes:
            r.apply("base")
        plane.wait_for(lambda: all(r.base_running() for r in regimes), timeout=180, message="base pods running")
        _settle(plane, regimes, quiet=5)
        for r in regimes:
            r.heads = r.head_uids()
            r.predict()
            _, plan = _render(r.dirs["head"])
            r.presync(plan, tmp)
            r.apply("head")
        _settle(plane, regimes)
        documented = fidelity.documented()
        rows, wrong = [], []
        for r in regimes:
            observed = r.observe()
            for title, (name, _) in fidelity.MUTATIONS.items():
                cell = (title, r.key)
                want = fidelity.OBSERVED.get(r.predicted[name], "?")
                rows.append(f"{r.regime.title:28} {title:50} diff: {r.predicted[name]:16} observed: {observed[name]}")
                if observed[name] != want or r.predicted[name] != documented[cell]:
                    wrong.append(f"{r.key} / {title}: documented {documented[cell]}, diff {r.predicted[name]} "
                                 f"(expects {want}), observed {observed[name]}")
            if r.regime.annotation == "None":  # native only: left alone, and said so
                for name, c in r.hook.items():
                    assert c["decision"] == "skip" and "native Recreate" in c["reason"], c
                    assert "warnings" not in c, c  # fresh on 1.6: the CRD knows the field, heads armed
        print("\n".join(rows))
        assert not wrong, "\n".join(wrong + ["", "measured:"] + rows)
    finally:
        for r in regimes:
            plane.delete_namespace(r.ns, wait=False)


def test_fidelity_on_kuberay_1_5(control_plane, tmp_path: Path):
    _run(control_plane, [k for k, r in fidelity.REGIMES.items() if r.operator == "1.5"], tmp_path)


def test_fidelity_on_kuberay_1_6(control_plane_next, tmp_path: Path):
    _run(control_plane_next, [k for k, r in fidelity.REGIMES.items() if r.operator == "1.6"], tmp_path)
