"""Commands a worker host runs: `run`, `sweep`, `init` and the local stack `local`."""

from __future__ import annotations

import json
import signal
import sys
import time

import click

from imposer import logs
from imposer.cli.common import (
    ALL_NAMES,
    AWS_NAMES,
    fail,
    handle_errors,
    settings_options,
)
from imposer.models.exits import Exit
from imposer.settings import Settings
from imposer.worker.timing import LeaseTiming


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=4566, show_default=True,
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
    from imposer.dev.localstack.stack import LocalStack

    logs.setup()
    try:
        stack = LocalStack(port, fair_queues=not strict_order)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}", Exit.CONFIG)
    click.echo(f"AWS_ENDPOINT_URL={stack.url}", nl=True)
    click.echo("# also export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
               "AWS_DEFAULT_REGION=us-east-1; Ctrl-C stops", err=True)
    sys.stdout.flush()
    try:
        stack.serve_forever()
    except KeyboardInterrupt:
        pass


@click.command()
@click.option("--check", is_flag=True,
              help="Change nothing: compare every resource with what init would make of it "
                   "and exit 1 if any is missing or differs (safe on a stack's resources).")
@settings_options(*AWS_NAMES, "lease_ttl_seconds", "retention_seconds", "max_receive_count",
                  "job_retention_days")
@handle_errors
def init(settings: Settings, check: bool) -> None:
    """Create the job queue, its DLQ, the tables and the bucket (idempotent); upgrade old tables.

    What it creates gets the template's settings (encryption, point-in-time
    recovery, versioning, lifecycle, public access block, TLS only). What
    exists it leaves as it is and says how it differs: a stack or an operator
    owns it. On tables made by an older imposer it adds the indexes and TTL
    they lack and moves job records still open to their (tenant, job) keys,
    with a progress bar: stop the old workers first.
    """
    from imposer.state.provision import drift, provision, stale_records, upgrade

    if check:
        rows = drift(settings)
        for row in rows:
            click.echo(f"{row.kind:7} {row.name:32} {row.done}")
        if any(row.done != "matches" for row in rows):
            fail("some resources differ from what init would make (nothing was changed)",
                 Exit.FAILED)
        click.echo("every resource matches what init would make; nothing was changed")
        return
    rows = provision(settings)
    for row in rows:
        click.echo(f"{row.kind:7} {row.name:32} {row.done}")
    stale = list(stale_records(settings))
    if not stale and all(row.done.startswith("exists") for row in rows):
        click.echo("all there already; nothing was changed")
    if stale:
        with click.progressbar(length=len(stale), label="upgrading job records",
                               file=sys.stderr) as bar:
            done = upgrade(settings, stale, lambda: bar.update(1))
        click.echo(f"upgraded {len(stale)} job record(s): {done['opened']} open ones indexed "
                   f"({done['moved']} moved to (tenant, job) keys), {done['expiring']} final "
                   "ones given an expiry")


@click.command()
@click.option("--once", is_flag=True, help="Sweep once and exit (for cron); else loop.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@settings_options(*AWS_NAMES, "sweep_seconds", "default_cap", "lease_ttl_seconds", "host_id")
@handle_errors
def sweep(settings: Settings, once: bool, as_json: bool) -> None:
    """Reclaim expired leases of crashed workers and repair counters."""
    from imposer.worker.messages import Messages
    from imposer.worker.threads.sweep import sweep as run_sweep
    from imposer.worker.wiring import connect

    backends = connect(settings)
    while True:
        messages = Messages(backends.queue, settings, backends.clock,
                            LeaseTiming.from_settings(settings))
        report = run_sweep(backends.leases, backends.metrics, settings.host_id, messages)
        if as_json:
            click.echo(json.dumps({"reclaimed": [l.job_id for l in report.reclaimed],
                                   "repaired": report.repaired}))
        else:
            click.echo(f"reclaimed {len(report.reclaimed)} expired lease(s); "
                       f"repaired {len(report.repaired)} counter(s)")
        if once:
            return
        time.sleep(settings.sweep_seconds)



@click.command()
@click.option("--max-jobs", type=click.IntRange(min=1), default=None,
              help="Stop taking jobs after this many were started, then drain and exit.")
@click.option("--exit-when-idle", is_flag=True,
              help="Exit once nothing runs here and the queue holds no message.")
@settings_options(*ALL_NAMES)
@handle_errors
def run(settings: Settings, max_jobs, exit_when_idle) -> None:
    """Run the worker: poll SQS, lease per tenant, impose in a fixed process pool.

    SIGTERM or Ctrl-C drains (no new jobs; running ones finish within the
    grace period while their leases are renewed); a second one stops fast
    (children killed, leases released, messages returned to the queue).
    """
    from imposer.worker.wiring import build

    if settings.engine == "pdftoolbox":
        import shutil

        if shutil.which(settings.pdftoolbox) is None:
            fail(f"pdfToolbox not found at {settings.pdftoolbox!r} (set --pdftoolbox or "
                 "IMPOSER_PDFTOOLBOX, or use --engine open)", Exit.CONFIG)
    code = build(settings, max_jobs=max_jobs, exit_when_idle=exit_when_idle).run()
    # Stopped: a further SIGTERM (an operator's second one) while the interpreter exits
    # must not turn the exit code into "killed by a signal" (Python drops its handlers then).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)
