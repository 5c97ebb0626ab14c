"""A write that meets a 409: read, recompute and write again (client-go's ``RetryOnConflict``).

The client never retries a 409 itself (:class:`~raygitops.kube.client.Conflict`): only the
caller can read the object again and recompute its change. :func:`on_conflict` does that a
bounded number of times and then fails the same way everywhere, with
:class:`ConflictsExhausted`, which is not a ``Conflict`` (a loop that re-decides on a
conflict must not take it for one more).
"""

from __future__ import annotations

from typing import Callable, TypeVar

from raygitops.kube.client import ApiError, Conflict

T = TypeVar("T")
MAX_CONFLICTS = 50


class ConflictsExhausted(ApiError):
    """The object kept changing under every attempt to write it."""


def on_conflict(write: Callable[[], T], what: str, attempts: int = MAX_CONFLICTS) -> T:
    """``write()`` (which reads, computes and writes) until it does not raise
    :class:`Conflict`; :class:`ConflictsExhausted` after ``attempts`` conflicts in a row."""
    for _ in range(attempts):
        try:
            return write()
        except Conflict:
            continue
    raise ConflictsExhausted(409, "Conflict", f"{what}: gave up after {attempts} write conflicts in a row")
