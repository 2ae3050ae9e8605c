"""A job's questions: `jobs` lists them, `why` explains one, `fetch` downloads its plate.

None of them reads the job history whole: a tenant's jobs are paged through
an index by submission time, and live work comes from the open-jobs index.
Only ``jobs --export`` scans.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from imposer.cli.common import (
    QUEUE_NAMES,
    TABLE_NAMES,
    OutputFile,
    duration,
    fail,
    handle_errors,
    settings_options,
)
from imposer.cli.reports import not_received, queue_line, share_of
from imposer.models.exits import Exit
from imposer.settings import Settings

STATUSES = ["queued", "running", "retrying", "succeeded", "failed", "dead"]


def _id(ctx, param, value):
    from imposer.models import valid_id

    if value is not None and not valid_id(value):
        raise click.BadParameter(f"{value!r} is not an id (1-128 of A-Z a-z 0-9 . _ -, "
                                 "starting with a letter or digit)")
    return value


@click.command()
@click.option("--tenant", callback=_id, help="A tenant's jobs, newest first (paged).")
@click.option("--status", "statuses", multiple=True, type=click.Choice(STATUSES),
              help="Only jobs in this state (repeatable).")
@click.option("--since", callback=duration, metavar="DURATION",
              help="Only jobs submitted in the last DURATION (30m, 6h, 7d).")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True,
              help="Jobs per page.")
@click.option("--cursor", help="Go on from where the previous page ended (it prints this).")
@click.option("--export", is_flag=True,
              help="Every record of the table as JSON lines (a full Scan: for exports only).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of job records.")
@settings_options(*TABLE_NAMES, *QUEUE_NAMES)
@handle_errors
def jobs(settings: Settings, tenant, statuses, since, limit, cursor, export, as_json) -> None:
    """List job records: status, attempts, wait, and why a job waits or failed.

    Without --tenant: the jobs that are queued, running or retrying now (the
    open-jobs index). With --tenant: that tenant's jobs by submission time.
    """
    import attrs

    from imposer.worker.wiring import connect

    backends = connect(settings)
    store = backends.jobs
    if export:
        for record in store.export():
            click.echo(json.dumps(_record(record, attrs), default=str))
        return
    next_cursor = None
    if tenant:
        start = _cursor(cursor, tenant) if cursor else None
        records, next_cursor = store.for_tenant(
            tenant, since=None if since is None else time.time() - since,
            statuses=statuses or None, limit=limit, cursor=start)
    else:
        records = store.open_jobs(statuses or None)
        if since is not None:
            records = [r for r in records if (r.submitted_at or 0) >= time.time() - since]
        records = records[:limit]
    if as_json:
        click.echo(json.dumps([_record(r, attrs) for r in records], indent=2, default=str))
    elif not records:
        click.echo("no jobs" if tenant else "no open jobs (give --tenant for a tenant's history)")
    else:
        click.echo(f"{'JOB':34} {'TENANT':14} {'STATUS':10} {'TRIES':>5} {'WAIT':>7}  REASON")
        for r in records:
            wait = f"{r.queue_wait:.1f}s" if r.queue_wait is not None else "-"
            why = r.wait_reason or r.error or ""
            click.echo(f"{r.job_id:34} {r.tenant_id:14} {r.status.value:10} {r.attempts:>5} "
                       f"{wait:>7}  {why}")
    if next_cursor is not None:
        click.echo(f"more: --cursor '{json.dumps(next_cursor)}'", err=True)
    if not tenant and not as_json:
        click.echo(queue_line(not_received(backends.queue)))


def _cursor(text: str, tenant: str) -> dict:
    """The page key `jobs` printed for *tenant*; anything else is a usage error, not a query."""
    import math

    try:
        start = json.loads(text[:2000])
    except ValueError:
        start = None
    if not (isinstance(start, dict) and set(start) == {"job_id", "tenant_id", "submitted_at"}
            and isinstance(start["job_id"], str) and start["tenant_id"] == tenant
            and isinstance(start["submitted_at"], (int, float))
            and math.isfinite(start["submitted_at"])):
        raise click.BadParameter(f"{text[:80]!r} is not a cursor `imposer jobs --tenant {tenant}`"
                                 " printed (copy it from its last line)", param_hint="--cursor")
    return start


def _record(record, attrs) -> dict:
    item = attrs.asdict(record)
    item["status"] = record.status.value
    item.pop("epoch", None)
    return item


def find_job(store, job_id: str, tenant: str | None):
    """Return (tenant, record) for JOB_ID, asking for --tenant when two tenants share it."""
    if tenant is not None:
        return tenant, store.get(tenant, job_id)
    found = store.find(job_id)
    if len(found) > 1:
        owners = ", ".join(sorted(r.tenant_id for r in found))
        raise click.UsageError(f"job id {job_id} exists for several tenants ({owners}); "
                               "give --tenant")
    return (found[0].tenant_id, found[0]) if found else (None, None)


@click.command()
@click.argument("job_id", callback=_id)
@click.option("--tenant", callback=_id, help="The job's tenant (needed when two share an id).")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@settings_options(*TABLE_NAMES, *QUEUE_NAMES, "slots", "default_cap", "defer_seconds",
                  "retry_seconds", "share_half_life")
@handle_errors
def why(settings: Settings, job_id: str, tenant, as_json: bool) -> None:
    """Say what JOB_ID is doing, why it waits, and when it should start.

    Exits 1 when no worker has seen the job yet.
    """
    from imposer.reports.why import explain, investigate
    from imposer.worker.wiring import connect

    b = connect(settings)
    owner, record = find_job(b.jobs, job_id, tenant)
    share = None
    if settings.share_half_life > 0 and record is not None and not record.status.final \
            and record.status.value != "running":
        share = share_of(settings, b, owner, time.time())
    if record is None:
        answer = explain(job_id, None, [], {}, settings.default_cap, [], [], settings.slots,
                         settings, time.time())
    else:
        answer = investigate(b.jobs, b.leases, b.tenants, settings, owner, job_id, time.time(),
                             share=share["share"] if share else None, waiting=b.waiting)
    waiting = not_received(b.queue) if record is None else None
    if as_json:
        payload = answer.to_dict()
        if record is None:
            payload["queue_not_received"] = waiting
        if share is not None:
            payload["fair_share"] = share
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(f"{job_id}: {answer.code}")
        click.echo(f"  {answer.reason}")
        if share is not None:
            click.echo(f"  fair share: {owner} used {share['used']:.1%} of recent licence "
                       f"time ({share['usage_seconds']:g} s) against a share of "
                       f"{share['share']:.1%} (weight {share['weight']:g}); effective cap "
                       f"{share['effective_cap']} of {share['cap']} while others wait")
        if answer.predicted_start and answer.code not in ("running", "succeeded"):
            when = time.strftime("%H:%M:%S", time.localtime(answer.predicted_start))
            span = ""
            if answer.earliest and answer.latest:
                span = (f" (between {time.strftime('%H:%M:%S', time.localtime(answer.earliest))}"
                        f" and {time.strftime('%H:%M:%S', time.localtime(answer.latest))})")
            click.echo(f"  predicted start {when}{span}; confidence: {answer.confidence}")
        if record is None:
            click.echo(f"  {queue_line(waiting)}")
    if record is None:
        raise SystemExit(int(Exit.FAILED))


@click.command()
@click.argument("job_id", callback=_id)
@click.option("--tenant", callback=_id, help="The job's tenant (needed when two share an id).")
@click.option("-o", "--output", "target", type=OutputFile(),
              help="Where to write the plate [default: JOB_ID.pdf].")
@settings_options(*TABLE_NAMES, "bucket")
@handle_errors
def fetch(settings: Settings, job_id: str, tenant, target) -> None:
    """Download a succeeded job's plate file."""
    from imposer.aws.s3 import Storage
    from imposer.models import TENANT_PREFIX, S3Uri
    from imposer.worker.wiring import connect

    owner, record = find_job(connect(settings).jobs, job_id, tenant)
    if record is None:
        fail(f"no job {job_id}" + (f" of tenant {tenant}" if tenant else ""), Exit.FAILED)
    if record.status.value != "succeeded" or not record.output:
        fail(f"job {job_id} is {record.status.value}; only a succeeded job has a plate",
             Exit.FAILED)
    uri = S3Uri.parse(record.output)
    if uri.bucket != settings.bucket or not uri.key.startswith(TENANT_PREFIX.format(tenant=owner)):
        fail(f"the plate {uri} lies outside {owner}'s prefix; not fetching it", Exit.FAILED)
    target = target or Path(f"{job_id}.pdf")
    size = Storage(settings.region).download(uri, target)
    click.echo(f"{target} ({size} bytes) from {uri}")


