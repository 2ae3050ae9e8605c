"""Values that cross a process, thread or table boundary.

Every class is frozen; ``to_item``/``from_item`` map it to a DynamoDB item in
the plain (deserialized) form that boto3's TypeSerializer accepts, and
``to_body``/``from_body`` map a job request to an SQS message body.
"""

from __future__ import annotations

import enum
import json
import re
import uuid
from decimal import Decimal
from typing import Any

import attrs

from imposer.errors import InvalidMessage

#: Every S3 key of a tenant's job sits under this prefix (``{tenant}`` filled in).
TENANT_PREFIX = "tenants/{tenant}/"

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def valid_id(value: Any) -> bool:
    """Say whether *value* is usable as a tenant or job id (and inside an S3 key)."""
    return isinstance(value, str) and bool(_ID_RE.match(value))


def new_job_id() -> str:
    return uuid.uuid4().hex


def _num(value: Any) -> Any:
    """Turn DynamoDB's Decimal back into int or float."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _dec(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    return value


def _drop_none(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _dec(v) for k, v in item.items() if v is not None and v != ""}


class JobStatus(str, enum.Enum):
    """Where a job is in its life; the last three are final."""

    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"

    @property
    def final(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.DEAD)


FINAL_STATUSES = tuple(s.value for s in JobStatus if s.final)


@attrs.frozen(kw_only=True)
class S3Uri:
    """An ``s3://bucket/key`` address."""

    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: Any) -> "S3Uri":
        if not isinstance(uri, str) or not uri.startswith("s3://"):
            raise InvalidMessage(f"not an s3:// URI: {uri!r}")
        bucket, _, key = uri[5:].partition("/")
        if not bucket or not key or ".." in key.split("/"):
            raise InvalidMessage(f"malformed S3 URI: {uri!r}")
        return cls(bucket=bucket, key=key)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@attrs.frozen(kw_only=True)
class JobRequest:
    """What a tenant asks for: the body of one SQS message."""

    #: Unique id of the job; the key of its record and lease.
    job_id: str
    #: Canonical tenant id; also the message's MessageGroupId.
    tenant_id: str
    #: Tenant-chosen idempotency token (defaults to the job id).
    token: str
    #: s3:// URI of the artwork PDF.
    input: str
    #: s3:// URI of the layout spec, or the spec itself (a dict).
    layout: Any
    #: s3:// URI the plate file is written to.
    output: str
    #: Optional URL to POST the completion event to.
    webhook: str | None = None
    #: Wall-clock epoch seconds of the first submission (survives re-publishing).
    submitted_at: float | None = None

    VERSION = 1

    @classmethod
    def from_body(cls, body: str) -> "JobRequest":
        """Parse and validate a message body; raise InvalidMessage saying why."""
        try:
            data = json.loads(body)
        except (TypeError, ValueError) as exc:
            raise InvalidMessage(f"body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidMessage("body is not a JSON object")
        version = data.get("version", cls.VERSION)
        if version != cls.VERSION:
            raise InvalidMessage(f"unsupported message version {version!r}")
        for field in ("job_id", "tenant_id"):
            if not valid_id(data.get(field)):
                raise InvalidMessage(f"{field} missing or invalid: {data.get(field)!r}")
        for field in ("input", "output"):
            if not isinstance(data.get(field), str):
                raise InvalidMessage(f"{field} missing: want an s3:// URI")
        layout = data.get("layout")
        if not isinstance(layout, (str, dict)):
            raise InvalidMessage("layout missing: want an s3:// URI or an inline spec")
        webhook = data.get("webhook")
        if webhook is not None and not isinstance(webhook, str):
            raise InvalidMessage("webhook must be a URL string")
        submitted = data.get("submitted_at")
        if submitted is not None and not isinstance(submitted, (int, float)):
            raise InvalidMessage("submitted_at must be epoch seconds")
        token = data.get("token") or data["job_id"]
        if not isinstance(token, str) or len(token) > 256:
            raise InvalidMessage("token must be a string of at most 256 characters")
        return cls(
            job_id=data["job_id"],
            tenant_id=data["tenant_id"],
            token=token,
            input=data["input"],
            layout=layout,
            output=data["output"],
            webhook=webhook,
            submitted_at=submitted,
        )

    def to_body(self) -> str:
        data = attrs.asdict(self)
        data["version"] = self.VERSION
        return json.dumps({k: v for k, v in data.items() if v is not None}, sort_keys=True)

    def check_prefix(self, bucket: str) -> None:
        """Refuse any S3 address outside the tenant's prefix of the artwork bucket."""
        prefix = TENANT_PREFIX.format(tenant=self.tenant_id)
        uris = [("input", self.input), ("output", self.output)]
        if isinstance(self.layout, str):
            uris.append(("layout", self.layout))
        for field, raw in uris:
            uri = S3Uri.parse(raw)
            if uri.bucket != bucket:
                raise InvalidMessage(f"{field} is in bucket {uri.bucket!r}, not {bucket!r}")
            if not uri.key.startswith(prefix):
                raise InvalidMessage(f"{field} key {uri.key!r} is outside {prefix!r}")


@attrs.frozen(kw_only=True)
class TenantConfig:
    """A tenant's row of the config table: its tier override and webhook setup."""

    tenant_id: str
    #: Concurrency cap override; None means the default cap.
    cap: int | None = None
    #: Secret for signing completion webhooks (HMAC-SHA256).
    webhook_secret: str | None = None
    #: Host names a webhook URL may point at.
    webhook_hosts: tuple[str, ...] = ()

    def to_item(self) -> dict[str, Any]:
        item = {
            "tenant_id": self.tenant_id,
            "cap": self.cap,
            "webhook_secret": self.webhook_secret,
        }
        if self.webhook_hosts:
            item["webhook_hosts"] = list(self.webhook_hosts)
        return _drop_none(item)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "TenantConfig":
        return cls(
            tenant_id=item["tenant_id"],
            cap=_num(item.get("cap")),
            webhook_secret=item.get("webhook_secret"),
            webhook_hosts=tuple(item.get("webhook_hosts") or ()),
        )


@attrs.frozen(kw_only=True)
class Lease:
    """One running job's claim on one of its tenant's slots."""

    tenant_id: str
    job_id: str
    #: Host id of the worker that holds it.
    host: str
    #: Slot index on that host.
    slot: int
    #: Fencing epoch: unique per acquisition; renew and release must match it.
    epoch: str
    #: Wall-clock epoch seconds.
    acquired_at: float
    #: Wall-clock epoch seconds after which a sweep may reclaim it.
    expires_at: float
    #: True when the slot was borrowed beyond the tenant's cap.
    borrowed: bool = False
    #: Receipt handle of the SQS message, so a restart or a sweep can make it
    #: visible again at once instead of waiting for its visibility to run out.
    receipt: str | None = attrs.field(default=None, repr=False, eq=False)

    def to_item(self) -> dict[str, Any]:
        item = attrs.asdict(self)
        item["pk"] = lease_key(self.job_id)
        return _drop_none(item)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "Lease":
        return cls(
            tenant_id=item["tenant_id"],
            job_id=item["job_id"],
            host=item["host"],
            slot=_num(item["slot"]),
            epoch=item["epoch"],
            acquired_at=_num(item["acquired_at"]),
            expires_at=_num(item["expires_at"]),
            borrowed=bool(item.get("borrowed", False)),
            receipt=item.get("receipt"),
        )


def lease_key(job_id: str) -> str:
    return f"lease#{job_id}"


def counter_key(tenant_id: str) -> str:
    return f"counter#{tenant_id}"


@attrs.frozen(kw_only=True)
class JobRecord:
    """imposer's own record of a job, kept in the jobs table."""

    job_id: str
    tenant_id: str
    status: JobStatus
    token: str | None = None
    #: Wall-clock epoch seconds when the tenant submitted (SentTimestamp or body).
    submitted_at: float | None = None
    #: When imposer first saw the message.
    received_at: float | None = None
    #: When the current or last attempt acquired its lease.
    started_at: float | None = None
    finished_at: float | None = None
    #: Attempts that acquired a lease.
    attempts: int = 0
    #: Attempts that failed in a way that counts toward dead-lettering.
    failures: int = 0
    #: Times the message was deferred because the tenant was at its cap.
    defers: int = 0
    error: str | None = None
    error_kind: str | None = None
    #: Why the job is waiting, in words (set while it waits).
    wait_reason: str | None = None
    host: str | None = None
    slot: int | None = None
    epoch: str | None = None
    output: str | None = None
    webhook: str | None = None
    webhook_status: str | None = None
    webhook_detail: str | None = None
    #: Seconds from submission to lease acquired (last attempt).
    queue_wait: float | None = None
    #: Seconds the last attempt ran.
    run_seconds: float | None = None
    layout_name: str | None = None
    #: Last time the parent saw the message (receipt or deferral).
    last_seen_at: float | None = None
    last_defer_at: float | None = None
    lease_expires_at: float | None = None

    def to_item(self) -> dict[str, Any]:
        item = attrs.asdict(self)
        item["status"] = self.status.value
        return _drop_none(item)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "JobRecord":
        names = {a.name for a in attrs.fields(cls)}
        values = {k: _num(v) for k, v in item.items() if k in names}
        values["status"] = JobStatus(values["status"])
        return cls(**values)


class Fate(str, enum.Enum):
    """What the parent does with a job after an attempt."""

    SUCCEEDED = "succeeded"
    #: Permanent failure: record, notify, delete the message.
    FAILED = "failed"
    #: Counted failure: retry later, dead-letter after max attempts.
    RETRY = "retry"
    #: Not the tenant's fault (licence, lost child): retry, not counted.
    REQUEUE = "requeue"


@attrs.frozen(kw_only=True)
class Outcome:
    """What a pool child reports back for one job; it never raises instead."""

    job_id: str
    fate: Fate
    #: Human-readable reason for anything but success.
    reason: str | None = None
    #: JobError.kind of the failure.
    error_kind: str | None = None
    #: Phase name -> seconds (download, impose, upload).
    timings: dict[str, float] = attrs.field(factory=dict)
    output_bytes: int | None = None
    #: Pages placed / sheets written, when the engine reports them.
    sheets: int | None = None
