"""Rush jobs and due times (docs/priority.rst): the workloads, their figures, their targets.

One definition, two users, as ``headline`` is for the policies: ``scripts/bench_fairness.py
--rush`` measures real runs with it and ``tests/sim/test_rush.py`` the simulator's
schedules of the same workloads, so a change that loses the order within a tenant fails
a test in seconds.

Each workload runs twice: as sent, and *plain* (the same jobs and arrivals with every
priority and due time dropped, so arrival order decides; for ``rush`` the heavy tenant's
run times dealt in the order its jobs started with priorities, see ``twin``). A row is
``(tenant, submitted, start, end, priority, due)`` of one job, in seconds from the run's
start, in the workload's job order; a plain run's rows keep the jobs' due times (they
are what "late" is judged by) and their priorities (what names a job rush or bulk).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from imposer.models.urgency import DEFAULT_PRIORITY
from imposer.reports.stats import percentile
from imposer.sim.engine import simulate
from imposer.sim.headline import NOISY
from imposer.sim.policy import Policy
from imposer.sim.schedule import Schedule
from imposer.sim.workload import SimJob, synthetic

#: workload -> (synthetic spec, median run seconds, seed). ``rush``: the heavy tenant's
#: 100 bulk jobs are parked at its cap when it sends 5 rush jobs (priority 0) at 20 s; two
#: quiet tenants send 5 each at 24 s. ``due``: 60 jobs due in 10 minutes, then 20 more
#: over 4-12 s due 15 s after they are sent; arrival order starts those after the 60.
WORKLOADS = {
    "rush": ("noisy=100@0,noisy=5@20!0,quiet=5x2@24", 4.0, 12),
    "due": ("noisy=60@0~10m,noisy=20@4/8~15s", 2.0, 13),
}


@attrs.frozen
class Target:
    what: str
    figure: str
    bound: float
    floor: bool = False  #: the figure must reach the bound (else: not exceed it)

    def met(self, value: float) -> bool:
        if value != value:  # NaN: the run did not show what the target is about
            return False
        return value >= self.bound if self.floor else value <= self.bound


#: The targets (docs/benchmarks.rst, "Rush jobs and due times").
TARGETS = (
    Target("rush: p95 wait / wait for the tenant's next slot", "rush_p95", 1.2),
    Target("rush: bulk jobs' start order kept (pairs)", "bulk_order", 0.95, floor=True),
    Target("rush: quiet p95 wait, with/without priorities", "quiet_ratio", 1.15),
    Target("due: jobs started late, with/without due times", "late_ratio", 0.5),
)


def plain(jobs: Sequence[SimJob]) -> list[SimJob]:
    """The same jobs with no priority or due time: what arrival order does with them."""
    return [attrs.evolve(j, priority=DEFAULT_PRIORITY, due=None) for j in jobs]


def twin(jobs: Sequence[SimJob], rows: Sequence[tuple], tenant: str = NOISY) -> list[SimJob]:
    """``plain(jobs)``, with *tenant*'s run times dealt out in the order its jobs started in
    *rows* (the run with priorities): its n-th job in arrival order runs as long as its
    n-th start did. The tenant then holds its slots for the same spans in both runs, so
    any change in another tenant's waits is the priorities' doing, not a different draw
    of which job happened to end when."""
    out = plain(jobs)
    mine = [i for i, j in enumerate(jobs) if j.tenant == tenant]
    started = sorted((i for i in mine if rows[i][2] is not None), key=lambda i: rows[i][2])
    arrived = sorted(mine, key=lambda i: (jobs[i].arrival, i))
    for slot, i in zip(arrived, started):
        out[slot] = attrs.evolve(out[slot], run=jobs[i].run)
    return out


def reference(name: str, jobs: Sequence[SimJob], rows: Sequence[tuple]) -> list[SimJob]:
    """What workload *name*'s *jobs* are run as to compare with *rows*, their run as sent."""
    return twin(jobs, rows) if name == "rush" else plain(jobs)


def simulated(name: str, policy: Policy, seed: int | None = None) -> tuple[list, list]:
    """Rows of workload *name* simulated under *policy*: as sent, and its reference."""
    spec, median, default = WORKLOADS[name]
    jobs = synthetic(spec, median=median, seed=default if seed is None else seed)
    rows = rows_of_schedule(simulate(jobs, policy), jobs)
    return rows, rows_of_schedule(simulate(reference(name, jobs, rows), policy), jobs)


#: Seeded draws the simulator's rush figure is pooled over: one draw can send a rush job
#: within one receive of an end, and that end is then a bulk job's (docs/priority.rst).
DRAWS = range(30)


def pooled_rush_ratios(policy: Policy) -> list[float]:
    """``rush_ratios`` of the rush workload simulated under *policy*, over ``DRAWS``."""
    spec, median, _ = WORKLOADS["rush"]
    out = []
    for seed in DRAWS:
        jobs = synthetic(spec, median=median, seed=seed)
        out += rush_ratios(rows_of_schedule(simulate(jobs, policy), jobs))
    return out


def rows_of_schedule(schedule: Schedule, jobs: Sequence[SimJob]) -> list[tuple]:
    """Rows of a simulated run of *jobs* (or of their ``plain`` twins)."""
    return [(j.tenant, j.arrival, schedule.first_start[i], schedule.end[i], j.priority, j.due)
            for i, j in enumerate(jobs)]


def rush_ratios(rows: Sequence[tuple], tenant: str = NOISY) -> list[float]:
    """For each of *tenant*'s rush jobs (priority above the default), its wait over the
    time from its submission to the tenant's k-th start after it, k the rush job's rank by
    start. The tenant's next slot is the next end of one of its running jobs, unless
    another tenant's turn takes that slot (caps and fair share are not a rush job's to
    overrule): 1.0 for each is "the rush jobs took the tenant's next k slots"; a bulk job
    of the tenant started before a rush job that had been sent makes it more."""
    mine = [r for r in rows if r[0] == tenant and r[2] is not None]
    rush = sorted((r for r in mine if r[4] < DEFAULT_PRIORITY), key=lambda r: r[2])
    starts = sorted(r[2] for r in mine)
    out = []
    for k, (_, submitted, start, *_rest) in enumerate(rush, 1):
        after = [s for s in starts if s >= submitted]
        gap = after[k - 1] - submitted if len(after) >= k else start - submitted
        out.append((start - submitted) / gap if gap > 0 else 1.0)
    return out


def order_kept(rows: Sequence[tuple], reference: Sequence[tuple], tenant: str = NOISY) -> float:
    """Of every pair of *tenant*'s bulk jobs (default priority), the share that started in
    the same order in both runs (rows line up job by job)."""
    bulk = [i for i, r in enumerate(rows) if r[0] == tenant and r[4] == DEFAULT_PRIORITY
            and r[2] is not None and reference[i][2] is not None]
    pairs = same = 0
    for n, i in enumerate(bulk):
        for j in bulk[n + 1:]:
            pairs += 1
            same += (rows[i][2] < rows[j][2]) == (reference[i][2] < reference[j][2])
    return same / pairs if pairs else float("nan")


def late(rows: Sequence[tuple]) -> int:
    """Jobs with a due time that started after it, or never."""
    return sum(1 for _, _, start, _, _, due in rows
               if due is not None and (start is None or start > due))


def quiet_p95(rows: Sequence[tuple]) -> float:
    waits = [s - a for t, a, s, *_ in rows if t != NOISY and s is not None]
    return percentile(waits, 95) if waits else float("nan")


def figures(rush: Sequence[tuple] | None, rush_plain: Sequence[tuple] | None,
            due: Sequence[tuple] | None, due_plain: Sequence[tuple] | None) -> dict:
    """Every target's figure from the runs measured (a run not measured: no figure)."""
    out: dict[str, float] = {}
    if rush is not None:
        ratios = rush_ratios(rush)
        out["rush_p95"] = percentile(ratios, 95) if ratios else float("nan")
        out["rush_max"] = max(ratios, default=float("nan"))
    if rush is not None and rush_plain is not None:
        out["bulk_order"] = order_kept(rush, rush_plain)
        plain_p95 = quiet_p95(rush_plain)
        out["quiet_ratio"] = quiet_p95(rush) / plain_p95 if plain_p95 else float("nan")
    if due is not None and due_plain is not None:
        out["late"], out["late_plain"] = late(due), late(due_plain)
        # Nothing late in arrival order: the workload shows nothing (NaN, so NOT MET).
        out["late_ratio"] = out["late"] / out["late_plain"] if out["late_plain"] \
            else float("nan")
    return out


def verdicts(found: dict) -> list[tuple[Target, float, bool]]:
    """(target, value, met) for each target whose figure was measured."""
    return [(t, found[t.figure], t.met(found[t.figure])) for t in TARGETS
            if t.figure in found]
