"""Where a slot's job ends: the results the pool's children report, and the slots killed
because their job ran past its limit or lost its lease; each ended job goes to the
completer, whose settle frees its slot (``imposer.worker.settle``).
"""

from __future__ import annotations

import logging
from typing import Sequence

from imposer.clock import Clock
from imposer.logs import extra
from imposer.models import Fate, Outcome
from imposer.worker.dispatch.pool import Pool
from imposer.worker.overrun import OverrunPolicy
from imposer.worker.running import RunningTable
from imposer.worker.settle.completion import Completer

logger = logging.getLogger(__name__)


class Reaper:
    """Take what the pool's slots report, kill the slots whose job must not go on, and hand
    back what is still running at a stop: each to the completer."""

    def __init__(self, *, pool: Pool, running: RunningTable, completer: Completer,
                 overrun: OverrunPolicy, clock: Clock, wake: Sequence[int] = ()) -> None:
        self.pool, self.running, self.completer = pool, running, completer
        self.overrun, self.clock = overrun, clock
        #: File descriptors that end a wait on the pool early (the receiver's wake-up).
        self.wake = tuple(wake)

    def collect(self, wait: float) -> None:
        """Take the outcomes the pool has, waiting up to *wait* seconds for one (or for a
        wake-up); their slots are free from now on. A child that died is a RETRY."""
        for event in self.pool.wait(wait, self.wake):
            job = self.running.in_slot(event.slot)
            if job is None:
                continue
            outcome = event.outcome or Outcome(
                job_id=job.request.job_id, fate=Fate.RETRY, error_kind="child_died",
                reason=f"pool worker died (exit code {event.exitcode})")
            self.completer.finished(job, outcome)

    def check_overruns(self) -> None:
        """Kill the slot of a job whose lease was lost or that ran past its limit.

        A result already waiting in the slot's pipe is collected first, never
        thrown away by a kill.
        """
        now = self.clock.monotonic()
        for job in self.running.running():
            if self.pool.has_result(job.slot):
                continue
            if job.lost:
                self.pool.kill(job.slot)
                self.running.remove(job)
                logger.error("killed job %s: its lease was reclaimed; the message will return",
                             job.request.key, extra=extra("job_abandoned", job.request.tenant_id,
                                                          job.request.job_id))
            elif self.overrun.overran(job.started, now):
                self.pool.kill(job.slot)
                self.completer.finished(job, Outcome(
                    job_id=job.request.job_id, fate=Fate.RETRY, error_kind="timeout",
                    reason=f"job ran past {self.overrun.limit:.0f}s; its pool worker was killed"))

    def stop_pool(self, timeout: float) -> None:
        """Stop the children (*timeout* seconds for the running ones to end); what they
        reported on the way out is settled like any result."""
        for event in self.pool.stop(timeout=timeout):
            job = self.running.in_slot(event.slot)
            if job is not None:
                self.completer.finished(job, event.outcome)

    def hand_back(self) -> None:
        """At the stop's end: every job still in the table released as queued, its message
        visible for other hosts (``Completer.hand_back``)."""
        for job in self.running.snapshot():
            self.completer.hand_back(job)
