"""The parent's table of running jobs, shared by the main loop and the heartbeat."""

from __future__ import annotations

import threading

import attrs

from imposer.models import JobRequest, Lease, Received


@attrs.define
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
    #: Set once the heartbeat stopped renewing (past timeout + slack).
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

    def snapshot(self) -> list[Running]:
        with self._lock:
            return list(self._jobs.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)
