"""The removed-group race (issue 46), forced on every run, on the real operators.

Under ReplaceGroups the hook writes the spec without worker group ``big`` and deletes the
group's pods. An operator whose view of the RayCluster is behind its view of the pods sees
the deletions, still believes in ``big`` and makes its pods again from the old spec; once it
sees the new spec it leaves them running for good (kuberay #1739). A hook that reports
``replaced`` before the operator has observed its spec can therefore report a success whose
end state does not hold.

The operator's API traffic goes through a fault proxy (tests/reliability/faultproxy.py) that
holds the watch events of RayClusters and pods, so the order is forced, not hoped for:

1. both held: the operator sees nothing of the hook's write and deletions;
2. pods released: it refills ``big`` from the spec it still sees (counted at the proxy);
3. RayClusters released: it observes the spec without ``big``.

The hook must not report before 3 (today's hook waits for ``status.observedGeneration``; the
hook before issue 46 reported ``replaced`` during 1, every time), and after it reports no pod
of ``big`` may exist or appear.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
from controlplane import wait_for
from test_presync_guarantees import PodWatch
from test_removed_groups import groups, without_big
from test_replace_groups import HookApp, _demo, _start, app, replace_groups  # noqa: F401 - the fixture

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reliability"))
from faultproxy import FaultProxy  # noqa: E402

pytestmark = pytest.mark.e2e


class HookLog:
    """The hook's JSON log lines on stderr, read as they come."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            self.raw.append(line)
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                pass

    def deleted(self, group: str) -> list[str]:
        return [l["msg"] for l in self.lines if l.get("step") == "replace"
                and l.get("msg", "").startswith("deleted pod") and l["msg"].endswith(f"of group {group}")]


@contextlib.contextmanager
def operator_behind_proxy(plane, tmp_path: Path) -> Iterator[FaultProxy]:
    """The operator's API requests through a fault proxy, for one test (its kubeconfig as
    before afterwards)."""
    before = plane.operator_kubeconfig
    with FaultProxy(plane.kubeconfig) as fp:
        plane.restart_operator(fp.write_kubeconfig(tmp_path / "operator.kubeconfig"))
        try:
            yield fp
        finally:
            fp.release("rayclusters", "pods")
            plane.restart_operator(before)


def force_the_race(app: HookApp, plane, proxy: FaultProxy) -> None:
    """Steps 1-3 of the module docstring around one hook run; fails if the hook reports
    before the operator observed its spec, or if a pod of the removed group is left or made
    after it reports."""
    _start(app, replace_groups())
    assert groups(app.pods()) == {"headgroup": 1, "small": 2, "big": 2}
    app.write(without_big(replace_groups()))
    _, _, plan = app.render()

    proxy.hold("rayclusters", "pods")  # 1. the operator sees nothing of what follows
    proc = subprocess.Popen(app.presync_argv(plan), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=app.hook_env(None), start_new_session=True)
    log = HookLog(proc)
    watch = PodWatch(app)
    try:
        wait_for(lambda: len(log.deleted("big")) == 2 or proc.poll() is not None, timeout=60,
                 message="the hook deleting the removed group's two pods")
        assert len(log.deleted("big")) == 2, "".join(log.raw)
        wait_for(lambda: "big" not in groups(app.pods()) or proc.poll() is not None, timeout=60,
                 message="the removed group's pods gone")
        # the hook before issue 46 reported here within a second, every time; today's waits for
        # the operator's word, which cannot come while it sees nothing
        wait_for(lambda: proc.poll() is not None or _waits_for_operator(log), timeout=60,
                 message="the hook waiting for the operator to observe its spec")
        assert proc.poll() is None, ("the hook reported before the operator observed its spec:\n"
                                     + proc.stdout.read() + "".join(log.raw[-20:]))

        creates = proxy.stats.requests["create pods"]
        proxy.release("pods")  # 2. it refills big from the spec it still sees
        wait_for(lambda: proxy.stats.requests["create pods"] > creates, timeout=60,
                 message="the operator making pods of the removed group from its stale view")
        proxy.release("rayclusters")  # 3. it observes the spec without big

        out, _ = proc.communicate(timeout=150)
        log.thread.join(10)
        seen_at_report = len(watch.events)
        demo = _demo(json.loads(out))
        assert demo["outcome"] == "replaced", (demo, "".join(log.raw[-30:]))
        assert "big" not in groups(app.pods()), app.pods()  # at the report: none, terminating ones included
        # one more reconcile, from whatever view the operator has now: it must make no pod of big
        mark = plane.operator_log_mark()
        plane.kubectl("annotate", "raycluster", "demo", "-n", app.ns, "e2e/poke=1", "--overwrite")
        plane.wait_operator_reconciled("demo", app.ns, since=mark, timeout=30)
        assert groups(app.pods()) == {"headgroup": 1, "small": 2}, app.pods()
    finally:
        if proc.poll() is None:
            proc.kill()
        watch.stop()
    big = [(i, o["metadata"]["name"]) for i, (kind, o) in enumerate(watch.events)
           if o["metadata"]["labels"].get("ray.io/group") == "big"]
    before = {name for i, name in big if i < seen_at_report}
    after = sorted({name for i, name in big if i >= seen_at_report} - before)
    assert not after, f"pods of the removed group made after the hook reported: {after}"
    assert len(before) > 2, f"the race was not forced: the operator made no pod of the removed group ({before})"


def _waits_for_operator(log: HookLog) -> bool:
    return any("the operator has not yet observed generation" in l.get("msg", "") for l in log.lines)


def test_a_removed_group_is_reported_gone_only_after_the_operator_saw_it_removed(app: HookApp, plane, tmp_path):
    with operator_behind_proxy(plane, tmp_path) as proxy:
        force_the_race(app, plane, proxy)
