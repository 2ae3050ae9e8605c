"""A received copy of a job that runs elsewhere or already ended (SQS delivers at least
once; a tenant may send a job twice): kept back while it runs, deleted once it ended,
after finishing what the host that ended it may have left (its plate's promotion, its
dead letter).
"""

from __future__ import annotations

import logging

from imposer.aws.s3 import Storage
from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import JobRequest, JobStatus, Received
from imposer.state import plates
from imposer.state.jobs import JobStore, dead_letter_due
from imposer.state.leases import Acquisition
from imposer.worker.dispatch.deferral import Deferral
from imposer.worker.messages import Messages

logger = logging.getLogger(__name__)


class Duplicates:
    """What an acquire's RUNNING or DONE verdict does with the message it was for."""

    def __init__(self, *, jobs: JobStore, storage: Storage, messages: Messages,
                 metrics: Metrics, deferral: Deferral) -> None:
        self.jobs, self.storage, self.messages = jobs, storage, messages
        self.metrics, self.deferral = metrics, deferral

    def running(self, request: JobRequest, message: Received) -> None:
        """The job runs on some host: this copy is deferred, to be settled when it returns."""
        self.metrics.emit("duplicate", 1, tenant_id=request.tenant_id)
        logger.info("job %s already runs elsewhere; keeping this copy back", request.job_id,
                    extra=extra("duplicate_running", request.tenant_id, request.job_id))
        self.deferral.defer(request, message, None)

    def done(self, request: JobRequest, message: Received, acq: Acquisition) -> None:
        """The job is final: this copy is deleted (``finish``)."""
        self.metrics.emit("duplicate", 1, tenant_id=request.tenant_id)
        logger.info("job %s already %s; deleting the duplicate", request.key, acq.status,
                    extra=extra("duplicate_done", request.tenant_id, request.job_id))
        self.finish(request, message, acq)

    def finish(self, request: JobRequest, message: Received, acq: Acquisition) -> None:
        """Delete the message of a final job, after making sure its plate was promoted.

        A host that died between the release and the promotion left the plate
        under its attempt key, or between a death's release and its DLQ message
        left that owed; the returning message is the cue to finish either.
        """
        if acq.status == JobStatus.DEAD.value and dead_letter_due(acq.dead_letter):
            record = self.jobs.get(request.tenant_id, request.job_id)
            self.messages.dead_letter_job(self.jobs, request, record.epoch or "", message,
                                          record.error or "too many failures")
            return
        if acq.status == JobStatus.SUCCEEDED.value and acq.output_epoch:
            plates.promote(self.storage, tenant_id=request.tenant_id, job_id=request.job_id,
                           attempt=request.attempt_uri(acq.output_epoch), output=request.output,
                           epoch=acq.output_epoch)
        self.messages.finish(message)
