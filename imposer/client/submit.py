"""Submit one imposition job: admit, upload the artwork, publish the request.

Admission runs first so a refused job costs no upload. Once admitted, any
failure (upload or publish) undoes the admission before the error leaves,
so the caller's retry with the same token is not refused as a duplicate.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from imposer.client.admission import Admission
from imposer.client.aws import Aws
from imposer.models import TENANT_PREFIX, JobRequest, new_job_id, valid_id
from imposer.models.urgency import parse_due, parse_priority

logger = logging.getLogger(__name__)


def job_prefix(tenant_id: str, job_id: str) -> str:
    """Return the S3 key prefix under which one job's files live."""
    return TENANT_PREFIX.format(tenant=tenant_id) + f"jobs/{job_id}/"


def _read_layout(layout: Any) -> tuple[dict | None, bytes | None]:
    """Return (inline spec, file bytes to upload): exactly one is not None."""
    if isinstance(layout, dict):
        return layout, None
    if isinstance(layout, (str, Path)) and Path(layout).is_file():
        data = Path(layout).read_bytes()
        try:
            spec = json.loads(data)
        except ValueError as exc:
            raise ValueError(f"layout file {layout} is not JSON: {exc}") from None
        if not isinstance(spec, dict):
            raise ValueError(f"layout file {layout} does not hold a JSON object")
        return None, data
    if isinstance(layout, Path):
        raise FileNotFoundError(f"layout file not found: {layout}")
    if isinstance(layout, str) and layout:
        return {"preset": layout}, None
    raise ValueError(f"layout must be a dict, a JSON file or a preset name, not {layout!r}")


def submit(tenant_id: str, pdf_path: str | Path, layout: Any, *, token: str | None = None,
           webhook: str | None = None, admission: Admission | None = None,
           bucket: str = "imposer-artwork", queue: str = "imposer-jobs",
           job_id: str | None = None, region: str | None = None,
           aws: Aws | None = None, priority: int | None = None,
           due: str | None = None) -> JobRequest:
    """Publish an imposition job for *tenant_id* and return the request sent.

    *layout* is a dict (sent inline), a path to a JSON file (uploaded next
    to the input) or a preset name (sent as ``{"preset": name}``). *token*
    defaults to the job id, which makes every call a new job; pass the same
    token for the same logical job so admission refuses a second copy.
    *priority* (0 most urgent to 9, default 5) and *due* (ISO-8601 with a
    timezone) order only this tenant's own waiting jobs, never against others.
    Without *admission* no admission control runs.

    Raises AdmissionError subclasses when refused, SubmitError when the
    upload or publish fails, ValueError or FileNotFoundError for bad arguments.
    """
    job_id = job_id or new_job_id()
    for name, value in (("tenant id", tenant_id), ("job id", job_id)):
        if not valid_id(value):
            raise ValueError(f"invalid {name}: {value!r}")
    pdf = Path(pdf_path)
    if not pdf.is_file():
        raise FileNotFoundError(f"input PDF not found: {pdf}")
    inline, layout_bytes = _read_layout(layout)
    token = token or job_id
    urgency = {"priority": parse_priority(priority), "due": parse_due(due)}
    prefix = job_prefix(tenant_id, job_id)
    # The worker's own validation, before anything is admitted or uploaded:
    checked(JobRequest(job_id=job_id, tenant_id=tenant_id, token=token,
                       input=f"s3://{bucket}/{prefix}input.pdf",
                       layout=inline if inline is not None else f"s3://{bucket}/{prefix}layout.json",
                       output=f"s3://{bucket}/{prefix}plate.pdf", webhook=webhook,
                       submitted_at=time.time(), **urgency), bucket)
    extra = {"tenant_id": tenant_id, "job_id": job_id}

    if admission is not None:
        admission.admit(tenant_id, token, job_id)
    try:
        aws = aws or Aws(region=region)
        input_uri = aws.upload_file(pdf, bucket, prefix + "input.pdf")
        layout_value: Any = inline
        if layout_bytes is not None:
            layout_value = aws.upload_bytes(layout_bytes, bucket, prefix + "layout.json")
        request = checked(JobRequest(
            job_id=job_id, tenant_id=tenant_id, token=token, input=input_uri,
            layout=layout_value, output=f"s3://{bucket}/{prefix}plate.pdf",
            webhook=webhook, submitted_at=time.time(), **urgency,
        ), bucket)
        aws.send(queue, request.to_body(), group_id=tenant_id)
    except BaseException as exc:
        if admission is not None:
            _undo(admission, tenant_id, token, job_id)
        logger.warning("submit failed: %s", exc,
                       extra={"action": "submit_failed", **extra})
        raise
    logger.info("submitted job with token %r", token, extra={"action": "submitted", **extra})
    return request


def checked(request: JobRequest, bucket: str) -> JobRequest:
    """Run the worker's validation on *request*; raise ValueError saying why it would refuse it.

    The same code (``imposer.models.request``) decides on both sides, so a job
    this accepts is never dead-lettered as an invalid message.
    """
    parsed = JobRequest.from_body(request.to_body())
    parsed.check_prefix(bucket)
    return request


def _undo(admission: Admission, tenant_id: str, token: str, job_id: str) -> None:
    """Undo an admission; a failure here must not hide the error that caused it."""
    try:
        admission.undo(tenant_id, token, job_id)
    except Exception:
        logger.exception("could not undo the admission of token %r", token,
                         extra={"action": "undo_failed", "tenant_id": tenant_id, "job_id": job_id})
