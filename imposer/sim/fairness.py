"""Fair share's figures and targets (issue 30): licence time split by weight, measured alike
on real runs and on the simulator's schedules.

Rows are the benchmark's, ``(tenant, submitted, start, end, borrowed)`` per
job (``headline``). Three tenants are backlogged on 8 slots with caps of 4,
and one of them (``c`` or ``a``) has jobs 4x longer; what counts is how each
tenant's licence-seconds split while all three still have work waiting,
against its weighted share (``policy.weighted_shares``: the weights'
parts, water-filled under the caps). A late tenant arriving while two
others saturate the slots must start at the first slot freed after it
arrives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from imposer.reports.stats import percentile
from imposer.sim.headline import REDRIVE, policy_of
from imposer.worker import policy as rules

#: The usage half-life of the benchmark's fair-share runs, seconds (longer than the runs:
#: the split is of the whole backlogged stretch).
HALF_LIFE = 600.0
#: workload -> (synthetic spec, median run seconds, seed). ``share``: three backlogged
#: tenants, c's jobs 4x longer; ``share-long-a``: the same with a's jobs the long ones;
#: ``arrival``: two tenants saturate 8 slots at their caps, six late tenants come one by one.
WORKLOADS = {
    "share": ("a=120@0,b=120@0,c=40@0*4", 2.0, 11),
    "share-long-a": ("a=40@0*4,b=120@0,c=120@0", 2.0, 12),
    "arrival": ("a=60@0,b=60@0,late=1x6@10/60", 6.0, 13),
}
#: The weightings measured: equal, and 3:1:1 on the tenant named (its share is bounded
#: by its cap of 4 of 8 slots: a half, the rest split evenly).
WEIGHTS = {"equal": {}, "3:1:1": {"a": 3.0}}
#: Each tenant's licence-seconds within this fraction of its weighted share.
SHARE_TOLERANCE = 0.10
#: Jain's index of weight-normalised licence-seconds at least this.
JAIN_FLOOR = 0.95
#: A late tenant's p95 wait for its first slot, over the p95 time to the next job end.
ARRIVAL_BOUND = 1.2
#: Seconds a late tenant's start may lag the first slot freed after it arrived.
GRACE = 0.25


def backlog_end(rows: Sequence[tuple]) -> float:
    """When the first tenant's backlog ran out: the earliest of tenants' last starts."""
    last: dict[str, float] = {}
    for t, a, s, e, b in rows:
        last[t] = max(last.get(t, s), s)
    return min(last.values())


def licence_seconds(rows: Sequence[tuple], until: float) -> dict[str, float]:
    """Each tenant's slot-seconds from the run's start to *until*."""
    out: dict[str, float] = {}
    for t, a, s, e, b in rows:
        out[t] = out.get(t, 0.0) + max(0.0, min(e, until) - s)
    return out


def split(rows: Sequence[tuple]) -> dict[str, float]:
    """Each tenant's fraction of the licence-seconds while every tenant was backlogged."""
    used = licence_seconds(rows, backlog_end(rows))
    total = sum(used.values())
    return {t: u / total for t, u in sorted(used.items())}


def targets(tenants: Sequence[str], weights: Mapping[str, float], cap: int,
            slots: int) -> dict[str, float]:
    """Each tenant's weighted share (the policy's own, under the caps)."""
    return rules.weighted_shares([rules.TenantShare(tenant=t, weight=weights.get(t, 1.0),
                                                    cap=cap) for t in tenants], slots)


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all are equal, 1/n when one has everything."""
    total, squares = sum(values), sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares else 1.0


def share_figures(rows: Sequence[tuple], weights: Mapping[str, float], cap: int = 4,
                  slots: int = 8) -> dict:
    """The split, its targets, the worst relative miss, and Jain's index of the
    licence-seconds each tenant had per unit of its share."""
    got = split(rows)
    want = targets(list(got), weights, cap, slots)
    return {"split": got, "target": want,
            "worst": max(abs(got[t] - want[t]) / want[t] for t in got),
            "jain": jain([got[t] / want[t] for t in got])}


def arrival_figures(rows: Sequence[tuple], late: str = "late") -> dict:
    """Late tenants' first waits against the time from their arrival to the next job end:
    the p95s' ratio, and the fraction that started in the first slot freed after they
    arrived (a slot freed within ``GRACE`` of the arrival may be missed, and the start
    may take as long: a receive and a transaction)."""
    ends = sorted(e for *_, e, b in rows)
    waits, gaps, first = [], [], 0
    for t, a, s, e, b in rows:
        if t.startswith(late):
            waits.append(s - a)
            gaps.append(min((x for x in ends if x > a), default=s) - a)
            first += s <= min((x for x in ends if x > a + GRACE), default=s) + GRACE
    ratio = percentile(waits, 95) / percentile(gaps, 95) if gaps else float("nan")
    return {"wait_p95": percentile(waits, 95), "next_end_p95": percentile(gaps, 95),
            "ratio": ratio, "first_slot": first / len(waits) if waits else float("nan")}


def share_policy(policy: str = "cap", hosts: int = 1, slots: int = 8,
                 latency: dict | None = None, weights: Mapping[str, float] | None = None,
                 half_life: float = HALF_LIFE):
    """A benchmark policy (``headline.policy_of``) with fair share on: the half-life, the
    weights (``{}``: all 1) and, fair share on, the views read every ``REDRIVE``."""
    return attrs.evolve(policy_of(policy, hosts, slots, latency), half_life=half_life,
                        weights=dict(weights or {}),
                        **({"redrive_seconds": REDRIVE} if half_life > 0 else {}))
