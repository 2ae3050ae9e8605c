"""This host's share of the hourly rollups, gathered in memory and flushed in one write.

The dispatcher reports each start (with its queue wait), the completer each
finish (with the hours its slot was busy), the dispatcher each cap deferral
and the sampler the stranded and shortage time. Every flush (once a minute,
and at stop) turns the gathered deltas into one ADD per host-hour, so a job
costs the rollups nothing extra per job. A host that dies loses at most one
flush interval of report data, never job state.
"""

from __future__ import annotations

import collections
import logging
import threading

from imposer.clock import Clock
from imposer.errors import BackendError
from imposer.logs import extra
from imposer.models.urgency import DEFAULT_PRIORITY
from imposer.state.rollups import RollupStore, bucket, hour_of, priority_field, tenant_field

logger = logging.getLogger(__name__)


class RollupRecorder:
    """Gather hour deltas for this host; ``flush`` writes them."""

    def __init__(self, store: RollupStore, host: str, slots: int, clock: Clock) -> None:
        self.store, self.host, self.slots, self.clock = store, host, slots, clock
        self._deltas: dict[int, collections.Counter] = collections.defaultdict(
            collections.Counter)
        self._lock = threading.Lock()

    def _add(self, at: float, **fields: float) -> None:
        with self._lock:
            self._deltas[hour_of(at)].update(fields)

    def _add_named(self, at: float, fields: dict[str, float]) -> None:
        with self._lock:
            self._deltas[hour_of(at)].update(fields)

    def job_started(self, tenant: str, wait: float, at: float,
                    priority: int = DEFAULT_PRIORITY, late: bool = False) -> None:
        """Count a start in its hour: its wait, for the host, its tenant and its priority,
        and whether it started after its due time."""
        b = bucket(wait)
        fields = {"started": 1, f"w{b}": 1, tenant_field(tenant, "started"): 1,
                  tenant_field(tenant, f"w{b}"): 1, priority_field(priority, "started"): 1,
                  priority_field(priority, f"w{b}"): 1}
        if late:
            fields.update({"late": 1, tenant_field(tenant, "late"): 1,
                           priority_field(priority, "late"): 1})
        self._add_named(at, fields)

    def job_finished(self, tenant: str, status: str, started_at: float,
                     finished_at: float) -> None:
        """Count the finish in its hour and credit each hour its share of busy time."""
        self._add_named(finished_at, {tenant_field(tenant, status): 1,
                                      tenant_field(tenant, "run_seconds"):
                                      max(0.0, finished_at - started_at)})
        start = started_at
        while start < finished_at:
            end = min(finished_at, hour_of(start) + 3600)
            self._add(start, busy=end - start)
            start = end

    def deferred(self, tenant: str, at: float) -> None:
        self._add_named(at, {"defers": 1, tenant_field(tenant, "defers"): 1})

    def contention(self, stranded_slot_seconds: float, stranded_seconds: float,
                   shortage_seconds: float, at: float) -> None:
        self._add(at, stranded=stranded_slot_seconds, stranded_time=stranded_seconds,
                  shortage=shortage_seconds)

    def flush(self) -> int:
        """Write the gathered deltas; keep them for the next flush if a write fails."""
        with self._lock:
            pending, self._deltas = self._deltas, collections.defaultdict(collections.Counter)
        written = 0
        for hour, deltas in sorted(pending.items()):
            try:
                self.store.add(hour, self.host, self.slots, dict(deltas),
                               flushed_at=self.clock.time())
                written += 1
            except BackendError as exc:
                logger.warning("could not write the rollup of hour %s: %s; will retry", hour,
                               exc, extra=extra("rollup_error"))
                with self._lock:
                    self._deltas[hour].update(deltas)
        return written
