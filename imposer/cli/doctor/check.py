"""One line of `imposer doctor`'s checklist, and the guard that turns an error into one."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from imposer.errors import ImposerError

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"


@attrs.frozen(kw_only=True)
class Check:
    """One line of the checklist."""

    name: str
    #: ok, warn, fail or skip; only fail makes doctor exit non-zero.
    status: str
    detail: str


def guard(name: str, call: Callable[[], object]):
    """Return *call*'s result, or yield a failed check naming the error and return None."""
    try:
        return call()
    except ImposerError as exc:
        yield Check(name=name, status=FAIL, detail=str(exc))
        return None
