"""Following what changes on the API server: watch calls from the resourceVersion in hand,
read again after a 410 or a broken stream (client-go's reflector, list then watch, without
its cache). The drain follows a cluster's pods with it, the prompting one RayCluster.

Each :meth:`Follow.window` is one watch call of at most the given seconds, which the server
ends then. When a watch cannot go on (a 410: the version is too old; a stream that dropped
or sent a garbled line; one the server closed before half its time), the window reads again
(``read()``: the list or the object, and the resourceVersion to watch from next) and yields
``(RELISTED, what it read)``; the next window watches from there. At most ``max_restarts``
reads in all (None: no bound), after which the failure is raised. Any other API error is
the caller's.
"""

from __future__ import annotations

import math
from contextlib import closing
from typing import Any, Callable, Iterator

from raygitops.clock import Clock
from raygitops.kube.client import Gone, StreamBroken

RELISTED = "RELISTED"

Read = Callable[[], tuple[Any, str]]  # what is there now, and its resourceVersion
Watch = Callable[[str, int], Iterator[tuple[str, dict[str, Any]]]]  # (resourceVersion, seconds) -> events


class Follow:
    def __init__(self, read: Read, watch: Watch, clock: Clock, resource_version: str = "",
                 max_restarts: int | None = None) -> None:
        self.read, self.watch, self.clock = read, watch, clock
        self.resource_version = resource_version
        self.max_restarts = max_restarts
        self.restarts = 0
        self.failure: Exception | None = None  # what made the last window read again

    def window(self, seconds: float) -> Iterator[tuple[str, Any]]:
        """The events of one watch call of at most ``seconds`` (BOOKMARKs only move the
        resourceVersion), or ``(RELISTED, read())`` when it could not go on."""
        started = self.clock.monotonic()
        try:
            with closing(self.watch(self.resource_version, max(1, math.ceil(seconds)))) as changes:
                for kind, obj in changes:
                    self.resource_version = (obj.get("metadata") or {}).get("resourceVersion") or self.resource_version
                    if kind != "BOOKMARK":
                        yield kind, obj
            if self.clock.monotonic() - started < seconds / 2:
                raise StreamBroken(0, "StreamBroken", "the watch ended early", "WATCH", "")
        except (Gone, StreamBroken) as err:
            self.restarts += 1
            if self.max_restarts is not None and self.restarts > self.max_restarts:
                raise
            self.failure = err
            found, self.resource_version = self.read()
            yield RELISTED, found
