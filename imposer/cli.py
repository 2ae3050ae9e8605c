"""The `imposer` command: run the worker, provision, inspect and operate.

Every setting is also an IMPOSER_* environment variable; an option given on
the command line wins. AWS is reached through boto3, so AWS_ENDPOINT_URL
points every command at `imposer local`.
"""

from __future__ import annotations

import functools
import json
import sys
import time

import click

from imposer import logs
from imposer.errors import BackendError, ConfigError, ImposerError
from imposer.settings import Settings, env_help

#: Exit codes; boot failures are distinct so systemd does not restart in a loop.
EXIT_CONFIG = 3
EXIT_BACKEND = 4

_TYPES = {int: int, float: float, str: str}


def settings_options(*names: str):
    """Add one option per setting *name*; pass the loaded Settings as ``settings``."""

    def decorate(func):
        @functools.wraps(func)
        def wrapper(**kwargs):
            overrides = {n: kwargs.pop(n) for n in names}
            try:
                settings = Settings.load(**overrides)
            except ConfigError as exc:
                raise click.UsageError(str(exc)) from None
            logs.setup(settings.log_level)
            return func(settings=settings, **kwargs)

        for name in reversed(names):
            from attrs import fields_dict

            kind = fields_dict(Settings)[name].metadata["kind"]
            flag = "--" + name.replace("_", "-")
            if kind not in _TYPES:  # booleans
                wrapper = click.option(flag + "/--no-" + flag[2:], default=None,
                                       help=env_help(name))(wrapper)
            else:
                wrapper = click.option(flag, type=_TYPES[kind], default=None,
                                       help=env_help(name))(wrapper)
        return wrapper

    return decorate


AWS_NAMES = ("region", "queue_name", "dlq_name", "bucket", "table_prefix")


def fail(message: str, code: int) -> None:
    click.echo(f"imposer: error: {message}", err=True)
    sys.exit(code)


def handle_errors(func):
    """Turn imposer errors into one clear line and a non-zero exit."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            fail(str(exc), EXIT_CONFIG)
        except BackendError as exc:
            fail(str(exc), EXIT_BACKEND)
        except ImposerError as exc:
            fail(str(exc), 1)

    return wrapper


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
        report = run_sweep(backends.leases, backends.metrics, settings.host_id)
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


@main.command()
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


@main.command()
@click.option("--tenant", required=True, help="Tenant id (also the MessageGroupId).")
@click.option("--pdf", "pdf", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Artwork PDF to impose.")
@click.option("--layout", required=True, help="Layout: a JSON file or a preset name.")
@click.option("--token", help="Idempotency token (default: the new job id).")
@click.option("--webhook", help="URL to POST the signed completion event to.")
@click.option("--redis-url", envvar="IMPOSER_REDIS_URL",
              help="Redis for admission control [env IMPOSER_REDIS_URL]; none: no checks.")
@settings_options("region", "queue_name", "bucket")
def submit(settings: Settings, tenant, pdf, layout, token, webhook, redis_url) -> None:
    """Upload a PDF under the tenant's prefix and publish one job (layer 1 + layer 3)."""
    from imposer.client import AdmissionError, SubmitError, submit as client_submit

    admission = None
    if redis_url:
        from imposer.client import Admission

        admission = Admission.from_url(redis_url)
    try:
        request = client_submit(tenant, pdf, layout, token=token, webhook=webhook,
                                admission=admission, bucket=settings.bucket,
                                queue=settings.queue_name, region=settings.region)
    except AdmissionError as exc:
        fail(str(exc), exc.exit_code)
    except SubmitError as exc:
        fail(str(exc), getattr(exc, "exit_code", EXIT_BACKEND))
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc), 2)
    click.echo(f"submitted job {request.job_id} for {tenant} (token {request.token})")
    click.echo(f"plate will be written to {request.output}")


def _duration(ctx, param, value):
    from imposer.report_cli import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
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


@main.command()
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


@main.command()
@click.option("--fast", is_flag=True, help="Same flow with short pacing (well under a minute).")
@click.option("--out", type=click.Path(file_okay=False), default="imposer-demo",
              show_default=True, help="Where the artwork, plates and worker log go.")
def demo(fast: bool, out: str) -> None:
    """Watch fairness happen: a noisy burst and three quiet tenants, no AWS needed.

    Starts an embedded AWS stack, submits 60 jobs from one tenant and a few
    from three others a moment later, runs 8 slots with the open engine and
    shows who holds which slots. Uses Redis for admission control when a
    redis-server is installed (or IMPOSER_REDIS_URL is set).
    """
    from pathlib import Path

    from imposer.demo import run_demo

    sys.exit(run_demo(fast, Path(out), click.echo))


@main.command()
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


def _register_engine_commands() -> None:
    from imposer.engine.cli import impose_command, layouts_command

    main.add_command(layouts_command)
    main.add_command(impose_command)


_register_engine_commands()
