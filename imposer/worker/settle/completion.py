"""Settle a finished attempt: one release transaction, the plate, then the message's fate.

Settling is a few steps, each safe to repeat, kept on the job's entry so a
step that meets an AWS error is tried again on the next pass of the loop
(the lease and the message are kept alive meanwhile):

1. the **release** transaction: lease deleted, counter decremented, the job's
   state recorded and, for a final job with a webhook, its completion event
   put in the outbox, all at once and fenced on the lease's epoch; when the
   slot was promised to the tenant's oldest parked job (``Handover``), that
   job's start is in the same transaction and the counter does not move (a
   borrowed slot lent on to a capped tenant's parked job the same way, in a
   borrowed lease);
2. for a success, the **promotion** of the attempt's plate to the job's output
   key (only an attempt whose fenced release committed gets this far);
3. the **message**: deleted, dead-lettered, or made visible again later.

Only a lease that runs out before the release goes through gives the job up
(the sweep reclaims it and it runs again); a release whose reply was lost
is found committed by the lease store, never taken for a reclaim. If the host dies after step 1,
the message returns, finds the job final and the dispatcher finishes step 2
before deleting it; the outbox sender does the same before telling the tenant.
"""

from __future__ import annotations

import enum
import logging

import attrs

from imposer import backoff
from imposer.aws.s3 import Storage
from imposer.clock import Clock
from imposer.errors import BackendError, LeaseLost
from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import Fate, JobStatus, Outcome, S3Uri, WebhookStatus
from imposer.settings import Settings
from imposer.state.jobs import DEAD_LETTER_OWED, JobStore
from imposer.state.leases import LeaseStore
from imposer.state import plates
from imposer.state.outbox import Event, OutboxStore, event_id
from imposer.webhooks.delivery import build_event, encode
from imposer.worker import policy
from imposer.worker.dispatch.handoff import Handover
from imposer.worker.messages import Messages
from imposer.worker.threads.rollup import RollupRecorder
from imposer.worker.running import Running, RunningTable

logger = logging.getLogger(__name__)


class Settled(enum.Enum):
    """Where a settlement pass left the job."""

    #: Every step is done; the job leaves the table.
    DONE = "done"
    #: A step met an AWS error; try again at the entry's ``retry_at``.
    LATER = "later"
    #: The lease is gone (reclaimed, or ran out while AWS failed): the job will run again.
    LOST = "lost"


class Completer:
    """Release and settle jobs as their outcomes come back from the pool."""

    def __init__(self, settings: Settings, *, table: RunningTable, leases: LeaseStore,
                 jobs: JobStore, outbox: OutboxStore, storage: Storage, messages: Messages,
                 metrics: Metrics, rollups: RollupRecorder, clock: Clock,
                 wake_sender=None) -> None:
        self.settings, self.table = settings, table
        self.leases, self.jobs, self.outbox, self.storage = leases, jobs, outbox, storage
        self.messages, self.metrics, self.rollups, self.clock = messages, metrics, rollups, clock
        self.wake_sender = wake_sender
        #: epoch -> the hand-over its release tried, and whether it committed
        self._handovers: dict[str, tuple[Handover, bool]] = {}

    def decide(self, job: Running) -> Running:
        """Decide the job's fate now, if not yet (``settle`` tries again after an AWS error).

        Called before its slot is promised, so the next job's start is never
        recorded before this one's end.
        """
        if job.status is not None:
            return job
        try:
            return self._decide(job)
        except BackendError:
            return job

    def handover(self, job: Running) -> tuple[Handover, bool] | None:
        """The hand-over *job*'s settlement tried, and whether it committed (once)."""
        return self._handovers.pop(job.epoch, None)

    def finished(self, job: Running, outcome: Outcome) -> Running | None:
        """Record the child's report on the job; its slot is free from now on."""
        return self.table.update(job, outcome=outcome, finished=self.clock.monotonic())

    def settle(self, job: Running) -> Settled:
        """Take the job through every settlement step still to do."""
        try:
            if job.status is None:
                job = self._decide(job)
            if not job.released:
                job = self._release(job)
            if job.status == JobStatus.SUCCEEDED and not job.promoted:
                job = self._promote(job)
        except LeaseLost:
            self.table.remove(job)
            return Settled.LOST
        except BackendError as exc:
            return self._later(job, exc)
        self._message(job)
        self._done(job)
        self.table.remove(job)
        return Settled.DONE

    def hand_back(self, job: Running) -> None:
        """On stop: release an unfinished job as queued, its message visible for others."""
        self.table.remove(job)
        req = job.request
        if job.settling:
            logger.error("job %s finished but could not be settled before the stop; its lease "
                         "will be reclaimed and it runs again", req.key,
                         extra=extra("settle_abandoned", req.tenant_id, req.job_id))
            return
        try:
            self.leases.release(job.lease, JobStatus.QUEUED, wait_reason=(
                f"worker {self.settings.host_id} stopped before finishing; returned to the queue"))
        except (LeaseLost, BackendError) as exc:
            logger.error("could not release %s on stop: %s", req.key, exc,
                         extra=extra("release_error", req.tenant_id, req.job_id))
        self.messages.give_back_quietly(job.message)
        logger.warning("returned unfinished job %s to the queue", req.key,
                       extra=extra("job_returned", req.tenant_id, req.job_id))

    # -- the steps -------------------------------------------------------------------------
    def _decide(self, job: Running) -> Running:
        """Map the outcome to a status once; a RETRY reads the failures counted so far."""
        fate, failures = job.outcome.fate, 0
        if fate == Fate.SUCCEEDED:
            status = JobStatus.SUCCEEDED
        elif fate == Fate.FAILED:
            status = JobStatus.FAILED
        elif fate == Fate.RETRY:
            record = self.jobs.get(job.request.tenant_id, job.request.job_id)
            failures = (record.failures if record else 0) + 1
            status = JobStatus.DEAD if policy.is_dead(failures, self.settings.max_attempts) \
                else JobStatus.RETRYING
        else:
            status = JobStatus.RETRYING
        decided = {"status": status, "failures": failures, "decided_at": self.clock.time()}
        return self.table.update(job, **decided) or attrs.evolve(job, **decided)

    def _fields(self, job: Running) -> dict:
        outcome, status, s = job.outcome, job.status, self.settings
        fields = {"run_seconds": round((job.finished or job.started) - job.started, 3),
                  "error": outcome.reason, "error_kind": outcome.error_kind}
        if status == JobStatus.SUCCEEDED:
            fields.update(error=None, error_kind=None, output_epoch=job.epoch,
                          warnings=list(outcome.warnings) or None)
        elif status == JobStatus.RETRYING and job.failures:
            fields["wait_reason"] = (f"retrying after failure {job.failures} of "
                                     f"{s.max_attempts}: {outcome.reason}")
        elif status == JobStatus.RETRYING:  # requeued, not counted: not the job's fault
            why = "lease ran out" if outcome.error_kind == "lease_expired" else \
                "licence unavailable"
            fields["wait_reason"] = f"{why}, retrying: {outcome.reason}"
        if status.final:
            fields["finished_at"] = job.decided_at
        return fields

    def _release(self, job: Running) -> Running | None:
        req, fields = job.request, self._fields(job)
        also = []
        if job.status.final and req.webhook:
            event = self._event(job, fields)
            also.append(self.outbox.put_op(event))
            fields.update(webhook_status=WebhookStatus.PENDING, webhook_event=event.event_id)
        if job.status == JobStatus.DEAD:  # its one DLQ message, owed until sent
            fields["dead_letter"] = DEAD_LETTER_OWED
        failures = 1 if job.failures else 0
        try:
            if job.handover is not None:
                committed = self.leases.hand_over(job.lease, job.status, job.handover.successor,
                                                  failures=failures, also=also,
                                                  ended_at=job.decided_at, **fields)
                self._handovers[job.epoch] = (job.handover, committed)
                if not committed:  # its successor was taken or is at cap: release as usual
                    job = self.table.update(job, handover=None) or \
                        attrs.evolve(job, handover=None)
            if job.handover is None:
                self.leases.release(job.lease, job.status, failures=failures, also=also,
                                    ended_at=job.decided_at, **fields)
        except LeaseLost as exc:
            logger.error("job %s finished but %s; its message will return", req.key, exc,
                         extra=extra("lease_lost", req.tenant_id, req.job_id))
            self._discard_attempt(job)
            raise
        self.rollups.job_finished(req.tenant_id, job.status.value, job.lease.acquired_at,
                                  self.clock.time())
        return self.table.update(job, released=True) or attrs.evolve(job, released=True)

    def _promote(self, job: Running) -> Running:
        req = job.request
        plates.promote(self.storage, tenant_id=req.tenant_id, job_id=req.job_id,
                       attempt=req.attempt_uri(job.epoch), output=req.output, epoch=job.epoch)
        return self.table.update(job, promoted=True) or attrs.evolve(job, promoted=True)

    def _message(self, job: Running) -> None:
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

    def _done(self, job: Running) -> None:
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

    # -- failures ---------------------------------------------------------------------------
    def _later(self, job: Running, exc: BackendError) -> Settled:
        """Try again soon, unless the lease would run out first (then the sweep takes it)."""
        job = next((j for j in self.table.snapshot() if j.epoch == job.epoch), job)
        req = job.request
        margin = self.settings.heartbeat_seconds
        if not job.released and self.clock.time() > job.lease.expires_at - margin:
            logger.error("could not release job %s before its lease ran out (%s); the sweep "
                         "will reclaim it and it runs again", req.key, exc,
                         extra=extra("release_gave_up", req.tenant_id, req.job_id))
            self.table.remove(job)
            return Settled.LOST
        delay = backoff.doubling(0.25, job.tries, cap=10.0)
        logger.warning("settling job %s failed (%s); trying again in %.1fs", req.key, exc,
                       delay, extra=extra("settle_retry", req.tenant_id, req.job_id,
                                          tries=job.tries + 1))
        self.table.update(job, tries=job.tries + 1, retry_at=self.clock.monotonic() + delay)
        return Settled.LATER

    def _event(self, job: Running, fields: dict) -> Event:
        req, lease = job.request, job.lease
        submitted = req.submitted_at or job.message.sent_at
        body = encode(build_event(
            job_id=req.job_id, tenant_id=req.tenant_id, status=job.status, token=req.token,
            output=req.output if job.status == JobStatus.SUCCEEDED else None,
            error=fields.get("error"), error_kind=fields.get("error_kind"),
            submitted_at=submitted, started_at=lease.acquired_at,
            finished_at=fields.get("finished_at"),
            queue_wait=round(max(0.0, lease.acquired_at - submitted), 3),
            run_seconds=fields.get("run_seconds"),
            warnings=list(job.outcome.warnings) or None))
        promote = job.status == JobStatus.SUCCEEDED
        return Event(event_id=event_id(req.tenant_id, req.job_id, job.epoch),
                     tenant_id=req.tenant_id, job_id=req.job_id, url=req.webhook, body=body,
                     due_at=job.decided_at, created_at=job.decided_at,
                     attempt=req.attempt_uri(job.epoch) if promote else None,
                     epoch=job.epoch if promote else None,
                     output=req.output if promote else None)

    def _discard_attempt(self, job: Running) -> None:
        """A refused release means this attempt is void: its plate must never surface."""
        try:
            self.storage.delete(S3Uri.parse(job.request.attempt_uri(job.epoch)))
        except BackendError:
            pass  # the attempts/ lifecycle rule removes it later
