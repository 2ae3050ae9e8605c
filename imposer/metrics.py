"""Metrics as CloudWatch Embedded Metric Format records in the JSON log stream.

The names are the seed's words: ``cap_defer`` (per tenant),
``lease_recovered`` (per tenant and host), ``queue_wait`` (per job, seconds),
``slot_utilisation`` (per host) and ``jobs`` (by outcome). ``CATALOGUE`` is
the one list of what may be emitted, each metric with its unit and its
dimension names; the dashboard and alarms of deploy/imposer.yaml read only
what it lists (tests/deploy/test_emf.py checks both against a real run's lines).

A data point is one log line that is a complete EMF record: the ``_aws``
envelope (``Timestamp``, one ``CloudWatchMetrics`` directive naming the
namespace, the dimension set and the metric with its unit), the value under
the metric's name and each dimension's value at the top level. Every
emission is also summed in ``totals`` and counted in ``counts`` (bounded by
the metric and dimension names, never by time) so tests and the demo can
read it back.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
from typing import Any

import attrs

from imposer.clock import Clock, SystemClock

logger = logging.getLogger("imposer.metrics")

#: The log record attribute carrying the EMF envelope; imposer.logs writes it as ``_aws``.
ENVELOPE = "emf"
#: CloudWatch's limit on a dimension value (PutMetricData, EMF specification).
DIMENSION_VALUE_LIMIT = 1024


@attrs.frozen
class Metric:
    """One metric imposer emits: its CloudWatch unit and the dimension names it always has."""

    unit: str
    dimensions: tuple[str, ...]
    #: What a data point means, for docs/operations.rst and the dashboard.
    meaning: str


CATALOGUE: dict[str, Metric] = {
    "cap_defer": Metric("Count", ("tenant_id",), "a message parked at its tenant's cap"),
    "handed_off": Metric("Count", ("tenant_id",), "a parked job started in a freed slot"),
    "borrowed": Metric("Count", ("tenant_id",), "a job started above its cap on an idle slot"),
    "duplicate": Metric("Count", ("tenant_id",), "a message of a job already running or done"),
    "lease_recovered": Metric("Count", ("host", "tenant_id"),
                              "a lease reclaimed from a host that stopped renewing it"),
    "queue_wait": Metric("Seconds", ("tenant_id",), "one job's wait from submission to lease"),
    "started_late": Metric("Count", ("tenant_id",),
                           "a job started after its due time (each such start)"),
    "slot_utilisation": Metric("Percent", ("host",), "busy slots of a host, per heartbeat"),
    "backlog": Metric("Count", ("host",), "messages a host parked that wait for a slot"),
    "stranded_seconds": Metric("Seconds", ("host",), "slot-seconds idle while a capped job waited"),
    "shortage_seconds": Metric("Seconds", ("host",),
                               "seconds every slot was busy with work queued"),
    "share_gap": Metric("Percent", ("tenant_id",),
                        "fair share: a tenant's part of recent licence time minus its weighted "
                        "share, in points (above 0: more than its share), per share-view read"),
    "jobs": Metric("Count", ("outcome", "tenant_id"), "a job settled, by its outcome"),
    "failures": Metric("Count", ("kind",), "an attempt that did not succeed, by error kind"),
    "webhooks": Metric("Count", ("outcome", "tenant_id"),
                       "a webhook attempt: delivered, retry, failed or refused"),
    "webhook_oldest_pending": Metric("Seconds", ("host",),
                                     "age of the oldest webhook due at a sender's last pass"),
    "licence_busy_days": Metric("Percent", (), "working days above the utilisation threshold"),
    "licence_slow_jobs": Metric("Percent", (), "jobs that waited above the wait threshold"),
    "licence_at_capacity": Metric("Count", (), "1 when imposer capacity says at capacity"),
}


class Metrics:
    """Emit EMF records and keep running totals keyed by (name, dimensions)."""

    def __init__(self, namespace: str = "imposer", clock: Clock | None = None) -> None:
        self.namespace = namespace
        self.clock = clock or SystemClock()
        self.totals: collections.Counter = collections.Counter()
        self.counts: collections.Counter = collections.Counter()
        self._lock = threading.Lock()

    def emit(self, name: str, value: float = 1, **dimensions: Any) -> None:
        """Record one data point of *name* with string *dimensions*.

        A metric or dimension set the catalogue does not declare, or a value
        CloudWatch would refuse, is a bug: the line is written without its
        envelope and an error says why, so the dashboard never silently
        gains a series nobody reads, and the caller (a job's handling) goes on.
        """
        dims = {k: str(v) for k, v in dimensions.items() if v is not None}
        key = (name, tuple(sorted(dims.items())))
        with self._lock:
            self.totals[key] += value
            self.counts[key] += 1
        fields: dict[str, Any] = {"action": "metric", "metric": name, name: value, **dims}
        try:
            fields[ENVELOPE] = self.envelope(name, value, dims)
        except ValueError as exc:
            logger.error("metric %s not emitted as EMF: %s", name, exc,
                         extra={**fields, "action": "metric_invalid"})
            return
        logger.info("metric %s=%s", name, value, extra=fields)

    def envelope(self, name: str, value: float, dims: dict[str, str]) -> dict[str, Any]:
        """Return the ``_aws`` object of one data point; ValueError if CloudWatch would not
        take it or the catalogue does not declare it."""
        spec = CATALOGUE.get(name)
        if spec is None:
            raise ValueError(f"{name!r} is not in imposer.metrics.CATALOGUE")
        if set(dims) != set(spec.dimensions):
            raise ValueError(f"dimensions {sorted(dims)} of {name} are not the catalogue's "
                             f"{list(spec.dimensions)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise ValueError(f"value {value!r} of {name} is not a finite number")
        for dim, text in dims.items():
            if not text.strip() or len(text) > DIMENSION_VALUE_LIMIT or not text.isascii():
                raise ValueError(f"dimension {dim}={text!r} of {name} is empty, longer than "
                                 f"{DIMENSION_VALUE_LIMIT} or not ASCII")
        return {"Timestamp": int(self.clock.time() * 1000),
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [list(spec.dimensions)],
                    "Metrics": [{"Name": name, "Unit": spec.unit}],
                }]}

    def total(self, name: str, **dimensions: Any) -> float:
        """Sum of *name* over every emission whose dimensions include *dimensions*."""
        return self._sum(self.totals, name, dimensions)

    def count(self, name: str, **dimensions: Any) -> int:
        """How many data points of *name* had dimensions including *dimensions*."""
        return int(self._sum(self.counts, name, dimensions))

    def _sum(self, table: collections.Counter, name: str, dimensions: dict) -> float:
        want = {k: str(v) for k, v in dimensions.items()}
        with self._lock:
            return sum(v for (n, dims), v in table.items()
                       if n == name and want.items() <= dict(dims).items())
