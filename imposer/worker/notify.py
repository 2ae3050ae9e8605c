"""Completion webhooks for finished jobs, sent after the slot is released.

Delivery runs on the notifier's own thread, so it never holds a processing
slot; each result (delivered, failed, refused) is recorded on the job.
"""

from __future__ import annotations

import logging
from typing import Any

from imposer.logs import extra
from imposer.models import JobRequest, JobStatus
from imposer.webhooks.delivery import Notifier, build_event
from imposer.worker.wiring import Backends

logger = logging.getLogger(__name__)


class JobNotifier:
    """Build, sign and queue the completion event of a job; record the outcome."""

    def __init__(self, backends: Backends, notifier: Notifier | None = None) -> None:
        self.jobs, self.tenants = backends.jobs, backends.tenants
        self.notifier = notifier or Notifier(
            self._record, allow_http_loopback=backends.settings.allow_http_loopback)
        self.notifier.start()

    def job_finished(self, request: JobRequest, status: JobStatus, fields: dict[str, Any]) -> None:
        record = self.jobs.get(request.job_id)
        config = self.tenants.get(request.tenant_id)
        event = build_event(
            job_id=request.job_id, tenant_id=request.tenant_id, status=status.value,
            token=request.token, output=request.output if status == JobStatus.SUCCEEDED else None,
            error=fields.get("error"), error_kind=fields.get("error_kind"),
            submitted_at=record.submitted_at if record else request.submitted_at,
            started_at=record.started_at if record else None,
            finished_at=fields.get("finished_at"),
            queue_wait=record.queue_wait if record else None,
            run_seconds=fields.get("run_seconds"),
        )
        secret = config.webhook_secret if config else None
        hosts = config.webhook_hosts if config else ()
        self.jobs.annotate(request.job_id, webhook_status="pending")
        self.notifier.notify(request.webhook, event, secret or "", hosts)

    def _record(self, job_id: str, status: str, detail: str) -> None:
        try:
            self.jobs.annotate(job_id, webhook_status=status, webhook_detail=detail[:500])
        except Exception:
            logger.exception("could not record webhook result of %s", job_id,
                             extra=extra("webhook_record_error", job_id=job_id))

    def is_alive(self) -> bool:
        return self.notifier.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        self.notifier.stop(timeout)
