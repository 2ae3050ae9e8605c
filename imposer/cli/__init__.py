"""The `imposer` command: one module per command group.

``worker`` holds what a host runs (``run``, ``sweep``, ``init``, ``local``),
``operator`` an operator's levers and live state (``leases``, ``tenants``),
``webhooks`` the outbox, ``jobs`` the questions about a job (``jobs``, ``why``,
``fetch``), ``reports`` those about the fleet (``stats``, ``capacity``),
``simulate`` the what-if replay, ``tools`` what sits beside the worker
(``submit``, ``demo``) and ``engine`` the open engine on its own
(``layouts``, ``impose``). ``common`` has the shared options, ``failures``
the one table that turns an error into a line and an exit code. Every
setting is also an IMPOSER_* environment variable; an option given on the
command line wins. AWS is reached through boto3, so
AWS_ENDPOINT_URL points every command at `imposer local`.
"""

from __future__ import annotations

import sys

import click

from imposer import __version__
from imposer.cli import failures


class ImposerGroup(click.Group):
    """Click, with every user error in imposer's one style: one line, a clear exit code."""

    def main(self, *args, **kwargs):  # type: ignore[override]
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except Exception as exc:  # every error, one table: imposer.cli.failures
            failures.report(exc)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=ImposerGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(version=__version__, prog_name="imposer")
def main() -> None:
    """imposer: fair multi-tenant PDF imposition over a licensed 8-slot pool.

    A tenant's burst cannot starve the others: each tenant holds at most its
    cap of slots (default 4 of 8), taken by one DynamoDB transaction per job;
    at cap a message is parked, never dropped.

    \b
    Try it without AWS:  imposer demo
    Local AWS stack:     imposer local   (then export the AWS_ENDPOINT_URL it prints)
    """


def _register() -> None:
    from imposer.cli import (doctor, engine, jobs, operator, reports, simulate, tools,
                             webhooks, worker)

    for command in (worker.run, worker.sweep, worker.init, worker.local,
                    operator.leases, operator.tenants, webhooks.webhooks, jobs.jobs,
                    jobs.why, reports.stats, reports.capacity, jobs.fetch, tools.submit,
                    tools.demo, engine.layouts_command, engine.impose_command, doctor.doctor,
                    simulate.simulate):
        main.add_command(command)


_register()
