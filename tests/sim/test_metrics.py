"""A variant's figures, and the licence rule applied to what the simulated fleet did."""

from __future__ import annotations

import pytest

from imposer.models import JobRecord, JobStatus
from imposer.reports.capacity import Thresholds, evaluate
from imposer.sim.engine import Policy, simulate
from imposer.sim.metrics import busiest_day, figures, heavy_tenants, verdict_of
from imposer.sim.workload import SimJob

#: Monday 2024-01-01 00:00 UTC.
MONDAY = 1704067200.0
HOUR = 3600.0


def four_weeks(per_hour: dict[int, int]) -> list[SimJob]:
    """Hour-long jobs arriving on the hour, 08:00-17:00 of each working day; *per_hour[day]*."""
    jobs = []
    for day in range(28):
        if day % 7 >= 5:
            continue
        for hour in range(8, 18):
            for n in range(per_hour.get(day, 0)):
                jobs.append(SimJob(tenant=f"t{n}", arrival=MONDAY + day * 86400 + hour * HOUR,
                                   run=HOUR, job_id=f"{day}-{hour}-{n}"))
    return jobs


def records_of(schedule) -> list[JobRecord]:
    """The job records the fleet would have written, for the rule over records."""
    out = []
    for i, job in enumerate(schedule.jobs):
        start = schedule.first_start[i]
        out.append(JobRecord(job_id=job.job_id, tenant_id=job.tenant,
                             status=JobStatus.SUCCEEDED, submitted_at=job.arrival,
                             started_at=start, finished_at=schedule.end[i],
                             queue_wait=start - job.arrival, host="h"))
    return out


class TestVerdict:
    @pytest.mark.parametrize("busy,crowded", [(7, 0), (7, 11), (4, 0), (9, 12)])
    def test_host_hours_give_the_rule_over_records(self, busy, crowded):
        """The rule over simulated host-hours says what it says over the same jobs' records."""
        days = [d for d in range(28) if d % 7 < 5]
        load = {d: busy + (2 if d in days[:crowded] else 0) for d in days}
        schedule = simulate(four_weeks(load), Policy(slots=8, cap=8))
        now = MONDAY + 28 * 86400
        t = Thresholds(window_seconds=28 * 86400)
        sim = verdict_of(schedule, thresholds=t, now=now)
        ref = evaluate(records_of(schedule), slots_total=8, now=now, thresholds=t)
        assert (sim.working_days, sim.busy_days, sim.jobs, sim.slow_jobs, sim.text) == \
            (ref.working_days, ref.busy_days, ref.jobs, ref.slow_jobs, ref.text)

    def test_more_slots_take_a_fleet_out_of_capacity(self):
        """Nine hour-long jobs an hour on 8 slots is at capacity; on 10 it is not."""
        jobs = four_weeks({d: 9 for d in range(28)})
        assert figures(simulate(jobs, Policy(slots=8, cap=8))).verdict.at_capacity
        assert not figures(simulate(jobs, Policy(slots=10, cap=8))).verdict.at_capacity

    def test_the_window_defaults_to_the_workloads_days(self):
        """Without a window, days before the first arrival count neither way."""
        jobs = [SimJob(tenant="a", arrival=MONDAY + 2 * 86400 + 9 * HOUR, run=60)]
        v = verdict_of(simulate(jobs, Policy()))
        assert v.working_days == 1 and v.jobs == 1


class TestFigures:
    WORK = [SimJob(tenant="big", arrival=MONDAY + n, run=100) for n in range(20)] + \
        [SimJob(tenant=f"small{n}", arrival=MONDAY + 50, run=10) for n in range(3)]

    def test_heavy_tenants_send_more_than_an_equal_share(self):
        """One tenant with most of the run time is heavy; a lone tenant is heavy too."""
        assert heavy_tenants(simulate(self.WORK, Policy())) == ("big",)
        assert heavy_tenants(simulate(self.WORK[:3], Policy())) == ("big",)

    def test_quiet_and_heavy_waits_are_split(self):
        """The cap keeps the quiet tenants' waits short while the heavy one queues."""
        f = figures(simulate(self.WORK, Policy(slots=8, cap=4).perfect()))
        assert f.quiet.jobs == 3 and f.heavy.jobs == 20
        assert f.quiet.p95 == 0 and f.heavy.p95 > 300
        assert set(f.per_tenant) == {"big", "small0", "small1", "small2"}

    def test_busiest_day_is_the_one_with_most_work(self):
        """The second day carries more run time: its makespan is first arrival to last end."""
        jobs = [SimJob(tenant="a", arrival=MONDAY + 9 * HOUR, run=60),
                SimJob(tenant="a", arrival=MONDAY + 86400 + 9 * HOUR, run=600),
                SimJob(tenant="a", arrival=MONDAY + 86400 + 10 * HOUR, run=60)]
        day, span = busiest_day(simulate(jobs, Policy()))
        assert (day, span) == ("2024-01-02", HOUR + 60)

    def test_utilisation_is_busy_over_the_span(self):
        """Two 10 s jobs on two slots, both at once: fully used."""
        jobs = [SimJob(tenant="a", arrival=0, run=10), SimJob(tenant="b", arrival=0, run=10)]
        assert figures(simulate(jobs, Policy(slots=2))).utilisation == 1.0
