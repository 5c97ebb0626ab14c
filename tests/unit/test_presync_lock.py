"""Lock/lease annotation and the pure state machine."""

from __future__ import annotations

import dataclasses

import json

from raygitops.model import verdict
from raygitops.presync import cycle
from raygitops.presync.context import State
from raygitops.model import lock as locks
from raygitops.model import names

TARGET = {"head": "h1-aaaaaaaaaaaaaaaa", "workers": {"small": "h1-bbbbbbbbbbbbbbbb"}}


def test_round_trip_and_fields():
    lk = locks.new_lock("pod/1/abc", TARGET, {"head": "h1-0"}, 1_800_000_000.25, 60)
    text = lk.to_annotation()
    doc = json.loads(text)
    assert set(doc) == {"target", "phase", "holder", "renewedAt", "startedAt", "leaseSeconds", "from"}
    assert doc["renewedAt"].endswith("Z") and doc["phase"] == "locked"
    back = locks.parse(text)
    assert back.target == TARGET and back.holder == "pod/1/abc" and abs(back.renewed_at - lk.renewed_at) < 1e-3


def test_parse_rejects_garbage():
    for text in (None, "", "{", "[]", '{"phase":"x","target":{}}', '{"phase":"locked","target":{}}',
                 '{"phase":"locked","target":{},"renewedAt":"yesterday"}'):
        assert locks.parse(text) is None


def test_lease_expiry_by_observation_only():
    lk = locks.new_lock("a", TARGET, None, 1000.0, 60)
    assert not lk.expired(unchanged_for=59) and lk.expired(unchanged_for=61)
    # renewedAt from a writer whose clock is far behind or ahead of ours changes nothing
    assert not locks.new_lock("a", TARGET, None, 0.0, 60).expired(unchanged_for=1)
    assert locks.new_lock("a", TARGET, None, 9e9, 60).expired(unchanged_for=61)


def test_takeover_keeps_target_only_after_resume():
    other = {"head": "h1-cccccccccccccccc"}
    for phase, expected in ((locks.LOCKED, TARGET), (locks.SUSPENDED, TARGET), (locks.RESUMED, other)):
        lk = locks.new_lock("dead", other, None, 0.0).at(phase, 0.0)
        taken = lk.taken_over("me", 100.0, TARGET)
        assert taken.holder == "me" and taken.renewed_at == 100.0 and taken.phase == phase
        assert taken.target == expected


def test_last_recreate_value():
    lk = locks.new_lock("a", TARGET, {"head": "h1-old"}, 1000.0)
    doc = json.loads(locks.last_recreate(lk, 1010.0, locks.COMPLETED))
    assert doc["from"] == {"head": "h1-old"} and doc["to"] == TARGET
    assert doc["startedAt"] < doc["finishedAt"] and doc["outcome"] == "Completed"


def _live(lock=None, suspend=None):
    obj = {"metadata": {"annotations": {}}, "spec": {}}
    if lock is not None:
        obj["metadata"]["annotations"][names.LOCK_ANNOTATION] = lock if isinstance(lock, str) else lock.to_annotation()
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    return obj


NS = "ray"


def test_state_machine_transitions():
    me, now = "me", 1000.0
    mine = locks.new_lock(me, TARGET, None, now)
    theirs = locks.new_lock("them", TARGET, None, now)
    state = State.of(verdict.Verdict(NS, "demo", verdict.RECREATE, "drifted"))

    def ns(live, holder, unchanged_for=0.0, **done):
        return cycle.next_step(live, holder, dataclasses.replace(state, **done), unchanged_for)

    assert ns(None, me) == cycle.GONE
    assert ns(_live(), me) == cycle.ACQUIRE
    assert ns(_live(), me, recheck=True) == cycle.CHECK  # waited for another hook: is it still drifted?
    assert ns(_live(), me, recreated=True) == cycle.FINISHED  # our cycle unlocked: done
    assert ns(_live(mine), me) == cycle.JOBS  # before anything goes: what runs on the Ray head?
    assert ns(_live(mine), me, jobs_cleared=True) == cycle.PREFLIGHT  # ... and can the new pods come up?
    assert ns(_live(mine), me, jobs_cleared=True, preflight_cleared=True) == cycle.SUSPEND
    assert ns(_live(mine.at(locks.SUSPENDED, now), suspend=True), me) == cycle.DRAIN
    # suspended phase but someone flipped suspend back: suspend again before draining
    assert ns(_live(mine.at(locks.SUSPENDED, now), suspend=False), me) == cycle.SUSPEND
    assert ns(_live(mine.at(locks.RESUMED, now), suspend=False), me) == cycle.WAIT_READY
    assert ns(_live(theirs), me, unchanged_for=10) == cycle.WAIT
    assert ns(_live(theirs), me, unchanged_for=61) == cycle.TAKEOVER
    assert ns(_live("not json"), me) == cycle.TAKEOVER
    changed = _live()
    changed["metadata"]["resourceVersion"] = "7"  # not the version the run decided on
    assert ns(changed, me) == cycle.CHECK
