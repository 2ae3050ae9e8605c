"""Read-only views for operators: job records, why a job waits, stats, capacity."""

from __future__ import annotations

import json
import time

import click

from imposer.cliutil import AWS_NAMES, handle_errors, settings_options
from imposer.errors import ConfigError
from imposer.settings import Settings


@click.command()
@click.option("--tenant", help="Only this tenant's jobs.")
@click.option("--status", "statuses", multiple=True,
              type=click.Choice(["queued", "running", "retrying", "succeeded", "failed", "dead"]),
              help="Only jobs in this state (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of job records.")
@settings_options(*AWS_NAMES, "default_cap")
@handle_errors
def jobs(settings: Settings, tenant, statuses, as_json) -> None:
    """List job records: status, attempts, wait, and why a job waits or failed."""
    import attrs

    from imposer.wiring import connect

    records = connect(settings).jobs.list(tenant, statuses or None)
    if as_json:
        out = []
        for r in records:
            item = attrs.asdict(r)
            item["status"] = r.status.value
            item.pop("epoch", None)
            out.append(item)
        click.echo(json.dumps(out, indent=2, default=str))
        return
    if not records:
        click.echo("no jobs")
        return
    click.echo(f"{'JOB':34} {'TENANT':14} {'STATUS':10} {'TRIES':>5} {'WAIT':>7}  REASON")
    for r in records:
        wait = f"{r.queue_wait:.1f}s" if r.queue_wait is not None else "-"
        why = r.wait_reason or r.error or ""
        click.echo(f"{r.job_id:34} {r.tenant_id:14} {r.status.value:10} {r.attempts:>5} "
                   f"{wait:>7}  {why}")



@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@settings_options(*AWS_NAMES, "slots", "default_cap", "defer_seconds", "retry_seconds")
@handle_errors
def why(settings: Settings, job_id: str, as_json: bool) -> None:
    """Say what JOB_ID is doing, why it waits, and when it should start."""
    from imposer.why import explain
    from imposer.wiring import connect

    b = connect(settings)
    caps = {c.tenant_id: c.cap for c in b.tenants.list() if c.cap is not None}
    answer = explain(job_id, b.jobs.get(job_id), b.leases.leases(), caps, settings.default_cap,
                     b.jobs.list(), settings.slots, settings, time.time())
    if as_json:
        click.echo(json.dumps(answer.to_dict(), indent=2))
        return
    click.echo(f"{job_id}: {answer.code}")
    click.echo(f"  {answer.reason}")
    if answer.predicted_start and answer.code not in ("running", "succeeded"):
        when = time.strftime("%H:%M:%S", time.localtime(answer.predicted_start))
        span = ""
        if answer.earliest and answer.latest:
            span = (f" (between {time.strftime('%H:%M:%S', time.localtime(answer.earliest))}"
                    f" and {time.strftime('%H:%M:%S', time.localtime(answer.latest))})")
        click.echo(f"  predicted start {when}{span}; confidence: {answer.confidence}")



def _duration(ctx, param, value):
    from imposer.report_cli import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.option("--since", callback=_duration, metavar="DURATION",
              help="Only jobs active in the last DURATION (30m, 6h, 7d, 4w); default: all.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@settings_options(*AWS_NAMES, "slots", "default_cap")
@handle_errors
def stats(settings: Settings, since, as_json) -> None:
    """Per tenant running/waiting/deferred and p50/p95 wait; stranded capacity vs shortage.

    Stranded capacity (a slot idle while a tenant at its cap had work
    waiting) says raise caps or allow borrowing; shortage (all slots busy
    while a tenant below its cap waited) says buy a licence. Read from
    imposer's own job records, not SQS's age metric.
    """
    from imposer.report_cli import run_stats

    run_stats(settings, since, as_json, click.echo)


@click.command()
@click.option("--window", callback=_duration, default="28d", show_default=True,
              metavar="DURATION", help="How far back to look.")
@click.option("--util-threshold", type=float, default=0.8, show_default=True,
              help="A working day is busy above this slot utilisation.")
@click.option("--day-share", type=float, default=0.5, show_default=True,
              help="Utilisation condition: busy on more than this share of working days.")
@click.option("--wait-threshold", type=float, default=180, show_default=True,
              help="A job is slow when it waited longer than this many seconds.")
@click.option("--slow-share", type=float, default=0.2, show_default=True,
              help="Wait condition: more than this share of jobs slow.")
@click.option("--chart", "chart_path", type=click.Path(dir_okay=False),
              help="Also draw daily utilisation and slow-job share to this PNG "
                   "(needs the chart extra).")
@click.option("--json", "as_json", is_flag=True)
@settings_options(*AWS_NAMES, "slots", "default_cap")
@handle_errors
def capacity(settings: Settings, window, util_threshold, day_share, wait_threshold, slow_share,
             chart_path, as_json) -> None:
    """Is a second licence warranted? The seed's rule, both conditions at once.

    At capacity only when slot utilisation is above 80% on more than half of
    working days AND queue wait is above 3 minutes for more than 20% of jobs;
    one condition alone is reported as a likely transient burst.
    """
    from imposer.capacity import Thresholds
    from imposer.report_cli import run_capacity

    thresholds = Thresholds(util=util_threshold, day_share=day_share,
                            wait_seconds=wait_threshold, slow_share=slow_share)
    run_capacity(settings, window, thresholds, as_json, chart_path, click.echo)


