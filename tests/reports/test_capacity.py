"""The licence rule over synthetic four-week histories with exact times."""

from __future__ import annotations

import datetime
import itertools
import json
import sys

import attrs
import pytest

from imposer.errors import ConfigError
from imposer.models import JobRecord, JobStatus
from imposer.reports.capacity import Thresholds, chart, daily, evaluate

UTC = datetime.timezone.utc
#: Monday 2024-03-04 00:00 UTC; the 28-day window starts Monday 2024-02-05 00:00.
NOW = datetime.datetime(2024, 3, 4, tzinfo=UTC).timestamp()
_ids = itertools.count()


def at(day: int, hour: float) -> float:
    """Epoch seconds of *hour* UTC on day *day* of the window (0 = Monday 5 Feb)."""
    return NOW - 28 * 86400 + day * 86400 + hour * 3600


def job(start: float, end: float, wait: float = 10.0, tenant: str = "acme") -> JobRecord:
    return JobRecord(job_id=f"j{next(_ids)}", tenant_id=tenant, status=JobStatus.SUCCEEDED,
                     submitted_at=start - wait, started_at=start, finished_at=end,
                     queue_wait=wait, host="h1", attempts=1)


def working_days() -> list[int]:
    return [d for d in range(28) if d % 7 < 5]


def history(busy_slots: dict[int, int], wait: dict[int, float] | float = 10.0) -> list:
    """Fill *busy_slots[day]* slots for the whole working day, each job waiting *wait*."""
    records = []
    for day, slots in busy_slots.items():
        for _ in range(slots):
            w = wait if isinstance(wait, (int, float)) else wait[day]
            records.append(job(at(day, 8), at(day, 18), w))
    return records


class TestEvaluate:
    def test_neither_condition(self):
        """Half the slots busy with short waits is within capacity."""
        v = evaluate(history({d: 4 for d in working_days()}), slots_total=8, now=NOW)
        assert (v.working_days, v.busy_days, v.jobs, v.slow_jobs) == (20, 0, 80, 0)
        assert not v.utilisation_sustained and not v.waits_long and not v.at_capacity
        assert v.text == "within capacity"

    def test_utilisation_only(self):
        """7 of 8 slots busy every working day with short waits is a utilisation burst."""
        v = evaluate(history({d: 7 for d in working_days()}), slots_total=8, now=NOW)
        assert (v.working_days, v.busy_days, v.jobs, v.slow_jobs) == (20, 20, 140, 0)
        assert v.days[0].utilisation == pytest.approx(0.875)
        assert v.utilisation_sustained and not v.waits_long
        assert v.text == "likely a transient burst: slot utilisation"

    def test_wait_only(self):
        """A quarter of jobs waiting ten minutes on a half-busy pool is a wait burst."""
        records = history({d: 3 for d in working_days()})
        records += history({d: 1 for d in working_days()}, wait=600.0)
        v = evaluate(records, slots_total=8, now=NOW)
        assert (v.working_days, v.busy_days, v.jobs, v.slow_jobs) == (20, 0, 80, 20)
        assert v.slow_job_share == pytest.approx(0.25)
        assert not v.utilisation_sustained and v.waits_long
        assert v.text == "likely a transient burst: queue wait"

    def test_both_conditions(self):
        """Eleven busy days of twenty plus long waits on them is at capacity."""
        days = working_days()
        busy = {d: 7 for d in days[:11]} | {d: 4 for d in days[11:]}
        waits = {d: 300.0 if d in days[:11] else 10.0 for d in days}
        v = evaluate(history(busy, waits), slots_total=8, now=NOW)
        assert (v.working_days, v.busy_days, v.jobs, v.slow_jobs) == (20, 11, 113, 77)
        assert v.busy_day_share == pytest.approx(0.55)
        assert v.at_capacity and v.text == "at capacity"

    def test_exactly_half_the_days_is_not_sustained(self):
        """Busy on 10 of 20 working days is not 'more than half'."""
        days = working_days()
        busy = {d: 7 for d in days[:10]} | {d: 4 for d in days[10:]}
        v = evaluate(history(busy), slots_total=8, now=NOW)
        assert (v.busy_days, v.utilisation_sustained) == (10, False)

    def test_exactly_a_fifth_slow_is_not_long(self):
        """Slow waits on exactly 20% of jobs do not meet 'more than 20%'."""
        records = history({d: 4 for d in working_days()})
        records += history({d: 1 for d in working_days()}, wait=181.0)
        v = evaluate(records, slots_total=8, now=NOW)
        assert (v.jobs, v.slow_jobs, v.waits_long) == (100, 20, False)
        more = evaluate(records + history({0: 1}, wait=181.0), slots_total=8, now=NOW)
        assert (more.jobs, more.slow_jobs, more.waits_long) == (101, 21, True)

    def test_thresholds_are_configurable(self):
        """A lower utilisation threshold turns a half-busy month into sustained load."""
        records = history({d: 4 for d in working_days()})
        v = evaluate(records, slots_total=8, now=NOW, thresholds=Thresholds(util=0.4))
        assert v.busy_days == 20 and v.utilisation_sustained

    def test_to_dict_is_json(self):
        """The verdict and its days serialise to JSON with the figures."""
        data = json.loads(json.dumps(evaluate(history({0: 7}), slots_total=8,
                                              now=NOW).to_dict()))
        assert data["text"] == "within capacity" and data["jobs"] == 7
        assert data["days"][0] == {"date": "2024-02-05", "working": True,
                                   "utilisation": 0.875, "jobs": 7, "slow_jobs": 0}
        assert data["thresholds"]["workday_start"] == "08:00:00"


class TestDaily:
    def test_weekend_load_ignored(self):
        """A full pool on Saturday and Sunday counts toward no working day."""
        weekend = [d for d in range(28) if d % 7 >= 5]
        records = history({d: 8 for d in weekend}) + history({d: 2 for d in working_days()})
        v = evaluate(records, slots_total=8, now=NOW)
        sat = v.days[5]
        assert sat.date.strftime("%a") == "Sat" and not sat.working and sat.utilisation is None
        assert sat.jobs == 8
        assert (v.working_days, v.busy_days) == (20, 0)

    def test_only_working_hours_count(self):
        """A job busy all day fills its slot for the 10 working hours, no more."""
        days = daily([job(at(2, 0), at(3, 0))], slots_total=1, now=NOW)
        assert days[2].utilisation == pytest.approx(1.0)
        assert days[3].utilisation == 0.0

    def test_span_across_midnight_split(self):
        """A job from Monday 13:00 to Tuesday 13:00 gives each day its own five hours."""
        days = daily([job(at(0, 13), at(1, 13))], slots_total=2, now=NOW)
        assert [d.utilisation for d in days[:2]] == [pytest.approx(0.25), pytest.approx(0.25)]
        assert (days[0].jobs, days[1].jobs) == (1, 0)

    def test_unfinished_day_not_counted(self):
        """Working hours cut by either end of the window are left out, not prorated."""
        now = NOW + 12 * 3600  # Monday noon: the window starts on a Monday noon too
        days = daily([], slots_total=8, now=now)
        assert days[0].date == datetime.date(2024, 2, 5) and not days[0].working
        assert days[-1].date == datetime.date(2024, 3, 4) and not days[-1].working
        assert sum(d.working for d in days) == 19

    def test_time_zone(self):
        """Working hours follow the given zone: 07:00 UTC is 08:00 in Berlin in winter."""
        records = [job(at(0, 7), at(0, 8))]
        berlin = daily(records, slots_total=1, now=NOW, thresholds=Thresholds(tz="Europe/Berlin"))
        utc = daily(records, slots_total=1, now=NOW)
        assert berlin[0].utilisation == pytest.approx(0.1) and utc[0].utilisation == 0.0

    def test_window_length(self):
        """A seven-day window counts five working days and ignores older jobs."""
        records = history({0: 8, 21: 8})
        v = evaluate(records, slots_total=8, now=NOW,
                     thresholds=Thresholds(window_seconds=7 * 86400))
        assert (len(v.days), v.working_days, v.busy_days, v.jobs) == (8, 5, 1, 8)

    def test_running_job_counts_until_now(self):
        """A job still running is busy up to now."""
        now = at(25, 20)  # Friday 1 March, 20:00
        running = attrs.evolve(job(at(25, 8), at(25, 8)), status=JobStatus.RUNNING,
                               finished_at=None)
        assert daily([running], slots_total=1, now=now)[-1].utilisation == pytest.approx(1.0)
        assert daily([running], slots_total=1, now=now)[-1].jobs == 1


class TestThresholds:
    def test_rejects_bad_values(self):
        """Shares outside 0-1, inverted hours and unknown zones are config errors."""
        for bad in ({"util": 80}, {"tz": "Mars/Olympus"}, {"window_seconds": 0},
                    {"workday_start": datetime.time(18), "workday_end": datetime.time(8)}):
            with pytest.raises(ConfigError):
                Thresholds(**bad)


class TestChart:
    def test_writes_png(self, tmp_path):
        """The chart of a verdict is a PNG file."""
        pytest.importorskip("matplotlib")
        path = tmp_path / "capacity.png"
        chart(evaluate(history({d: 7 for d in working_days()}), slots_total=8, now=NOW),
              str(path))
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def test_missing_matplotlib_says_how_to_install(self, tmp_path, monkeypatch):
        """Without matplotlib the error names the extra to install."""
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        with pytest.raises(ConfigError, match=r"pip install 'imposer\[chart\]'"):
            chart(daily([], slots_total=8, now=NOW), str(tmp_path / "x.png"))


def _histories():
    days = working_days()
    weekend = [d for d in range(28) if d % 7 >= 5]
    yield "neither", history({d: 4 for d in days})
    yield "utilisation", history({d: 7 for d in days})
    yield "wait", history({d: 3 for d in days}) + history({d: 1 for d in days}, wait=600.0)
    yield "both", history({d: 7 for d in days[:11]} | {d: 4 for d in days[11:]},
                          {d: 300.0 if d in days[:11] else 10.0 for d in days})
    yield "half", history({d: 7 for d in days[:10]} | {d: 4 for d in days[10:]})
    yield "fifth", history({d: 4 for d in days}) + history({d: 1 for d in days}, wait=181.0)
    yield "fifth+1", (history({d: 4 for d in days}) + history({d: 1 for d in days}, wait=181.0)
                      + history({0: 1}, wait=181.0))
    yield "weekend", history({d: 8 for d in weekend}) + history({d: 2 for d in days})
    yield "midnight", [job(at(0, 13), at(1, 13)), job(at(3, 0), at(4, 0))]


class TestRollupsAgree:
    @pytest.mark.parametrize("name, records", list(_histories()), ids=lambda v: v
                             if isinstance(v, str) else "")
    def test_same_verdict_through_rollups(self, name, records):
        """The history fed through host-hour rollups gives the verdict the records give."""
        from imposer.reports.capacity import evaluate_hours
        from imposer.reports.history import from_records

        direct = evaluate(records, slots_total=8, now=NOW)
        rolled = evaluate_hours(from_records(records, slots_per_host=8, now=NOW), now=NOW)
        figures = ("text", "working_days", "busy_days", "jobs", "slow_jobs", "slots_total")
        assert [getattr(rolled, f) for f in figures] == [getattr(direct, f) for f in figures]
        assert [round(d.utilisation or 0, 6) for d in rolled.days] == \
            [round(d.utilisation or 0, 6) for d in direct.days]


class TestNewStack:
    def test_days_before_the_first_record_are_not_counted(self):
        """A stack a week old judges that week only; earlier days say no data."""
        from imposer.reports.capacity import evaluate_hours
        from imposer.reports.history import from_records

        recent = history({d: 7 for d in working_days() if d >= 21})
        verdict = evaluate_hours(from_records(recent, slots_per_host=8, now=NOW), now=NOW)
        assert verdict.working_days == 5 and verdict.busy_days == 5
        assert [d.data for d in verdict.days[:21]] == [False] * 21
        assert verdict.text == "likely a transient burst: slot utilisation"

    def test_no_records_at_all_is_not_enough_data(self):
        """An empty stack does not claim to be within capacity."""
        from imposer.reports.capacity import evaluate_hours
        from imposer.reports.formatting import format_capacity

        verdict = evaluate_hours([], now=NOW)
        assert verdict.text.startswith("not enough data")
        assert any("no data yet" in line for line in format_capacity(verdict))
