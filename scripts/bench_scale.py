#!/usr/bin/env python3
"""Scale benchmark: what each routine read costs with 0, 10,000 and 100,000 finished jobs.

On `imposer local` (moto behind imposer's index, so a Query reads only its
page, as in DynamoDB), for each history size: seed N finished job
records of 50 tenants over four weeks straight into the jobs table, their
hourly rollups, and 20 open jobs; then time `why`, `jobs --tenant`, `stats`,
`capacity`, the borrow view's refresh, a sweep and one job's acquire and
release, the worker's two transactions (median of several runs,
in-process so interpreter start-up is not measured). Prints the table and the
ratio of the 100k row to the 0 row against the targets (every ratio <= 1.5,
why < 1 s and the borrow refresh < 100 ms at 100k).

Then it runs `imposer run` on 200 jobs and turns the AWS calls the worker
made (its stop log) into DynamoDB request units and a price per million jobs,
saying how many of the jobs found their tenant at its cap (the worker's
``cap_defer`` log lines).
moto's ConsumedCapacity is a constant, so units are counted from the items'
real sizes with DynamoDB's rules (see ``units``); the price constants are
at the top of this file.

    python scripts/bench_scale.py [--sizes 0,10000,100000] [--repeat 5]
    python scripts/bench_scale.py --skip-costs      # the size table only
    python scripts/bench_scale.py --costs-only      # the 200-job cost part only

``--costs-only`` seeds nothing and skips the size table: it runs only the
200-job `imposer run` and prints its calls, units and price, so a job's cost
can be re-measured in about a minute after a change to the worker.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: On-demand list prices, us-east-1, USD (DynamoDB after the November 2024 reduction).
PRICE_WRU = 0.625 / 1e6
PRICE_RRU = 0.125 / 1e6
PRICE_SQS = 0.40 / 1e6
PRICE_S3_WRITE = 0.005 / 1000   # PUT, COPY, POST, LIST
PRICE_S3_READ = 0.0004 / 1000   # GET, HEAD
TENANTS = [f"tenant{n:02d}" for n in range(50)]
HOSTS = [f"host{n}" for n in range(6)]
DAY = 86400.0


def start_stack() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "imposer", "local", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = proc.stdout.readline().strip().split("=", 1)[1]
    os.environ.update(AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="bench",
                      AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    return proc, url


def records(count: int, start: float, end: float, seed_: int):
    """*count* finished job records of the 50 tenants, started between *start* and *end*."""
    from imposer.models import JobRecord, JobStatus

    rng = random.Random(seed_)
    for n in range(count):
        began = start + rng.random() * (end - start)
        wait = rng.expovariate(1 / 30)
        run = rng.lognormvariate(3.5, 0.5)
        yield JobRecord(
            job_id=uuid.uuid4().hex, tenant_id=TENANTS[n % len(TENANTS)],
            status=JobStatus.SUCCEEDED, token=f"t{n}", submitted_at=began - wait,
            received_at=began - wait, started_at=began, finished_at=began + run, attempts=1,
            queue_wait=wait, run_seconds=run, host=rng.choice(HOSTS), slot=rng.randrange(8),
            output="s3://b/tenants/x/plate.pdf", expires_at=int(began + run + 35 * DAY))


def seed(settings, backends, history: int, now: float) -> tuple[str, str]:
    """Seed one stack: the same recent work in every row, plus *history* older records.

    Every row has the same last two days (2,500 finished jobs, 50 per tenant),
    the same four weeks of hourly rollups from six hosts and the same 20 open
    jobs, so every command returns the same answer in every row; only the
    history behind them grows (records between four weeks and two days old).
    """
    from imposer.aws.dynamodb import serialize
    from imposer.models import JobRequest
    from imposer.reports.history import from_records, to_deltas

    client = backends.dynamo.client
    batch: list = []

    def put(record) -> None:
        batch.append({"PutRequest": {"Item": serialize(record.to_item())}})
        if len(batch) == 25:
            flush()

    def flush() -> None:
        pending = batch[:]
        batch.clear()
        while pending:
            resp = client.batch_write_item(RequestItems={settings.jobs_table: pending})
            pending = resp.get("UnprocessedItems", {}).get(settings.jobs_table, [])

    for record in records(2500, now - 2 * DAY, now - 600, 1):
        put(record)
    for record in records(history, now - 28 * DAY, now - 2 * DAY, history):
        put(record)
    flush()
    fleet = list(records(5000, now - 28 * DAY, now - 600, 2))
    for row in from_records(fleet, slots_per_host=8, now=now):
        backends.rollups.add(row.hour, row.host, row.slots, to_deltas(row))
    open_job = None
    for n in range(20):
        req = JobRequest(job_id=f"open-{n}", tenant_id=TENANTS[n % 5], token="x",
                         input="s3://b/tenants/x/in.pdf", layout={"preset": "a5-4up-sra3"},
                         output="s3://b/tenants/x/out.pdf", submitted_at=now - 60 + n)
        backends.jobs.note_waiting(req, now - 60 + n, "at tenant cap", deferred=True)
        if n < 4:
            backends.leases.acquire(req, "host0", n)
        open_job = open_job or (req.tenant_id, req.job_id)
    return open_job


def timed(fn, repeat: int) -> float:
    fn()  # warm: connection pools, imports
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def measure(size: int, repeat: int) -> dict[str, float]:
    from imposer.cli.reports import run_capacity, run_stats
    from imposer.reports.why import investigate
    from imposer.settings import Settings
    from imposer.state.provision import provision
    from imposer.worker.dispatch.borrowing import BorrowPolicy
    from imposer.worker.threads.sweep import sweep
    from imposer.worker.wiring import connect

    tag = uuid.uuid4().hex[:8]
    settings = Settings.load({}, table_prefix=f"scale-{tag}", queue_name=f"q-{tag}",
                             dlq_name=f"q-{tag}-dlq", bucket=f"b-{tag}", borrow=True)
    provision(settings)
    backends = connect(settings)
    now = time.time()
    began = time.monotonic()
    tenant, job = seed(settings, backends, size, now)
    seeded = time.monotonic() - began
    borrow = BorrowPolicy(True, 1, backends.leases, backends.jobs, backends.tenants)
    quiet = []
    figures = {
        "why": timed(lambda: investigate(backends.jobs, backends.leases, backends.tenants,
                                         settings, tenant, job, now), repeat),
        "jobs --tenant": timed(lambda: backends.jobs.for_tenant(TENANTS[7], limit=50), repeat),
        "stats": timed(lambda: run_stats(settings, DAY, True, quiet.append), repeat),
        "capacity": timed(lambda: run_capacity(settings, 28 * DAY, None, True, None,
                                               quiet.append), repeat),
        "borrow refresh": timed(borrow.refresh, repeat),
        "sweep": timed(lambda: sweep(backends.leases, backends.metrics), repeat),
        "acquire+release": timed(lambda: lease_round(backends), repeat),
    }
    print(f"  seeded {size:,} records in {seeded:.0f}s", file=sys.stderr)
    return figures


def lease_round(backends) -> None:
    """The worker's hot path: one job's acquire and release (two transactions)."""
    from imposer.models import JobRequest, JobStatus

    job = uuid.uuid4().hex
    request = JobRequest(job_id=job, tenant_id=TENANTS[3], token=job, input="s3://b/in.pdf",
                         layout={"preset": "nup-2"}, output="s3://b/out.pdf")
    acquired = backends.leases.acquire(request, "bench", 0)
    backends.leases.release(acquired.lease, JobStatus.SUCCEEDED, output_epoch=acquired.lease.epoch)


def units(calls: dict[str, int], sizes: dict[str, float], jobs: int) -> tuple[float, float]:
    """DynamoDB request units per job from the worker's calls and the items' real sizes.

    Rules: a write costs ceil(KB) units, twice inside a transaction; a strongly
    consistent read ceil(size / 4 KB), an index (eventually consistent) read
    half that per 4 KB page; each index an item write changes costs one more
    write. Sizes are the median item size per table, measured after the run.
    """
    import math

    def kb(table: str) -> float:
        return max(1, math.ceil(sizes.get(table, 1024) / 1024))

    write = read = 0.0
    for key, count in calls.items():
        op, _, table = key.partition("@")
        indexes = {"jobs": 2, "outbox": 1}.get(table.rsplit("-", 1)[-1], 0)
        if op == "dynamodb.TransactWriteItems":
            write += count * 2 * (3 * 1 + 2 + 1)  # lease, counter, job (+2 indexes), outbox
        elif op in ("dynamodb.UpdateItem", "dynamodb.PutItem", "dynamodb.DeleteItem"):
            write += count * (kb(table) + indexes)
        elif op == "dynamodb.GetItem":
            read += count * max(1, math.ceil(sizes.get(table, 1024) / 4096))
        elif op in ("dynamodb.Query", "dynamodb.Scan", "dynamodb.BatchGetItem"):
            read += count * 0.5
    return write / jobs, read / jobs


def per_job_costs(url: str) -> None:
    """Run 200 jobs through `imposer run` and price what they cost in AWS calls."""
    from imposer.aws.dynamodb import serialize
    from imposer.client import submit
    from imposer.dev.samples import A5, numbered_pdf
    from imposer.settings import Settings
    from imposer.state.provision import provision
    from imposer.worker.wiring import connect

    tag = uuid.uuid4().hex[:8]
    names = dict(table_prefix=f"cost-{tag}", queue_name=f"q-{tag}", dlq_name=f"q-{tag}-dlq",
                 bucket=f"b-{tag}")
    settings = Settings.load({}, **names)
    provision(settings)
    tmp = Path(tempfile.mkdtemp(prefix="imposer-bench-"))
    pdf = numbered_pdf(tmp / "a5.pdf", 4, *A5)
    jobs = 200
    for n in range(jobs):
        submit(f"tenant{n % 10}", pdf, "a5-4up-sra3", bucket=settings.bucket,
               queue=settings.queue_name)
    env = dict(os.environ, IMPOSER_ENGINE="open", IMPOSER_HOST_ID="cost",
               IMPOSER_QUEUE=settings.queue_name, IMPOSER_DLQ=settings.dlq_name,
               IMPOSER_BUCKET=settings.bucket, IMPOSER_TABLE_PREFIX=settings.table_prefix,
               IMPOSER_DEFER_SECONDS="1", IMPOSER_POLL_SECONDS="1",
               IMPOSER_WORK_DIR=str(tmp / "work"))
    log = tmp / "worker.log"
    with open(log, "w") as out:
        subprocess.run([sys.executable, "-m", "imposer", "run", "--exit-when-idle"], env=env,
                       stdout=out, stderr=subprocess.STDOUT, check=True, timeout=1800)
    stopped = [json.loads(line) for line in log.read_text().splitlines()
               if line.startswith("{") and '"action": "stopped"' in line][-1]
    calls = stopped["aws_calls"]
    # Jobs that found their tenant at its cap (the worker logs each deferral as cap_defer).
    capped = {json.loads(line).get("job_id") for line in log.read_text().splitlines()
              if line.startswith("{") and '"action": "cap_defer"' in line}
    backends = connect(settings)
    sizes = {}
    for table in (settings.jobs_table, settings.leases_table, settings.outbox_table):
        items = list(backends.dynamo.scan(table))
        lengths = sorted(len(json.dumps(serialize(i))) for i in items) or [1024]
        sizes[table.rsplit("-", 1)[-1]] = lengths[len(lengths) // 2]
        sizes[table] = sizes[table.rsplit("-", 1)[-1]]
    wru, rru = units(calls, sizes, jobs)
    sqs = sum(n for k, n in calls.items() if k.startswith("sqs.")) / jobs
    # Tenant side: one PutObject and one SendMessage per job; the child: a GetObject of the
    # input and a PutObject of its plate; the parent's HeadObject, CopyObject, DeleteObject.
    s3_writes = sum(n for k, n in calls.items() if k in (
        "s3.CopyObject", "s3.DeleteObject", "s3.PutObject")) / jobs + 2
    s3_reads = sum(n for k, n in calls.items() if k in ("s3.HeadObject", "s3.GetObject")) / jobs + 1
    sqs_total = sqs + 1
    dollars = 1e6 * (wru * PRICE_WRU + rru * PRICE_RRU + sqs_total * PRICE_SQS
                     + s3_writes * PRICE_S3_WRITE + s3_reads * PRICE_S3_READ)
    dynamo = {k: round(n / jobs, 2) for k, n in sorted(calls.items()) if k.startswith("dynamodb")}
    print(f"\nper job, from `imposer run` of {jobs} jobs (10 tenants, cap 4, deferral 1 s; "
          f"{len(capped)} job(s) hit the cap):")
    print(f"  SQS requests {sqs_total:.2f} (worker {sqs:.2f} + the tenant's send)")
    total = sum(n for k, n in calls.items() if k.startswith("dynamodb")) / jobs  # unrounded
    print(f"  DynamoDB calls {total:.2f}: {dynamo}")
    print(f"  DynamoDB units: {wru:.1f} write, {rru:.1f} read (item sizes, bytes: "
          f"{ {k: v for k, v in sizes.items() if '-' not in k} })")
    print(f"  S3: {s3_writes:.1f} writes, {s3_reads:.1f} reads (tenant upload, child, promotion)")
    print(f"  on-demand price per million jobs: ${dollars:,.2f} "
          f"(WRU ${PRICE_WRU * 1e6:.3f}/M, RRU ${PRICE_RRU * 1e6:.3f}/M, SQS "
          f"${PRICE_SQS * 1e6:.2f}/M, S3 ${PRICE_S3_WRITE * 1e3:.3f}/1k writes, "
          f"${PRICE_S3_READ * 1e3:.4f}/1k reads; us-east-1 list prices)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-costs", action="store_true", help="the size table only")
    parser.add_argument("--costs-only", action="store_true",
                        help="skip the size table; run only the 200-job cost part")
    args = parser.parse_args()
    if args.costs_only and args.skip_costs:
        parser.error("--costs-only and --skip-costs leave nothing to run")
    sizes = [int(s) for s in args.sizes.split(",")]
    proc, url = start_stack()
    try:
        if args.costs_only:
            per_job_costs(url)
            return 0
        rows = {size: measure(size, args.repeat) for size in sizes}
        names = list(next(iter(rows.values())))
        print(f"{'records':>9}  " + "  ".join(f"{n:>14}" for n in names))
        for size, row in rows.items():
            print(f"{size:>9,}  " + "  ".join(f"{1000 * row[n]:>12.1f}ms" for n in names))
        low, high = rows[sizes[0]], rows[sizes[-1]]
        ratios = {n: high[n] / low[n] for n in names}
        print(f"{'ratio':>9}  " + "  ".join(f"{ratios[n]:>14.2f}" for n in names)
              + f"   ({sizes[-1]:,} vs {sizes[0]:,}; target <= 1.5 each)")
        ok = all(r <= 1.5 for r in ratios.values()) and high["why"] < 1.0 \
            and high["borrow refresh"] < 0.1
        print(f"why {1000 * high['why']:.0f} ms (target < 1000), borrow refresh "
              f"{1000 * high['borrow refresh']:.0f} ms (target < 100) at {sizes[-1]:,}: "
              f"{'met' if ok else 'NOT MET'}")
        if not args.skip_costs:
            per_job_costs(url)
    finally:
        proc.terminate()
        proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
