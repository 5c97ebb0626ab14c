"""The drain step: after the suspend, wait until every pod the RayCluster owns is gone.

Only the cluster's own pods count: a pod whose controller ownerReference is the RayCluster's
uid.  Another pod that carries the label ``ray.io/cluster=<name>`` (made by a person or
another controller) is named in the log, never deleted and never waited for.

The operator deletes the pods when it sees ``spec.suspend: true``.  Pods still there after
``--drain-grace`` are deleted by the hook, one DELETE per pod with a uid precondition and
the pod's OWN grace period; a straggler is deleted again only after another
``--drain-grace``.  Pods are followed with a watch (:class:`raygitops.kube.watch.Follow`: a
LIST after a 410, a garbled line or a dropped stream); each watch call lasts at most
:data:`WATCH_SECONDS`, so a signal or the deadline is noticed promptly.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from raygitops.clock import Clock
from raygitops.kube.client import ApiError
from raygitops.kube.watch import RELISTED, Follow
from raygitops.model import objmeta, pods
from raygitops.model.names import CLUSTER_LABEL
from raygitops.presync.logs import Log

WATCH_SECONDS = 5
RELIST_PAUSE_SECONDS = 0.5  # after a watch that could not go on: never a tight loop of LISTs


class DrainTimeout(Exception):
    """Pods still present when the drain had to give up."""


def split_pods(pod_list: list[dict[str, Any]], cluster_uid: str) -> tuple[dict[str, str], list[str]]:
    """(uid → name of the cluster's own pods, names of foreign pods with its label) (pure)."""
    own: dict[str, str] = {}
    foreign: list[str] = []
    for pod in pod_list:
        meta = objmeta.meta(pod)
        if pods.owned_by(pod, cluster_uid):
            own[meta.get("uid", "")] = meta.get("name", "")
        else:
            foreign.append(meta.get("name", ""))
    return own, sorted(foreign)


@dataclass
class Drain:
    """One drain of one RayCluster.  ``tick`` is called between watch calls (lease renewal,
    signals: it raises to stop); ``give_up`` is a ``clock.monotonic()`` instant."""


    kube: Any
    log: Log
    key: str
    namespace: str
    name: str
    cluster_uid: str
    grace: float
    give_up: float
    tick: Callable[[], None]
    clock: Clock
    stop: threading.Event  # a stop request cuts a pause short; ``tick`` then ends the drain
    remaining: dict[str, str] = field(default_factory=dict)
    foreign_seen: set[str] = field(default_factory=set)

    def _foreign(self, names: list[str]) -> None:
        for name in names:
            if name not in self.foreign_seen:
                self.foreign_seen.add(name)
                self.log.warn(self.key, "drain", f"pod {name} carries label {CLUSTER_LABEL}={self.name} "
                              "but is not this RayCluster's: not deleted, not waited for")

    def _listed(self, pod_list: list[dict[str, Any]]) -> None:
        self.remaining, foreign = split_pods(pod_list, self.cluster_uid)
        self._foreign(foreign)

    def _delete_remaining(self) -> None:
        self.log.warn(self.key, "drain", f"drain grace over: deleting {len(self.remaining)} pods of the cluster "
                      "(each with its own grace period)", pods=sorted(self.remaining.values())[:10])
        for uid, name in list(self.remaining.items()):
            self.kube.delete_pod(self.namespace, name, uid=uid)

    def run(self) -> float:
        """Block until no pod of the cluster is left; the ``clock.monotonic()`` when that was
        seen.  Raises :class:`DrainTimeout` at ``give_up``."""
        selector = f"{CLUSTER_LABEL}={self.name}"
        follow = Follow(lambda: self.kube.list_pods(self.namespace, selector),
                        lambda rv, seconds: self.kube.watch_pods(self.namespace, selector, rv, seconds), self.clock)
        start = self.clock.monotonic()
        delete_at = start + self.grace
        announced, relist = -1, True
        while True:
            if relist:
                listed, follow.resource_version = follow.read()
                self._listed(listed)
                relist = False
            if not self.remaining:
                self.log.info(self.key, "drain", "all pods of the cluster are gone",
                              seconds=round(self.clock.monotonic() - start, 3))
                return self.clock.monotonic()
            if len(self.remaining) != announced:
                announced = len(self.remaining)
                self.log.info(self.key, "drain", f"{announced} pods left")
            now = self.clock.monotonic()
            if now >= self.give_up:
                shown = ", ".join(sorted(self.remaining.values())[:5])
                raise DrainTimeout(f"drain timed out: {len(self.remaining)} pods still present ({shown})")
            if now >= delete_at:
                self._delete_remaining()
                delete_at = now + max(self.grace, 1.0)  # stragglers: again only after another grace
                relist = True
                continue
            self.tick()
            relist = self._window(follow, min(WATCH_SECONDS, self.give_up - now, delete_at - now))

    def _window(self, follow: Follow, seconds: float) -> bool:
        """Follow pod events for up to ``seconds``; whether to LIST again."""
        try:
            for kind, obj in follow.window(seconds):
                if kind == RELISTED:
                    self._listed(obj)
                    self.clock.wait(RELIST_PAUSE_SECONDS, self.stop)
                    return False
                meta = objmeta.meta(obj)
                uid = meta.get("uid")
                if kind == "DELETED":
                    self.remaining.pop(uid, None)
                elif kind in ("ADDED", "MODIFIED") and uid:
                    if pods.owned_by(obj, self.cluster_uid):
                        self.remaining[uid] = meta.get("name", "")
                    else:
                        self._foreign([meta.get("name", "")])
                if not self.remaining:
                    return False
        except ApiError as err:
            if err.status in (401, 403):
                raise
            self.log.warn(self.key, "drain", f"watch failed ({err}): listing again")
            self.clock.wait(RELIST_PAUSE_SECONDS, self.stop)
            return True
        return False

