"""The harness's checks catch what they claim: each planted violation shows up in its column."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid

import attrs
import boto3
import pytest

from tests.fixtures.chaos import COLUMNS, Config, checks
from tests.fixtures.chaos.cluster import FAKE
from tests.fixtures.chaos.faults import FaultRecord
from tests.fixtures.chaos.receiver import Delivery
from tests.fixtures.chaos.run import Chaos

pytestmark = pytest.mark.slow


def plant_everything(chaos: Chaos, tmp_path) -> list[subprocess.Popen]:
    """Break one invariant per column behind the cluster's back, after a clean run."""
    s = chaos.stack.settings
    jobs = list(chaos.jobs.values())
    ok = [j for j in jobs if j.tenant_id == "globex"]
    a, b, c, d, e, f = ok[:6]
    # output: the plate of a succeeded job disappears
    chaos.stack.s3.delete_object(Bucket=s.bucket, Key=a.request.output.split("/", 3)[3])
    # output: a succeeded job's plate written a second time (the same attempt's bytes)
    key = c.request.output.split("/", 3)[3]
    plate = chaos.stack.s3.get_object(Bucket=s.bucket, Key=key)
    chaos.stack.s3.put_object(Bucket=s.bucket, Key=key, Body=plate["Body"].read(),
                              Metadata=plate["Metadata"])
    # webhook: a second event id for a job
    chaos.receiver.deliveries.append(Delivery(
        at=time.monotonic(), tenant_id=b.tenant_id, webhook_id="msg_planted", job_id=b.job_id,
        status="succeeded", verified=True, answer=200))
    # rerun: one more tool run in the call log
    with open(chaos.workdir / "calls.jsonl", "a") as calls:
        calls.write(json.dumps({"input": f"/x/{c.job_id}-{uuid.uuid4().hex}/input.pdf"}) + "\n")
    # rerun: an attempt stopped by its lease fence, with no fault that kept its host from
    # renewing the lease
    with open(chaos.hosts[0].logs[-1], "a") as log:
        log.write(json.dumps({
            "action": "job_finished", "level": "INFO", "job_id": a.job_id,
            "time": time.strftime("%Y-%m-%d %H:%M:%S,000"),
            "message": f"job globex/{a.job_id} retrying: the attempt's lease ran out before "
                       "the worker renewed it"}) + "\n")
    # rerun: an attempt killed at its time limit, with no hang, frozen parent or AWS window
    with open(chaos.hosts[0].logs[-1], "a") as log:
        log.write(json.dumps({
            "action": "job_finished", "level": "INFO", "job_id": b.job_id,
            "time": time.strftime("%Y-%m-%d %H:%M:%S,000"),
            "message": f"job globex/{b.job_id} retrying: job ran past 13s; its pool worker "
                       "was killed"}) + "\n")
    # rerun, explained: a healthy job's attempt whose release was refused on its epoch
    # (its lease ran out unrenewed and was reclaimed) under an AWS fault on its host, and
    # its one run more; the same refusal with no fault (f) is a violation
    for job in (e, f):
        with open(chaos.workdir / "calls.jsonl", "a") as calls:
            calls.write(json.dumps({"input": f"/x/{job.job_id}-{uuid.uuid4().hex}/input.pdf"})
                        + "\n")
        with open(chaos.hosts[0].logs[-1], "a") as log:
            log.write(json.dumps({
                "action": "lease_lost", "level": "ERROR", "job_id": job.job_id,
                "time": time.strftime("%Y-%m-%d %H:%M:%S,000"),
                "message": f"job globex/{job.job_id} finished but release of job {job.job_id} "
                           "refused: lease epoch planted is no longer current; its message "
                           "will return"}) + "\n")
    chaos.faults.append(FaultRecord(id=len(chaos.faults) + 1, kind="aws_error", at=0.0,
                                    detail="planted", jobs={e.job_id}))
    # dead-letter: two DLQ messages for one job
    sqs = boto3.client("sqs")
    dlq = sqs.get_queue_url(QueueName=s.dlq_name)["QueueUrl"]
    for _ in range(2):
        sqs.send_message(QueueUrl=dlq, MessageBody=a.request.to_body(), MessageGroupId="globex")
    # fate: the harness now expects a permanent failure of a job that succeeded
    chaos.jobs[d.job_id] = attrs.evolve(d, kind="badpdf")
    # exit: a host that ended by itself with exit 4
    chaos.hosts[0].exits.append((1, 4, "", time.time()))
    # error: a crashed thread in a log
    with open(chaos.hosts[0].logs[-1], "a") as log:
        log.write(json.dumps({"action": "thread_died", "level": "CRITICAL",
                              "message": "planted", "time": ""}) + "\n")
    # leak: a live lease nobody holds
    boto3.client("dynamodb").put_item(TableName=s.leases_table, Item={
        "pk": {"S": f"lease#globex/{b.job_id}"}, "tenant_id": {"S": "globex"},
        "job_id": {"S": b.job_id}, "host": {"S": "nobody"}, "slot": {"N": "0"},
        "epoch": {"S": "planted"}, "acquired_at": {"N": str(time.time())},
        "expires_at": {"N": str(time.time() + 3600)}})
    # orphan: a tool left running under the work root
    attempt = chaos.hosts[0].work_root / "host-a" / "boot" / "slot-0" / f"{c.job_id}-planted"
    attempt.mkdir(parents=True)
    shutil.copy(chaos.pdf, attempt / "input.pdf")
    return [subprocess.Popen([sys.executable, str(FAKE), "Impose.kfpx",
                              str(attempt / "input.pdf"), f"-o={attempt / 'plate.pdf'}",
                              "--setvariable=fake_hang:1"])]


class TestChecks:
    def test_every_column_catches_its_violation(self, aws_endpoint, tmp_path):
        """A clean run with one violation planted per column reports a violation in each."""
        config = Config(seed=5, faults=0, hosts=1, slots=2, settle_seconds=180.0,
                        tenants=(("globex", 2), ("paused", 0)))
        chaos = Chaos(config, tmp_path, aws_endpoint)
        planted = []
        try:
            chaos.sampler.caps["globex"] = 1  # cap / cap-tools: two jobs run under a cap of 1
            for _ in range(4):
                chaos.submit_job("slow", "globex")
            for _ in range(2):
                chaos.submit_job("ok", "globex")
            chaos.submit_job("ok", "paused")  # lost: never runs
            chaos.boot()
            chaos.wait_final(leave=1)  # all but the paused tenant's, however busy the machine
            chaos.wait_webhooks(20)
            chaos.stop_hosts()
            sweep = chaos.final_sweep()
            planted = plant_everything(chaos, tmp_path)
            time.sleep(0.5)
            report = checks.judge(chaos, sweep)
        finally:
            for proc in planted:
                proc.kill()
            chaos.close()
        found = {v.column for v in report.violations}
        assert found == set(COLUMNS), report.render()
        assert [v for v in report.violations
                if v.column == "rerun" and "lease ran out" in v.detail], report.render()
        assert [v for v in report.violations
                if v.column == "output" and "written 2 times" in v.detail], report.render()
        assert [v for v in report.violations
                if v.column == "rerun" and "ran past" in v.detail], report.render()
        e, f = [j.job_id for j in chaos.jobs.values() if j.tenant_id == "globex"][4:6]
        assert not [v for v in report.violations
                    if v.column == "rerun" and e in v.detail], report.render()
        assert [v for v in report.violations
                if v.column == "rerun" and f in v.detail and "no longer current" in v.detail], \
            report.render()
