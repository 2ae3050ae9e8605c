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

import contextlib
import enum
import logging
from typing import Iterator

import attrs

from imposer import backoff
from imposer.aws.s3 import Storage
from imposer.clock import Clock
from imposer.errors import BackendError, LeaseLost
from imposer.logs import extra
from imposer.models import Fate, JobStatus, Outcome, S3Uri
from imposer.state.jobs import JobStore
from imposer.state import plates
from imposer.state.leases import LeaseStore
from imposer.state.outbox import OutboxStore
from imposer.worker import policy
from imposer.worker.dispatch.handoff import Handover
from imposer.worker.running import Running, RunningTable
from imposer.worker.settle.ending import Ending
from imposer.worker.settle.record import release_record

logger = logging.getLogger(__name__)


class Settled(enum.Enum):
    """Where a settlement pass left the job."""

    #: Every step is done; the job leaves the table.
    DONE = "done"
    #: A step met an AWS error; try again at the entry's ``retry_at``.
    LATER = "later"
    #: The lease is gone (reclaimed, or ran out while AWS failed): the job will run again.
    LOST = "lost"


@attrs.frozen(kw_only=True)
class Handed:
    """The hand-over a release tried (``LeaseStore.hand_over``), and whether it committed."""

    handover: Handover
    #: True: the successor holds the slot; False: refused, the release was a plain one.
    committed: bool


@attrs.frozen(kw_only=True)
class Settlement:
    """What one ``Completer.settle`` pass did with a finished job."""

    #: Where the pass left the job.
    state: Settled
    #: The hand-over its release tried in this pass (each is tried by one pass only).
    handed: Handed | None = None
    #: Fair share: what the release this pass committed charged, (seconds, ended at).
    charged: tuple[float, float] | None = None


class Completer:
    """Release and settle jobs as their outcomes come back from the pool."""

    def __init__(self, *, max_attempts: int, heartbeat: float, table: RunningTable,
                 leases: LeaseStore, jobs: JobStore, outbox: OutboxStore, storage: Storage,
                 ending: Ending, clock: Clock) -> None:
        #: The attempts a job may fail, and the margin before its lease runs out within
        #: which a release gives up.
        self.max_attempts, self.heartbeat = max_attempts, heartbeat
        self.table = table
        self.leases, self.jobs, self.outbox, self.storage = leases, jobs, outbox, storage
        #: The message's fate and the job's report, once its release committed.
        self.ending, self.clock = ending, clock

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

    def finished(self, job: Running, outcome: Outcome) -> Running | None:
        """Record the child's report on the job; its slot is free from now on."""
        return self.table.update(job, outcome=outcome, finished=self.clock.monotonic())

    def settle(self, job: Running) -> Settlement:
        """Take the job through every settlement step still to do.

        A slot promised on the job's entry (``Running.handover``) is handed
        over by the release; what became of that is in the result, even when
        a later step failed, so the successor is started (or its note let go)
        once.
        """
        handed = charged = None
        try:
            if job.status is None:
                job = self._decide(job)
            if not job.released:
                fields, also = release_record(job, self.max_attempts, self.outbox)
                if job.handover is not None:
                    job, handed = self._hand_over(job, fields, also)
                if not job.released:
                    job = self._release(job, fields, also)
                # as ``LeaseStore`` charged it: launch to the decision, ending at the decision
                charged = max(0.0, job.decided_at - job.lease.acquired_at), job.decided_at
            if job.status == JobStatus.SUCCEEDED and not job.promoted:
                job = self._promote(job)
        except LeaseLost:
            self.table.remove(job)
            return Settlement(state=Settled.LOST, handed=handed)
        except BackendError as exc:
            return Settlement(state=self._later(job, exc), handed=handed, charged=charged)
        self.ending.message(job)
        self.ending.report(job)
        self.table.remove(job)
        return Settlement(state=Settled.DONE, handed=handed, charged=charged)

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
                f"worker {job.lease.host} stopped before finishing; returned to the queue"))
        except (LeaseLost, BackendError) as exc:
            logger.error("could not release %s on stop: %s", req.key, exc,
                         extra=extra("release_error", req.tenant_id, req.job_id))
        self.ending.give_back(job)
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
            status = JobStatus.DEAD if policy.is_dead(failures, self.max_attempts) \
                else JobStatus.RETRYING
        else:
            status = JobStatus.RETRYING
        decided = {"status": status, "failures": failures, "decided_at": self.clock.time()}
        return self.table.update(job, **decided) or attrs.evolve(job, **decided)

    def _hand_over(self, job: Running, fields: dict, also: list) -> tuple[Running, Handed]:
        """Release the job and start its promised successor in one transaction; refused
        (its successor was taken or is at cap), the job is left to release as usual."""
        with self._fenced(job):
            committed = self.leases.hand_over(job.lease, job.status, job.handover.successor,
                                              failures=1 if job.failures else 0, also=also,
                                              ended_at=job.decided_at, **fields)
        handed = Handed(handover=job.handover, committed=committed)
        if not committed:
            return self.table.update(job, handover=None) or \
                attrs.evolve(job, handover=None), handed
        return self._released(job), handed

    def _release(self, job: Running, fields: dict, also: list) -> Running:
        with self._fenced(job):
            self.leases.release(job.lease, job.status, failures=1 if job.failures else 0,
                                also=also, ended_at=job.decided_at, **fields)
        return self._released(job)

    def _released(self, job: Running) -> Running:
        self.ending.released(job)
        return self.table.update(job, released=True) or attrs.evolve(job, released=True)

    @contextlib.contextmanager
    def _fenced(self, job: Running) -> Iterator[None]:
        """A release refused on the lease's epoch voids this attempt (LeaseLost goes on)."""
        try:
            yield
        except LeaseLost as exc:
            req = job.request
            logger.error("job %s finished but %s; its message will return", req.key, exc,
                         extra=extra("lease_lost", req.tenant_id, req.job_id))
            self._discard_attempt(job)
            raise

    def _promote(self, job: Running) -> Running:
        req = job.request
        plates.promote(self.storage, tenant_id=req.tenant_id, job_id=req.job_id,
                       attempt=req.attempt_uri(job.epoch), output=req.output, epoch=job.epoch)
        return self.table.update(job, promoted=True) or attrs.evolve(job, promoted=True)

    # -- failures ---------------------------------------------------------------------------
    def _later(self, job: Running, exc: BackendError) -> Settled:
        """Try again soon, unless the lease would run out first (then the sweep takes it)."""
        job = next((j for j in self.table.snapshot() if j.epoch == job.epoch), job)
        req = job.request
        margin = self.heartbeat
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

    def _discard_attempt(self, job: Running) -> None:
        """A refused release means this attempt is void: its plate must never surface."""
        try:
            self.storage.delete(S3Uri.parse(job.request.attempt_uri(job.epoch)))
        except BackendError:
            pass  # the attempts/ lifecycle rule removes it later
