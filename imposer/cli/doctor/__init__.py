"""`imposer doctor`: a host's preflight checklist, so a misconfigured host refuses to start.

systemd runs it as the worker's ``ExecStartPre``: any failed check exits 3
(configuration) with one line per check saying what was found. AWS is asked
only things that cannot change state: reads, and writes that AWS authorizes
before it finds them impossible (a condition that never holds, a receipt
handle that does not exist), so a permission probe proves the grant and
leaves every table and queue as it was.

    check        one line of the checklist, and the guard that turns an error into one
    host         this host: the engine and the work dir's free space
    tool         the licensed tool's version and its licence for this host's slots
    resources    AWS: identity and clock, each queue, table and the bucket
    shipping     the CloudWatch agent ships the worker log (so its metrics reach the alarms)
    permissions  the probes of each kind of call the worker makes

This module runs them in order and prints the checklist.
"""

from __future__ import annotations

import json
import uuid

import attrs
import click

from imposer.cli.common import ALL_NAMES, fail, settings_options
from imposer.cli.doctor import host, resources, shipping, tool
from imposer.cli.doctor.check import FAIL, SKIP, Check
from imposer.cli.doctor.permissions import permissions
from imposer.cli.doctor.resources import clock_skew
from imposer.models.exits import Exit
from imposer.settings import Settings

__all__ = ["Check", "Doctor", "clock_skew", "doctor"]


class Doctor:
    """Run every check of one host in order; AWS checks stop early if AWS cannot be reached."""

    def __init__(self, settings: Settings, *, max_skew: float, min_free_mb: float) -> None:
        self.s = settings
        self.max_skew = max_skew
        self.min_free_mb = min_free_mb
        self.probe_key = f"doctor-probe-{uuid.uuid4().hex}"

    def run(self) -> list[Check]:
        s = self.s
        checks = [host.engine(s), *tool.checks(s), host.work_dir(s, self.min_free_mb),
                  *resources.identity(s, self.max_skew)]
        if any(c.name in ("endpoint", "credentials") and c.status == FAIL for c in checks):
            return checks + [Check(name="aws resources", status=SKIP,
                                   detail="not checked: AWS cannot be asked")]
        for step in (resources.queues, resources.tables, resources.bucket,
                     shipping.log_shipping):
            checks += list(step(s))
        if any(c.status == FAIL for c in checks):
            return checks + [Check(name="permissions", status=SKIP,
                                   detail="not probed: fix the failures above first")]
        return checks + list(permissions(s, self.probe_key))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as a JSON object.")
@click.option("--max-clock-skew", type=float, default=5.0, show_default=True,
              help="Seconds this host's clock may differ from AWS's.")
@click.option("--min-free-mb", type=float, default=None,
              help="Free space the work dir needs [default: 2 x IMPOSER_MAX_INPUT_MB].")
@settings_options(*ALL_NAMES)
def doctor(settings: Settings, as_json: bool, max_clock_skew: float, min_free_mb) -> None:
    """Check this host before the worker starts; exit 3 if anything would stop it.

    Engine (pdfToolbox's version and its licence for IMPOSER_SLOTS processes), work dir
    space, AWS credentials, endpoint and clock, each queue, table, index and the
    bucket with the settings imposer relies on, the agent shipping the log, and the
    permissions the worker needs (probed with calls that change nothing).
    systemd runs it as ExecStartPre.
    """
    checks = Doctor(settings, max_skew=max_clock_skew,
                    min_free_mb=2 * settings.max_input_mb if min_free_mb is None
                    else min_free_mb).run()
    failed = [c for c in checks if c.status == FAIL]
    if as_json:
        click.echo(json.dumps({"ok": not failed, "host": settings.host_id,
                               "checks": [attrs.asdict(c) for c in checks]}, indent=2))
    else:
        click.echo(f"imposer doctor on {settings.host_id}")
        width = max(len(c.name) for c in checks)
        for c in checks:
            click.echo(f"  {c.status.upper() if c.status == FAIL else c.status:5} "
                       f"{c.name:{width}}  {c.detail}")
        if not failed:
            click.echo("all checks passed")
    if failed:
        fail(f"{len(failed)} check(s) failed: {', '.join(c.name for c in failed)}", Exit.CONFIG)
