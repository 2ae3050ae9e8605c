"""The operator's questions: `jobs`, `why`, `stats`, `capacity`, and `fetch` a plate.

None of them reads the job history whole: a tenant's jobs are paged through
an index by submission time, live work comes from the open-jobs index, and
stats and capacity read the hourly rollups. Only ``jobs --export`` scans.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

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
from imposer.models.exits import Exit
from imposer.settings import Settings

if TYPE_CHECKING:
    from imposer.reports.capacity import Thresholds, Verdict

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


def not_received(queue) -> int:
    """Messages in the queue no worker has received yet: their jobs have no record so far."""
    depth = queue.depth()
    return depth["visible"] + depth["delayed"]


def queue_line(waiting: int) -> str:
    return (f"queue: {waiting} message(s) not received by a worker yet (a job has a record "
            "from its first receive)")


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
    if record is None:
        answer = explain(job_id, None, [], {}, settings.default_cap, [], [], settings.slots,
                         settings, time.time())
    else:
        answer = investigate(b.jobs, b.leases, b.tenants, settings, owner, job_id, time.time())
    waiting = not_received(b.queue) if record is None else None
    share = None
    if settings.share_half_life > 0 and record is not None and not record.status.final \
            and answer.code != "running":
        share = share_of(settings, b, owner, time.time())
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


@click.command()
@click.option("--since", callback=duration, default="24h", show_default=True,
              metavar="DURATION", help="How far back the history goes (30m, 6h, 7d, 4w).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@settings_options(*TABLE_NAMES, *QUEUE_NAMES, "slots", "default_cap", "rollup_seconds",
                  "share_half_life")
@handle_errors
def stats(settings: Settings, since, as_json) -> None:
    """Per tenant running/waiting/deferred and p50/p95 wait; stranded capacity vs shortage.

    Stranded capacity (a slot idle while a tenant at its cap had work
    waiting) says raise caps or allow borrowing; shortage (all slots busy
    while a tenant below its cap waited) says buy a licence. Live work comes
    from imposer's own records, history from its hourly rollups.
    """
    run_stats(settings, since, as_json, click.echo)


@click.command()
@click.option("--since", callback=duration, default="28d", show_default=True,
              metavar="DURATION", help="How far back to look (30m, 6h, 7d, 4w).")
@click.option("--window", callback=duration, hidden=True, metavar="DURATION",
              deprecated="say --since instead")
@click.option("--util-threshold", type=float, default=0.8, show_default=True,
              help="A working day is busy above this slot utilisation.")
@click.option("--day-share", type=float, default=0.5, show_default=True,
              help="Utilisation condition: busy on more than this share of working days.")
@click.option("--wait-threshold", type=float, default=180, show_default=True,
              help="A job is slow when it waited longer than this many seconds.")
@click.option("--slow-share", type=float, default=0.2, show_default=True,
              help="Wait condition: more than this share of jobs slow.")
@click.option("--chart", "chart_path", type=OutputFile(),
              help="Also draw daily utilisation and slow-job share to this PNG "
                   "(needs the chart extra).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and its days as JSON.")
@click.option("--emit", is_flag=True,
              help="Also log the verdict as EMF metric lines for CloudWatch (licence_busy_days, "
                   "licence_slow_jobs, licence_at_capacity), and skip the simulation an "
                   "at-capacity verdict prints; imposer-capacity.timer runs this hourly.")
@settings_options(*TABLE_NAMES, "slots", "metrics_namespace")
@handle_errors
def capacity(settings: Settings, since, window, util_threshold, day_share, wait_threshold,
             slow_share, chart_path, as_json, emit) -> None:
    """Is a second licence warranted? The seed's rule, both conditions at once.

    At capacity only when slot utilisation is above 80% on more than half of
    working days AND queue wait is above 3 minutes for more than 20% of jobs;
    one condition alone is reported as a likely transient burst.
    """
    from imposer.reports.capacity import Thresholds

    thresholds = Thresholds(util=util_threshold, day_share=day_share,
                            wait_seconds=wait_threshold, slow_share=slow_share)
    run_capacity(settings, since if window is None else window, thresholds, as_json,
                 chart_path, click.echo, emit=emit)


def run_stats(settings: Settings, since_seconds: float, as_json: bool,
              echo: Callable[[str], None], *, now: float | None = None) -> dict:
    """Read the rollups of the window and the open jobs, then print the figures."""
    from imposer.reports.formatting import format_stats
    from imposer.reports.history import HostHour
    from imposer.reports.overview import summarise
    from imposer.worker.wiring import connect

    backends = connect(settings)
    now = backends.clock.time() if now is None else now
    since = now - since_seconds
    items = list(backends.rollups.read(since, now))
    rows = [HostHour.from_item(i) for i in items]
    data = summarise(rows, backends.jobs.open_jobs(), now=now, since=since,
                     caps=backends.tenants.caps(), default_cap=settings.default_cap,
                     slots_per_host=settings.slots)
    # what the records and rollups cannot know yet: messages not received, finishes not flushed
    newest = max((float(i["flushed_at"]) for i in items if "flushed_at" in i), default=None)
    data["queue"] = {"not_received": not_received(backends.queue)}
    data["rollups"] = {"newest_flush": newest, "every_seconds": settings.rollup_seconds,
                       "age_seconds": None if newest is None else round(now - newest, 1)}
    if settings.share_half_life > 0:
        data["fair_share"] = fair_share_of(settings, backends, now)
    if as_json:
        echo(json.dumps(data, indent=2))
    else:
        for line in format_stats(data):
            echo(line)
        for line in format_fair_share(data.get("fair_share"), settings.share_half_life):
            echo(line)
    return data


def fair_share_of(settings: Settings, backends, now: float) -> list[dict]:
    """Usage against weighted share per tenant: the usage items (one per tenant), the
    tenants' rows and who has queued work (the open index); nothing that grows with history."""
    from imposer.worker.dispatch.shares import usage_table

    configs = backends.tenants.list()
    open_jobs = backends.jobs.open_jobs(("queued", "running"))
    hosts = {r.host for r in open_jobs if r.status.value == "running" and r.host}
    slots = settings.slots * max(1, len(hosts))
    rows = usage_table(
        backends.leases.usage(), {c.tenant_id: c.weight for c in configs if c.weight is not None},
        {c.tenant_id: c.cap for c in configs if c.cap is not None}, settings.default_cap,
        {r.tenant_id for r in open_jobs if r.status.value == "queued"}, now,
        settings.share_half_life, slots)
    return [{**row, "fleet_slots": slots} for row in rows]


def share_of(settings: Settings, backends, tenant: str, now: float) -> dict:
    """One tenant's fair-share row (``fair_share_of``) for `why`, with its cap and effective
    cap: the slots its share is of the fleet's, rounded up, never above its cap."""
    import math

    rows = {r["tenant_id"]: r for r in fair_share_of(settings, backends, now)}
    cap = backends.tenants.cap_for(tenant)
    row = rows.get(tenant) or {"tenant_id": tenant, "usage_seconds": 0.0,
                               "weight": backends.tenants.weight_for(tenant), "share": 0.0,
                               "used": 0.0, "gap": 0.0, "fleet_slots": settings.slots}
    return {**row, "cap": cap, "effective_cap": min(cap, max(
        1, math.ceil(row["share"] * row["fleet_slots"] - 1e-9)))}


def format_fair_share(rows: list[dict] | None, half_life: float) -> list[str]:
    """The fair-share table of `imposer stats`: usage vs weighted share per tenant."""
    if rows is None:
        return []
    from imposer.reports.formatting import format_seconds

    lines = ["", f"fair share (usage half-life {format_seconds(half_life)}): licence-seconds "
             "used lately against each tenant's weighted share"]
    if not rows:
        return lines + ["  no tenant has used licence time lately"]
    lines.append(f"  {'TENANT':20} {'USED (S)':>10} {'WEIGHT':>6} {'USED':>6} {'SHARE':>6} "
                 f"{'GAP':>7}")
    for r in rows:
        lines.append(f"  {r['tenant_id'][:20]:20} {r['usage_seconds']:>10.1f} "
                     f"{r['weight']:>6g} {r['used']:>6.1%} {r['share']:>6.1%} "
                     f"{100 * r['gap']:>+6.1f}")
    return lines + ["  GAP: points of licence time above (+) or below (-) the share; the "
                    "furthest below gets the next free slot"]


def run_capacity(settings: Settings, window_seconds: float | None,
                 thresholds: Thresholds | None, as_json: bool, chart_path: str | None,
                 echo: Callable[[str], None], *, now: float | None = None,
                 emit: bool = False) -> Verdict:
    """Apply the licence rule to the rollups of the window; optionally draw the chart and
    log the verdict as metrics."""
    import attrs

    from imposer.reports.capacity import Thresholds, chart, evaluate_hours
    from imposer.reports.capacity import emit as emit_verdict
    from imposer.reports.formatting import format_capacity
    from imposer.reports.history import HostHour
    from imposer.state.rollups import CAPACITY_FIELDS
    from imposer.worker.wiring import connect

    thresholds = thresholds or Thresholds()
    if window_seconds is not None:
        thresholds = attrs.evolve(thresholds, window_seconds=window_seconds)
    backends = connect(settings)
    now = backends.clock.time() if now is None else now
    rows = [HostHour.from_item(i) for i in backends.rollups.read(
        now - thresholds.window_seconds, now, CAPACITY_FIELDS)]
    verdict = evaluate_hours(rows, now=now, thresholds=thresholds)
    if emit:
        emit_verdict(verdict, backends.metrics)
    if chart_path:
        chart(verdict, chart_path)
    if as_json:
        echo(json.dumps(verdict.to_dict(), indent=2))
    else:
        for line in format_capacity(verdict):
            echo(line)
        if chart_path:
            echo(f"\nchart written to {chart_path}")
    # -- at capacity: how much would more slots help? (imposer simulate) ----------------------
    # Not for the hourly --emit: it reads four weeks of jobs, which is for an operator's run.
    if verdict.at_capacity and not as_json and not emit:
        from imposer.cli.simulate import capacity_outlook

        capacity_outlook(settings, backends, rows, verdict, now, echo)
    return verdict
