"""The figures the benchmark claims for each policy, and the targets they must meet.

One definition, two users: ``scripts/bench_fairness.py`` measures real runs
with it (a run's job records as rows) and the guard tests measure the
simulator's schedules of the same workloads with it, so a change that
quietly turns a policy's feature off fails a test in seconds, not only a
17-minute benchmark on an idle machine.

A row is ``(tenant, submitted, start, end, borrowed)`` of one job, in
seconds from the run's start; the heavy tenant is ``noisy``, every other
tenant is quiet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from imposer.reports.stats import percentile
from imposer.sim.policy import Policy
from imposer.sim.schedule import Schedule
from imposer.sim.state import CALLS

#: The heavy tenant of the benchmark's workloads.
NOISY = "noisy"
#: workload -> (synthetic spec, median run seconds, seed)
WORKLOADS = {
    "mixed": ("noisy=100@0,quiet=5x2@3", 2.0, 7),
    "lone": ("noisy=100@0", 2.0, 8),
    "long": ("noisy=60@0,quiet=5x4@20", 4.0, 9),
    "late": ("noisy=100@0,quiet=5x2@12", 2.0, 7),
}
#: Policies on a strictly ordered queue (no fair-queue delivery).
STRICT = ("fifo", "cap-strict")
#: The benchmark's deferral and park windows and long poll, in seconds.
DEFER, PARK, POLL = 1.0, 300.0, 1
#: How often a borrowing or fair-share host of the benchmark reads who waits (the waiting
#: and share views; IMPOSER_REDRIVE_SECONDS), and every other (the default: a safety net).
REDRIVE, REDRIVE_DEFAULT = 1.0, 5.0


@attrs.frozen(kw_only=True)
class Target:
    """One headline figure of one benchmark run and its bound.

    ``floor`` figures (utilisation) must reach the bound; the others are
    ratios to the reference (perfect delivery of the same policy, or another
    policy's run) that must not exceed it.
    """

    #: (run name, policy) of the measured run, and of the run it is compared with.
    run: tuple[str, str]
    figure: str
    bound: float
    what: str
    #: (run name, policy) of the reference; None: perfect delivery of the same run.
    against: tuple[str, str] | None = None
    floor: bool = False


#: The benchmark's targets, the cap's and borrowing's (docs/benchmarks.rst).
TARGETS = (
    Target(run=("lone", "cap"), figure="makespan", bound=1.10,
           what="lone heavy tenant, cap, 1 host: makespan"),
    Target(run=("lone-2h", "cap"), figure="makespan", bound=1.15,
           what="lone heavy tenant, cap, 2 hosts: makespan"),
    Target(run=("mixed", "cap"), figure="quiet_p95", bound=1.25,
           what="mixed, cap: quiet p95 wait"),
    Target(run=("mixed-2h", "cap"), figure="quiet_p95", bound=1.25,
           what="mixed, cap, 2 hosts: quiet p95 wait"),
    Target(run=("lone", "borrow"), figure="makespan", bound=1.10,
           what="lone heavy tenant, borrow, 1 host: makespan"),
    Target(run=("lone-2h", "borrow"), figure="makespan", bound=1.10,
           what="lone heavy tenant, borrow, 2 hosts: makespan"),
    Target(run=("mixed", "borrow"), figure="util", bound=0.85, floor=True,
           what="mixed, borrow: utilisation"),
    Target(run=("mixed", "borrow"), figure="quiet_p95", bound=1.25,
           what="mixed, borrow: quiet p95 wait"),
    Target(run=("long", "borrow"), figure="util", bound=0.85, floor=True,
           what="long, borrow: utilisation"),
    Target(run=("long", "borrow"), figure="quiet_p95", bound=1.25,
           what="long, borrow: quiet p95 wait"),
    Target(run=("lone", "borrow"), figure="makespan", bound=0.65, against=("lone", "cap"),
           what="lone heavy tenant: makespan borrow/cap"),  # 4/7 = 0.57 at best
)
#: AWS calls per job on a job's own path under the cap (receive, transactions,
#: visibility, the waiting table, job notes): at most this many.
CALLS_PER_JOB = 4.0


def cap_of(policy: str, slots_total: int) -> int:
    """The benchmark's cap: none for ``fifo`` and ``fair`` (every slot), else 4."""
    return slots_total if policy in ("fifo", "fair") else 4


def policy_of(policy: str, hosts: int, slots: int, latency: dict | None = None) -> Policy:
    """A benchmark run's settings as a simulated policy, with the stack's latency (fair
    share's runs: ``fairness.share_policy``, which reads the views every ``REDRIVE`` too)."""
    latency = latency or {}
    return Policy(hosts=hosts, slots=slots, cap=cap_of(policy, hosts * slots),
                  borrow=policy == "borrow", reserve=1, fair_queues=policy not in STRICT,
                  park_seconds=PARK, defer_seconds=DEFER, poll_seconds=POLL,
                  redrive_seconds=REDRIVE if policy == "borrow" else REDRIVE_DEFAULT,
                  call_seconds=latency.get("call", 0.0),
                  receive_seconds=latency.get("receive", 0.0))


def path_calls(schedule: Schedule) -> float:
    """AWS calls per job on a job's own path, as the benchmark counts them: every call
    but the tenants' cap reads and a success's plate promotion and message delete."""
    c, jobs = schedule.counts, len(schedule.jobs)
    settled = sum(1 for s in schedule.status if s == "succeeded")
    return (c["calls"] - c["cap_reads"] - settled * (CALLS["succeeded"] - 1)) / jobs


def rows_of_schedule(schedule: Schedule, since: Sequence[float] | None = None) -> list[tuple]:
    """(tenant, submitted, start, end, borrowed) per simulated job; *since* replaces each
    job's arrival as its submission (a replayed run's own)."""
    borrowed = {a.job for a in schedule.attempts if a.borrowed}
    return [(j.tenant, j.arrival if since is None else since[i], schedule.first_start[i],
             schedule.end[i], i in borrowed) for i, j in enumerate(schedule.jobs)]


def measure(rows: Sequence[tuple], slots_total: int) -> dict[str, float]:
    """The figures compared side by side, the same way for real and simulated runs."""
    quiet = [s - a for t, a, s, e, b in rows if t != NOISY]
    return {"quiet_p95": percentile(quiet, 95) if quiet else float("nan"),
            "makespan": max(e for *_, e, b in rows),
            "util": utilisation(rows, slots_total),
            "max_noisy": overlap([(s, e) for t, a, s, e, b in rows if t == NOISY])}


def overlap(spans: Sequence[tuple[float, float]]) -> int:
    """The most spans open at once (ends before starts at the same instant)."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                   key=lambda e: (e[0], e[1]))
    held = best = 0
    for _, step in edges:
        held += step
        best = max(best, held)
    return best


def utilisation(rows: Sequence[tuple], slots: int) -> float:
    """Busy slot-seconds over slot-seconds during which work was eligible (arrived,
    unfinished), counting no more slots than there was work."""
    busy = sum(e - s for t, a, s, e, b in rows)
    edges = sorted([(max(0.0, a), 1) for t, a, s, e, b in rows] +
                   [(e, -1) for t, a, s, e, b in rows])
    total, level, last = 0.0, 0, None
    for at, step in edges:
        if last is not None and level > 0:
            total += (at - last) * min(level, slots) / slots
        level += step
        last = at
    return busy / (slots * total) if total else float("nan")


def judge(target: Target, figures: Mapping[str, float],
          reference: Mapping[str, float]) -> tuple[float, bool]:
    """The target's value (the figure, or its ratio to *reference*) and whether it is met."""
    if target.floor:
        value = figures[target.figure]
        return value, value >= target.bound
    value = figures[target.figure] / reference[target.figure]
    return value, value <= target.bound
