"""Keep running jobs' leases and SQS messages alive.

Every interval each running job's lease is renewed and its message's
visibility pushed to the lease TTL, so a long job is never redelivered while
it runs, and after a crash the message returns about when the lease expires.
Past the job timeout plus slack we stop renewing: a wedged job then loses its
lease like a crashed one.
"""

from __future__ import annotations

import logging

from imposer.aws.sqs import JobQueue
from imposer.errors import BackendError, LeaseLost
from imposer.logs import extra
from imposer.state.leases import LeaseStore
from imposer.worker.running import RunningTable

logger = logging.getLogger(__name__)


class Heartbeat:
    """One pass renews every lease in the running table."""

    def __init__(self, table: RunningTable, leases: LeaseStore, queue: JobQueue,
                 ttl: float, give_up_after: float, clock) -> None:
        self.table = table
        self.leases = leases
        self.queue = queue
        self.ttl = ttl
        self.give_up_after = give_up_after
        self.clock = clock

    def beat(self) -> None:
        for job in self.table.snapshot():
            if job.lost or job.abandoned:
                continue
            req = job.request
            if self.clock.monotonic() - job.started > self.give_up_after:
                job.abandoned = True
                logger.error("job %s ran past its timeout; no longer renewing its lease",
                             req.job_id, extra=extra("heartbeat_abandon", req.tenant_id,
                                                     req.job_id))
                continue
            try:
                job.lease = self.leases.renew(job.lease)
            except LeaseLost as exc:
                if self.table.get(job.slot) is not job:
                    continue  # it finished and released its lease meanwhile
                job.lost = True
                logger.error("lost the lease of job %s: %s", req.job_id, exc,
                             extra=extra("lease_lost", req.tenant_id, req.job_id))
                continue
            except BackendError as exc:
                logger.warning("could not renew lease of %s: %s", req.job_id, exc,
                               extra=extra("heartbeat_error", req.tenant_id, req.job_id))
                continue
            if not self.queue.change_visibility(job.message, self.ttl):
                logger.warning("message of job %s is no longer ours to extend", req.job_id,
                               extra=extra("visibility_lost", req.tenant_id, req.job_id))
