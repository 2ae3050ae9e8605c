"""Metrics as CloudWatch Embedded Metric Format records in the JSON log stream.

The names are the seed's words: ``cap_defer`` (per tenant),
``lease_recovered`` (per tenant and host), ``queue_wait`` (per job, seconds),
``slot_utilisation`` (per host) and ``jobs`` (by outcome). Every emission is
also summed in ``totals`` and counted in ``counts`` (bounded by the metric and
dimension names, never by time) so tests and the demo can read it back.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any

from imposer.clock import Clock, SystemClock

logger = logging.getLogger("imposer.metrics")

UNITS = {
    "cap_defer": "Count",
    "lease_recovered": "Count",
    "queue_wait": "Seconds",
    "slot_utilisation": "Percent",
    "jobs": "Count",
    "duplicate": "Count",
    "stranded_seconds": "Seconds",
    "shortage_seconds": "Seconds",
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
        """Record one data point of *name* with string *dimensions*."""
        dims = {k: str(v) for k, v in dimensions.items() if v is not None}
        key = (name, tuple(sorted(dims.items())))
        with self._lock:
            self.totals[key] += value
            self.counts[key] += 1
        record = {
            "_aws": {
                "Timestamp": int(self.clock.time() * 1000),
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [sorted(dims)],
                    "Metrics": [{"Name": name, "Unit": UNITS.get(name, "None")}],
                }],
            },
            name: value,
        }
        record.update(dims)
        logger.info("metric %s=%s", name, value,
                    extra={"action": "metric", "metric": name, **record})

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
