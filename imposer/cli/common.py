"""Shared plumbing of the `imposer` commands: settings options, errors, exit codes."""

from __future__ import annotations

import functools
import sys

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


