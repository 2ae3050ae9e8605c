"""Nothing routine reads the job history: no Scan of a table that grows with it.

The AWS call counter records DynamoDB calls per table (botocore's
``before-parameter-build`` event), so these tests see exactly which tables a
worker run of 50 jobs and each operator command read, and how.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from imposer.aws import session
from imposer.cli import main
from imposer.models import JobStatus
from tests.fixtures.aws import env_for
from tests.fixtures.jobs import request
from tests.fixtures.workers import Worker, layout, submit_jobs


def scans_of_history(calls: dict[str, int], settings) -> dict[str, int]:
    """The Scans in *calls* of the tables that grow with history (jobs, outbox, rollups)."""
    grow = (settings.jobs_table, settings.outbox_table, settings.rollups_table)
    return {k: n for k, n in calls.items() if k.startswith("dynamodb.Scan@")
            and k.split("@", 1)[1] in grow}


@pytest.mark.slow
class TestWorkerRun:
    def test_fifty_jobs_without_a_scan_of_history(self, settings, backends, tmp_path):
        """A run of 50 jobs reads the jobs table by key and index only."""
        submit_jobs(settings, tmp_path, "acme", 30, layout())
        submit_jobs(settings, tmp_path, "globex", 20, layout())
        worker = Worker(settings, tmp_path, "counted", "--slots", "4", "--exit-when-idle",
                        env={"IMPOSER_BORROW": "1"})
        try:
            assert worker.wait(180) == 0, worker.tail()
        finally:
            worker.close()
        (stopped,) = worker.actions("stopped")
        calls = stopped["aws_calls"]
        assert stopped["started"] == 50
        assert scans_of_history(calls, settings) == {}
        assert calls.get(f"dynamodb.Query@{settings.jobs_table}", 0) > 0, \
            "the borrow view reads the open-jobs index"


class TestOperatorCommands:
    @pytest.fixture
    def run(self, settings):
        runner = CliRunner()

        def invoke(*args: str) -> dict[str, int]:
            session.CALLS.reset()
            result = runner.invoke(main, list(args), env=env_for(settings))
            assert result.exit_code in (0, 1), result.output
            return session.CALLS.snapshot()

        return invoke

    @pytest.mark.parametrize("args", [
        ("leases",), ("tenants", "list"), ("jobs",), ("jobs", "--tenant", "acme"),
        ("jobs", "--tenant", "acme", "--status", "succeeded", "--since", "1h"),
        ("why", "JOB"), ("why", "no-such-job"), ("stats",), ("stats", "--since", "7d"),
        ("capacity",), ("webhooks", "list"), ("sweep", "--once"),
    ])
    def test_no_command_scans_history(self, settings, backends, run, args):
        """Every operator command leaves the jobs, outbox and rollups tables unscanned."""
        lease = backends.leases.acquire(request(), "h", 0).lease
        backends.leases.release(lease, JobStatus.SUCCEEDED, finished_at=1.0)
        running = backends.leases.acquire(request(), "h", 1).lease
        calls = run(*[running.job_id if a == "JOB" else a for a in args])
        assert calls, "the command made no AWS call at all: is the counter wired?"
        assert scans_of_history(calls, settings) == {}

    def test_export_is_the_one_scan(self, settings, backends, run):
        """`jobs --export` is the explicit full read, and the check above would see it."""
        backends.leases.acquire(request(), "h", 0)
        calls = run("jobs", "--export")
        assert scans_of_history(calls, settings) == {f"dynamodb.Scan@{settings.jobs_table}": 1}
