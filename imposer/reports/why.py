"""`imposer why JOB_ID`: what a job is doing, why it waits, and when it should start.

The answer comes from imposer's own state: the job record, the live leases,
the tenants' caps and the run times of finished jobs. A prediction simulates
the slots that matter (the tenant's own when it is at its cap, all of them
when the pool is full) freeing up, with the 25th, 50th and 75th percentile of
past run times, so it comes with a range and the number of jobs it rests on.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import attrs

from imposer import backoff
from imposer.models import JobRecord, JobStatus, Lease
from imposer.models.records import SHARE_PARK_REASON
from imposer.models.urgency import DEFAULT_PRIORITY, format_due
from imposer.reports.formatting import format_seconds
from imposer.reports.stats import percentile
from imposer.state.jobs import JobStore
from imposer.state.leases import LeaseStore
from imposer.state.tenants import TenantStore
from imposer.state.waiting import WaitingStore, order_key, urgency_key


@attrs.frozen(kw_only=True)
class Explanation:
    """The state of one job in words, with a predicted start when it waits."""

    job_id: str
    #: not_received, running, at_cap, pool_full, licence, retrying, queued,
    #: succeeded, failed or dead.
    code: str
    reason: str
    tenant_id: str | None = None
    #: Jobs holding the slots this job waits for: job_id, host, slot, running_for.
    holders: tuple[dict, ...] = ()
    #: Predicted start, wall-clock epoch seconds, and the range around it.
    predicted_start: float | None = None
    earliest: float | None = None
    latest: float | None = None
    #: How sure the prediction is, in words.
    confidence: str | None = None
    #: Whether it will start after its due time, or it has passed (None: it has none).
    late: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["holders"] = list(self.holders)
        return data


#: How many of the tenant's last finished jobs a prediction rests on.
HISTORY = 50


def predict(holders: list[Lease], ahead: int, history: list[float], now: float,
            delay: float = 0.0) -> tuple[float, float, float] | None:
    """Return (low, mid, high) start times for the job after *ahead* waiting jobs."""
    if not history or not holders:
        return None
    starts = []
    for q in (25, 50, 75):
        d = percentile(history, q)
        free = [now + max(d - (now - h.acquired_at), 0.0) for h in holders]
        heapq.heapify(free)
        for _ in range(ahead):
            t = heapq.heappop(free)
            heapq.heappush(free, t + d)
        starts.append(heapq.heappop(free) + delay)
    return starts[0], starts[1], starts[2]


def investigate(jobs: JobStore, leases: LeaseStore, tenants: TenantStore, settings,
                tenant_id: str, job_id: str, now: float, share: float | None = None,
                waiting: WaitingStore | None = None) -> Explanation:
    """Read what explaining one job needs, all of it bounded by live work.

    The job's record, the live leases, the open-jobs index (who is ahead) and
    the tenant's last finished jobs (how long they ran); never the history.
    *share*: fair share on, the tenant's weighted share of the licence time.
    *waiting*: the tenant's parked notes before this job's (``Ahead``).
    """
    record = jobs.get(tenant_id, job_id)
    if record is None or record.status.final:
        return explain(job_id, record, [], {}, settings.default_cap, [], [],
                       settings.slots, settings, now)
    recent, _ = jobs.for_tenant(tenant_id, statuses=["succeeded"], limit=HISTORY)
    history = [r.run_seconds for r in recent if r.run_seconds]
    return explain(job_id, record, leases.leases(), tenants.caps(), settings.default_cap,
                   jobs.open_jobs(), history, settings.slots, settings, now, share,
                   Ahead.read(waiting, record) if waiting is not None else None)


@attrs.frozen
class Ahead:
    """The tenant's parked jobs a slot of the tenant goes to before this one (the waiting
    table's order: ``in_turn``'s), and how many of them are more urgent than it."""

    jobs: int
    more_urgent: int

    @classmethod
    def read(cls, waiting: WaitingStore, record: JobRecord) -> "Ahead | None":
        if record.status != JobStatus.QUEUED or record.submitted_at is None:
            return None
        priority = DEFAULT_PRIORITY if record.priority is None else record.priority
        keys = waiting.ahead_of(record.tenant_id, order_key(
            priority, record.due, record.submitted_at, record.job_id))
        urgency = urgency_key(priority, record.due)
        return cls(jobs=len(keys), more_urgent=sum(1 for k in keys if k < urgency))


def explain(job_id: str, record: JobRecord | None, leases: list[Lease], caps: dict[str, int],
            default_cap: int, open_jobs: list[JobRecord], history: list[float],
            slots_per_host: int, settings, now: float,
            share: float | None = None, ahead: Ahead | None = None) -> Explanation:
    """Explain *job_id* from its record, the live leases, open jobs and past run times
    (and, fair share on, its tenant's weighted *share*: ``_waiting``; *ahead*: its tenant's
    parked jobs before it, by urgency)."""
    if record is None:
        return Explanation(job_id=job_id, code="not_received", reason=(
            "not yet received: no worker has picked this job up, so it is still in the queue "
            "behind other work (or was never submitted)"))
    tenant, status = record.tenant_id, record.status
    base = dict(job_id=job_id, tenant_id=tenant)
    if status == JobStatus.RUNNING:
        lease = next((l for l in leases if (l.tenant_id, l.job_id) == (tenant, job_id)), None)
        where = f"host {record.host} slot {record.slot}"
        lent = " on a borrowed slot" if lease and lease.borrowed else ""
        return Explanation(**base, code="running", predicted_start=record.started_at, reason=(
            f"running on {where}{lent} for {format_seconds(now - (record.started_at or now))} "
            f"(attempt {record.attempts})"))
    if status == JobStatus.SUCCEEDED:
        return Explanation(**base, code="succeeded", reason=(
            f"succeeded after {record.attempts} attempt(s); plate at {record.output}"))
    if status == JobStatus.FAILED:
        return Explanation(**base, code="failed", reason=f"failed: {record.error}")
    if status == JobStatus.DEAD:
        return Explanation(**base, code="dead", reason=(
            f"dead-lettered after {record.failures} failed attempt(s): {record.error}"))
    sure = (f"based on {len(history)} finished job(s)" if len(history) >= 5 else
            f"low: only {len(history)} finished job(s) to go by")
    last_end = (record.started_at or now) + (record.run_seconds or 0)
    if status == JobStatus.RETRYING:
        text = record.wait_reason or f"retrying after failure {record.failures}"
        if text.startswith("licence"):
            start = last_end + settings.defer_seconds
            return Explanation(**base, code="licence", predicted_start=start, confidence=(
                "depends on the licence server"), reason=(
                f"licence unavailable (pdfToolbox exit 100), not the tenant's fault: {text}"))
        delay = backoff.doubling(settings.retry_seconds, record.failures - 1)  # policy.retry_delay
        return Explanation(**base, code="retrying", predicted_start=last_end + delay,
                           confidence="the retry delay is fixed", reason=text)
    return _waiting(base, record, leases, caps, default_cap, open_jobs, slots_per_host,
                    settings, now, history, sure, share, ahead)


def _waiting(base, record, leases, caps, default_cap, open_jobs, slots_per_host, settings, now,
             history, sure, share=None, parked: Ahead | None = None) -> Explanation:
    """A queued job: at its tenant's cap, behind a full pool, held by fair share, or due.

    Fair share on (*share* below 1), a job behind a full pool or held waits
    for its tenant's turns rather than for everyone ahead of it: while others
    wait, about one freed slot in ``1/share`` goes to the tenant, so its job
    with *k* of the tenant's own jobs ahead starts with the
    ``ceil((k + 1) / share)``-th slot to free.
    """
    tenant = record.tenant_id
    cap = caps.get(tenant, default_cap)
    own = [l for l in leases if l.tenant_id == tenant and not l.borrowed]
    queued = [r for r in open_jobs if r.status in (JobStatus.QUEUED, JobStatus.RETRYING)
              and r.key != record.key]

    def ahead(pred) -> int:
        mine = record.submitted_at or 0
        return sum(1 for r in queued if pred(r) and (r.submitted_at or 0) < mine)

    def own_ahead() -> int:
        """The tenant's jobs its next slots go to first: its parked notes before this
        one's (urgency, then age) if it has any, else its older waiting jobs."""
        urgent = record.priority not in (None, DEFAULT_PRIORITY) or record.due is not None
        if parked is not None and (parked.jobs or urgent):
            return parked.jobs
        return ahead(lambda r: r.tenant_id == tenant)

    behind = (f"; behind {parked.more_urgent} more urgent job(s) of {tenant}"
              if parked is not None and parked.more_urgent else "")

    def holders_of(chosen: list[Lease]) -> tuple[dict, ...]:
        return tuple({"job_id": l.job_id, "tenant_id": l.tenant_id, "host": l.host,
                      "slot": l.slot, "borrowed": l.borrowed,
                      "running_for": round(now - l.acquired_at, 1)} for l in chosen)

    def answer(code, reason, chosen, n_ahead, delay):
        guess = predict(chosen, n_ahead, history, now, delay)
        if guess is None:
            return Explanation(**base, code=code, reason=reason + due_note(None),
                               holders=holders_of(chosen), late=late(None),
                               confidence="no finished jobs yet to predict from")
        low, mid, high = guess
        return Explanation(**base, code=code, holders=holders_of(chosen), predicted_start=mid,
                           earliest=low, latest=high, confidence=sure, late=late(mid),
                           reason=f"{reason}; likely to start in {format_seconds(mid - now)}"
                           + due_note(mid))

    def late(start: float | None) -> bool | None:
        if record.due is None:
            return None
        return (start if start is not None else now) > record.due

    def due_note(start: float | None) -> str:
        due = record.due
        if due is None:
            return ""
        if start is not None and start > due:
            return (f"; will miss its due time {format_due(due)}: predicted to start "
                    f"{format_seconds(start - due)} after it")
        if now > due:
            return f"; its due time {format_due(due)} passed {format_seconds(now - due)} ago"
        return f"; due {format_due(due)}"

    if cap <= 0:
        return Explanation(**base, code="at_cap", reason=f"tenant {tenant} is paused (cap 0)")
    if len(own) >= cap:
        names = ", ".join(f"{l.job_id} ({format_seconds(now - l.acquired_at)})" for l in own)
        return answer("at_cap", f"at the tenant's cap: {tenant} holds {len(own)} of {cap} "
                      f"slots: {names}{behind}", own, own_ahead(), settings.defer_seconds / 2)
    hosts = {l.host for l in leases} or {None}
    full = len(leases) >= len(hosts) * slots_per_host
    held = (record.wait_reason or "").startswith(SHARE_PARK_REASON)
    if share is not None and 0 < share < 1 and leases and (full or held):
        turns = math.ceil((own_ahead() + 1) / share - 1e-9) - 1
        turn = (f"under fair share about one freed slot in {1 / share:.3g} goes to {tenant} "
                "while others wait")
        if full:
            return answer("pool_full", f"pool full: all {len(leases)} slots are busy; {turn}",
                          leases, turns, 0.0)
        return answer("queued", f"{record.wait_reason}; {turn}", leases, turns, 0.0)
    if full:
        return answer("pool_full", f"pool full: all {len(leases)} slots are busy", leases,
                      ahead(lambda r: caps.get(r.tenant_id, default_cap) > 0), 0.0)
    start = (record.last_seen_at or now) + settings.defer_seconds
    return Explanation(**base, code="queued", reason=(
        record.wait_reason or "waiting to be delivered again") +
        "; slots are free, so it should start when its message comes round again"
        + due_note(start), predicted_start=start, late=late(start),
        confidence="the deferral delay is fixed")
