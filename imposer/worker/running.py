"""The parent's table of running jobs, shared by the main loop and the heartbeat.

Entries are frozen; a thread that learns something about a job (a renewed
lease, a lost one) replaces the entry under the table's lock, and only if
the slot still holds that very job, so a late heartbeat can never write onto
the job that took the slot after it.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs

from imposer.models import JobRequest, Lease, Received


@attrs.frozen(kw_only=True)
class Running:
    """One job in one slot, as the parent tracks it."""

    slot: int
    request: JobRequest
    message: Received
    lease: Lease
    #: Monotonic time the job was dispatched.
    started: float
    #: Monotonic time the message was received (parent overhead = started - received).
    received: float = 0.0
    #: Set by the heartbeat when the lease was reclaimed under us.
    lost: bool = False
    #: Set once the heartbeat stopped renewing (past the overrun limit).
    abandoned: bool = False


class RunningTable:
    """slot -> Running, behind a lock."""

    def __init__(self) -> None:
        self._jobs: dict[int, Running] = {}
        self._lock = threading.Lock()

    def add(self, job: Running) -> None:
        with self._lock:
            self._jobs[job.slot] = job

    def pop(self, slot: int) -> Running | None:
        with self._lock:
            return self._jobs.pop(slot, None)

    def get(self, slot: int) -> Running | None:
        with self._lock:
            return self._jobs.get(slot)

    def update(self, job: Running, **changes: Any) -> Running | None:
        """Replace *job* with a copy carrying *changes*; None if its slot moved on."""
        with self._lock:
            if self._jobs.get(job.slot) is not job:
                return None
            new = self._jobs[job.slot] = attrs.evolve(job, **changes)
            return new

    def snapshot(self) -> list[Running]:
        with self._lock:
            return list(self._jobs.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)
