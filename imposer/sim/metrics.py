"""One variant's figures, and the licence rule's verdict on what the simulated fleet did.

The verdict is ``imposer.reports.capacity``'s own, applied to the host-hours
the simulated hosts would have written to the rollups (busy slot-seconds
and a wait histogram per host and hour), so `imposer simulate` and
`imposer capacity` judge a fleet the same way.
"""

from __future__ import annotations

import collections
import datetime
import math
from typing import Mapping, Sequence
from zoneinfo import ZoneInfo

import attrs

from imposer.reports.capacity import Thresholds, Verdict, daily_hours, judge
from imposer.reports.history import HOUR, HostHour
from imposer.reports.stats import percentile
from imposer.sim.policy import Policy
from imposer.sim.schedule import Schedule
from imposer.state.rollups import WAIT_EDGES, bucket, hour_of


@attrs.frozen(kw_only=True)
class Waits:
    """Queue waits (submission to first start) of a group of jobs, in seconds."""

    jobs: int
    p50: float | None
    p95: float | None

    @classmethod
    def of(cls, waits: Sequence[float]) -> "Waits":
        return cls(jobs=len(waits), p50=percentile(waits, 50), p95=percentile(waits, 95))


@attrs.frozen(kw_only=True)
class Figures:
    """What one variant would have done with the workload."""

    policy: Policy
    jobs: int
    #: Jobs that never started: their tenant is paused (cap 0).
    paused: int
    #: Busy slot-seconds over slot-seconds from the first arrival to the last end.
    utilisation: float
    #: Share of starts that waited longer than the licence rule's threshold.
    slow_share: float
    per_tenant: Mapping[str, Waits]
    quiet: Waits
    heavy: Waits
    #: Tenants that sent more than an equal share of the work (run seconds).
    heavy_tenants: tuple[str, ...]
    #: First arrival to last end, over the whole workload and on its busiest day.
    makespan: float
    busiest_day: str | None
    busiest_makespan: float | None
    verdict: Verdict
    counts: Mapping[str, int]
    #: Waits per priority (0 most urgent), and of the jobs with a due time how many
    #: started after it (or never).
    per_priority: Mapping[int, Waits] = attrs.field(factory=dict)
    with_due: int = 0
    late: int = 0

    def to_dict(self) -> dict:
        p = self.policy
        return {
            "hosts": p.hosts, "slots": p.slots, "cap": p.cap, "caps": dict(p.caps),
            "borrow": p.borrow, "reserve": p.reserve if p.borrow else None,
            "express": list(p.express),
            "share_half_life": p.half_life or None,
            "weights": dict(p.weights) if p.sharing else None,
            "jobs": self.jobs, "paused": self.paused,
            "utilisation": round(self.utilisation, 4), "slow_share": round(self.slow_share, 4),
            "waits": {t: attrs.asdict(w) for t, w in sorted(self.per_tenant.items())},
            "quiet": attrs.asdict(self.quiet), "heavy": attrs.asdict(self.heavy),
            "heavy_tenants": list(self.heavy_tenants), "makespan": round(self.makespan, 3),
            "busiest_day": self.busiest_day,
            "busiest_day_makespan": None if self.busiest_makespan is None
            else round(self.busiest_makespan, 3),
            "verdict": self.verdict.text, "at_capacity": self.verdict.at_capacity,
            "busy_days": self.verdict.busy_days, "working_days": self.verdict.working_days,
            "counts": dict(self.counts),
            "priorities": {str(p): attrs.asdict(w) for p, w in sorted(self.per_priority.items())},
            "due": {"jobs": self.with_due, "started_late": self.late},
        }


def window_of(schedule: Schedule, tz: str = "UTC") -> tuple[float, float]:
    """Whole days from the first arrival's to the last end's: (window end, its length)."""
    zone = ZoneInfo(tz)
    first = min((j.arrival for j in schedule.jobs), default=0.0)
    last = max([e for e in schedule.end if e is not None] + [first])
    lo = datetime.datetime.fromtimestamp(first, zone).replace(hour=0, minute=0, second=0,
                                                                microsecond=0)
    hi = datetime.datetime.fromtimestamp(last, zone).replace(hour=0, minute=0, second=0,
                                                               microsecond=0)
    hi += datetime.timedelta(days=1)
    return hi.timestamp(), hi.timestamp() - lo.timestamp()


def host_hours(schedule: Schedule) -> list[HostHour]:
    """The rollup rows the simulated hosts would have written: busy time and waits per hour."""
    busy: dict[tuple[int, int], float] = collections.defaultdict(float)
    started: collections.Counter = collections.Counter()
    waits: dict[tuple[int, int], list[int]] = collections.defaultdict(
        lambda: [0] * (len(WAIT_EDGES) + 1))
    jobs = schedule.jobs
    for a in schedule.attempts:
        key = (hour_of(a.start), a.host)
        started[key] += 1
        waits[key][bucket(max(0.0, a.start - jobs[a.job].arrival))] += 1
        start = a.start
        while start < a.end:
            stop = min(a.end, hour_of(start) + HOUR)
            busy[(hour_of(start), a.host)] += stop - start
            start = stop
    slots = schedule.policy.slots
    return [HostHour(hour=h, host=f"sim-{host + 1}", slots=slots, busy=busy.get((h, host), 0.0),
                     started=started.get((h, host), 0),
                     waits=tuple(waits[(h, host)]) if (h, host) in waits
                     else (0,) * (len(WAIT_EDGES) + 1))
            for h, host in sorted(set(busy) | set(started))]


def verdict_of(schedule: Schedule, *, thresholds: Thresholds | None = None,
               now: float | None = None) -> Verdict:
    """The licence rule on the simulated fleet, over its host-hours.

    Without *now*, the window is the workload's whole days; days before the
    first arrival count neither way, as days before imposer's first record do.
    """
    t = thresholds or Thresholds()
    if now is None:
        now, length = window_of(schedule, t.tz)
        t = attrs.evolve(t, window_seconds=length)
    rows = host_hours(schedule)
    days = daily_hours(rows, slots_total=schedule.policy.slots_total, now=now, thresholds=t)
    first = min((j.arrival for j in schedule.jobs), default=now)
    first_day = datetime.datetime.fromtimestamp(first, ZoneInfo(t.tz)).date()
    days = [d if d.date >= first_day
            else attrs.evolve(d, working=False, utilisation=None, data=False) for d in days]
    return judge(days, slots_total=schedule.policy.slots_total, now=now, thresholds=t)


def heavy_tenants(schedule: Schedule) -> tuple[str, ...]:
    """Tenants whose run seconds are more than an equal share of all (a lone tenant is heavy)."""
    work: collections.Counter = collections.Counter()
    for j in schedule.jobs:
        work[j.tenant] += j.run
    total = sum(work.values())
    if len(work) == 1:
        return tuple(work)
    return tuple(sorted(t for t, w in work.items() if total and w / total > 1 / len(work)))


def figures(schedule: Schedule, *, thresholds: Thresholds | None = None,
            now: float | None = None) -> Figures:
    """Every figure of one variant's row."""
    t = thresholds or Thresholds()
    jobs = schedule.jobs
    waits: dict[str, list[float]] = collections.defaultdict(list)
    by_priority: dict[int, list[float]] = collections.defaultdict(list)
    for i, start in enumerate(schedule.first_start):
        if start is not None:
            waits[jobs[i].tenant].append(start - jobs[i].arrival)
            by_priority[jobs[i].priority].append(start - jobs[i].arrival)
    heavy = heavy_tenants(schedule)
    busy = sum(a.end - a.start for a in schedule.attempts)
    first = min((j.arrival for j in jobs), default=0.0)
    ends = [e for e in schedule.end if e is not None]
    makespan = (max(ends) - first) if ends else 0.0
    span = makespan * schedule.policy.slots_total
    verdict = verdict_of(schedule, thresholds=t, now=now)
    day, day_span = busiest_day(schedule, t.tz)
    return Figures(
        policy=schedule.policy, jobs=len(jobs),
        paused=sum(1 for s in schedule.status if s == "paused"),
        utilisation=busy / span if span else 0.0, slow_share=verdict.slow_job_share,
        per_tenant={tn: Waits.of(w) for tn, w in waits.items()},
        quiet=Waits.of([w for tn, ws in waits.items() if tn not in heavy for w in ws]),
        heavy=Waits.of([w for tn, ws in waits.items() if tn in heavy for w in ws]),
        heavy_tenants=heavy, makespan=makespan, busiest_day=day, busiest_makespan=day_span,
        verdict=verdict, counts=schedule.counts,
        per_priority={p: Waits.of(w) for p, w in by_priority.items()},
        with_due=sum(1 for j in jobs if j.due is not None), late=len(late_jobs(schedule)))


def late_jobs(schedule: Schedule) -> list[int]:
    """The jobs with a due time that started after it, or never (by index)."""
    return [i for i, j in enumerate(schedule.jobs) if j.due is not None and
            (schedule.first_start[i] is None or schedule.first_start[i] > j.due)]


def busiest_day(schedule: Schedule, tz: str = "UTC") -> tuple[str | None, float | None]:
    """The arrival day with the most run seconds, and its first arrival to its last end."""
    zone = ZoneInfo(tz)
    work: collections.Counter = collections.Counter()
    bounds: dict[datetime.date, list[float]] = {}
    for i, job in enumerate(schedule.jobs):
        day = datetime.datetime.fromtimestamp(job.arrival, zone).date()
        work[day] += job.run
        end = schedule.end[i]
        lo_hi = bounds.setdefault(day, [math.inf, -math.inf])
        lo_hi[0] = min(lo_hi[0], job.arrival)
        if end is not None:
            lo_hi[1] = max(lo_hi[1], end)
    if not work:
        return None, None
    day = max(work, key=lambda d: (work[d], d))
    lo, hi = bounds[day]
    return day.isoformat(), (hi - lo) if hi > -math.inf else None

