"""Exponential back-off: one formula, each caller with its own numbers.

The retry of a failed job (``retry_seconds`` doubling, no ceiling: the
dead-letter count ends it), a settlement AWS refused (0.25 s doubling to
10 s), a failed receive (0.5 s doubling to 30 s) and a boot step AWS did not
answer (0.5 s doubling to 10 s) all wait ``first * 2**step``, at most a cap.
"""

from __future__ import annotations

import math


def doubling(first: float, step: int, cap: float = math.inf) -> float:
    """Seconds to wait at *step*: *first* at step 0 (or below), twice as long each step after,
    never more than *cap*.

    A step too large for a float (a receive failing for hours on end) waits
    *cap*, never raises.
    """
    try:
        return min(cap, first * 2 ** max(0, step))
    except OverflowError:
        return cap
