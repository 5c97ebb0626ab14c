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
