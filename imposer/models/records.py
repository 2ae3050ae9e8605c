"""Records that cross a table or process boundary: leases, counters, jobs, outcomes.

A tenant's config row is ``tenant.TenantConfig``.

``to_item``/``from_item`` map each to a DynamoDB item in plain Python (ints
and floats); the DynamoDB adapter converts numbers to and from Decimal.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from imposer.models.request import job_key


def drop_none(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None and v != ""}


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


class WebhookStatus:
    """Where a job's completion webhook stands: plain strings, as the tables store them.

    An outbox event is pending until delivered, failed or refused; one attempt comes to
    delivered, retry, failed or refused; the job record's ``webhook_status`` follows it.
    """

    #: The event waits for its next attempt (its ``due_at`` says when).
    PENDING = "pending"
    #: An attempt failed in a way that may pass (an attempt's result only).
    RETRY = "retry"
    #: Between attempts (the job record only).
    RETRYING = "retrying"
    DELIVERED = "delivered"
    #: Given up: it will not pass, or the schedule ran out (``imposer webhooks redeliver``).
    FAILED = "failed"
    #: The URL guard or the tenant's configuration said no.
    REFUSED = "refused"


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
    #: The item's key as read (imposer 0.1 keyed leases by job id alone).
    stored_key: str | None = attrs.field(default=None, repr=False, eq=False)

    @property
    def key(self) -> str:
        return self.stored_key or lease_key(self.tenant_id, self.job_id)

    def to_item(self) -> dict[str, Any]:
        item = attrs.asdict(self)
        del item["stored_key"]
        item["pk"] = self.key
        return drop_none(item)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "Lease":
        return cls(
            tenant_id=item["tenant_id"],
            job_id=item["job_id"],
            host=item["host"],
            slot=item["slot"],
            epoch=item["epoch"],
            acquired_at=item["acquired_at"],
            expires_at=item["expires_at"],
            borrowed=bool(item.get("borrowed", False)),
            receipt=item.get("receipt"),
            stored_key=item.get("pk"),
        )


@attrs.frozen(kw_only=True)
class TenantCounter:
    """A tenant's counter item: how many leases it holds, own and borrowed."""

    tenant_id: str
    #: Live leases within the tenant's cap.
    inflight: int = 0
    #: Live leases on borrowed slots, beyond the cap.
    borrowed: int = 0
    #: Bumped by every transaction that touches the counter; repairs condition on it.
    ver: int = 0

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "TenantCounter":
        return cls(tenant_id=item["tenant_id"], inflight=int(item.get("inflight", 0)),
                   borrowed=int(item.get("borrowed", 0)), ver=int(item.get("ver", 0)))


def lease_key(tenant_id: str, job_id: str) -> str:
    return f"lease#{job_key(tenant_id, job_id)}"


def counter_key(tenant_id: str) -> str:
    return f"counter#{tenant_id}"


def usage_key(tenant_id: str) -> str:
    """The leases-table item of a tenant's decayed licence-seconds (fair share)."""
    return f"usage#{tenant_id}"


#: How the wait reason of a job the fair-share rule held begins (``imposer why`` reads it).
SHARE_PARK_REASON = "held by fair share"


@attrs.frozen(kw_only=True)
class JobRecord:
    """imposer's own record of a job, kept in the jobs table.

    A job is (tenant, job id): the table's key holds ``<tenant>/<job id>``
    and the id alone is in ``job``, so two tenants' equal ids never meet.
    """

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
    #: webhook-id of the completion event in the outbox.
    webhook_event: str | None = None
    #: Its priority within its tenant and its due time (epoch seconds); None: the
    #: default priority, no due time (``models.urgency``).
    priority: int | None = None
    due: float | None = None
    #: Seconds from submission to lease acquired (last attempt).
    queue_wait: float | None = None
    #: Seconds the last attempt ran.
    run_seconds: float | None = None
    layout_name: str | None = None
    #: Last time the parent saw the message (receipt or deferral).
    last_seen_at: float | None = None
    last_defer_at: float | None = None
    lease_expires_at: float | None = None
    #: Fencing epoch of the attempt whose output became the plate (one commit per job).
    output_epoch: str | None = None
    #: A dead job's DLQ message: "owed" from its release, then the claim of the host that
    #: sends it (``JobStore.claim_dead_letter``).
    dead_letter: str | None = None
    #: Things a prepress operator should know about a job that still succeeded.
    warnings: tuple[str, ...] = ()
    #: Epoch seconds after which DynamoDB may delete the record (final records only).
    expires_at: float | None = None

    @property
    def key(self) -> str:
        return job_key(self.tenant_id, self.job_id)

    def to_item(self) -> dict[str, Any]:
        item = attrs.asdict(self)
        item.update(status=self.status.value, job_id=self.key, job=self.job_id,
                    warnings=list(self.warnings) or None)
        return drop_none(item)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "JobRecord":
        names = {a.name for a in attrs.fields(cls)}
        values = {k: v for k, v in item.items() if k in names}
        values["job_id"] = item.get("job") or item["job_id"]  # records of imposer 0.1: bare id
        values["status"] = JobStatus(values["status"])
        values["warnings"] = tuple(values.get("warnings") or ())
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
    #: Warnings of a job that still succeeded (for example a page without bleed).
    warnings: tuple[str, ...] = ()
