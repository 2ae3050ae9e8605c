"""The `imposer` command: run the worker, provision, inspect and operate.

Every setting is also an IMPOSER_* environment variable; an option given on
the command line wins. AWS is reached through boto3, so AWS_ENDPOINT_URL
points every command at `imposer local`. Read-only views live in
``cli_views``, tenant-side tools and the demo in ``cli_tools``.
"""

from __future__ import annotations

import json
import sys
import time

import click

from imposer import logs
from imposer.cliutil import (
    AWS_NAMES,
    EXIT_CONFIG,
    fail,
    handle_errors,
    settings_options,
)
from imposer.settings import Settings

@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="imposer")
def main() -> None:
    """imposer: fair multi-tenant PDF imposition over a licensed 8-slot pool.

    A tenant's burst cannot starve the others: each tenant holds at most its
    cap of slots (default 4 of 8), taken by one DynamoDB transaction per job;
    at cap a message is deferred, never dropped.

    \b
    Try it without AWS:  imposer demo
    Local AWS stack:     imposer local   (then export the AWS_ENDPOINT_URL it prints)
    """



@main.command()
@click.option("--port", type=int, default=4566, show_default=True,
              help="Port on 127.0.0.1 (0 picks a free one).")
@click.option("--strict-order", is_flag=True,
              help="Deliver standard-queue messages strictly in send order (no fair-queue "
                   "ordering by message group), to see what a queue without layer 1 does.")
def local(port: int, strict_order: bool) -> None:
    """Serve a local AWS stack (moto, with serializable DynamoDB) in the foreground.

    Standard queues deliver like SQS fair queues: a message group with many
    messages in flight (a noisy tenant's deferred backlog) yields to quieter
    groups.
    """
    from imposer.localstack import LocalStack

    logs.setup()
    try:
        stack = LocalStack(port, fair_queues=not strict_order)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}", EXIT_CONFIG)
    click.echo(f"AWS_ENDPOINT_URL={stack.url}", nl=True)
    click.echo("# also export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
               "AWS_DEFAULT_REGION=us-east-1; Ctrl-C stops", err=True)
    sys.stdout.flush()
    try:
        stack.serve_forever()
    except KeyboardInterrupt:
        pass


@main.command()
@settings_options(*AWS_NAMES, "lease_ttl_seconds", "retention_seconds", "max_receive_count")
@handle_errors
def init(settings: Settings) -> None:
    """Create the job queue, its DLQ, the tables and the bucket (idempotent)."""
    from imposer.provision import provision

    for kind, name, created in provision(settings):
        click.echo(f"{kind:7} {name:32} {'created' if created else 'exists'}")


@main.command()
@click.option("--once", is_flag=True, help="Sweep once and exit (for cron); else loop.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@settings_options(*AWS_NAMES, "sweep_seconds", "default_cap", "lease_ttl_seconds", "host_id")
@handle_errors
def sweep(settings: Settings, once: bool, as_json: bool) -> None:
    """Reclaim expired leases of crashed workers and repair counters."""
    from imposer.sweep import sweep as run_sweep
    from imposer.wiring import connect

    backends = connect(settings)
    while True:
        report = run_sweep(backends.leases, backends.metrics, settings.host_id, backends.queue)
        if as_json:
            click.echo(json.dumps({"reclaimed": [l.job_id for l in report.reclaimed],
                                   "repaired": report.repaired}))
        else:
            click.echo(f"reclaimed {len(report.reclaimed)} expired lease(s); "
                       f"repaired {len(report.repaired)} counter(s)")
        if once:
            return
        time.sleep(settings.sweep_seconds)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of objects.")
@settings_options(*AWS_NAMES, "default_cap")
@handle_errors
def leases(settings: Settings, as_json: bool) -> None:
    """Show live leases: tenant, job, host, slot, age, expires in."""
    from imposer.wiring import connect

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


@main.group()
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
    from imposer.wiring import connect

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
    from imposer.wiring import connect

    backends = connect(settings)
    counters = backends.leases.counters()
    rows = []
    for config in backends.tenants.list():
        rows.append({"tenant_id": config.tenant_id,
                     "cap": config.cap if config.cap is not None else settings.default_cap,
                     "override": config.cap is not None,
                     "inflight": int(counters.get(config.tenant_id, {}).get("inflight", 0)),
                     "webhook_hosts": list(config.webhook_hosts)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"default cap {settings.default_cap}")
    for r in rows:
        tag = "" if r["override"] else " (default)"
        click.echo(f"{r['tenant_id']:20} cap {r['cap']}{tag:10} inflight {r['inflight']}")



RUN_NAMES = AWS_NAMES + (
    "slots", "default_cap", "heartbeat_seconds", "lease_ttl_seconds", "defer_seconds",
    "sweep_seconds", "host_id", "engine", "pdftoolbox", "pdftoolbox_args",
    "job_timeout_seconds", "memory_limit_mb", "max_attempts", "retry_seconds", "poll_seconds",
    "grace_seconds", "retention_seconds", "republish_margin_seconds", "republish_receive_count",
    "borrow", "reserve_slots", "allow_http_loopback", "metrics_namespace", "log_level",
    "pace_seconds",
)


@main.command()
@click.option("--max-jobs", type=click.IntRange(min=1), default=None,
              help="Stop taking jobs after this many were started, then drain and exit.")
@click.option("--exit-when-idle", is_flag=True,
              help="Exit once nothing runs here and the queue holds no message.")
@settings_options(*RUN_NAMES)
@handle_errors
def run(settings: Settings, max_jobs, exit_when_idle) -> None:
    """Run the worker: poll SQS, lease per tenant, impose in a fixed process pool.

    SIGTERM or Ctrl-C drains (no new jobs; running ones finish within the
    grace period while their leases are renewed); a second one stops fast
    (children killed, leases released, messages returned to the queue).
    """
    from imposer.supervisor import Supervisor
    from imposer.notify import JobNotifier
    from imposer.wiring import connect

    backends = connect(settings)
    for table in (settings.leases_table, settings.jobs_table, settings.tenants_table):
        if not backends.dynamo.table_exists(table):
            fail(f"table {table} does not exist (run `imposer init`)", EXIT_CONFIG)
    backends.queue.url()
    if settings.engine == "pdftoolbox":
        import shutil

        if shutil.which(settings.pdftoolbox) is None:
            fail(f"pdfToolbox not found at {settings.pdftoolbox!r} (set --pdftoolbox or "
                 "IMPOSER_PDFTOOLBOX, or use --engine open)", EXIT_CONFIG)
    notifier = JobNotifier(backends)
    code = Supervisor(backends, max_jobs=max_jobs, exit_when_idle=exit_when_idle,
                      notifier=notifier).run()
    sys.exit(code)




def _register() -> None:
    from imposer import cli_tools, cli_views
    from imposer.engine.cli import impose_command, layouts_command

    for command in (cli_views.jobs, cli_views.why, cli_views.stats, cli_views.capacity,
                    cli_tools.submit, cli_tools.demo, layouts_command, impose_command):
        main.add_command(command)


_register()
