"""Live split of lost capacity: stranded (caps idle a slot) vs shortage (no slot at all).

*Stranded*: a slot sat idle while a tenant at its cap had work waiting; the
cure is a higher cap or borrowing. *Shortage*: every slot was busy while
work waited; the cure is another licence. The parent knows which tenants it
deferred at cap recently and how deep the queue is, and integrates both
between samples; ``imposer stats`` computes the same split from job records.
"""

from __future__ import annotations

import threading

from imposer.clock import Clock
from imposer.metrics import Metrics


class ContentionMeter:
    """Integrate stranded slot-seconds and shortage seconds between samples."""

    def __init__(self, slots: int, window: float, clock: Clock, metrics: Metrics,
                 host: str) -> None:
        self.slots = slots
        #: A cap deferral counts as "still waiting" for this long after it happened.
        self.window = window
        self.clock = clock
        self.metrics = metrics
        self.host = host
        self._waiting: dict[str, tuple[str, float]] = {}  # job -> (tenant, last deferral)
        self._last: float | None = None
        self._lock = threading.Lock()
        self.stranded_slot_seconds = 0.0
        self.shortage_seconds = 0.0

    def deferred(self, tenant: str, job_id: str) -> None:
        with self._lock:
            self._waiting[job_id] = (tenant, self.clock.monotonic())

    def started(self, job_id: str) -> None:
        with self._lock:
            self._waiting.pop(job_id, None)

    def capped_waiting(self) -> int:
        """Jobs deferred at cap within the window and not started since."""
        now = self.clock.monotonic()
        with self._lock:
            for job, (_, when) in list(self._waiting.items()):
                if now - when > self.window:
                    del self._waiting[job]
            return len(self._waiting)

    def sample(self, busy: int, queued: int) -> tuple[float, float, float]:
        """Account the time since the last sample; emit and return its three figures.

        They are stranded slot-seconds, seconds with a slot stranded, and
        shortage seconds.
        """
        now = self.clock.monotonic()
        last, self._last = self._last, now
        if last is None:
            return 0.0, 0.0, 0.0
        dt = now - last
        idle = max(0, self.slots - busy)
        stranded = min(idle, self.capped_waiting()) * dt
        shortage = dt if idle == 0 and queued > 0 else 0.0
        self.stranded_slot_seconds += stranded
        self.shortage_seconds += shortage
        self.metrics.emit("stranded_seconds", round(stranded, 3), host=self.host)
        self.metrics.emit("shortage_seconds", round(shortage, 3), host=self.host)
        return stranded, dt if stranded else 0.0, shortage
