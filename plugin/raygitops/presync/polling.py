"""How long to sleep between two reads of something the hook waits for (pure).

Short first, because what the hook waits for (a status condition, new pods turning Ready, a
replaced batch) usually comes within a fraction of a second on a healthy cluster; then
doubling up to a cap, so a long wait costs no more requests than a fixed poll at the cap.
"""

from __future__ import annotations

import math
from typing import Iterator


def delays(first: float, cap: float, total: float = math.inf) -> Iterator[float]:
    """``first``, doubling up to ``cap``; no more once they would add up to over ``total``."""
    delay, spent = first, 0.0
    while spent + delay <= total + 1e-9:
        yield delay
        spent += delay
        delay = min(delay * 2, cap)


WAIT_FIRST_SECONDS = 0.1  # the first sleep: new pods are often Ready, a batch replaced, within it
WAIT_CAP_SECONDS = 1.0  # the longest sleep between two reads while waiting for pods


def waiting() -> Iterator[float]:
    """Sleeps while waiting for pods (readiness, a replaced batch): from
    :data:`WAIT_FIRST_SECONDS` up to :data:`WAIT_CAP_SECONDS`; restarted whenever something moved."""
    return delays(WAIT_FIRST_SECONDS, WAIT_CAP_SECONDS)
