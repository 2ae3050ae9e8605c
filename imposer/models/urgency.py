"""How urgent a job is within its tenant: a priority and an optional due time.

Both only order a tenant's own waiting jobs; they never win a tenant a slot
from another tenant. Parsed here, once, for the client and the worker alike;
a bad value is an ``InvalidMessage`` saying why, like every other field.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any

from imposer.errors import InvalidMessage

#: Priorities run from 0 (most urgent) to 9; a job without one is in the middle.
HIGHEST, LOWEST, DEFAULT_PRIORITY = 0, 9, 5
#: Due times before 2000-01-01 UTC are refused as nonsense.
EARLIEST_DUE = 946_684_800.0
#: ...and so are due times more than a year ahead of now.
FURTHEST_AHEAD = 366 * 24 * 3600.0


def parse_priority(value: Any) -> int:
    """Return the priority *value* names (None: the default); refuse anything else."""
    if value is None:
        return DEFAULT_PRIORITY
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value != int(value) \
            or not HIGHEST <= value <= LOWEST:
        raise InvalidMessage(f"priority must be a whole number from {HIGHEST} (most urgent) "
                             f"to {LOWEST}, got {str(value)[:40]!r}")
    return int(value)


def parse_due(value: Any, now: float | None = None) -> float | None:
    """Return the epoch seconds of an ISO-8601 due time with a timezone (None: no due).

    Naive times are refused rather than guessed: a worker's zone is not the tenant's.
    """
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 64:
        raise InvalidMessage(f"due must be an ISO-8601 time with a timezone, "
                             f"got {str(value)[:40]!r}")
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidMessage(f"due is not an ISO-8601 time: {value!r}") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidMessage(f"due has no timezone: {value!r} (add Z or +HH:MM)")
    try:
        epoch = moment.timestamp()
    except (OverflowError, OSError, ValueError):
        raise InvalidMessage(f"due is out of range: {value!r}") from None
    latest = (time.time() if now is None else now) + FURTHEST_AHEAD
    if not EARLIEST_DUE <= epoch <= latest:
        raise InvalidMessage(f"due must be after 2000-01-01 and at most a year ahead, "
                             f"got {value!r}")
    return epoch


def format_due(epoch: float) -> str:
    """Write epoch seconds back as the ISO-8601 UTC text a message carries."""
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat().replace("+00:00", "Z")


def sort_key(priority: int, due: float | None) -> tuple[int, float]:
    """How urgent a job is within its tenant, as a sort key: priority, then due time (none:
    after every due time); age breaks ties (``imposer.state.waiting``'s key sorts alike)."""
    return priority, math.inf if due is None else due


def record_fields(priority: int, due: float | None) -> dict[str, Any]:
    """What a job record keeps of a job's urgency: nothing for the default (no due time)."""
    return {**({"priority": priority} if priority != DEFAULT_PRIORITY else {}),
            **({"due": due} if due is not None else {})}
