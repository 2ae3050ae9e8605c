"""What a finished job's release writes: its record's fields and its completion event.

Built from the job's entry alone (its decided fate and ``decided_at``), so
every try of the release, plain or handing the slot over, writes the same
request.
"""

from __future__ import annotations

from imposer.models import JobStatus, WebhookStatus
from imposer.state.jobs import DEAD_LETTER_OWED
from imposer.state.outbox import Event, OutboxStore, event_id
from imposer.webhooks.delivery import build_event, encode
from imposer.worker.running import Running


def release_record(job: Running, max_attempts: int,
                   outbox: OutboxStore) -> tuple[dict, list]:
    """The job's record fields and the writes that go with its release (its completion
    event, its owed DLQ message): the same for every try, and for either way to release."""
    req, fields = job.request, record_fields(job, max_attempts)
    also = []
    if job.status.final and req.webhook:
        event = completion_event(job, fields)
        also.append(outbox.put_op(event))
        fields.update(webhook_status=WebhookStatus.PENDING, webhook_event=event.event_id)
    if job.status == JobStatus.DEAD:  # its one DLQ message, owed until sent
        fields["dead_letter"] = DEAD_LETTER_OWED
    return fields, also


def record_fields(job: Running, max_attempts: int) -> dict:
    """The job's record as its release writes it: run time, error or warnings, why it waits."""
    outcome, status = job.outcome, job.status
    fields = {"run_seconds": round((job.finished or job.started) - job.started, 3),
              "error": outcome.reason, "error_kind": outcome.error_kind}
    if status == JobStatus.SUCCEEDED:
        fields.update(error=None, error_kind=None, output_epoch=job.epoch,
                      warnings=list(outcome.warnings) or None)
    elif status == JobStatus.RETRYING and job.failures:
        fields["wait_reason"] = (f"retrying after failure {job.failures} of "
                                 f"{max_attempts}: {outcome.reason}")
    elif status == JobStatus.RETRYING:  # requeued, not counted: not the job's fault
        why = "lease ran out" if outcome.error_kind == "lease_expired" else \
            "licence unavailable"
        fields["wait_reason"] = f"{why}, retrying: {outcome.reason}"
    if status.final:
        fields["finished_at"] = job.decided_at
    return fields


def completion_event(job: Running, fields: dict) -> Event:
    """The signed completion event a final job with a webhook puts in the outbox."""
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
