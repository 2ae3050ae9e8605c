"""Timeline, stranded capacity vs shortage, and the stats summary, from scripted records."""

from __future__ import annotations

import itertools
import json

import pytest

from imposer.cli.reports import run_capacity, run_stats
from imposer.reports.history import from_records, to_deltas
from imposer.errors import ConfigError
from imposer.models import JobRecord, JobStatus, TenantConfig
from imposer.reports.capacity import Thresholds
from imposer.reports.formatting import format_seconds, format_stats, parse_duration
from imposer.reports.stats import percentile, stranded_and_shortage, summary, timeline

NOW = 1_700_000_000.0
_ids = itertools.count()
S = JobStatus


def job(tenant: str, submitted: float, started: float | None = None,
        finished: float | None = None, status: JobStatus | None = None,
        host: str = "h1", **fields) -> JobRecord:
    """Make a record; times are seconds after NOW - 1000."""
    base = NOW - 1000
    if status is None:
        status = S.SUCCEEDED if finished is not None else S.RUNNING if started is not None \
            else S.QUEUED
    return JobRecord(
        job_id=fields.pop("job_id", f"j{next(_ids)}"), tenant_id=tenant, status=status,
        submitted_at=base + submitted,
        started_at=None if started is None else base + started,
        finished_at=None if finished is None else base + finished,
        queue_wait=None if started is None else started - submitted,
        host=host if started is not None else None, **fields)


def waves(tenant: str, count: int, per_wave: int, length: float, submitted: float = 0.0):
    """*count* jobs submitted together, run *per_wave* at a time for *length* seconds each."""
    return [job(tenant, submitted, submitted + (i // per_wave) * length,
                submitted + (i // per_wave + 1) * length) for i in range(count)]


class TestPercentile:
    def test_nearest_rank(self):
        """p50 and p95 are observed values chosen by nearest rank."""
        values = list(range(1, 21))
        assert (percentile(values, 50), percentile(values, 95)) == (10, 19)
        assert (percentile([3.0], 50), percentile([5, 1], 100)) == (3.0, 5)
        assert percentile([5, 1], 0) == 1

    def test_empty_and_out_of_range(self):
        """No values give None; a rank outside 0-100 is refused."""
        assert percentile([], 95) is None
        with pytest.raises(ValueError):
            percentile([1], 101)


class TestTimeline:
    def test_segments_count_busy_and_waiting_per_tenant(self):
        """Each segment holds the slots held and the jobs waiting per tenant."""
        tl = timeline(waves("acme", 6, 4, 100) + [job("globex", 50, 150, 250)], 8, NOW,
                      since=NOW - 1000)
        at = {(s.start - (NOW - 1000)): s for s in tl.segments}
        assert at[0].busy == {"acme": 4} and at[0].waiting == {"acme": 2}
        assert at[50].waiting == {"acme": 2, "globex": 1}
        assert at[100].busy == {"acme": 2} and at[100].waiting == {"globex": 1}
        assert at[150].busy == {"acme": 2, "globex": 1} and at[150].waiting == {}
        assert tl.segments[-1].end == NOW and tl.segments[-1].busy == {}

    def test_hosts_multiply_slots(self):
        """Distinct hosts seen in the window times slots per host make total slots."""
        records = [job("a", 0, 0, 10, host="h1"), job("a", 0, 0, 10, host="h2")]
        assert timeline(records, 8, NOW).slots_total == 16
        assert timeline([], 8, NOW).slots_total == 8
        old = timeline(records[:1] + [job("a", 0, 0, 10, host="gone")], 8, NOW, since=NOW - 900)
        assert old.hosts == () and old.slots_total == 8

    def test_open_jobs_run_and_wait_until_now(self):
        """A running job is busy and a queued job waits up to now."""
        tl = timeline([job("a", 0, 100), job("a", 0)], 8, NOW)
        last = tl.segments[-1]
        assert last.end == NOW and last.busy == {"a": 1} and last.waiting == {"a": 1}

    def test_retrying_job_waits_after_its_last_attempt(self):
        """A retrying job is busy during its last attempt, then waits again until now."""
        r = job("a", 0, 100, status=S.RETRYING, run_seconds=50.0, attempts=1)
        tl = timeline([r], 8, NOW)
        assert [(s.start - (NOW - 1000), s.busy, s.waiting) for s in tl.segments] == [
            (0, {}, {"a": 1}), (100, {"a": 1}, {}), (150, {}, {"a": 1})]

    def test_since_clips(self):
        """Intervals before the window start are cut at it."""
        tl = timeline([job("a", 0, 0, 600)], 8, NOW, since=NOW - 500)
        assert tl.start == NOW - 500 and tl.segments[0].busy == {"a": 1}
        assert tl.segments[0].duration == 100


class TestStrandedAndShortage:
    def test_one_tenant_at_cap_strands_idle_slots(self):
        """Eight jobs of one cap-4 tenant run four at a time: 4 idle slots x 100 s stranded."""
        c = stranded_and_shortage(timeline(waves("acme", 8, 4, 100), 8, NOW))
        assert (c.stranded_slot_seconds, c.stranded_seconds, c.shortage_seconds) == (400, 100, 0)
        assert c.busy_slot_seconds == 800

    def test_stranded_counts_only_usable_slots(self):
        """Ten jobs in waves of four strand min(idle, waiting): 4x100 + 2x100."""
        c = stranded_and_shortage(timeline(waves("acme", 10, 4, 100), 8, NOW))
        assert (c.stranded_slot_seconds, c.stranded_seconds, c.shortage_seconds) == (600, 200, 0)

    def test_two_capped_tenants_and_a_third_waiting_is_shortage(self):
        """Two tenants at cap fill all 8 slots for 100 s while a third waits: shortage."""
        records = (waves("acme", 6, 4, 100) + waves("globex", 4, 4, 100)
                   + [job("initech", 0, 100, 150)])
        c = stranded_and_shortage(timeline(records, 8, NOW))
        assert (c.shortage_seconds, c.stranded_slot_seconds) == (100, 0)

    def test_full_pool_of_one_capped_tenant_is_no_shortage(self):
        """All slots busy while only capped tenants wait would not run on a ninth slot."""
        records = waves("acme", 10, 8, 100)
        c = stranded_and_shortage(timeline(records, 8, NOW, caps={"acme": 8}))
        assert (c.shortage_seconds, c.stranded_slot_seconds) == (0, 0)

    def test_tier_override_and_paused_tenant(self):
        """A cap-2 tenant strands min(6 idle, 3 waiting); a paused tenant strands nothing."""
        records = waves("acme", 5, 2, 100)[:2] + [job("acme", 0, 100, 200) for _ in range(3)]
        records += [job("paused", 0)]
        c = stranded_and_shortage(timeline(records, 8, NOW - 800,
                                           caps={"acme": 2, "paused": 0}))
        assert c.stranded_slot_seconds == 300 and c.stranded_seconds == 100

    def test_idle_slots_with_uncapped_waiting_is_neither(self):
        """Work waiting below its cap next to idle slots is neither stranded nor shortage."""
        c = stranded_and_shortage(timeline([job("a", 0, 30, 60)], 8, NOW))
        assert (c.stranded_slot_seconds, c.shortage_seconds) == (0, 0)


class TestSummary:
    def test_oldest_waiting_from_records(self):
        """The oldest waiting job is found in the records, deferred ones included."""
        records = [job("acme", 0, 10, 20), job("acme", 400, job_id="deferred", defers=12,
                                                    wait_reason="at cap 4 of 4"),
                   job("globex", 700), job("globex", 300, 400, 500)]
        data = summary(records, slots_per_host=8, now=NOW)
        assert data["cluster"]["oldest_waiting"] == {
            "job_id": "deferred", "tenant_id": "acme", "age_seconds": 600.0,
            "status": "queued", "wait_reason": "at cap 4 of 4"}

    def test_per_tenant_figures(self):
        """Counts, defers and nearest-rank queue waits are reported per tenant."""
        records = [job("acme", 0, w, w + 10, defers=1) for w in range(0, 200, 10)]
        records += [job("acme", 0, status=S.QUEUED, defers=3), job("acme", 0, 900),
                    job("acme", 0, 5, 6, status=S.FAILED), job("acme", 0, 5, 6, status=S.DEAD)]
        row = summary(records, slots_per_host=8, now=NOW, caps={"acme": 6})["tenants"]["acme"]
        assert row == {"cap": 6, "running": 1, "waiting": 1, "deferred": 23, "succeeded": 20,
                       "failed": 1, "dead": 1, "started": 23, "queue_wait_p50": 90.0,
                       "queue_wait_p95": 190.0}

    def test_window_and_utilisation(self):
        """Jobs finished before --since drop out; utilisation is busy over all slot-seconds."""
        records = [job("old", 0, 0, 100)] + [job("acme", 500, 500, 1000) for _ in range(4)]
        data = summary(records, slots_per_host=8, now=NOW, since=NOW - 500)
        assert list(data["tenants"]) == ["acme"]
        assert data["cluster"]["slot_utilisation"] == 0.5
        assert data["window"] == {"start": NOW - 500, "end": NOW, "seconds": 500.0}

    def test_verdict_words_and_json(self):
        """Stranded capacity says raise caps; the summary is plain JSON."""
        data = summary(waves("acme", 8, 4, 100), slots_per_host=8, now=NOW)
        assert data["cluster"]["stranded_slot_seconds"] == 400
        assert "raise that tenant's cap or allow borrowing" in data["cluster"]["verdict"][0]
        assert json.loads(json.dumps(data)) == data


class TestParseDuration:
    def test_units(self):
        """Minutes, hours, days, weeks and bare seconds are understood."""
        assert [parse_duration(t) for t in ("30m", "6h", "7d", "4w", "90", "1.5h")] == [
            1800, 21600, 604800, 2419200, 90, 5400]

    def test_rejects_nonsense(self):
        """Unknown units, zero and empty text are config errors."""
        for text in ("7y", "0m", "", "-3d", "h"):
            with pytest.raises(ConfigError):
                parse_duration(text)


class TestFormat:
    def test_seconds(self):
        """Durations read as seconds, minutes, hours or days with their remainder."""
        assert [format_seconds(s) for s in (None, 42, 185, 7800, 367200, 604800)] == [
            "-", "42.0s", "3m05s", "2h10m", "4d06h", "7d"]

    def test_table_is_aligned(self):
        """Tenant rows line up under the header."""
        lines = format_stats(summary(waves("a-long-tenant-name", 8, 4, 100),
                                     slots_per_host=8, now=NOW))
        header = next(i for i, line in enumerate(lines) if line.startswith("TENANT"))
        assert len(lines[header]) == len(lines[header + 1])


class TestRunReports:
    def test_stats_and_capacity_from_tables(self, backends, settings, tmp_path):
        """The commands read rollups written as hosts write them, and print JSON or a table."""
        records = waves("acme", 8, 4, 100)
        for row in from_records(records, slots_per_host=8, now=NOW, caps={"acme": 4}):
            backends.rollups.add(row.hour, row.host, row.slots, to_deltas(row))
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=4))
        out: list[str] = []
        data = run_stats(settings, parse_duration("1h"), True, out.append, now=NOW)
        assert json.loads(out[0])["cluster"]["stranded_slot_seconds"] == 400
        assert data["tenants"]["acme"]["succeeded"] == 8
        out.clear()
        verdict = run_capacity(settings, parse_duration("1w"), Thresholds(), False, None,
                               out.append, now=NOW)
        assert verdict.text == "within capacity" and verdict.jobs == 8
        assert any(line.startswith("verdict       within capacity") for line in out)


class TestFairShareStats:
    def test_stats_show_usage_against_weighted_share(self, settings, clock):
        """Fair share on: heavy used 90 s, light 30 s (weight 3): stats say each one's part
        of the licence time, its weighted share and the gap, in the table and in JSON."""
        from imposer.worker.wiring import connect
        from tests.fixtures.jobs import request

        shared = settings.evolve(share_half_life=3600.0)
        backends = connect(shared, clock=clock)
        backends.tenants.put(TenantConfig(tenant_id="light", weight=3.0))
        for tenant, seconds in (("heavy", 90), ("light", 30)):
            lease = backends.leases.acquire(request(tenant), "h", 0).lease
            clock.advance(seconds)
            backends.leases.release(lease, JobStatus.SUCCEEDED, finished_at=clock.time())
        out: list[str] = []
        data = run_stats(shared, parse_duration("1h"), False, out.append, now=clock.time())
        rows = {r["tenant_id"]: r for r in data["fair_share"]}
        assert rows["heavy"]["used"] == pytest.approx(0.75, abs=0.01)
        assert (rows["heavy"]["share"], rows["light"]["share"]) == (0.5, 0.5)  # caps of 4/8
        assert rows["heavy"]["gap"] == pytest.approx(0.25, abs=0.01)
        heavy = next(line.split() for line in out if line.split()[:1] == ["heavy"])
        assert heavy[-1] == f"{100 * rows['heavy']['gap']:+.1f}" and heavy[-2] == "50.0%"

    def test_without_a_half_life_stats_say_nothing_of_it(self, backends, settings):
        """IMPOSER_SHARE_HALF_LIFE=0: no fair-share section at all."""
        out: list[str] = []
        data = run_stats(settings, parse_duration("1h"), False, out.append, now=NOW)
        assert "fair_share" not in data and not any("fair share" in line for line in out)


class TestWaitsPerPriority:
    def test_stats_show_waits_per_priority_and_late_starts(self, backends, settings):
        """Rush jobs (priority 0) that waited 5 s beside bulk that waited 100 s, one bulk job
        started after its due time: per priority in JSON and as a table, late per tenant."""
        base = NOW - 1000
        records = [job("acme", 0, 5, 50, priority=0) for _ in range(3)] + \
            [job("acme", 0, 100, 150) for _ in range(4)] + \
            [job("acme", 0, 100, 150, due=base + 60)]
        for row in from_records(records, slots_per_host=8, now=NOW, caps={"acme": 4}):
            backends.rollups.add(row.hour, row.host, row.slots, to_deltas(row))
        out: list[str] = []
        data = run_stats(settings, parse_duration("1h"), False, out.append, now=NOW)
        assert data["priorities"] == {
            "0": {"started": 3, "started_late": 0, "queue_wait_p50": 5, "queue_wait_p95": 5},
            "5": {"started": 5, "started_late": 1, "queue_wait_p50": 120,
                  "queue_wait_p95": 120}}  # (the upper edges of the wait buckets)
        assert data["cluster"]["started_late"] == 1
        assert data["tenants"]["acme"]["started_late"] == 1
        header = next(i for i, line in enumerate(out) if line.startswith("PRIORITY"))
        assert out[header + 1].split() == ["0", "3", "0", "5.0s", "5.0s"]
        assert out[header + 2].split() == ["5", "5", "1", "2m", "2m"]

    def test_a_fleet_without_priorities_reads_as_before(self, backends, settings):
        """One priority, nothing late: no priority table."""
        for row in from_records(waves("acme", 8, 4, 100), slots_per_host=8, now=NOW):
            backends.rollups.add(row.hour, row.host, row.slots, to_deltas(row))
        out: list[str] = []
        data = run_stats(settings, parse_duration("1h"), False, out.append, now=NOW)
        assert list(data["priorities"]) == ["5"]
        assert not any(line.startswith("PRIORITY") for line in out)
