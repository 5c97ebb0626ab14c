"""Every change of the objects a campaign round looks at, as the API server orders them:
pods (label ``ray.io/cluster``), ConfigMaps, Secrets and RayClusters of a few namespaces,
from watches (not polls: no change is missed), with the admin credentials (never through a
fault proxy).

Each watch goes on from the last resourceVersion it saw, so an ``ADDED`` event carries the
object as it was created (its resourceVersion is the etcd revision of the creation: a pod
can be ordered against the write of the ConfigMap it reads).  Only after a 410 or a broken
stream does a watch list again; what the list shows that the watch had not is recorded with
``exact=False`` (a deletion missed is recorded as one; a creation missed, with the list's
version of the object, only as "no later than").  The invariants over a record are pure
functions of it (:mod:`reliability.invariants`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

RESOURCES = ("pods", "configmaps", "secrets", "rayclusters")
WATCH_SECONDS = 5


@dataclass(frozen=True)
class Change:
    resource: str  # pods, configmaps, secrets, rayclusters
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]
    rv: int  # the object's resourceVersion in this change (an etcd revision)
    at: float  # time.monotonic() when the recorder got it
    exact: bool = True  # False: inferred from a list after the watch could not go on

    @property
    def key(self) -> str:
        return f"{self.obj['metadata'].get('namespace', '')}/{self.obj['metadata']['name']}"

    @property
    def uid(self) -> str:
        return self.obj["metadata"].get("uid", "")


def _listers(api: Any) -> dict[str, Callable[..., Any]]:
    return {
        "pods": lambda ns, **kw: api.core.list_namespaced_pod(ns, label_selector="ray.io/cluster", **kw),
        "configmaps": lambda ns, **kw: api.core.list_namespaced_config_map(ns, **kw),
        "secrets": lambda ns, **kw: api.core.list_namespaced_secret(ns, **kw),
        "rayclusters": lambda ns, **kw: api.custom.list_namespaced_custom_object("ray.io", "v1", ns, "rayclusters",
                                                                                  **kw),
    }


@dataclass
class Recorder:
    """``with Recorder(kubeconfig, namespaces) as rec:`` ... ``rec.changes()``."""

    kubeconfig: str
    namespaces: list[str]
    resources: tuple[str, ...] = RESOURCES
    _changes: list[Change] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> "Recorder":
        from reliability.fleet import Api

        self._list = _listers(Api(self.kubeconfig))
        ready = []
        for ns in self.namespaces:
            for resource in self.resources:
                event = threading.Event()
                ready.append(event)
                threading.Thread(target=self._run, args=(ns, resource, event), daemon=True,
                                 name=f"recorder-{resource}-{ns}").start()
        for event in ready:
            event.wait(30)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Record nothing more; each watch ends with its current call (at most
        :data:`WATCH_SECONDS`), in the background."""
        self._stop.set()

    def settle(self, seconds: float = 1.0) -> None:
        """Give the watches time to deliver the last changes."""
        time.sleep(seconds)

    def changes(self, resource: str | None = None) -> list[Change]:
        with self._lock:
            return [c for c in self._changes if resource is None or c.resource == resource]

    def _add(self, resource: str, kind: str, obj: dict[str, Any], exact: bool = True) -> None:
        rv = int(obj["metadata"].get("resourceVersion") or 0)
        self._changes.append(Change(resource, kind, obj, rv, time.monotonic(), exact))

    def _relist(self, namespace: str, resource: str, known: dict[str, dict[str, Any]]) -> str:
        """List; the first list is what was there already (:attr:`initial`), a later one
        records what the watch missed."""
        doc = json.loads(self._list[resource](namespace, _preload_content=False).data)
        now = {o["metadata"]["uid"]: o for o in doc["items"]}
        with self._lock:
            if (resource, namespace) not in self._listed:
                self._listed.add((resource, namespace))
                self.initial.setdefault(resource, []).extend(now.values())
                known.update(now)
                return doc["metadata"]["resourceVersion"]
            for uid in sorted(set(known) - set(now)):
                self._add(resource, "DELETED", known.pop(uid), exact=False)
            for uid, obj in now.items():
                if uid not in known:
                    self._add(resource, "ADDED", obj, exact=False)
                elif obj["metadata"].get("resourceVersion") != known[uid]["metadata"].get("resourceVersion"):
                    self._add(resource, "MODIFIED", obj, exact=False)
                known[uid] = obj
        return doc["metadata"]["resourceVersion"]

    def _run(self, namespace: str, resource: str, ready: threading.Event) -> None:
        known: dict[str, dict[str, Any]] = {}
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._relist(namespace, resource, known)
                    ready.set()
                resp = self._list[resource](namespace, watch=True, resource_version=rv, timeout_seconds=WATCH_SECONDS,
                                            allow_watch_bookmarks=True, _preload_content=False)
                for line in resp:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        rv = None  # 410: list again
                        break
                    rv = obj["metadata"].get("resourceVersion") or rv
                    if event["type"] == "BOOKMARK":
                        continue
                    if self._stop.is_set():
                        break
                    with self._lock:
                        if event["type"] == "DELETED":
                            known.pop(obj["metadata"]["uid"], None)
                        else:
                            known[obj["metadata"]["uid"]] = obj
                        self._add(resource, event["type"], obj)
                resp.release_conn()
            except Exception as err:  # noqa: BLE001 - a watch that broke lists again
                self.errors.append(f"{resource} {namespace}: {str(err)[:200]}")
                rv = None
                time.sleep(0.5)

    def __post_init__(self) -> None:
        self._listed: set[tuple[str, str]] = set()
        self.initial: dict[str, list[dict[str, Any]]] = {}  # resource -> objects there when it began
