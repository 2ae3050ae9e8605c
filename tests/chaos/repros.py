"""Minimal reproductions of what the chaos runs found, one function each (not collected by pytest).

    python -m tests.chaos.repros poison [--imposer-rev main]
    python -m tests.chaos.repros same-host-id [--imposer-rev main]
    python -m tests.chaos.repros dead-idle-child [--imposer-rev main]
    python -m tests.chaos.repros slow-acquire [--imposer-rev main]
    python -m tests.chaos.repros lost-reply [--imposer-rev main]
    python -m tests.chaos.repros stop-during-boot [--imposer-rev main]
    python -m tests.chaos.repros parked-stall [--imposer-rev main]

Each builds the smallest cluster that shows the problem from the harness's
parts (``tests.fixtures.chaos``), prints what happened and exits 1 while
the problem is there, 0 once it is fixed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import boto3

from imposer.client import submit
from imposer.models import TenantConfig
from imposer.worker.wiring import connect
from tests.fixtures.chaos.cluster import ROOT, Host, Stack, Timing, checkout, tools
from tests.fixtures.pdfs import numbered_pdf


def _layout(**variables) -> dict:
    return {"version": 1, "kind": "nup", "sheet": {"size": "A4"},
            "grid": {"cols": 1, "rows": 1},
            "pdftoolbox": {"profile": "Impose.kfpx",
                           "variables": {k: str(v) for k, v in variables.items()}}}


def _until(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def poison(tmp: Path, src: Path) -> bool:
    """A job whose message was received 3 times meets 8 s of AWS errors: it is dead-lettered.

    The acquire transaction fails (a DynamoDB 500), the dispatcher defers the
    message, the deferral fails too (an SQS 500), and the poison guard takes
    the transient error for a poison message: at the third receive it moves a
    valid job to the DLQ. Its record never becomes final and no webhook comes.
    """
    timing = Timing()
    stack = Stack(tmp, timing, src=src)
    s = stack.settings
    req = submit("acme", numbered_pdf(tmp / "art.pdf", 2), _layout(fake_sleep=0.2),
                 bucket=s.bucket, queue=s.queue_name)
    sqs = boto3.client("sqs")
    url = sqs.get_queue_url(QueueName=s.queue_name)["QueueUrl"]
    for _ in range(2):  # two earlier receives, as by hosts that died holding it
        assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=5)[
            "Messages"]
    host = Host("poison-a", 1, stack, timing, tmp, seed=1)
    host.proxy.inject("error", 8, service="dynamodb", operation="TransactWriteItems")
    host.proxy.inject("error", 8, service="sqs", operation="ChangeMessageVisibility")
    try:
        host.start()
        dlq = sqs.get_queue_url(QueueName=s.dlq_name)["QueueUrl"]
        got: list = []
        _until(lambda: got.extend(sqs.receive_message(
            QueueUrl=dlq, MessageAttributeNames=["All"]).get("Messages", [])) or got, 20)
        time.sleep(5)
        record = connect(s).jobs.get("acme", req.job_id)
    finally:
        host.close()
        stack.close()
    print(f"job record: {record and record.status.value}")
    for m in got:
        print(f"in the DLQ: job {json.loads(m['Body'])['job_id']}: "
              f"{m['MessageAttributes']['imposer_error']['StringValue'][:200]}")
    return bool(got)


def same_host_id(tmp: Path, src: Path) -> bool:
    """Two workers with one host id on one machine (other queue, tables, work dir): the
    second one's boot SIGKILLs the first one's running tool, a counted failure."""
    timing = Timing(job_timeout=60.0)
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    first = Stack(tmp / "a", timing, src=src)
    second = Stack(tmp / "b", timing, endpoint=first.url, src=src)
    s = first.settings
    req = submit("acme", numbered_pdf(tmp / "art.pdf", 2), _layout(fake_sleep=10),
                 bucket=s.bucket, queue=s.queue_name)
    a = Host("worker-1", 1, first, timing, tmp / "a", seed=1)
    b = Host("worker-1", 1, second, timing, tmp / "b", seed=2)
    try:
        a.start()
        _until(lambda: tools({str(a.work_root)}), 30)
        before = tools({str(a.work_root)})
        b.start()
        _until(lambda: tools({str(a.work_root)}) != before, 8)
        time.sleep(2)
        record = connect(s).jobs.get("acme", req.job_id)
    finally:
        for host in (a, b):
            host.close()
        first.close()
    print(f"A's tool before B booted: {before}")
    print(f"A's job after B booted: {record.status.value}, failures {record.failures}, "
          f"{record.error}")
    return bool(record.failures)


def dead_idle_child(tmp: Path, src: Path) -> bool:
    """An idle pool child is killed; the next job sent to its slot meets a broken pipe,
    is logged as a handler error and counted as a failure it never had."""
    timing = Timing()
    stack = Stack(tmp, timing, src=src)
    s = stack.settings
    host = Host("idle-a", 1, stack, timing, tmp, seed=1)
    try:
        host.start()
        _until(host.booted, 30)
        _until(host.pool_children, 10)
        host.pool_children()[0].kill()
        req = submit("acme", numbered_pdf(tmp / "art.pdf", 2), _layout(fake_sleep=0.2),
                     bucket=s.bucket, queue=s.queue_name)
        _until(lambda: (r := connect(s).jobs.get("acme", req.job_id)) and r.status.final, 30)
        record = connect(s).jobs.get("acme", req.job_id)
        log = host.logs[-1].read_text()
    finally:
        host.close()
        stack.close()
    broken = "BrokenPipeError" in log
    print(f"job: {record.status.value}, attempts {record.attempts}, failures "
          f"{record.failures}; BrokenPipeError in the worker log: {broken}")
    return broken or record.failures > 0


def slow_acquire(tmp: Path, src: Path) -> bool:
    """An acquire that takes longer than the lease TTL (a stalled or retrying DynamoDB) commits
    a lease that has already expired; the job is launched anyway, the sweep reclaims the
    lease at once, and the job runs a second time beside the first."""
    timing = Timing()
    stack = Stack(tmp, timing, src=src)
    s = stack.settings
    req = submit("acme", numbered_pdf(tmp / "art.pdf", 2), _layout(fake_sleep=3),
                 bucket=s.bucket, queue=s.queue_name)
    host = Host("slow-a", 2, stack, timing, tmp, seed=1)
    try:
        host.start()
        _until(host.booted, 30)
        # the first acquire is held 9 s (> the 8 s TTL) before it reaches DynamoDB
        host.proxy.inject("delay", 1.0, service="dynamodb", operation="TransactWriteItems",
                          delay=timing.lease_ttl + 1)
        seen: set = set()
        _until(lambda: seen.update((t.job_id, t.epoch) for t in tools({str(host.work_root)}))
               or len(seen) > 1, 30)
        both = len({e for j, e in seen if j == req.job_id})
        _until(lambda: (r := connect(s).jobs.get("acme", req.job_id)) and r.status.final, 40)
        calls = sum(1 for line in (tmp / "calls.jsonl").read_text().splitlines()
                    if req.job_id in json.loads(line)["input"])
    finally:
        host.close()
        stack.close()
    print(f"attempts of the job seen running: {both}; tool runs: {calls}")
    return both > 1


def lost_reply(tmp: Path, src: Path) -> bool:
    """The reply to a committed release transaction is lost until botocore gives up; the
    worker's next try is refused (the lease is gone: its own release took it), so it takes
    the job for reclaimed and deletes the attempt's plate. The record says succeeded with
    that attempt as its output, but the plate never reaches the output key (a job with a
    webhook is saved only when the outbox sender promotes the plate first)."""
    timing = Timing()
    stack = Stack(tmp, timing, src=src)
    s = stack.settings
    req = submit("acme", numbered_pdf(tmp / "art.pdf", 2), _layout(fake_sleep=2),
                 bucket=s.bucket, queue=s.queue_name)
    host = Host("reply-a", 1, stack, timing, tmp, seed=1)
    try:
        host.start()
        _until(lambda: tools({str(host.work_root)}), 30)  # acquired: only the release is left
        host.proxy.inject("drop_reply", 6, service="dynamodb", operation="TransactWriteItems")
        _until(lambda: (r := connect(s).jobs.get("acme", req.job_id)) and r.status.final, 30)
        time.sleep(3 * timing.lease_ttl)  # the message comes back meanwhile
        record = connect(s).jobs.get("acme", req.job_id)
        key = req.output.split("/", 3)[3]
        plates = stack.s3.list_object_versions(Bucket=s.bucket, Prefix=key).get("Versions", [])
    finally:
        host.close()
        stack.close()
    print(f"job: {record.status.value}, output_epoch {record.output_epoch}; plates at the "
          f"output key: {len(plates)}")
    return record.status.value == "succeeded" and not plates


def stop_during_boot(tmp: Path, src: Path) -> bool:
    """A worker booting while AWS answers 500 is told to stop (SIGTERM twice): it exits 4
    ("AWS unreachable"), not 0; one SIGTERM is ignored until the boot retries end."""
    import signal

    timing = Timing()
    stack = Stack(tmp, timing, src=src)
    host = Host("boot-a", 1, stack, timing, tmp, seed=1)
    host.proxy.inject("error", 30)
    try:
        host.start()
        # Python is up and retrying its first AWS call (so its handlers are installed)
        if not _until(lambda: host.logs and '"aws_retry"' in host.logs[-1].read_text(), 60):
            print("the worker never retried an AWS call while booting: nothing shown")
            return True
        host.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        host.proc.send_signal(signal.SIGTERM)
        code = host.proc.wait(30)
        tail = host.logs[-1].read_text().strip().splitlines()[-1:]
    finally:
        host.close()
        stack.close()
    print(f"exit code {code}: {tail}")
    return code != 0


def parked_stall(tmp: Path, src: Path) -> bool:
    """An AWS error window across a capped tenant's release: the read of its parked notes
    fails before the release (no hand-over) and again after it (no hand-off), so with every
    slot free its three parked jobs wait out their park window (60 s here, 5 min by default);
    nothing reads the notes again."""
    timing = Timing(park=60.0)
    stack = Stack(tmp, timing, src=src)
    s = stack.settings
    connect(s).tenants.put(TenantConfig(tenant_id="t2", cap=1))
    pdf = numbered_pdf(tmp / "art.pdf", 2)
    reqs = [submit("t2", pdf, _layout(fake_sleep=3), bucket=s.bucket, queue=s.queue_name)
            for _ in range(4)]
    host = Host("stall-a", 3, stack, timing, tmp, seed=1)
    jobs = connect(s).jobs

    def final() -> int:
        return sum(1 for r in reqs if (rec := jobs.get("t2", r.job_id)) and rec.status.final)

    try:
        host.start()
        _until(lambda: tools({str(host.work_root)}), 30)  # the first job runs: its tool
        started = time.monotonic()  # sleeps 3 s from about now
        _until(lambda: host.logs[-1].read_text().count('"action": "cap_defer"') >= 3, 10)
        time.sleep(max(0.0, started + 1.5 - time.monotonic()))
        # the release fails for 3 s (settled again once it passes); the notes' reads for 7 s
        host.proxy.inject("error", 3, service="dynamodb", operation="TransactWriteItems")
        host.proxy.inject("error", 7, service="dynamodb", operation="Query")
        time.sleep(7)
        healed = time.time()
        _until(lambda: final() == len(reqs), 25)
        done = final()
        starts = sorted(r.started_at for r in (jobs.get("t2", q.job_id) for q in reqs)
                        if r and r.started_at and r.started_at > healed - 7)
        log = host.logs[-1].read_text()
    finally:
        host.close()
        stack.close()
    failed_read = "could not read the parked jobs" in log or "no hand-over" in log
    first = f"{starts[0] - healed:+.1f}s" if starts else "never"
    print(f"failed notes read seen: {failed_read}; next start after the errors ended: {first}; "
          f"jobs final within 25 s of that: {done} of {len(reqs)}")
    return done < len(reqs)


REPROS = {"poison": poison, "same-host-id": same_host_id, "dead-idle-child": dead_idle_child,
          "slow-acquire": slow_acquire, "lost-reply": lost_reply,
          "stop-during-boot": stop_during_boot, "parked-stall": parked_stall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted(REPROS))
    parser.add_argument("--imposer-rev", default=None,
                        help="run the workers on this git revision instead of this tree")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix=f"imposer-repro-{args.name}-"))
    src = checkout(args.imposer_rev, tmp / "src") if args.imposer_rev else ROOT
    found = REPROS[args.name](tmp, src)
    print(f"{args.name}: {'REPRODUCED' if found else 'not reproduced (fixed?)'}; logs in {tmp}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
