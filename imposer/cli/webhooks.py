"""`imposer webhooks`: the outbox of completion events, pending, failed or refused.

Read through the outbox's index of pending and given-up events, never the history.
"""

from __future__ import annotations

import json
import re

import click

from imposer.cli.common import TABLE_NAMES, fail, handle_errors, settings_options
from imposer.models import WebhookStatus
from imposer.models.exits import Exit
from imposer.settings import Settings


@click.group()
def webhooks() -> None:
    """The webhook outbox: completion events pending, failed or refused."""


@webhooks.command("list")
@click.option("--tenant", help="Only this tenant's events.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of events.")
@settings_options(*TABLE_NAMES)
@handle_errors
def webhooks_list(settings: Settings, tenant, as_json) -> None:
    """List events not delivered yet (pending) or given up (failed, refused)."""
    from imposer.worker.wiring import connect

    events = [e for e in connect(settings).outbox.listed()
              if tenant is None or e.tenant_id == tenant]
    events.sort(key=lambda e: e.created_at)
    if as_json:
        click.echo(json.dumps([{
            "event_id": e.event_id, "tenant_id": e.tenant_id, "job_id": e.job_id,
            "status": e.status, "attempts": e.attempts, "url": e.url,
            "next_attempt_at": e.due_at if e.status == WebhookStatus.PENDING else None,
            "last_error": e.last_error} for e in events], indent=2))
        return
    if not events:
        click.echo("no webhook events pending or failed")
        return
    click.echo(f"{'EVENT':38} {'TENANT':14} {'JOB':34} {'STATUS':8} {'TRIES':>5}  LAST ERROR")
    for e in events:
        click.echo(f"{e.event_id:38} {e.tenant_id:14} {e.job_id:34} {e.status:8} "
                   f"{e.attempts:>5}  {e.last_error or ''}")


@webhooks.command("redeliver")
@click.argument("event_id")
@settings_options(*TABLE_NAMES)
@handle_errors
def webhooks_redeliver(settings: Settings, event_id: str) -> None:
    """Send EVENT_ID again now, with a fresh schedule of attempts (any worker sends it)."""
    from imposer.worker.wiring import connect

    if not re.fullmatch(r"msg_[0-9a-f]{32}", event_id):
        raise click.BadParameter("an event id looks like msg_ and 32 hex digits (see "
                                 "`imposer webhooks list`)", param_hint="EVENT_ID")
    if not connect(settings).outbox.redeliver(event_id):
        fail(f"no webhook event {event_id} (delivered events expire with their job)",
             Exit.FAILED)
    click.echo(f"{event_id}: pending; a worker sends it within its poll interval")
