"""ReplaceGroups on the real control plane, both operators (KubeRay 1.5 and KUBERAY_NEXT_VERSION).

A cluster with a head and two worker groups (``small``, ``big``) under
``raygitops.dev/upgrade-strategy: ReplaceGroups``; the hook runs with a token of the
rendered ServiceAccount (its Role and RoleBinding applied as rendered). Each test says what a
user sees: which pods keep their UIDs, how many of the changed group were ever missing, what
the hook reports and records.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import controlplane
import yaml
import pytest
from raygitops.model import operators
from test_presync_guarantees import PodWatch
from test_presync_hook import HASH, LOCK, App, _spawn, _token_kubeconfig, _wait_paused, desired_hashes, rendered
from test_removed_groups import groups, two_groups, without_big

pytestmark = pytest.mark.e2e
NEW = "rayproject/ray:2.42.0"


class HookApp(App):
    """An :class:`App` whose hook runs with the rendered ServiceAccount's token."""

    def presync_argv(self, plan: Path, *extra: str, kubeconfig: str | None = None) -> list[str]:
        return super().presync_argv(plan, *extra, kubeconfig=kubeconfig or self.hook_kubeconfig())

    def hook_kubeconfig(self) -> str:
        path = self.tmp / "hook.kubeconfig"
        if not path.exists():
            _, hooks, _ = self.render()
            self.plane.apply([h for h in hooks if h["kind"] in controlplane.HOOK_RBAC_KINDS],
                             namespace=self.ns)
            _token_kubeconfig(self, path, self.ns)
        return str(path)


@pytest.fixture
def app(plane, tmp_path):
    ns = plane.create_namespace(controlplane.unique_name("e2e-replace"))
    yield HookApp(plane, ns, tmp_path)
    plane.delete_namespace(ns, wait=False)


def replace_groups(max_unavailable: str | None = "1", big: int = 2) -> dict[str, Any]:
    obj = two_groups(strategy="ReplaceGroups")
    obj["spec"]["workerGroupSpecs"][1]["replicas"] = big
    if max_unavailable is not None:
        obj["metadata"]["annotations"]["raygitops.dev/max-unavailable"] = max_unavailable
    return obj


def with_big_image(obj: dict[str, Any], image: str = NEW) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["image"] = image
    return obj


def uids_by_group(pods: list[dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in pods:
        if not p["metadata"].get("deletionTimestamp"):
            out.setdefault(p["metadata"]["labels"]["ray.io/group"], set()).add(p["metadata"]["uid"])
    return out


def ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


class ReadyWatch:
    """Samples the Ready, non-terminating pods of one group while the hook runs: the lowest
    count seen is what max-unavailable bounds."""

    def __init__(self, app: App, group: str):
        self.app, self.group, self.samples = app, group, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pods = self.app.plane.kubectl_json("get", "pods", "-n", self.app.ns, "-l",
                                               f"ray.io/cluster=demo,ray.io/group={self.group}")["items"]
            self.samples.append(sum(1 for p in pods if ready(p) and not p["metadata"].get("deletionTimestamp")))

    def __enter__(self) -> "ReadyWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(30)


def deleted_pods(log: str) -> set[str]:
    """The pods a hook run says it deleted (its JSON log lines)."""
    msgs = [json.loads(line)["msg"] for line in log.splitlines() if line.startswith("{")]
    return {m.split()[2] for m in msgs if m.startswith("deleted pod ")}


def _start(app: HookApp, obj: dict[str, Any], count: int = 5) -> dict[str, set[str]]:
    report = app.sync(obj)
    assert report["summary"]["skipped"] == 1, report
    return uids_by_group(app.wait_pods(count=count))


def _demo(report: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in report["clusters"] if c["name"] == "demo")


def test_changed_group_is_replaced_in_batches_and_the_rest_keeps_its_pods(app: HookApp, plane):
    base = replace_groups("1")
    # each stale pod goes with its own grace period: Ray (2.60) drains its node on SIGTERM for it
    base["spec"]["workerGroupSpecs"][1]["template"]["spec"]["terminationGracePeriodSeconds"] = 11
    before = _start(app, base)
    app.write(with_big_image(base))
    objs, _, plan = app.render()
    _, status = app.status()
    (entry,) = [c for c in status["clusters"] if c["name"] == "demo"]
    assert entry["detail"].endswith("the next sync replaces 2 pods of group big (1 at a time); "
                                    "head and group small untouched; preflight now: passes"), entry
    assert entry["replace"] == {"maxUnavailable": "1", "kept": ["head", "small"], "groups": [
        {"group": "big", "change": "changed", "pods": {"min": 2, "max": 2}, "atATime": 1}]}, entry
    started = time.monotonic()
    pod_watch = PodWatch(app)
    try:
        with ReadyWatch(app, "big") as watch:
            res = app.presync(plan)
    finally:
        pod_watch.stop()
    wall = time.monotonic() - started
    graces = {uid: pod_watch.deletion_grace(uid) for uid in before["big"]}
    assert set(graces.values()) == {11}, graces
    report = json.loads(res.stdout)
    demo = _demo(report)
    assert demo["decision"] == "replace" and demo["outcome"] == "replaced", (plane.kuberay, demo)
    assert demo["message"] == "replaced 2 pods of group big; head and group small kept"
    app.apply(objs)
    pods = app.wait_pods(count=5, hashes=desired_hashes(rendered(objs)))
    after = uids_by_group(pods)
    assert after["headgroup"] == before["headgroup"] and after["small"] == before["small"]  # untouched
    assert after["big"].isdisjoint(before["big"]) and len(after["big"]) == 2
    assert {c["image"] for p in pods if p["metadata"]["labels"]["ray.io/group"] == "big"
            for c in p["spec"]["containers"]} == {NEW}
    # max-unavailable 1 of 2: the group never had fewer than one Ready pod
    assert watch.samples and min(watch.samples) >= 1, watch.samples
    live = app.cluster()
    assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]
    last = json.loads(live["metadata"]["annotations"]["raygitops.dev/last-recreate"])
    assert last["strategy"] == "ReplaceGroups" and last["outcome"] == "Completed"
    assert last["summary"] == demo["message"]
    assert not app.events("Suspended") and len(app.events("RecreateCompleted")) == 1
    print(f"\n{plane.kuberay}: replaced 2 of 2 pods of group big in {wall:.1f} s; "
          f"Ready pods of big min {min(watch.samples)} over {len(watch.samples)} samples; "
          "head and group small restarted 0")
    again = json.loads(app.presync(plan).stdout)
    assert again["summary"]["inSync"] == 1, again


def test_each_group_is_replaced_within_its_own_bound(app: HookApp):
    """Both worker groups change; the cluster allows 100 % unavailable, group big (3 pods)
    only 1 at a time (max-unavailable-by-group): big never drops below 2 Ready pods, small
    is replaced at its own pace, the head keeps its pod."""
    def cluster(image: str = "rayproject/ray:2.41.0") -> dict[str, Any]:
        obj = replace_groups("100%", big=3)
        obj["metadata"]["annotations"]["raygitops.dev/max-unavailable-by-group"] = "big=1"
        for group in obj["spec"]["workerGroupSpecs"]:
            group["template"]["spec"]["containers"][0]["image"] = image
        return obj

    before = _start(app, cluster(), count=6)
    app.write(cluster(NEW))
    objs, _, plan = app.render()
    _, status = app.status()
    (entry,) = [c for c in status["clusters"] if c["name"] == "demo"]
    assert entry["detail"].endswith("the next sync replaces 3 pods of group big (1 at a time); replaces 2 pods of "
                                    "group small (2 at a time); head untouched; preflight now: passes"), entry
    with ReadyWatch(app, "big") as watch:
        res = app.presync(plan)
    demo = _demo(json.loads(res.stdout))
    assert demo["outcome"] == "replaced", demo
    assert "(max unavailable big 1, small 100%)" in res.stderr
    app.apply(objs)
    after = uids_by_group(app.wait_pods(count=6, hashes=desired_hashes(rendered(objs))))
    assert after["headgroup"] == before["headgroup"]
    assert after["big"].isdisjoint(before["big"]) and after["small"].isdisjoint(before["small"])
    assert watch.samples and min(watch.samples) >= 2, watch.samples


def test_a_head_change_falls_back_to_the_full_cycle(app: HookApp):
    before = _start(app, replace_groups())
    changed = replace_groups()
    changed["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = NEW
    report = app.sync(changed)
    assert _demo(report)["decision"] == "recreate" and report["summary"]["recreated"] == 1, report
    objs, _, _ = app.render()
    after = uids_by_group(app.wait_pods(count=5, hashes=desired_hashes(rendered(objs))))
    assert all(after[g].isdisjoint(before[g]) for g in before)


def test_a_removed_group_loses_only_its_own_pods(app: HookApp, plane):
    before = _start(app, replace_groups())
    report = app.sync(without_big(replace_groups()))
    demo = _demo(report)
    assert demo["outcome"] == "replaced", demo
    assert demo["message"] == "deleted 2 pods of removed groups; head and group small kept"
    pods = app.wait_pods(count=3)
    after = uids_by_group(pods)
    assert groups(pods) == {"headgroup": 1, "small": 2}
    assert after["headgroup"] == before["headgroup"] and after["small"] == before["small"]


def test_a_pod_that_only_carries_the_label_is_never_deleted(app: HookApp):
    """A pod labelled like the removed group but not owned by the RayCluster stays.

    The stray appears only once the operator has observed the spec without ``big``: while the
    operator still holds ``big`` (replicas 2) it counts every pod of that label as the group's
    and scales a third one down, the stray as likely as its own (tests/flaky.md). The hook then
    runs on the removed group's own pods, which KubeRay leaves running, beside the stray."""
    _start(app, replace_groups())
    app.write(without_big(replace_groups()))
    objs, _, plan = app.render()
    app.apply(objs)
    app.plane.wait_for(lambda: (lambda live: operators.unobserved(live, live["metadata"]["generation"]) is None)(
        app.cluster()), timeout=60, message="the operator observed the spec without big")
    stray = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "stray", "labels": {"ray.io/cluster": "demo", "ray.io/group": "big",
                                                      "ray.io/node-type": "worker"}},
             "spec": {"containers": [{"name": "c", "image": "busybox"}],
                      **({"nodeName": app.node_name} if app.node_name else {})}}
    app.plane.apply(stray, namespace=app.ns)
    assert groups(app.pods()).get("big") == 3, "the removed group's own two pods run beside the stray"
    res = app.presync(plan)
    report = json.loads(res.stdout)
    assert _demo(report)["outcome"] == "replaced", report
    assert "stray" not in deleted_pods(res.stderr) and len(deleted_pods(res.stderr)) == 2, res.stderr
    app.plane.wait_for(lambda: groups(app.pods()).get("big") == 1, timeout=60, message="only the stray pod left")
    assert [p["metadata"]["name"] for p in app.pods() if p["metadata"]["labels"]["ray.io/group"] == "big"] == ["stray"]


def test_a_killed_replacement_is_finished_by_the_next_run(app: HookApp):
    """SIGKILL after the first batch: the cluster keeps running (never suspended), the next run
    takes the lock over and replaces the rest, no pod is deleted twice."""
    before = _start(app, replace_groups("1"))
    app.write(with_big_image(replace_groups("1")))
    objs, _, plan = app.render()
    proc = _spawn(app, plan, {"RAYGITOPS_TEST_PAUSE_AT": "replacing"})
    try:
        first_log = _wait_paused(proc, "replacing")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    live = app.cluster()
    assert live["spec"].get("suspend") is not True
    assert json.loads(live["metadata"]["annotations"][LOCK])["phase"] == "replacing"
    first = deleted_pods(first_log)
    assert len(first) == 1, first_log
    res = app.presync(plan)
    demo = _demo(json.loads(res.stdout))
    assert demo["outcome"] == "replaced" and "takeover" in res.stderr, res.stderr
    second = deleted_pods(res.stderr)
    assert second and first.isdisjoint(second), (first, second)
    app.apply(objs)
    after = uids_by_group(app.wait_pods(count=5, hashes=desired_hashes(rendered(objs))))
    assert after["headgroup"] == before["headgroup"] and after["small"] == before["small"]
    assert not app.events("Suspended")


def test_replacements_that_never_get_ready_fail_the_sync_naming_the_stale_pods(app: HookApp):
    """New pods of ``big`` cannot be placed (a node that does not exist): after the first
    pod of the batch the hook waits, times out, exits 1 and says what is still stale; the
    other pod of the group keeps running (max-unavailable 1)."""
    before = _start(app, replace_groups("1"))
    broken = with_big_image(replace_groups("1"))
    app.write(broken)
    # pin the new template of `big` to a node that does not exist: its pods stay Pending
    path = app.dir / "demo.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["workerGroupSpecs"][1]["template"]["spec"]["nodeName"] = "no-such-node"
    path.write_text(yaml.safe_dump(doc))
    objs, _, plan = app.render()
    res = app.presync(plan, "--timeout", "12", check=False)
    assert res.returncode == 1, res.stderr
    demo = _demo(json.loads(res.stdout))
    assert demo["outcome"] == "failed" and "timed out replacing worker pods" in demo["message"], demo
    assert "group big: 0 of 2 Ready with the new template, 1 stale" in demo["message"], demo
    live = app.cluster()
    assert live["spec"].get("suspend") is not True and LOCK not in live["metadata"]["annotations"]
    assert json.loads(live["metadata"]["annotations"]["raygitops.dev/last-recreate"])["outcome"] == "Failed"
    now = uids_by_group(app.pods())
    assert now["headgroup"] == before["headgroup"] and now["small"] == before["small"]
    assert len(now["big"] & before["big"]) == 1  # one old pod still serves


def test_a_group_scaled_during_its_replacement_ends_at_the_new_size(app: HookApp):
    """The autoscaler's part, played by hand: ``big`` goes from 2 to 3 replicas while the hook
    replaces it. The hook never writes replicas; it ends with 3 new pods."""
    _start(app, replace_groups("1"))
    app.write(with_big_image(replace_groups("1")))
    objs, _, plan = app.render()
    proc = _spawn(app, plan, {"RAYGITOPS_TEST_PAUSE_AT": "replacing", "RAYGITOPS_TEST_PAUSE_SECONDS": "3"})
    try:
        _wait_paused(proc, "replacing")
        live = app.cluster()
        live_groups = live["spec"]["workerGroupSpecs"]
        index = next(i for i, g in enumerate(live_groups) if g["groupName"] == "big")
        app.plane.kubectl("patch", "raycluster", "demo", "-n", app.ns, "--type", "json", "-p",
                          json.dumps([{"op": "replace", "path": f"/spec/workerGroupSpecs/{index}/replicas", "value": 3}]))
        out, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert _demo(json.loads(out))["outcome"] == "replaced"
    pods = app.pods()
    big = [p for p in pods if p["metadata"]["labels"]["ray.io/group"] == "big" and not p["metadata"].get("deletionTimestamp")]
    want = json.loads(rendered(objs)["metadata"]["annotations"]["raygitops.dev/template-hashes"])["workers"]["big"]
    assert len(big) == 3 and {p["metadata"]["annotations"][HASH] for p in big} == {want}
    assert next(g for g in app.cluster()["spec"]["workerGroupSpecs"] if g["groupName"] == "big")["replicas"] == 3
