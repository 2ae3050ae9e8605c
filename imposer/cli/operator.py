"""Read-only views for operators: job records, why a job waits, stats, capacity."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Callable

import click

from imposer.cli.common import AWS_NAMES, handle_errors, settings_options
from imposer.errors import ConfigError
from imposer.settings import Settings

if TYPE_CHECKING:
    from imposer.reports.capacity import Thresholds, Verdict


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of objects.")
@settings_options(*AWS_NAMES, "default_cap")
@handle_errors
def leases(settings: Settings, as_json: bool) -> None:
    """Show live leases: tenant, job, host, slot, age, expires in."""
    from imposer.worker.wiring import connect

    backends = connect(settings)
    now = time.time()
    rows = backends.leases.leases()
    if as_json:
        click.echo(json.dumps([{
            "tenant_id": l.tenant_id, "job_id": l.job_id, "host": l.host, "slot": l.slot,
            "acquired_at": l.acquired_at, "expires_at": l.expires_at, "borrowed": l.borrowed,
            "age_seconds": round(now - l.acquired_at, 3),
            "expires_in_seconds": round(l.expires_at - now, 3)} for l in rows], indent=2))
        return
    if not rows:
        click.echo("no live leases")
        return
    click.echo(f"{'TENANT':16} {'JOB':34} {'HOST':16} {'SLOT':>4} {'AGE':>8} {'EXPIRES IN':>10}")
    for l in rows:
        click.echo(f"{l.tenant_id:16} {l.job_id:34} {l.host:16} {l.slot:>4} "
                   f"{now - l.acquired_at:>7.0f}s {l.expires_at - now:>9.0f}s")


@click.group()
def tenants() -> None:
    """Tier overrides: per-tenant caps and webhook settings."""


@tenants.command("set")
@click.argument("tenant")
@click.option("--cap", type=click.IntRange(min=0), help="Concurrency cap (0 pauses the tenant).")
@click.option("--default-cap-override", "clear_cap", is_flag=True,
              help="Drop the override; use the default cap.")
@click.option("--webhook-secret", help="Secret that signs this tenant's webhooks.")
@click.option("--webhook-host", "webhook_hosts", multiple=True,
              help="Host a webhook URL may point at (repeat; *.example.com allowed).")
@settings_options(*AWS_NAMES, "default_cap")
@handle_errors
def tenants_set(settings: Settings, tenant: str, cap, clear_cap, webhook_secret, webhook_hosts):
    """Set TENANT's cap or webhook settings; takes effect on the next acquire."""
    import attrs

    from imposer.models import TenantConfig
    from imposer.worker.wiring import connect

    store = connect(settings).tenants
    current = store.get(tenant) or TenantConfig(tenant_id=tenant)
    changes = {}
    if cap is not None:
        changes["cap"] = cap
    if clear_cap:
        changes["cap"] = None
    if webhook_secret:
        changes["webhook_secret"] = webhook_secret
    if webhook_hosts:
        changes["webhook_hosts"] = tuple(webhook_hosts)
    updated = attrs.evolve(current, **changes)
    store.put(updated)
    shown = updated.cap if updated.cap is not None else f"{settings.default_cap} (default)"
    click.echo(f"{tenant}: cap {shown}")


@tenants.command("list")
@click.option("--json", "as_json", is_flag=True)
@settings_options(*AWS_NAMES, "default_cap")
@handle_errors
def tenants_list(settings: Settings, as_json: bool) -> None:
    """List tenants with a config row and their effective cap."""
    from imposer.worker.wiring import connect

    backends = connect(settings)
    counters = backends.leases.counters()
    rows = []
    for config in backends.tenants.list():
        rows.append({"tenant_id": config.tenant_id,
                     "cap": config.cap if config.cap is not None else settings.default_cap,
                     "override": config.cap is not None,
                     "inflight": counters[config.tenant_id].inflight
                     if config.tenant_id in counters else 0,
                     "webhook_hosts": list(config.webhook_hosts)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"default cap {settings.default_cap}")
    for r in rows:
        tag = "" if r["override"] else " (default)"
        click.echo(f"{r['tenant_id']:20} cap {r['cap']}{tag:10} inflight {r['inflight']}")


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

    from imposer.worker.wiring import connect

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
    from imposer.reports.why import explain
    from imposer.worker.wiring import connect

    b = connect(settings)
    answer = explain(job_id, b.jobs.get(job_id), b.leases.leases(), b.tenants.caps(),
                     settings.default_cap,
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
    from imposer.reports.formatting import parse_duration

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
    from imposer.reports.capacity import Thresholds

    thresholds = Thresholds(util=util_threshold, day_share=day_share,
                            wait_seconds=wait_threshold, slow_share=slow_share)
    run_capacity(settings, window, thresholds, as_json, chart_path, click.echo)


def run_stats(settings: Settings, since_seconds: float | None, as_json: bool,
              echo: Callable[[str], None], *, now: float | None = None) -> dict:
    """Load job records and tenant caps, then print per-tenant and cluster figures."""
    from imposer.reports.formatting import format_stats
    from imposer.reports.stats import summary
    from imposer.worker.wiring import connect

    backends = connect(settings)
    now = backends.clock.time() if now is None else now
    data = summary(backends.jobs.list(), slots_per_host=settings.slots, now=now,
                   since=None if since_seconds is None else now - since_seconds,
                   caps=backends.tenants.caps(), default_cap=settings.default_cap)
    if as_json:
        echo(json.dumps(data, indent=2))
    else:
        for line in format_stats(data):
            echo(line)
    return data


def run_capacity(settings: Settings, window_seconds: float | None,
                 thresholds: Thresholds | None, as_json: bool, chart_path: str | None,
                 echo: Callable[[str], None], *, now: float | None = None) -> Verdict:
    """Apply the licence rule to the job records of the window; optionally draw the chart."""
    import attrs

    from imposer.reports.capacity import Thresholds, chart, evaluate
    from imposer.reports.formatting import format_capacity
    from imposer.reports.stats import hosts_seen
    from imposer.worker.wiring import connect

    thresholds = thresholds or Thresholds()
    if window_seconds is not None:
        thresholds = attrs.evolve(thresholds, window_seconds=window_seconds)
    backends = connect(settings)
    now = backends.clock.time() if now is None else now
    records = backends.jobs.list()
    hosts = hosts_seen(records, now - thresholds.window_seconds, now)
    verdict = evaluate(records, slots_total=max(1, len(hosts)) * settings.slots, now=now,
                       thresholds=thresholds)
    if chart_path:
        chart(verdict, chart_path)
    if as_json:
        echo(json.dumps(verdict.to_dict(), indent=2))
    else:
        for line in format_capacity(verdict):
            echo(line)
        if chart_path:
            echo(f"\nchart written to {chart_path}")
    return verdict
