"""A tenant's decayed licence-seconds (fair share): the arithmetic of its usage item.

Written once and read by both sides: the release transaction ADDs a charge
(``imposer.state.lease_items.charge``), the share rule
(``imposer.worker.policy``) and the reports read the total back. Decay is
lazy, worked out when read; a charge is scaled up to its era's base
(forward decay, Cormode et al., ICDE 2009) so no write ever needs a read.
"""

from __future__ import annotations

import math
from typing import Mapping

#: A tenant's usage is kept as forward-decayed terms, one per era of this many half-lives.
ERA_HALF_LIVES = 64


def decayed(usage: float, elapsed: float, half_life: float) -> float:
    """Decay *usage* over *elapsed* seconds: ``usage * 2^(-elapsed / half_life)``.

    This is Slurm's ``PriorityDecayHalfLife`` and Kueue's ``usageHalfLifeTime``
    (lazy: worked out when read, never by a periodic pass). A half-life of 0
    turns the decay off, and with it fair share (the count caps alone decide).
    """
    if half_life <= 0 or elapsed <= 0:
        return usage
    return usage * 2.0 ** (-elapsed / half_life)


def era_of(at: float, half_life: float) -> int:
    """The era of time *at*: forward decay's base moves every ``ERA_HALF_LIVES`` half-lives."""
    return math.floor(at / (ERA_HALF_LIVES * half_life))


def forward_charge(seconds: float, at: float, half_life: float) -> tuple[int, float]:
    """The term a job's *seconds* ending at *at* add to its tenant's usage: (era, amount).

    Forward decay (Cormode et al., ICDE 2009): rather than decay the stored
    total on every write (a read, then a conditional write), each charge is
    scaled up by ``2^((at - base) / half_life)`` from its era's base, so the
    release transaction only ADDs it, in any order, from any host, and a read
    scales the total back down to now (``usage_at``). The era keeps the scale
    below ``2^ERA_HALF_LIVES`` (a DynamoDB number has 38 digits).
    """
    era = era_of(at, half_life)
    base = era * ERA_HALF_LIVES * half_life
    return era, seconds * 2.0 ** ((at - base) / half_life)


def usage_at(terms: Mapping[int, float], now: float, half_life: float) -> float:
    """A tenant's decayed licence-seconds at *now*, from its forward-decayed *terms*
    (era -> the sum of its charges), as ``decayed`` would give for each charge."""
    if half_life <= 0:
        return sum(terms.values())
    span = ERA_HALF_LIVES * half_life
    return sum(amount * 2.0 ** (-(now - era * span) / half_life)
               for era, amount in terms.items())


def fold(terms: Mapping[int, float], era: int, amount: float) -> dict[int, float]:
    """Add one charge to *terms*, keeping only the current and the previous era (an older
    era's charges have decayed by at least ``2^-ERA_HALF_LIVES``: nothing)."""
    out = {e: a for e, a in terms.items() if e >= era - 1}
    out[era] = out.get(era, 0.0) + amount
    return out


#: How much one finished run moves a tenant's typical run length (an exponentially
#: weighted mean: the last run weighs 0.3, the one before 0.21, ...).
TYPICAL_WEIGHT = 0.3


def typical_run(previous: float | None, seconds: float) -> float:
    """A tenant's typical run length after a run of *seconds* ends (*previous*: None for
    its first)."""
    if previous is None:
        return seconds
    return previous + TYPICAL_WEIGHT * (seconds - previous)


def running_usage(starts, now: float, typical: float = 0.0) -> float:
    """The licence-seconds a tenant's running jobs (started at *starts*) count for now:
    each its time so far, or its tenant's *typical* run if longer.

    A job just started is counted as the licence time it is about to use, not
    as nothing: else a tenant with long jobs, just below its share, would be
    given a slot at each one that frees before the first of them is charged
    (its share overshot by a few long jobs). Its release charges what it really
    ran, and the job counts here no more.
    """
    return sum(max(typical, now - s) for s in starts)
