"""What each lease transaction writes: the items, their conditions, nothing run.

Every item that changes a tenant's leases comes with one on its counter
(``inflight`` or ``borrowed``, and ``ver``), so the counter always equals
the live leases (see ``leases``, which runs these and reads their verdicts).
Each lease's items are fenced on its epoch: a reclaimed attempt writes nothing.
"""

from __future__ import annotations

import hashlib
from typing import Any

from imposer.aws.dynamodb import op
from imposer.aws.expressions import Update
from imposer.models import JobRequest, JobStatus, Lease, counter_key, usage_key
from imposer.models.urgency import record_fields
from imposer.state.jobs import JobStore, free_to_start, mark_final, mark_open


def request_token(epoch: str, step: str) -> str:
    """Return the ClientRequestToken of one step of one attempt: the same on every try."""
    return hashlib.blake2s(f"{epoch}/{step}".encode(), digest_size=16).hexdigest()


def take(table: str, tenant: str, cap: int, borrow: bool, count: int = 1) -> dict[str, Any]:
    """The counter's part of an acquire: one more below the cap, or borrowed at it; or
    *count* more, all below the cap (a burst taken in one transaction)."""
    if count > 1:
        return op("Update", table, {"pk": counter_key(tenant)},
                  update="SET inflight = if_not_exists(inflight, :zero) + :n, "
                         "tenant_id = :t ADD ver :one",
                  condition="attribute_not_exists(inflight) OR inflight <= :room",
                  values={":zero": 0, ":one": 1, ":n": count, ":room": cap - count,
                          ":t": tenant})
    if borrow:
        return op("Update", table, {"pk": counter_key(tenant)},
                  update="SET borrowed = if_not_exists(borrowed, :zero) + :one ADD ver :one",
                  condition="inflight >= :cap", values={":zero": 0, ":one": 1, ":cap": cap})
    return op("Update", table, {"pk": counter_key(tenant)},
              update="SET inflight = if_not_exists(inflight, :zero) + :one, "
                     "tenant_id = :t ADD ver :one",
              condition="attribute_not_exists(inflight) OR inflight < :cap",
              values={":zero": 0, ":one": 1, ":cap": cap, ":t": tenant})


def give_back(table: str, lease: Lease) -> dict[str, Any]:
    """The counter's part of a release or a reclaim: one fewer of the lease's kind."""
    field = "borrowed" if lease.borrowed else "inflight"
    return op("Update", table, {"pk": counter_key(lease.tenant_id)},
              update=f"SET {field} = {field} - :one ADD ver :one",
              condition=f"{field} >= :one", values={":one": 1})


def pass_on(table: str, tenant: str, cap: int, borrowed: bool = False) -> dict[str, Any]:
    """The counter's part of a hand-over: unchanged (one ends, one starts), not over *cap*;
    or, a *borrowed* slot passed to the tenant's next borrowed job, the tenant still at
    *cap* (a borrow is allowed only there, as ``take``'s)."""
    if borrowed:
        return op("Update", table, {"pk": counter_key(tenant)}, update="ADD ver :one",
                  condition="inflight >= :cap AND borrowed >= :one",
                  values={":one": 1, ":cap": cap})
    return op("Update", table, {"pk": counter_key(tenant)}, update="ADD ver :one",
              condition="inflight <= :cap", values={":one": 1, ":cap": cap})


def hand_on(table: str, ending: Lease, starting: Lease, cap: int) -> list[dict[str, Any]]:
    """The counters' part of a hand-over from *ending* to *starting* (*cap*: the starting
    tenant's): one item when the slot stays with its tenant and its kind (``pass_on``);
    else the ending lease's ``give_back`` and the starting one's ``take`` (a slot lent to
    another tenant's parked job). The first item is always the ending tenant's counter."""
    if starting.tenant_id == ending.tenant_id:
        if starting.borrowed != ending.borrowed:  # (one counter item cannot be both)
            raise ValueError("a hand-over within a tenant keeps the slot's kind")
        return [pass_on(table, ending.tenant_id, cap, ending.borrowed)]
    return [give_back(table, ending), take(table, starting.tenant_id, cap, starting.borrowed)]


#: Eras before the last two whose terms a charge removes from a usage item (ADD keeps one
#: term per era; an idle tenant's older ones are removed by its next charges).
STALE_ERAS = 8


def charge(table: str, tenant: str, era: int, amount: float) -> dict[str, Any]:
    """The usage item's part of a release (fair share): one forward-decayed term ADDed to the
    era's attribute ``u<era>``, the attributes of older eras REMOVEd (``policy.fold``).

    No condition: a charge never refuses the release it rides on, and ADD
    is the same whichever host's release comes first.
    """
    stale = ", ".join(f"u{era - back}" for back in range(2, 2 + STALE_ERAS) if era >= back)
    return op("Update", table, {"pk": usage_key(tenant)},
              update=f"SET tenant_id = :t ADD u{era} :a" + (f" REMOVE {stale}" if stale else ""),
              values={":t": tenant, ":a": amount})


def usage_terms(item: dict[str, Any]) -> dict[int, float]:
    """A usage item's forward-decayed terms, era -> amount (``policy.usage_at``)."""
    return {int(k[1:]): float(v) for k, v in item.items()
            if k.startswith("u") and k[1:].lstrip("-").isdigit()}


def start(table: str, jobs_table: str, request: JobRequest, lease: Lease,
          sent_at: float | None) -> list[dict[str, Any]]:
    """The lease's Put and the job record's "running", as of the lease's acquire time."""
    now = lease.acquired_at
    submitted = request.submitted_at or sent_at or now
    job = (mark_open(Update(), request.tenant_id, request.job_id)
           .set(status=JobStatus.RUNNING.value, host=lease.host, slot=lease.slot,
                epoch=lease.epoch, started_at=now, lease_expires_at=lease.expires_at,
                token=request.token, output=request.output, webhook=request.webhook,
                queue_wait=max(0.0, now - submitted),
                **record_fields(request.priority, request.due))
           .set_if_absent(submitted_at=submitted, received_at=now)
           .remove("wait_reason")
           .add(attempts=1))
    return [op("Put", table, lease.to_item(), condition="attribute_not_exists(pk)",
               return_old=True),
            op("Update", jobs_table, JobStore.key(request.tenant_id, request.job_id),
               update=job.expression, condition=free_to_start(job), values=job.values,
               names=job.names, return_old=True)]


def end(table: str, jobs_table: str, lease: Lease, status: JobStatus, failures: int,
        fields: dict[str, Any], finished_at: float, retention_days: float) -> list[dict[str, Any]]:
    """The lease's Delete and the job record's new state, fenced on the lease's epoch."""
    job = Update().set(status=status.value, **fields).remove("lease_expires_at")
    if status.final:
        mark_final(job, finished_at, retention_days)
    if failures:
        job.add(failures=failures)
    job.values[":e"] = lease.epoch
    return [op("Delete", table, {"pk": lease.key},
               condition="epoch = :e", values={":e": lease.epoch}),
            op("Update", jobs_table, JobStore.key(lease.tenant_id, lease.job_id),
               update=job.expression, condition="epoch = :e", values=job.values,
               names=job.names)]


def take_back(table: str, jobs_table: str, lease: Lease, reason: str, *,
              expired_before: float | None = None,
              host: str | None = None) -> list[dict[str, Any]]:
    """A reclaim: the lease's Delete if it expired before *expired_before* (or is *host*'s),
    its counter, and the job record queued again with *reason*."""
    if host is None:
        cond, values, names = ("epoch = :e AND expires_at < :now",
                               {":now": expired_before}, None)
    else:
        cond, values, names = "epoch = :e AND #h = :h", {":h": host}, {"#h": "host"}
    values[":e"] = lease.epoch
    job = (mark_open(Update(), lease.tenant_id, lease.job_id)
           .set(status=JobStatus.QUEUED.value, wait_reason=reason)
           .remove("lease_expires_at"))
    job.values[":e"] = lease.epoch
    return [op("Delete", table, {"pk": lease.key}, condition=cond, values=values, names=names),
            give_back(table, lease),
            op("Update", jobs_table, JobStore.key(lease.tenant_id, lease.job_id),
               update=job.expression, condition="attribute_not_exists(job_id) OR epoch = :e",
               values=job.values, names=job.names)]
