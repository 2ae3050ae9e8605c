"""Keep the parent's jobs alive: leases in DynamoDB, messages in SQS, on separate threads.

Every interval each job's lease is renewed and, on its own thread, its
message held for another lease TTL: a long job is never redelivered while it
runs, and after a crash the message returns about when the lease expires.
The two never share a thread, so botocore backing off a throttled SQS call
cannot starve the renewals (and the other way round).

Each renewal also moves the job's fence (``imposer.child.fence``): the
time by which its child stops its tools if no later renewal comes. A job
that settles after its child reported is still renewed until its release
commits. Past the overrun limit the renewer stops: a wedged job then
loses its lease like a crashed one.
"""

from __future__ import annotations

import logging
from typing import Callable

from imposer.clock import Clock
from imposer.errors import BackendError, LeaseLost
from imposer.logs import extra
from imposer.state.leases import LeaseStore
from imposer.worker.messages import Messages
from imposer.worker.overrun import OverrunPolicy
from imposer.worker.running import Running, RunningTable
from imposer.worker.timing import LeaseTiming

logger = logging.getLogger(__name__)


class LeaseRenewer:
    """One pass renews the lease of every job not yet released."""

    def __init__(self, table: RunningTable, leases: LeaseStore, overrun: OverrunPolicy,
                 timing: LeaseTiming, clock: Clock,
                 fence: Callable[[int, str, float], None] | None = None) -> None:
        self.table, self.leases, self.overrun = table, leases, overrun
        self.timing, self.clock, self.fence = timing, clock, fence

    def beat(self) -> None:
        for job in self.table.snapshot():
            if job.lost or job.abandoned or job.released:
                continue
            req = job.request
            if not job.settling and self.overrun.overran(job.started, self.clock.monotonic()):
                self.table.update(job, abandoned=True)
                logger.error("job %s ran past its timeout; no longer renewing its lease",
                             req.key, extra=extra("heartbeat_abandon", req.tenant_id,
                                                  req.job_id))
                continue
            began = self.clock.monotonic()
            try:
                lease = self.leases.renew(job.lease)
            except LeaseLost as exc:
                self.lost(job, exc)
                continue
            except BackendError as exc:
                logger.warning("could not renew lease of %s: %s", req.key, exc,
                               extra=extra("heartbeat_error", req.tenant_id, req.job_id))
                continue
            took = self.clock.monotonic() - began
            if self.timing.slow_renewal(took):
                logger.warning("renewing the lease of %s took %.1fs, %.0f%% of the lease TTL; "
                               "raise IMPOSER_LEASE_TTL_SECONDS", req.key, took,
                               100 * took / self.timing.ttl,
                               extra=extra("renew_slow", req.tenant_id, req.job_id, seconds=took))
            self.table.update(job, lease=lease)
            if self.fence is not None and not job.settling:
                self.fence(job.slot, job.epoch,
                           self.timing.tools_may_run(lease.expires_at - self.clock.time()))

    def lost(self, job: Running, exc: LeaseLost) -> None:
        """Flag *job* as lost, unless it was our own release that took the lease.

        A renewal that races the release finds the lease gone: the running
        table or, while the release's reply is still awaited, the job record
        says so. Only a lease someone else took is an error.
        """
        req = job.request
        current = self.table.update(job)
        try:
            ours = current is None or current.released or (
                current.status is not None and self.leases.released(job.lease, current.status))
        except BackendError as err:
            logger.warning("lease of %s is gone and its job record cannot be read (%s); "
                           "looking again next beat", req.key, err,
                           extra=extra("heartbeat_error", req.tenant_id, req.job_id))
            return
        if ours:
            logger.debug("lease of job %s ended with its release", req.key,
                         extra=extra("lease_released", req.tenant_id, req.job_id))
        elif self.table.update(job, lost=True) is not None:
            logger.error("lost the lease of job %s: %s", req.key, exc,
                         extra=extra("lease_lost", req.tenant_id, req.job_id))


class MessageHolder:
    """One pass keeps the message of every job whose fate is not settled invisible.

    Only a message that could show up again before two more beats is held:
    its receive already made it invisible for a lease TTL, so a job shorter
    than that (most of them, with the defaults) costs no visibility change.
    """

    def __init__(self, table: RunningTable, messages: Messages) -> None:
        self.table, self.messages = table, messages

    def beat(self) -> None:
        for job in self.table.snapshot():
            if job.lost or job.abandoned:
                continue
            req = job.request
            if not self.messages.due(job.message):
                continue  # its receive (or last hold) keeps it invisible past two more beats
            try:
                held = self.messages.hold(job.message)
            except BackendError as exc:
                logger.warning("could not hold the message of %s: %s", req.key, exc,
                               extra=extra("visibility_error", req.tenant_id, req.job_id))
                continue
            if held is not None:
                self.table.update(job, message=held)
            elif self.table.update(job) is not None:
                logger.warning("message of job %s is no longer ours to extend", req.key,
                               extra=extra("visibility_lost", req.tenant_id, req.job_id))
