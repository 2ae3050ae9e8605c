"""Settle a finished job: one release transaction, then the message's fate.

The job's state goes into the same transaction that frees the slot. Only
after it committed is the message deleted, retried later or dead-lettered,
and the completion webhook queued (it never holds a slot).
"""

from __future__ import annotations

import logging
from typing import Protocol

from imposer.clock import Clock
from imposer.errors import BackendError, LeaseLost
from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import Fate, JobRequest, JobStatus, Outcome
from imposer.settings import Settings
from imposer.state.jobs import JobStore
from imposer.state.leases import LeaseStore
from imposer.worker.messages import Messages
from imposer.worker.running import Running

logger = logging.getLogger(__name__)


class Notifier(Protocol):
    """Whatever sends a tenant the completion event of a final job."""

    def job_finished(self, request: JobRequest, status: JobStatus, fields: dict) -> None: ...

    def is_alive(self) -> bool: ...

    def stop(self) -> None: ...


class Completer:
    """Release and settle jobs as their outcomes come back from the pool."""

    def __init__(self, settings: Settings, *, leases: LeaseStore, jobs: JobStore,
                 messages: Messages, metrics: Metrics, clock: Clock,
                 notifier: Notifier | None = None) -> None:
        self.settings = settings
        self.leases, self.jobs, self.messages, self.metrics = leases, jobs, messages, metrics
        self.clock = clock
        self.notifier = notifier

    def complete(self, job: Running, outcome: Outcome) -> JobStatus | None:
        """Release the lease with the job's state, then settle its message.

        Return the status recorded, or None when the lease was no longer ours
        (the message then returns and the job runs again: at least once).
        """
        req, now, settle_from = job.request, self.clock.time(), self.clock.monotonic()
        fields = {"run_seconds": round(self.clock.monotonic() - job.started, 3),
                  "error": outcome.reason, "error_kind": outcome.error_kind}
        status, failures = self.fate(job, outcome, fields)
        if status.final:
            fields["finished_at"] = now
        try:
            self.leases.release(job.lease, status, failures=1 if failures else 0, **fields)
        except LeaseLost as exc:
            logger.error("job %s finished but %s; its message will return", req.job_id, exc,
                         extra=extra("lease_lost", req.tenant_id, req.job_id))
            return None
        except BackendError as exc:
            logger.error("could not release job %s: %s; the sweep will reclaim it", req.job_id,
                         exc, extra=extra("release_error", req.tenant_id, req.job_id))
            return None
        self.settle_message(job, status, outcome, failures)
        fields["settle_ms"] = round(1000 * (self.clock.monotonic() - settle_from), 2)
        self.metrics.emit("jobs", 1, outcome=status.value, tenant_id=req.tenant_id)
        logger.info("job %s %s: %s", req.job_id, status.value, outcome.reason or "ok",
                    extra=extra("job_finished", req.tenant_id, req.job_id, status=status.value,
                                slot=job.slot, **fields))
        if status.final and self.notifier is not None and req.webhook:
            self.notifier.job_finished(req, status, fields)
        return status

    def fate(self, job: Running, outcome: Outcome, fields: dict) -> tuple[JobStatus, int]:
        """Map an outcome to a status; return it with the counted failures so far (or 0)."""
        if outcome.fate == Fate.SUCCEEDED:
            fields.update(error=None, error_kind=None)
            return JobStatus.SUCCEEDED, 0
        if outcome.fate == Fate.FAILED:
            return JobStatus.FAILED, 0
        if outcome.fate == Fate.RETRY:
            record = self.jobs.get(job.request.job_id)
            count = (record.failures if record else 0) + 1
            if count >= self.settings.max_attempts:
                return JobStatus.DEAD, count
            fields["wait_reason"] = (f"retrying after failure {count} of "
                                     f"{self.settings.max_attempts}: {outcome.reason}")
            return JobStatus.RETRYING, count
        fields["wait_reason"] = f"licence unavailable, retrying: {outcome.reason}"
        return JobStatus.RETRYING, 0

    def settle_message(self, job: Running, status: JobStatus, outcome: Outcome,
                       failures: int) -> None:
        if status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
            self.messages.finish(job.message)
        elif status == JobStatus.DEAD:
            self.messages.dead_letter(job.message, outcome.reason or "too many failures")
        elif failures:
            self.messages.retry_later(job.message, failures)
        else:
            self.messages.requeue(job.message)

    def stop(self) -> None:
        if self.notifier is not None:
            self.notifier.stop()
