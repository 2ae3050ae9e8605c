"""The one place an error becomes what a person sees: one line on stderr and an exit code.

Every command runs under :func:`report` (the group's ``main`` and
``handle_errors`` both call it), so no error reachable from the command line
prints a traceback: a click usage error, an imposer error, a client error,
an OS error on a file the user named, an unreachable Redis, or a bug. The
exit code comes from the one table, :class:`imposer.models.exits.Exit`.
A bug is still a bug: ``IMPOSER_TRACEBACK=1`` prints its traceback after
the line, for a report.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import NoReturn

import click

from imposer.errors import (
    BackendError,
    ConfigError,
    ImposerError,
    MissingResource,
    PermanentJobError,
)
from imposer.models.exits import Exit

#: A line longer than this is cut: an over-long argument echoed back must stay one line.
MAX_LINE = 600


def line(kind: str, message: str) -> str:
    """``imposer: <kind>: <message>`` on one line, however the message was made."""
    text = " ".join(str(message).split())
    if len(text) > MAX_LINE:
        text = text[:MAX_LINE] + "..."
    return f"imposer: {kind}: {text}" if text else f"imposer: {kind}"


def classify(exc: BaseException) -> tuple[str, str, int]:
    """Return (kind, message, exit code) of *exc*: the table of what each error means."""
    if isinstance(exc, click.UsageError):
        where = exc.ctx.command_path if exc.ctx else "imposer"
        return "usage", f"{exc.format_message()} (see `{where} --help`)", Exit.USAGE
    if isinstance(exc, click.ClickException):
        return "error", exc.format_message(), exc.exit_code
    if isinstance(exc, click.Abort):
        return "aborted", "", Exit.FAILED
    if isinstance(exc, (ConfigError, MissingResource)):
        return "error", str(exc), Exit.CONFIG
    if isinstance(exc, BackendError):
        return "error", str(exc), Exit.BACKEND
    if isinstance(exc, PermanentJobError):  # a layout or PDF the engine refuses
        return exc.kind, str(exc), Exit.USAGE
    if isinstance(exc, ImposerError):
        return "error", str(exc), Exit.FAILED
    code = getattr(exc, "exit_code", None)  # the tenant client's errors carry their code
    if isinstance(code, Exit):
        return "error", str(exc), code
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        return "error", f"cannot use{where}: {exc.strerror or exc}", Exit.FAILED
    if type(exc).__module__.split(".")[0] == "redis":
        return "error", f"Redis failed: {type(exc).__name__}: {exc}", Exit.BACKEND
    return ("internal error", f"{type(exc).__name__}: {exc} (a bug: IMPOSER_TRACEBACK=1 "
            "shows where)", Exit.FAILED)


def report(exc: BaseException) -> NoReturn:
    """Print *exc* as one line on stderr and exit with its code."""
    kind, message, code = classify(exc)
    click.echo(line(kind, message), err=True)
    if os.environ.get("IMPOSER_TRACEBACK") == "1":
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    sys.exit(int(code))
