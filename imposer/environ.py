"""How a setting is declared and read: an option, else its IMPOSER_* variable, else its default.

``setting`` declares one attrs field with its variable, kind, help and
minimum; ``read`` turns options and the environment into typed values for
such a class, naming the option or variable a bad value came from, and
``described`` is a field's help with its variable and default. The settings
themselves, and the combinations they refuse, are ``imposer.settings``.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from imposer.errors import ConfigError


def boolean(value: Any) -> bool:
    """A setting's boolean: the usual spellings of yes and no."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def setting(default: Any, env: str, kind: Any, help: str, minimum: float | None = None,
            choices: tuple[str, ...] | None = None):
    """A field read from *env* as *kind* (a callable that raises ValueError on a bad value)."""
    return attrs.field(
        default=default,
        metadata={"env": env, "kind": kind, "help": help, "minimum": minimum,
                  "choices": choices},
    )


def read(cls: type, environ: Mapping[str, str],
         options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Return the values *options* and *environ* give *cls*'s fields, and where each came
    from (``--option`` or the variable): options that are not None win."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field in attrs.fields(cls):
        meta = field.metadata
        raw = options.get(field.name)
        source = f"--{field.name.replace('_', '-')}"
        if raw is None and meta["env"] in environ:
            raw, source = environ[meta["env"]], meta["env"]
        if raw is None:
            continue
        sources[field.name] = source
        try:
            value = meta["kind"](raw)
        except (TypeError, ValueError):
            raise ConfigError(f"{source}: {raw!r} is not a valid {meta['kind'].__name__}") from None
        if meta["minimum"] is not None and value < meta["minimum"]:
            raise ConfigError(f"{source}: {value!r} is below the minimum {meta['minimum']}")
        values[field.name] = value
    unknown = set(options) - {f.name for f in attrs.fields(cls)}
    if unknown:
        raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
    return values, sources


def described(field: attrs.Attribute) -> str:
    """Help text of a setting with its variable and default, for click options."""
    default = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        default = "host name"
    return f"{field.metadata['help']} [env {field.metadata['env']}; default: {default}]"
