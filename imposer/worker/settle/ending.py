"""A settled job's end, once its release committed: its message's fate (deleted,
dead-lettered, or back later) and what operators read of it (the ``job_finished`` line,
the ``jobs`` and ``failures`` metrics, the hourly rollup, the webhook sender woken).
"""

from __future__ import annotations

import logging
from typing import Callable

from imposer.clock import Clock
from imposer.errors import BackendError
from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import JobStatus
from imposer.state.jobs import JobStore
from imposer.state.outbox import event_id
from imposer.worker.messages import Messages
from imposer.worker.running import Running
from imposer.worker.threads.rollup import RollupRecorder

logger = logging.getLogger(__name__)


class Ending:
    """The message and the report of a job whose release committed (``Completer``)."""

    def __init__(self, *, messages: Messages, jobs: JobStore, metrics: Metrics,
                 rollups: RollupRecorder, clock: Clock,
                 wake_sender: Callable[[str], None] | None = None) -> None:
        self.messages, self.jobs, self.metrics = messages, jobs, metrics
        self.rollups, self.clock, self.wake_sender = rollups, clock, wake_sender

    def released(self, job: Running) -> None:
        """Its release committed: the hour's rollup counts the run."""
        self.rollups.job_finished(job.request.tenant_id, job.status.value,
                                  job.lease.acquired_at, self.clock.time())

    def message(self, job: Running) -> None:
        """Settle the message; a failure here only means it comes back and is settled then."""
        status, message = job.status, job.message
        try:
            if status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
                self.messages.finish(message)
            elif status == JobStatus.DEAD:
                self.messages.dead_letter_job(self.jobs, job.request, job.epoch, message,
                                              job.outcome.reason or "too many failures")
            elif job.failures:
                self.messages.retry_later(message, job.failures)
            else:
                self.messages.requeue(message)
        except BackendError as exc:
            logger.warning("job %s is %s but its message could not be settled: %s; it will "
                           "come back and be settled then", job.request.key, status.value, exc,
                           extra=extra("message_settle_error", job.request.tenant_id,
                                       job.request.job_id))

    def report(self, job: Running) -> None:
        """The job's end where operators read it; a final job's webhook sender woken."""
        req, status = job.request, job.status
        self.metrics.emit("jobs", 1, outcome=status.value, tenant_id=req.tenant_id)
        if status != JobStatus.SUCCEEDED:
            self.metrics.emit("failures", 1, kind=job.outcome.error_kind or "unknown")
        settle_ms = round(1000 * (self.clock.monotonic() - (job.finished or job.started)), 2)
        logger.info("job %s %s: %s", req.key, status.value, job.outcome.reason or "ok",
                    extra=extra("job_finished", req.tenant_id, req.job_id, status=status.value,
                                error_kind=job.outcome.error_kind if status != JobStatus.SUCCEEDED
                                else None, slot=job.slot, settle_ms=settle_ms, tries=job.tries,
                                run_seconds=round((job.finished or 0) - job.started, 3)))
        if status.final and req.webhook and self.wake_sender is not None:
            self.wake_sender(event_id(req.tenant_id, req.job_id, job.epoch))

    def give_back(self, job: Running) -> None:
        """A stopped job's message, visible for other hosts at once (an AWS error only
        delays it: it comes back when its visibility runs out)."""
        self.messages.give_back_quietly(job.message)
