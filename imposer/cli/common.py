"""Shared plumbing of the `imposer` commands: settings options, errors, exit codes."""

from __future__ import annotations

import functools
import sys
from typing import NoReturn

import attrs
import click

from imposer import logs
from imposer.errors import BackendError, ConfigError, ImposerError, MissingResource
from imposer.models.exits import Exit
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
            kind = attrs.fields_dict(Settings)[name].metadata["kind"]
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
#: What a command that reads only the tables needs.
TABLE_NAMES = ("region", "table_prefix")
#: Every setting: `imposer run` takes them all.
ALL_NAMES = tuple(f.name for f in attrs.fields(Settings))


def fail(message: str, code: int, kind: str = "error") -> NoReturn:
    """Print ``imposer: <kind>: <message>`` on stderr and exit with *code*: one error style."""
    click.echo(f"imposer: {kind}: {message}", err=True)
    sys.exit(int(code))


def handle_errors(func):
    """Turn imposer errors into one clear line and a non-zero exit."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (ConfigError, MissingResource) as exc:
            fail(str(exc), Exit.CONFIG)
        except BackendError as exc:
            fail(str(exc), Exit.BACKEND)
        except ImposerError as exc:
            fail(str(exc), Exit.FAILED)

    return wrapper


