"""`imposer simulate` from each source, and `imposer capacity` pointing to it."""

from __future__ import annotations

import json
import time

import attrs
import pytest
from click.testing import CliRunner

from imposer.aws import session
from imposer.aws.dynamodb import serialize
from imposer.cli import main
from imposer.cli.reports import run_capacity
from imposer.models import JobStatus, TenantConfig
from imposer.reports.capacity import Thresholds
from imposer.reports.history import from_records, to_deltas
from imposer.sim.engine import Policy, simulate
from tests.fixtures.aws import env_for
from tests.fixtures.jobs import request
from tests.sim.test_metrics import MONDAY, four_weeks, records_of
from tests.state.test_no_scans import scans_of_history

MIXED = "noisy=100@0,quiet=5x2@3"
NOW = MONDAY + 28 * 86400


def invoke(*args: str, env: dict | None = None):
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.output


def seed_history(backends, settings, per_hour: int, slots: int, weeks_ago: int = 0) -> int:
    """Four weeks of records in the jobs table and their rollups, as a fleet would leave them.

    The weeks are those that end at NOW, or *weeks_ago* whole weeks later.
    """
    jobs = [attrs.evolve(j, arrival=j.arrival + weeks_ago * 7 * 86400)
            for j in four_weeks({d: per_hour for d in range(28)})]
    records = records_of(simulate(jobs, Policy(slots=slots, cap=slots)))
    client = backends.jobs.dynamo.client
    for n in range(0, len(records), 25):
        client.batch_write_item(RequestItems={settings.jobs_table: [
            {"PutRequest": {"Item": serialize(r.to_item())}} for r in records[n:n + 25]]})
    for row in from_records(records, slots_per_host=slots, now=NOW + weeks_ago * 7 * 86400):
        backends.rollups.add(row.hour, row.host, row.slots, to_deltas(row))
    return len(records)


class TestSynthetic:
    def test_priorities_and_due_times_are_replayed(self):
        """Three rush jobs (priority 0) sent behind a capped backlog wait far less than
        the backlog; each variant counts the due jobs that started late."""
        out = json.loads(invoke("simulate", "--synthetic",
                                "noisy=40@0,noisy=3@20!0,quiet=5@3~30s", "--median", "5",
                                "--slots", "4", "--cap", "2", "--no-search", "--json"))
        (row,) = out["variants"]
        rush, bulk = row["priorities"]["0"], row["priorities"]["5"]
        assert (rush["jobs"], bulk["jobs"]) == (3, 45)
        assert rush["p95"] < bulk["p50"] / 4
        assert row["due"] == {"jobs": 5, "started_late": 0}
        text = invoke("simulate", "--synthetic", "noisy=40@0,noisy=3@20!0,quiet=5@3~30s",
                      "--median", "5", "--slots", "4", "--cap", "2", "--no-search")
        assert "priority 0            3" in text and "started late          5" in text

    def test_an_express_tenant_borrows_the_reserve_too(self):
        """--express with borrowing on: the lone backlog may borrow the two reserve slots
        too, and waits about half as long; the table and JSON say who is express."""
        args = ("simulate", "--synthetic", "noisy=60@0", "--median", "5", "--slots", "4",
                "--cap", "1", "--borrow", "on", "--reserve", "2", "--no-search")
        (plain,) = json.loads(invoke(*args, "--json"))["variants"]
        (express,) = json.loads(invoke(*args, "--express", "noisy", "--json"))["variants"]
        assert (plain["express"], express["express"]) == ([], ["noisy"])
        assert express["waits"]["noisy"]["p50"] < 0.7 * plain["waits"]["noisy"]["p50"]
        assert express["utilisation"] > plain["utilisation"]
        assert "; express noisy" in invoke(*args, "--express", "noisy").splitlines()[2]
        assert "express" not in invoke(*args).splitlines()[2]

    def test_one_row_per_variant(self):
        """Slots x borrow x reserve, the reserve only where borrowing is on."""
        out = json.loads(invoke("simulate", "--synthetic", MIXED, "--median", "2",
                                "--slots", "8,10", "--borrow", "on,off", "--reserve", "0,1",
                                "--park-seconds", "5", "--no-search", "--json"))
        rows = out["variants"]
        assert out["jobs"] == 110 and len(rows) == 2 * (2 + 1)
        assert {(r["slots"], r["borrow"], r["reserve"]) for r in rows} == {
            (s, True, 0) for s in (8, 10)} | {(s, True, 1) for s in (8, 10)} | {
            (s, False, None) for s in (8, 10)}
        assert all(r["heavy_tenants"] == ["noisy"] for r in rows)
        assert {"quiet-a", "quiet-b", "noisy"} == set(rows[0]["waits"])

    def test_the_table_reads_side_by_side(self):
        """The text output has the variants table and the per-tenant waits."""
        out = invoke("simulate", "--synthetic", MIXED, "--median", "2", "--cap", "2,4",
                     "--cap-of", "noisy=3")
        lines = out.splitlines()
        assert lines[0].startswith("workload      110 jobs of 3 tenant(s)")
        assert "tier caps noisy=3" in out
        header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("# HOSTS"))
        assert len([line for line in lines[header + 1:header + 4] if line.strip()]) == 2
        assert any(line.startswith("quiet-a") for line in lines)

    def test_a_chart_is_written(self, tmp_path):
        """--chart draws the variants into a PNG."""
        target = tmp_path / "variants.png"
        out = invoke("simulate", "--synthetic", "a=20@0,b=5@1", "--slots", "2,4",
                     "--no-search", "--chart", str(target))
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"chart written to {target}" in out

    @pytest.mark.parametrize("args", [("--slots", "0"), ("--borrow", "maybe"),
                                      ("--cap-of", "noisy"), ("--synthetic", "noisy"),
                                      ("--express", " "),
                                      ("--express", "a", "--no-express")])
    def test_bad_options_say_so(self, args):
        """A bad list, switch, tier cap or workload is refused with a clear exit code."""
        result = CliRunner().invoke(main, ["simulate", "--synthetic", MIXED, *args])
        assert result.exit_code in (2, 3), result.output

    def test_half_lives_and_weights_are_variants(self):
        """--half-life 0,10m with two weightings: off once, then each weighting, and the
        tenant weighted 3 waits less than with equal weights."""
        out = json.loads(invoke("simulate", "--synthetic", "a=120@0,b=120@0,c=40@0*4",
                                "--median", "2", "--seed", "11", "--half-life", "0,10m",
                                "--weights", "equal", "--weights", "a=3", "--call-ms", "10",
                                "--receive-ms", "40", "--no-search", "--json"))
        rows = out["variants"]
        assert [(r["share_half_life"], r["weights"]) for r in rows] == [
            (None, None), (600.0, {}), (600.0, {"a": 3.0})]
        assert rows[2]["waits"]["a"]["p50"] < rows[1]["waits"]["a"]["p50"]

    def test_the_table_says_each_variants_share(self):
        """A SHARE column says off, or the half-life and weights."""
        out = invoke("simulate", "--synthetic", "a=20@0,b=20@0", "--half-life", "0,1h",
                     "--weights", "a=2", "--no-search")
        assert "SHARE" in out and " off " in out and " 1h a=2 " in out

    @pytest.mark.parametrize("args", [("--half-life", "soon"), ("--weights", "a=-1"),
                                      ("--weights", "a=many"), ("--weights", "=2")])
    def test_bad_half_lives_and_weights_are_refused(self, args):
        """A half-life that is no duration, or a weight that is no number >= 0, is refused
        in one line naming the option, with the usage exit code."""
        result = CliRunner().invoke(main, ["simulate", "--synthetic", MIXED, *args])
        assert result.exit_code == 2, result.output
        assert args[0] in result.output and len(result.output.strip().splitlines()) == 1


class TestFromTables:
    def test_an_export_replays(self, backends, settings, tmp_path):
        """The JSON lines of `imposer jobs --export` are a workload for --from-export."""
        for n in range(3):
            lease = backends.leases.acquire(request(), "h", n).lease
            backends.leases.release(lease, JobStatus.SUCCEEDED, finished_at=lease.acquired_at
                                    + 5, run_seconds=5.0)
        export = tmp_path / "jobs.jsonl"
        export.write_text(invoke("jobs", "--export", env=env_for(settings)))
        out = json.loads(invoke("simulate", "--from-export", str(export), "--json",
                                "--no-search"))
        assert out["jobs"] == 3 and out["variants"][0]["waits"]["acme"]["jobs"] == 3

    def test_the_last_days_come_through_the_index(self, backends, settings):
        """--since reads the window's jobs page by page from the index, never by a Scan."""
        weeks = int((time.time() - NOW) // (7 * 86400))  # the four weeks before this one
        count = seed_history(backends, settings, per_hour=2, slots=2, weeks_ago=weeks)
        session.CALLS.reset()
        out = CliRunner().invoke(main, ["simulate", "--since", "35d", "--json", "--no-search"],
                                 env=env_for(settings))
        assert out.exit_code == 0, out.output
        data = json.loads(out.output)
        assert data["jobs"] == count
        assert data["variants"][0]["hosts"] == 1 and data["variants"][0]["slots"] == 2
        calls = session.CALLS.snapshot()
        assert scans_of_history(calls, settings) == {}
        assert calls[f"dynamodb.Query@{settings.jobs_table}"] >= 2

    def test_fair_share_weighs_tenants_as_the_tenants_table_does(self, settings):
        """From the tables, with a half-life and no --weights, the variant weighs tenants
        as the worker would (``tenants set --weight``); --weights equal still overrides."""
        from imposer.worker.wiring import connect

        live = connect(settings)  # on the wall clock, as the command reads its window
        live.tenants.put(TenantConfig(tenant_id="acme", weight=3.0))
        for n in range(3):
            lease = live.leases.acquire(request(), "h", n).lease
            live.leases.release(lease, JobStatus.SUCCEEDED, finished_at=lease.acquired_at + 5,
                                run_seconds=5.0)
        records, _ = live.jobs.for_tenant("acme", limit=10)
        for row in from_records(records, slots_per_host=settings.slots, now=time.time()):
            live.rollups.add(row.hour, row.host, row.slots, to_deltas(row))  # as a worker's
        rows = json.loads(invoke("simulate", "--since", "1h", "--half-life", "10m", "--json",
                                 "--no-search", env=env_for(settings)))["variants"]
        assert [r["weights"] for r in rows] == [{"acme": 3.0}]
        rows = json.loads(invoke("simulate", "--since", "1h", "--half-life", "10m",
                                 "--weights", "equal", "--json", "--no-search",
                                 env=env_for(settings)))["variants"]
        assert [r["weights"] for r in rows] == [{}]

    def test_the_tenants_tables_express_class_is_replayed(self, settings):
        """From the tables without --express, the tenants the worker treats as express
        (``tenants set --express``) are the variant's; --express names others instead."""
        from imposer.worker.wiring import connect

        live = connect(settings)
        live.tenants.put(TenantConfig(tenant_id="acme", express=True))
        live.tenants.put(TenantConfig(tenant_id="globex", cap=2))
        lease = live.leases.acquire(request(), "h", 0).lease
        live.leases.release(lease, JobStatus.SUCCEEDED, finished_at=lease.acquired_at + 5,
                            run_seconds=5.0)
        records, _ = live.jobs.for_tenant("acme", limit=10)
        for row in from_records(records, slots_per_host=settings.slots, now=time.time()):
            live.rollups.add(row.hour, row.host, row.slots, to_deltas(row))
        rows = json.loads(invoke("simulate", "--since", "1h", "--json", "--no-search",
                                 env=env_for(settings)))["variants"]
        assert [r["express"] for r in rows] == [["acme"]]
        rows = json.loads(invoke("simulate", "--since", "1h", "--express", "globex", "--json",
                                 "--no-search", env=env_for(settings)))["variants"]
        assert [r["express"] for r in rows] == [["globex"]]
        rows = json.loads(invoke("simulate", "--since", "1h", "--no-express", "--json",
                                 "--no-search", env=env_for(settings)))["variants"]
        assert [r["express"] for r in rows] == [[]]


class TestCapacityPointsToIt:
    def test_at_capacity_it_simulates_more_slots(self, backends, settings):
        """The rule says at capacity: it prints +1..+4 slots and how long waits would drop."""
        seed_history(backends, settings, per_hour=3, slots=2)
        backends.tenants.put(TenantConfig(tenant_id="t0", cap=2))
        out: list[str] = []
        verdict = run_capacity(settings, 28 * 86400, Thresholds(), False, None, out.append,
                               now=NOW)
        assert verdict.at_capacity
        start = next(i for i, line in enumerate(out) if line.startswith("imposer simulate"))
        table = out[start + 2:start + 7]
        assert [int(line.split()[0]) for line in table] == [2, 3, 4, 5, 6]
        shares = [float(line.split()[1].rstrip("%")) for line in table]
        assert shares[0] > 20 and shares[-1] < shares[0]
        assert "(as now)" in table[0] and "pts" in table[1]

    @pytest.mark.parametrize("per_hour, verdict_metric", [(3, 1), (1, 0)])
    def test_emit_logs_the_verdict_it_prints_as_emf(self, backends, settings, logged,
                                                     per_hour, verdict_metric):
        """--emit logs the verdict it prints as EMF, the same figures, and simulates nothing."""
        from tests.deploy import emf

        seed_history(backends, settings, per_hour=per_hour, slots=2)
        out: list[str] = []
        verdict = run_capacity(settings, 28 * 86400, Thresholds(), False, None, out.append,
                               now=NOW, emit=True)
        assert any(line.startswith("verdict") for line in out)
        assert not any(line.startswith("imposer simulate") for line in out)  # routine: no sim
        lines = logged.stream.getvalue().splitlines()
        assert [emf.problems(line) for line in lines] == [[], [], []]
        values = {r["metric"]: r[r["metric"]] for r in map(json.loads, lines)}
        assert values == {"licence_busy_days": round(100 * verdict.busy_day_share, 2),
                          "licence_slow_jobs": round(100 * verdict.slow_job_share, 2),
                          "licence_at_capacity": verdict_metric}
        assert verdict.at_capacity == bool(verdict_metric)

    def test_within_capacity_it_stays_quiet(self, backends, settings):
        """No simulation when the rule does not call for a licence."""
        seed_history(backends, settings, per_hour=1, slots=2)
        out: list[str] = []
        run_capacity(settings, 28 * 86400, Thresholds(), False, None, out.append, now=NOW)
        assert not any(line.startswith("imposer simulate") for line in out)
