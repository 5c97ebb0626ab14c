"""The Kubernetes layer's shared mechanisms: a write retried on 409 (``kube.retry``), a watch
followed across 410s and broken streams (``kube.watch``), and the hook's lease on top of them;
in simulated time."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from raygitops.kube import retry
from raygitops.kube.client import ApiError, Conflict, Gone, StreamBroken
from raygitops.kube.watch import RELISTED, Follow
from raygitops.model import lock as locks
from raygitops.model import verdict
from raygitops.model.names import LOCK_ANNOTATION
from raygitops.presync import lease
from raygitops.presync.context import Context, LostLock, Options, State
from raygitops.presync.logs import Log

from test_presync_fakes import NS, FakeClock, FakeKube, cluster_spec, make_plan, stamped


def test_on_conflict_retries_then_gives_up_the_same_way_everywhere() -> None:
    calls = []

    def write() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Conflict(409, "Conflict", "modified")
        return "written"

    assert retry.on_conflict(write, "w") == "written" and len(calls) == 3
    with pytest.raises(retry.ConflictsExhausted) as err:
        retry.on_conflict(lambda: (_ for _ in ()).throw(Conflict(409, "Conflict", "x")), "renewing", attempts=4)
    assert "renewing: gave up after 4 write conflicts" in str(err.value) and err.value.status == 409
    assert not isinstance(err.value, Conflict)  # a loop that re-decides on a Conflict must not loop on it
    with pytest.raises(ApiError, match="500"):  # anything else is not retried
        retry.on_conflict(lambda: (_ for _ in ()).throw(ApiError(500, "x", "y")), "w")


def _events(*items: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from items


def test_follow_reads_again_after_a_410_a_drop_or_an_early_end() -> None:
    clock = FakeClock()
    reads: list[int] = []
    windows: list[Any] = [Gone(410, "Expired", "too old"), StreamBroken(0, "StreamBroken", "dropped"), "early",
                          [("MODIFIED", {"metadata": {"resourceVersion": "9"}}), ("BOOKMARK", {"metadata": {
                              "resourceVersion": "12"}})]]
    asked: list[tuple[str, int]] = []

    def read() -> tuple[Any, str]:
        reads.append(1)
        return f"list {len(reads)}", str(len(reads))

    def watch(rv: str, seconds: int) -> Iterator[tuple[str, dict[str, Any]]]:
        asked.append((rv, seconds))
        now = windows.pop(0)
        if isinstance(now, Exception):
            raise now
        if now == "early":
            return _events()  # the server closed it at once
        clock.advance(seconds)
        return _events(*now)

    follow = Follow(read, watch, clock, "5")
    seen = [list(follow.window(4.2)) for _ in range(4)]
    assert seen[:3] == [[(RELISTED, "list 1")], [(RELISTED, "list 2")], [(RELISTED, "list 3")]]
    assert seen[3] == [("MODIFIED", {"metadata": {"resourceVersion": "9"}})]  # BOOKMARKs only move the version
    assert asked == [("5", 5), ("1", 5), ("2", 5), ("3", 5)] and follow.resource_version == "12"


def test_follow_raises_past_its_restarts() -> None:
    follow = Follow(lambda: (None, "1"), lambda rv, s: (_ for _ in ()).throw(Gone(410, "Expired", "x")),
                    FakeClock(), max_restarts=2)
    assert list(follow.window(1)) == [(RELISTED, None)]
    assert list(follow.window(1)) == [(RELISTED, None)]
    with pytest.raises(Gone):
        list(follow.window(1))


def _locked() -> tuple[FakeKube, Context, State]:
    """A cluster this hook holds the lock of, read into the cycle's state."""
    kube = FakeKube()
    kube.add_cluster("demo", stamped(cluster_spec()))
    plan = make_plan(spec=cluster_spec(image="new:2"))
    opts = Options(deadline=kube.clock.monotonic() + 100, drain_grace=5, wait_ready=True, lease_seconds=60)
    c = Context(kube, Log("json"), NS, plan, opts, "me/1/a", kube.clock)
    s = State.of(verdict.Verdict(NS, "demo", verdict.RECREATE, "drifted"))
    c.get(s)
    c.patch(s, {"metadata": {"annotations": {LOCK_ANNOTATION: locks.new_lock(
        c.holder, c.target, None, c.clock.now()).to_annotation()}}})
    return kube, c, s


def test_the_lease_is_renewed_a_third_of_a_lease_after_each_write() -> None:
    kube, c, s = _locked()
    lease.written(c)
    kube.clock.advance(19.9)
    lease.renew_if_due(c, s)
    assert kube.by_verb["patch"] == 1  # not due yet
    kube.clock.advance(0.2)
    lease.renew_if_due(c, s)
    assert kube.by_verb["patch"] == 2 and not lease.due(c)
    assert locks.parse(s.live["metadata"]["annotations"][LOCK_ANNOTATION]).renewed_at == kube.clock.now()


def test_a_renewal_that_keeps_conflicting_fails_like_any_other_write() -> None:
    kube, c, s = _locked()
    patch = kube.patch_cluster

    def always_conflicting(namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        raise Conflict(409, "Conflict", "the object has been modified")

    kube.patch_cluster = always_conflicting
    with pytest.raises(retry.ConflictsExhausted):
        lease.renew(c, s)  # the old renewal gave up silently and counted the lease as written
    kube.patch_cluster = patch
    lock = locks.parse(s.live["metadata"]["annotations"][LOCK_ANNOTATION])
    s.live["metadata"]["annotations"][LOCK_ANNOTATION] = lock.taken_over("other/2/b", 0.0, {}).to_annotation()
    kube.clusters[(NS, "demo")] = s.live
    with pytest.raises(LostLock, match="other/2/b"):
        lease.renew(c, s)


def test_a_lock_is_judged_unchanged_by_observation() -> None:
    clock = FakeClock()
    seen = lease.Observed(clock)
    live = {"metadata": {"annotations": {LOCK_ANNOTATION: "v1"}}}
    assert seen.unchanged_for(live) == 0
    clock.advance(30)
    assert seen.unchanged_for(live) == 30
    live["metadata"]["annotations"][LOCK_ANNOTATION] = "v2"  # renewed
    assert seen.unchanged_for(live) == 0
