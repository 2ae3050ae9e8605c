"""Shared plumbing of the `imposer` commands: settings options, errors, exit codes."""

from __future__ import annotations

import functools
import os
import stat
import sys
from pathlib import Path
from typing import NoReturn

import attrs
import click

from imposer import logs
from imposer.cli import failures
from imposer.errors import ConfigError
from imposer.settings import Settings, env_help

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
            meta = attrs.fields_dict(Settings)[name].metadata
            kind = meta["kind"]
            flag = "--" + name.replace("_", "-")
            if meta.get("choices"):  # a closed set: click lists it and refuses the rest
                wrapper = click.option(flag, type=click.Choice(meta["choices"],
                                                               case_sensitive=False),
                                       default=None, help=env_help(name))(wrapper)
            elif kind not in _TYPES:  # booleans
                wrapper = click.option(flag + "/--no-" + flag[2:], default=None,
                                       help=env_help(name))(wrapper)
            else:
                wrapper = click.option(flag, type=_TYPES[kind], default=None,
                                       help=env_help(name))(wrapper)
        return wrapper

    return decorate


class InputFile(click.Path):
    """A file a person names for reading: a regular file of at most *max_mb* MB.

    Reading it is bounded in size and time: a device (``/dev/zero``), a FIFO
    (whose open blocks until a writer comes) or a directory is refused by its
    ``stat``, before anything opens it.
    """

    def __init__(self, max_mb: float) -> None:
        super().__init__(exists=True, dir_okay=False, readable=True, path_type=str)
        self.max_mb = max_mb

    def convert(self, value, param, ctx):
        path = super().convert(value, param, ctx)
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):
            self.fail(f"{path!r} is not a regular file (a device, FIFO or socket has no end "
                      "to read to)", param, ctx)
        if found.st_size > self.max_mb * 2**20:
            self.fail(f"{path!r} is {found.st_size / 2**20:.0f} MB; the limit is "
                      f"{self.max_mb:g} MB", param, ctx)
        return path


class OutputFile(click.ParamType):
    """A file a command writes: a new or regular file in a directory that exists.

    Checked before any work is done: ``-`` (these commands do not write to
    stdout), a directory or a device is a usage error (exit 2); a missing
    directory or one we may not write to is an output that cannot be written
    (exit 1), as when the write itself fails.
    """

    name = "file"

    def convert(self, value, param, ctx):
        path = Path(value)
        if value == "-":
            self.fail("'-' is not a file here: give a file name", param, ctx)
        try:
            exists, regular = path.exists(), path.is_file()
        except (OSError, ValueError) as exc:  # a name too long, a NUL
            self.fail(f"{value[:100]!r} is not a file name: {exc}", param, ctx)
        if exists and not regular:
            self.fail(f"{value!r} is not a regular file", param, ctx)
        folder = path.parent
        if not folder.is_dir():
            raise click.FileError(value, hint=f"no directory {str(folder)!r}")
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise click.FileError(value, hint="permission denied")
        return path


#: Largest input PDF a command reads: the worker's own limit by default.
MAX_PDF_MB = attrs.fields_dict(Settings)["max_input_mb"].default

AWS_NAMES = ("region", "queue_name", "dlq_name", "bucket", "table_prefix")
#: What a command that reads only the tables needs.
TABLE_NAMES = ("region", "table_prefix")
#: What `jobs`, `why` and `stats` read besides the tables: the queue's depth.
QUEUE_NAMES = ("queue_name", "dlq_name")
#: Every setting: `imposer run` takes them all.
ALL_NAMES = tuple(f.name for f in attrs.fields(Settings))


def duration(ctx, param, value):
    """Option callback: ``30m``, ``6h``, ``7d``, ``4w`` as seconds; the one spelling of a window."""
    from imposer.reports.formatting import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


def fail(message: str, code: int, kind: str = "error") -> NoReturn:
    """Print ``imposer: <kind>: <message>`` on stderr and exit with *code*: one error style."""
    click.echo(failures.line(kind, message), err=True)
    sys.exit(int(code))


def handle_errors(func):
    """Turn every error into one clear line and its exit code (see imposer.cli.failures).

    The group's ``main`` does the same; this keeps a command called on its own
    (click's test runner) in the same style.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except click.ClickException:
            raise  # click's own, for the group (or the runner) to print with its usage hint
        except Exception as exc:
            failures.report(exc)

    return wrapper
