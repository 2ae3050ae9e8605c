"""Reconstruct slot use and waiting from job records; tell stranded capacity from shortage.

Computed from imposer's own job records, not SQS's ApproximateAgeOfOldestMessage,
which drops messages received three or more times: exactly the jobs deferred at cap.
A record keeps only its *last* attempt, so a retried job shows one busy stretch and
waits from submission to its last start: busy slot-seconds are a lower bound when
retries happen. A message imposer never received has no record at all.
"""

from __future__ import annotations

import collections
import math
from typing import Iterable, Mapping, Sequence

import attrs

from imposer.models import JobRecord, JobStatus

WAITING = (JobStatus.QUEUED, JobStatus.RETRYING)


def percentile(values: Iterable[float], q: float) -> float | None:
    """Return the nearest-rank *q*-th percentile (0-100) of *values*, None if empty.

    Nearest rank answers with an observed value (a real job's wait), never an interpolation.
    """
    data = sorted(values)
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0-100, not {q!r}")
    if not data:
        return None
    return data[max(1, math.ceil(q / 100 * len(data))) - 1]


def busy_span(record: JobRecord, now: float) -> tuple[float, float] | None:
    """Return when the record's last attempt held a slot, or None if none is known.

    A job released back to the queue without ``run_seconds`` (reclaimed
    from a dead worker) has an unknown end and counts as zero busy time.
    """
    start = record.started_at
    if start is None:
        return None
    if record.status is JobStatus.RUNNING:
        end = now
    elif record.finished_at is not None:
        end = record.finished_at
    else:
        end = start + (record.run_seconds or 0.0)
    return start, max(start, min(end, now))


def wait_spans(record: JobRecord, now: float) -> list[tuple[float, float]]:
    """Return the stretches the job spent waiting for a slot."""
    submitted = record.submitted_at if record.submitted_at is not None else record.received_at
    if submitted is None:
        return []
    if record.started_at is not None:
        spans = [(submitted, record.started_at)]
        if record.status in WAITING:  # released to retry: waits again since its attempt ended
            spans.append((busy_span(record, now)[1], now))
        return spans
    if record.status in WAITING:
        return [(submitted, now)]
    if record.finished_at is not None:  # refused without a lease (invalid request)
        return [(submitted, record.finished_at)]
    return []


def queue_wait(record: JobRecord) -> float | None:
    """Return seconds from submission to the last lease, as stored or from the times."""
    if record.queue_wait is not None:
        return record.queue_wait
    if record.started_at is not None and record.submitted_at is not None:
        return max(0.0, record.started_at - record.submitted_at)
    return None


def hosts_seen(records: Sequence[JobRecord], start: float, now: float) -> tuple[str, ...]:
    """Return hosts that held a slot within [start, now]; an idle host is invisible."""
    spans = ((r.host, busy_span(r, now)) for r in records)
    return tuple(sorted({h for h, s in spans if h and s and s[1] >= start and s[0] <= now}))


@attrs.frozen(kw_only=True)
class Segment:
    """A stretch of time over which no job started, finished or arrived."""

    start: float
    end: float
    #: Tenant -> slots it held.
    busy: Mapping[str, int]
    #: Tenant -> jobs of it waiting for a slot.
    waiting: Mapping[str, int]

    @property
    def duration(self) -> float:
        return self.end - self.start


@attrs.frozen(kw_only=True)
class Timeline:
    """Slot use and waiting over [start, end], cut where anything changed."""

    start: float
    end: float
    hosts: tuple[str, ...]
    slots_per_host: int
    segments: tuple[Segment, ...]
    #: Tier overrides; a tenant not in it has ``default_cap``.
    caps: Mapping[str, int] = attrs.field(factory=dict)
    default_cap: int = 4

    @property
    def slots_total(self) -> int:
        return max(1, len(self.hosts)) * self.slots_per_host

    def cap(self, tenant_id: str) -> int:
        return self.caps.get(tenant_id, self.default_cap)


def timeline(records: Sequence[JobRecord], slots_per_host: int, now: float,
             since: float | None = None, *, caps: Mapping[str, int] | None = None,
             default_cap: int = 4) -> Timeline:
    """Replay the records into segments of constant busy and waiting counts per tenant."""
    deltas: dict[float, list[collections.Counter]] = collections.defaultdict(
        lambda: [collections.Counter(), collections.Counter()])
    floor, earliest = (-math.inf if since is None else min(since, now)), now
    for r in records:
        for kind, span in [(0, busy_span(r, now))] + [(1, s) for s in wait_spans(r, now)]:
            if span is None:
                continue
            earliest = min(earliest, span[0])
            lo, hi = max(span[0], floor), min(span[1], now)
            if hi > lo:
                deltas[lo][kind][r.tenant_id] += 1
                deltas[hi][kind][r.tenant_id] -= 1
    start = earliest if since is None else floor
    times = sorted(set(deltas) | {start, now})
    busy, waiting = collections.Counter(), collections.Counter()
    segments = []
    for t, t_next in zip(times, times[1:]):
        if t in deltas:
            busy.update(deltas[t][0])
            waiting.update(deltas[t][1])
        segments.append(Segment(start=t, end=t_next, busy={k: v for k, v in busy.items() if v},
                                waiting={k: v for k, v in waiting.items() if v}))
    return Timeline(start=start, end=now, hosts=hosts_seen(records, start, now),
                    slots_per_host=slots_per_host, segments=tuple(segments),
                    caps=dict(caps or {}), default_cap=default_cap)


@attrs.frozen(kw_only=True)
class Contention:
    """Where waiting came from, integrated over a timeline."""

    #: Idle slots that a waiting tenant at its cap could have used, times seconds.
    stranded_slot_seconds: float
    #: Seconds during which at least one such slot sat idle.
    stranded_seconds: float
    #: Seconds during which every slot was busy while a tenant below its cap waited.
    shortage_seconds: float
    #: Slot-seconds held by jobs, over all slots.
    busy_slot_seconds: float


def stranded_and_shortage(tl: Timeline) -> Contention:
    """Integrate idle-while-capped (raise caps) and full-while-waiting (buy a licence).

    Shortage counts only waiting tenants below their cap: a tenant at its
    cap would not have run on a ninth slot either. Paused tenants (cap 0)
    strand nothing; they wait because an operator said so.
    """
    stranded = stranded_time = shortage = busy_total = 0.0
    for seg in tl.segments:
        held = sum(seg.busy.values())
        busy_total += held * seg.duration
        idle = max(0, tl.slots_total - held)
        capped = sum(n for t, n in seg.waiting.items() if 0 < tl.cap(t) <= seg.busy.get(t, 0))
        below = sum(n for t, n in seg.waiting.items() if seg.busy.get(t, 0) < tl.cap(t))
        usable = min(idle, capped)
        stranded += usable * seg.duration
        stranded_time += seg.duration if usable else 0.0
        shortage += seg.duration if idle == 0 and below else 0.0
    return Contention(stranded_slot_seconds=stranded, stranded_seconds=stranded_time,
                      shortage_seconds=shortage, busy_slot_seconds=busy_total)


def verdict_words(contention: Contention) -> list[str]:
    """Say what the contention figures call for, one sentence per finding."""
    words = []
    if contention.stranded_slot_seconds > 0:
        words.append("stranded capacity: slots sat idle while a tenant at its cap had work "
                     "waiting; raise that tenant's cap or allow borrowing")
    if contention.shortage_seconds > 0:
        words.append("shortage: every slot was busy while a tenant below its cap waited; "
                     "more slots would have helped (check `imposer capacity` before buying)")
    return words or ["no contention: no idle slot was stranded and no slot was short"]


def summary(records: Sequence[JobRecord], *, slots_per_host: int, now: float,
            since: float | None = None, caps: Mapping[str, int] | None = None,
            default_cap: int = 4) -> dict:
    """Return per-tenant and cluster figures over [since, now] as a JSON-ready dict."""
    tl = timeline(records, slots_per_host, now, since, caps=caps, default_cap=default_cap)
    contention = stranded_and_shortage(tl)
    window = max(0.0, tl.end - tl.start)
    tenants: dict[str, dict] = {}
    waits: dict[str, list[float]] = collections.defaultdict(list)
    oldest = None
    for r in records:
        last = r.finished_at or r.started_at or r.submitted_at or r.received_at or now
        if r.status.final and last < tl.start:
            continue
        row = tenants.setdefault(r.tenant_id, {
            "cap": tl.cap(r.tenant_id), "running": 0, "waiting": 0, "deferred": 0,
            "succeeded": 0, "failed": 0, "dead": 0})
        row["deferred"] += r.defers
        if r.status is JobStatus.RUNNING:
            row["running"] += 1
        elif r.status in WAITING:
            row["waiting"] += 1
            since_when = r.submitted_at if r.submitted_at is not None else r.received_at
            if since_when is not None and (oldest is None or since_when < oldest[0]):
                oldest = (since_when, r)
        elif r.finished_at is None or r.finished_at >= tl.start:
            row[r.status.value] += 1
        wait = queue_wait(r)
        if wait is not None and r.started_at is not None and tl.start <= r.started_at <= now:
            waits[r.tenant_id].append(wait)
    for tenant, row in tenants.items():
        p50, p95 = (percentile(waits[tenant], q) for q in (50, 95))
        row.update(started=len(waits[tenant]), queue_wait_p50=p50, queue_wait_p95=p95)
    oldest_job = None if oldest is None else {
        "job_id": oldest[1].job_id, "tenant_id": oldest[1].tenant_id,
        "age_seconds": round(now - oldest[0], 3), "status": oldest[1].status.value,
        "wait_reason": oldest[1].wait_reason}
    cluster = {
        "hosts": list(tl.hosts), "slots_total": tl.slots_total,
        "slot_utilisation": round(contention.busy_slot_seconds / (tl.slots_total * window), 4)
        if window else None,
        "running": sum(t["running"] for t in tenants.values()),
        "waiting": sum(t["waiting"] for t in tenants.values()),
        "oldest_waiting": oldest_job,
        **{k: round(v, 3) for k, v in attrs.asdict(contention).items()},
        "verdict": verdict_words(contention),
    }
    return {"window": {"start": tl.start, "end": tl.end, "seconds": round(window, 3)},
            "cluster": cluster, "tenants": dict(sorted(tenants.items()))}
