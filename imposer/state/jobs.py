"""The jobs table: imposer's own record of every job it has seen.

Records are written by the parent only: on first receipt, on every deferral
(so the age of the oldest waiting job never depends on SQS's own metrics),
and by the lease transactions on acquire and release.
"""

from __future__ import annotations

from typing import Iterable

from imposer.aws.dynamodb import Dynamo
from imposer.aws.expressions import Update
from imposer.clock import Clock, SystemClock
from imposer.models import FINAL_STATUSES, JobRecord, JobRequest, JobStatus


def free_to_start(update: Update) -> str:
    """Condition that a job is neither running nor final (or has no record yet).

    The one spelling of "may start or wait": acquire and the waiting note
    both use it, so a final record is never reopened and a running one never
    relabelled as waiting.
    """
    busy = ", ".join(update.value(s, "busy") for s in ("running", *FINAL_STATUSES))
    return f"attribute_not_exists(job_id) OR NOT ({update.name('status')} IN ({busy}))"


class JobStore:
    """Read and annotate job records."""

    def __init__(self, dynamo: Dynamo, table: str, clock: Clock | None = None) -> None:
        self.dynamo = dynamo
        self.table = table
        self.clock = clock or SystemClock()

    def get(self, job_id: str) -> JobRecord | None:
        item = self.dynamo.get(self.table, {"job_id": job_id})
        return JobRecord.from_item(item) if item else None

    def note_waiting(self, request: JobRequest, sent_at: float, reason: str,
                     deferred: bool = False, **fields) -> bool:
        """Record that *request* waits and why; no-op if it runs or has finished."""
        now = self.clock.time()
        up = (Update()
              .set(tenant_id=request.tenant_id, token=request.token, wait_reason=reason,
                   output=request.output, webhook=request.webhook, last_seen_at=now, **fields)
              .set_if_absent(status=JobStatus.QUEUED.value,
                             submitted_at=request.submitted_at or sent_at, received_at=now))
        if deferred:
            up.add(defers=1).set(last_defer_at=now)
        return self.dynamo.update(self.table, {"job_id": request.job_id}, up.expression,
                                  up.values, up.names, free_to_start(up))

    def finish_unleased(self, job_id: str, tenant_id: str, status: JobStatus, error: str,
                        error_kind: str, **fields) -> bool:
        """Put a final state on a job that never got a lease (invalid request)."""
        now = self.clock.time()
        up = (Update().set(tenant_id=tenant_id, status=status.value, error=error,
                           error_kind=error_kind, finished_at=now, **fields)
              .set_if_absent(received_at=now).remove("wait_reason"))
        cond = f"attribute_not_exists(job_id) OR {up.name('status')} <> {up.value('running')}"
        return self.dynamo.update(self.table, {"job_id": job_id}, up.expression,
                                  up.values, up.names, cond)

    def annotate(self, job_id: str, **fields) -> None:
        """Set informational fields (e.g. webhook delivery) on an existing record."""
        up = Update().set(**fields)
        self.dynamo.update(self.table, {"job_id": job_id}, up.expression, up.values, up.names,
                           "attribute_exists(job_id)")

    def list(self, tenant_id: str | None = None,
             statuses: Iterable[str] | None = None) -> list[JobRecord]:
        """Return records, oldest submission first, optionally filtered."""
        up = Update()
        clauses = []
        if tenant_id:
            clauses.append(f"{up.name('tenant_id')} = {up.value(tenant_id)}")
        if statuses:
            vals = ", ".join(up.value(s) for s in statuses)
            clauses.append(f"{up.name('status')} IN ({vals})")
        items = self.dynamo.scan(self.table, " AND ".join(clauses) or None,
                                 up.values or None, up.names or None)
        records = [JobRecord.from_item(i) for i in items]
        return sorted(records, key=lambda r: (r.submitted_at or 0, r.job_id))
