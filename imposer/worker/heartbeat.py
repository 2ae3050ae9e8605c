"""Keep running jobs' leases and SQS messages alive.

Every interval each running job's lease is renewed and its message held
for another lease TTL, so a long job is never redelivered while it runs,
and after a crash the message returns about when the lease expires. Past the
overrun limit we stop renewing: a wedged job then loses its lease like a
crashed one.
"""

from __future__ import annotations

import logging

from imposer.clock import Clock
from imposer.errors import BackendError, LeaseLost
from imposer.logs import extra
from imposer.state.leases import LeaseStore
from imposer.worker.messages import Messages
from imposer.worker.overrun import OverrunPolicy
from imposer.worker.running import RunningTable

logger = logging.getLogger(__name__)


class Heartbeat:
    """One pass renews every lease in the running table."""

    def __init__(self, table: RunningTable, leases: LeaseStore, messages: Messages,
                 overrun: OverrunPolicy, clock: Clock) -> None:
        self.table = table
        self.leases = leases
        self.messages = messages
        self.overrun = overrun
        self.clock = clock

    def beat(self) -> None:
        for job in self.table.snapshot():
            if job.lost or job.abandoned:
                continue
            req = job.request
            if self.overrun.overran(job.started, self.clock.monotonic()):
                self.table.update(job, abandoned=True)
                logger.error("job %s ran past its timeout; no longer renewing its lease",
                             req.job_id, extra=extra("heartbeat_abandon", req.tenant_id,
                                                     req.job_id))
                continue
            try:
                lease = self.leases.renew(job.lease)
            except LeaseLost as exc:
                if self.table.update(job, lost=True) is None:
                    continue  # it finished and released its lease meanwhile
                logger.error("lost the lease of job %s: %s", req.job_id, exc,
                             extra=extra("lease_lost", req.tenant_id, req.job_id))
                continue
            except BackendError as exc:
                logger.warning("could not renew lease of %s: %s", req.job_id, exc,
                               extra=extra("heartbeat_error", req.tenant_id, req.job_id))
                continue
            self.table.update(job, lease=lease)
            if not self.messages.hold(job.message):
                logger.warning("message of job %s is no longer ours to extend", req.job_id,
                               extra=extra("visibility_lost", req.tenant_id, req.job_id))
