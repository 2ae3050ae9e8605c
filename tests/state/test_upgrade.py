"""A stack made by imposer 0.1 keeps working: `imposer init` upgrades it in place.

The old layout is made here by hand: the jobs table keyed by the bare job id,
without indexes or TTL, its records without ``job`` or ``open_shard``, and a
lease item a killed old worker left under its old key.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import attrs
import boto3
import pytest

from imposer.aws import tables
from imposer.models import JobStatus
from imposer.settings import Settings
from imposer.state.provision import table_specs
from imposer.worker.wiring import connect
from tests.fixtures.aws import env_for
from tests.fixtures.workers import Worker, layout


def imposer(env, *args):
    return subprocess.run([sys.executable, "-m", "imposer", *args], env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture
def old_stack(aws_endpoint, names):
    """Queues, bucket and tables as imposer 0.1 made them, with 0.1's items."""
    settings = Settings.load({}, host_id="upgraded", heartbeat_seconds=0.5,
                             lease_ttl_seconds=5.0, defer_seconds=1.0, sweep_seconds=0.5,
                             poll_seconds=1, retry_seconds=0.0, **names)
    backends = connect(settings)
    for spec in table_specs(settings):
        tables.ensure(backends.dynamo, attrs.evolve(spec, indexes=(), ttl_attribute=None))
    backends.queue.ensure({settings.dlq_name: {}})
    backends.queue.ensure({settings.queue_name: {"RedrivePolicy": json.dumps({
        "deadLetterTargetArn": backends.queue.arn(settings.dlq_name), "maxReceiveCount": 1000})}})
    boto3.client("s3").create_bucket(Bucket=settings.bucket)
    now = time.time()
    for job_id, status, extra in (("old-open", "queued", {}),
                                  ("old-done", "succeeded", {"finished_at": now - 3600}),
                                  ("old-held", "running", {"host": "gone", "epoch": "e0"})):
        backends.dynamo.put(settings.jobs_table, {
            "job_id": job_id, "tenant_id": "acme", "status": status,
            "submitted_at": now - 7200, "attempts": 1, **extra})
    backends.dynamo.put(settings.leases_table, {
        "pk": "lease#old-held", "tenant_id": "acme", "job_id": "old-held", "host": "gone",
        "slot": 0, "epoch": "e0", "acquired_at": now - 3600, "expires_at": now - 3000})
    backends.dynamo.put(settings.leases_table, {"pk": "counter#acme", "tenant_id": "acme",
                                                "inflight": 1, "ver": 1})
    return settings, backends


class TestUpgrade:
    def test_init_adds_indexes_ttl_and_moves_open_records(self, old_stack):
        """init says what it did; open records are indexed under (tenant, job), final ones expire."""
        settings, backends = old_stack
        got = imposer(env_for(settings), "init")
        assert got.returncode == 0, got.stderr
        assert "added index open" in got.stdout and "TTL on expires_at" in got.stdout
        assert "upgraded 3 job record(s): 2 open ones indexed (2 moved to (tenant, job) keys), " \
               "1 final ones given an expiry" in got.stdout
        described = tables.describe(backends.dynamo, settings.jobs_table)
        assert {i["IndexName"] for i in described["GlobalSecondaryIndexes"]} == \
            {"by-tenant", "open", "by-job"}
        assert described["TimeToLive"]["AttributeName"] == "expires_at"
        open_jobs = backends.jobs.open_jobs()
        assert sorted((r.tenant_id, r.job_id, r.status.value) for r in open_jobs) == [
            ("acme", "old-held", "running"), ("acme", "old-open", "queued")]
        done = backends.jobs.get("acme", "old-done") or backends.jobs.find("old-done")[0]
        assert done.status == JobStatus.SUCCEEDED and done.expires_at is not None
        again = imposer(env_for(settings), "init")
        assert "upgraded" not in again.stdout, "a second init finds nothing to upgrade"

    def test_new_worker_finishes_old_work(self, old_stack, tmp_path):
        """After init, a new worker sweeps the old lease and runs the old queued job's message."""
        settings, backends = old_stack
        assert imposer(env_for(settings), "init").returncode == 0
        from imposer.dev.samples import numbered_pdf

        pdf = numbered_pdf(tmp_path / "a.pdf", 2)
        prefix = f"s3://{settings.bucket}/tenants/acme/jobs/old-open"
        boto3.client("s3").upload_file(str(pdf), settings.bucket,
                                       "tenants/acme/jobs/old-open/input.pdf")
        backends.queue.send(json.dumps({"job_id": "old-open", "tenant_id": "acme",
                                        "input": f"{prefix}/input.pdf",
                                        "output": f"{prefix}/plate.pdf", "layout": layout()}),
                            "acme")
        worker = Worker(settings, tmp_path, "upgraded", "--slots", "2", "--exit-when-idle")
        try:
            assert worker.wait(120) == 0, worker.tail()
        finally:
            worker.close()
        assert backends.jobs.get("acme", "old-open").status == JobStatus.SUCCEEDED
        assert backends.leases.leases() == [], "the old-format lease was swept"
        assert backends.leases.counters()["acme"].inflight == 0
        reclaimed = backends.jobs.open_jobs()
        assert [(r.job_id, r.status.value) for r in reclaimed] == [("old-held", "queued")]
