"""JSON-lines logging with the fields an operator greps for.

Every record carries ``action``, ``tenant_id`` and ``job_id`` (empty when they
do not apply), passed as ``extra`` through :func:`extra`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from imposer.errors import BackendError

FIELDS = ("action", "tenant_id", "job_id")


class _Defaults(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for name in FIELDS:
            if not hasattr(record, name):
                setattr(record, name, None)
        return True


def extra(action: str, tenant_id: str | None = None, job_id: str | None = None, **more: Any) -> dict:
    """Build the structured ``extra`` for one log call."""
    return {"action": action, "tenant_id": tenant_id, "job_id": job_id, **more}


class _Formatter(JsonFormatter):
    """python-json-logger, with a metric's EMF envelope written as ``_aws``.

    python-json-logger leaves out every record attribute whose name starts
    with ``_``, so the envelope travels as ``emf`` and is renamed here.
    """

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        envelope = log_data.pop("emf", None)
        if envelope is not None:
            log_data["_aws"] = envelope
        return super().process_log_record(log_data)


def setup(level: str = "INFO", stream: Any = None) -> None:
    """Send imposer's records to *stream* (stderr) as JSON lines.

    Metric lines are data the dashboard and alarms read, not chatter: they
    are written whatever *level* says.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(_Defaults())
    handler.setFormatter(
        _Formatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s %(action)s %(tenant_id)s %(job_id)s",
            rename_fields={"levelname": "level", "asctime": "time"},
        )
    )
    root = logging.getLogger("imposer")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    logging.getLogger("imposer.metrics").setLevel(logging.INFO)
    for noisy in ("botocore", "boto3", "urllib3", "werkzeug"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def quiet() -> None:
    """Keep imposer's records off the terminal: a command that says its failure in one
    line of its own (``submit``) would only repeat it as a JSON line first."""
    for name in ("imposer", "imposer.metrics"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


class guard:
    """Log a failure to handle one job and carry on.

    The lease expires, the sweep reclaims it and the message returns, so a
    bug in handling one message never crashes the parent or loses the job.
    An AWS error is no bug: it is one warning line (``aws_error``), not a
    traceback; the paths that can do better than wait catch it themselves.
    """

    def __init__(self, request=None) -> None:
        self.request = request

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None or not issubclass(kind, Exception):
            return False
        req = self.request
        tenant, job = (req.tenant_id, req.job_id) if req else (None, None)
        log = logging.getLogger("imposer.worker.supervisor")
        if issubclass(kind, BackendError):  # AWS had a bad moment: expected, no traceback
            log.warning("AWS error while handling job %s: %s; the next pass or the sweep "
                        "takes it up", job, exc, extra=extra("aws_error", tenant, job))
            return True
        log.error(
            "error while handling job %s; leaving it to the sweep", job,
            exc_info=(kind, exc, tb), extra=extra("handler_error", tenant, job))
        return True
