"""The parent's table of its jobs, from dispatch until their settlement is done.

A job enters when it is launched in a slot and leaves only once its release
committed and its message is settled. In between, after the child reported,
the job *settles*: its slot is free for other work, but its lease is still
renewed and its message still held until the release goes through, so a
short DynamoDB outage never turns a finished job into a re-run.

Entries are frozen and keyed by the attempt's fencing epoch; a thread that
learns something (a renewed lease, a lost one) applies its change to the
current entry of that epoch under the table's lock. The threads change
different fields (the renewer the lease, the loop the settlement), so no
change is lost, and a change about an attempt that has left the table is
dropped: it can never land on the job that took the slot after it.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs

from imposer.models import JobRequest, JobStatus, Lease, Outcome, Received


@attrs.frozen(kw_only=True)
class Running:
    """One attempt of a job, as the parent tracks it."""

    slot: int
    request: JobRequest
    message: Received
    lease: Lease
    #: Monotonic time the job was dispatched.
    started: float
    #: Monotonic time the message was received (parent overhead = started - received).
    received: float = 0.0
    #: Set by the lease renewer when the lease was reclaimed under us.
    lost: bool = False
    #: Set once the renewer stopped renewing (past the overrun limit).
    abandoned: bool = False
    #: What the child reported; from then on the slot is free and the job settles.
    outcome: Outcome | None = None
    #: Monotonic time the outcome arrived.
    finished: float | None = None
    #: The fate decided for this attempt (kept, so a retried settlement counts once).
    status: JobStatus | None = None
    failures: int = 0
    #: Wall-clock time the fate was decided: every try of the release writes this one, so
    #: each try is the same request (and its ClientRequestToken can answer for it).
    decided_at: float | None = None
    #: Settlement steps done: the release transaction, the plate promotion.
    released: bool = False
    promoted: bool = False
    #: Failed settlement attempts so far, and when to try again (monotonic).
    tries: int = 0
    retry_at: float = 0.0
    #: Its slot, promised to its tenant's oldest parked job: the release starts that
    #: job in the same transaction (``imposer.worker.dispatch.handoff.Handover``).
    handover: Any = None

    @property
    def epoch(self) -> str:
        return self.lease.epoch

    @property
    def settling(self) -> bool:
        return self.outcome is not None


class RunningTable:
    """epoch -> Running, behind a lock."""

    def __init__(self) -> None:
        self._jobs: dict[str, Running] = {}
        self._lock = threading.Lock()

    def add(self, job: Running) -> None:
        with self._lock:
            self._jobs[job.epoch] = job

    def in_slot(self, slot: int) -> Running | None:
        """Return the job still running in *slot* (not one that settles after leaving it)."""
        with self._lock:
            return next((j for j in self._jobs.values()
                         if j.slot == slot and not j.settling), None)

    def update(self, job: Running, **changes: Any) -> Running | None:
        """Apply *changes* to the current entry of *job*'s attempt; None if it left the table."""
        with self._lock:
            current = self._jobs.get(job.epoch)
            if current is None:
                return None
            new = self._jobs[job.epoch] = attrs.evolve(current, **changes)
            return new

    def remove(self, job: Running) -> None:
        with self._lock:
            self._jobs.pop(job.epoch, None)

    def snapshot(self) -> list[Running]:
        with self._lock:
            return list(self._jobs.values())

    def running(self) -> list[Running]:
        return [j for j in self.snapshot() if not j.settling]

    def settling(self) -> list[Running]:
        return [j for j in self.snapshot() if j.settling]

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)
