"""Workloads: the synthetic generator, job records and `imposer jobs --export` lines."""

from __future__ import annotations

import json

import attrs
import pytest

from imposer.errors import ConfigError
from imposer.models import JobRecord, JobStatus
from imposer.sim.engine import Policy, simulate
from imposer.sim.metrics import figures
from imposer.sim.workload import SimJob, fates_of, from_jsonl, from_records, synthetic


def record(**fields) -> JobRecord:
    base = dict(job_id="j1", tenant_id="acme", status=JobStatus.SUCCEEDED, submitted_at=100.0,
                started_at=110.0, finished_at=130.0, run_seconds=19.5, attempts=1)
    base.update(fields)
    return JobRecord(**base)


class TestSynthetic:
    def test_parts_name_tenants_and_arrivals(self):
        """``quiet=5x2@3`` is five jobs each for quiet-a and quiet-b, arriving at 3 s."""
        jobs = synthetic("noisy=100@0,quiet=5x2@3", median=2, seed=7)
        assert [(t, sum(1 for j in jobs if j.tenant == t)) for t in
                ("noisy", "quiet-a", "quiet-b")] == [("noisy", 100), ("quiet-a", 5),
                                                     ("quiet-b", 5)]
        assert {j.arrival for j in jobs if j.tenant != "noisy"} == {3.0}

    def test_run_times_are_clipped_log_normal(self):
        """Run times stay within 0.3-4 times the median, and their median is near it."""
        runs = sorted(j.run for j in synthetic("a=2001@0", median=60, seed=1))
        assert 0.3 * 60 <= runs[0] and runs[-1] <= 4 * 60
        assert 55 <= runs[1000] <= 65

    def test_spread_arrivals_stay_in_their_span(self):
        """``/2h`` spreads the part's arrivals over two hours after its start."""
        jobs = synthetic("a=50@1h/2h", seed=3)
        assert all(3600 <= j.arrival <= 3 * 3600 for j in jobs)
        assert len({j.arrival for j in jobs}) == 50

    def test_the_benchmark_workloads_give_the_issues_figures(self):
        """The lone tenant's 100 jobs (seed 8) under the cap with instant delivery: 56.4 s."""
        lone = simulate(synthetic("noisy=100@0", median=2, seed=8), Policy(cap=4).perfect())
        assert figures(lone).makespan == pytest.approx(56.4, abs=0.05)
        mixed = synthetic("noisy=100@0,quiet=5x2@3", median=2, seed=7)
        assert figures(simulate(mixed, Policy(cap=4).perfect())).makespan == \
            pytest.approx(52.5, abs=0.05)

    @pytest.mark.parametrize("spec", ["noisy", "noisy=x", "=5", "a=5@soon", ""])
    def test_bad_specs_are_refused(self, spec):
        """A part that does not parse, or no jobs at all, is a configuration error."""
        with pytest.raises(ConfigError):
            synthetic(spec)


class TestRecords:
    def test_a_record_becomes_one_job(self):
        """Arrival is the submission, run the last attempt's run time."""
        (job,) = from_records([record()])
        assert (job.tenant, job.arrival, job.run, job.fates) == ("acme", 100.0, 19.5,
                                                                 ("succeeded",))

    @pytest.mark.parametrize("fields,fates", [
        (dict(attempts=3, failures=2), ("retry", "retry", "succeeded")),
        (dict(attempts=3, failures=1), ("requeue", "retry", "succeeded")),
        (dict(status=JobStatus.FAILED), ("failed",)),
        (dict(status=JobStatus.DEAD, attempts=3, failures=3), ("retry", "retry", "retry")),
    ])
    def test_attempts_become_fates(self, fields, fates):
        """Uncounted retries first, then counted failures, then how it ended."""
        assert fates_of(record(**fields)) == fates

    def test_a_queued_job_runs_for_its_tenants_median(self):
        """A job that never ran is replayed with its tenant's median run time."""
        records = [record(job_id=f"j{n}", run_seconds=float(r)) for n, r in enumerate((10, 20,
                                                                                       30))]
        records.append(record(job_id="q", status=JobStatus.QUEUED, started_at=None,
                              finished_at=None, run_seconds=None))
        queued = next(j for j in from_records(records) if j.job_id == "q")
        assert queued.run == 20.0

    def test_an_export_line_reads_back(self, tmp_path):
        """The JSON lines of `imposer jobs --export` are a workload."""
        r = record(warnings=("page 3 has no bleed",))
        line = attrs.asdict(r)
        line["status"] = r.status.value
        path = tmp_path / "export.jsonl"
        path.write_text(json.dumps(line, default=str) + "\n\n")
        assert from_jsonl(path) == [SimJob(tenant="acme", arrival=100.0, run=19.5,
                                           job_id="j1")]

    def test_a_bad_export_line_names_its_line(self, tmp_path):
        """A line that is not a job record is refused with its file and line number."""
        path = tmp_path / "export.jsonl"
        path.write_text('{"job_id": "j"}\n')
        with pytest.raises(ConfigError, match="export.jsonl:1"):
            from_jsonl(path)


class TestScaledParts:
    def test_a_scale_multiplies_a_parts_run_times(self):
        """``*4`` makes a part's jobs four times as long (rounded to 10 ms), drawing the
        same random runs."""
        plain = synthetic("a=5@0,c=5@0", median=2, seed=3)
        scaled = synthetic("a=5@0,c=5@0*4", median=2, seed=3)
        assert [j.run for j in scaled[:5]] == [j.run for j in plain[:5]]
        assert [j.run for j in scaled[5:]] == pytest.approx([4 * j.run for j in plain[5:]],
                                                            abs=0.011)

    def test_a_bad_scale_is_refused(self):
        """``*x`` is not a number: the error names the part."""
        with pytest.raises(ConfigError, match="a=5@0\\*x"):
            synthetic("a=5@0*x")


class TestUrgency:
    def test_a_part_carries_a_priority_and_a_due_time_after_each_arrival(self):
        """``!0~1m``: priority 0, each job due a minute after it arrives; two parts of one
        name are one tenant's, numbered on."""
        jobs = synthetic("noisy=3@0,noisy=2@30/10!0~1m", seed=1, origin=1000.0)
        assert [j.job_id for j in jobs] == [f"noisy-{n}" for n in range(1, 6)]
        assert [j.priority for j in jobs] == [5, 5, 5, 0, 0]
        assert [j.due for j in jobs[:3]] == [None] * 3
        assert all(j.due == j.arrival + 60 for j in jobs[3:])

    @pytest.mark.parametrize("spec", ["a=5@0!x", "a=5@0!10", "a=5@0~soon"])
    def test_a_bad_priority_or_due_is_refused(self, spec):
        """A priority beyond one digit or a due that is no duration does not parse."""
        with pytest.raises(ConfigError, match="not a workload part"):
            synthetic(spec)

    def test_a_records_priority_and_due_are_replayed(self):
        """A record's priority and due time become the job's; a record without them (before
        priorities) is of the default priority with no due time."""
        urgent, plain = from_records([record(job_id="u", priority=1, due=150.0),
                                      record(job_id="p", submitted_at=101.0)])
        assert (urgent.priority, urgent.due) == (1, 150.0)
        assert (plain.priority, plain.due) == (5, None)

    def test_a_record_keeps_only_urgency_that_is_not_the_default(self):
        """The item of a default job has neither field (old readers see what they saw)."""
        assert {"priority", "due"}.isdisjoint(record().to_item())
        item = record(priority=0, due=200.0).to_item()
        assert (item["priority"], item["due"]) == (0, 200.0)
        assert JobRecord.from_item(item).priority == 0
