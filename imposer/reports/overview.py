"""What `imposer stats` prints: live work from the open-jobs index, history from rollups.

Both sources are bounded: the open index holds only queued, running and
retrying jobs, and the rollups one small item per host and hour. Waits come
from the rollups' histograms, so p50 and p95 are bucket edges (1, 2, 5, 10,
20, 30, 60, 90, 120, 180, 300 s ...), not single jobs' waits.
"""

from __future__ import annotations

import collections
from typing import Mapping, Sequence

from imposer.models import JobRecord, JobStatus
from imposer.reports.history import HostHour, histogram_percentile, hosts_seen
from imposer.reports.stats import Contention, verdict_words
from imposer.state.rollups import WAIT_EDGES

WAITING = (JobStatus.QUEUED, JobStatus.RETRYING)
_DONE = ("succeeded", "failed", "dead")


def summarise(rows: Sequence[HostHour], open_jobs: Sequence[JobRecord], *, now: float,
              since: float, caps: Mapping[str, int], default_cap: int,
              slots_per_host: int) -> dict:
    """Return per-tenant and cluster figures over [since, now] as a JSON-ready dict."""
    rows = [r for r in rows if since - 3600 < r.hour < now]
    window = max(0.0, now - since)
    tenants: dict[str, dict] = {}
    waits: dict[str, list[int]] = collections.defaultdict(lambda: [0] * (len(WAIT_EDGES) + 1))

    def row_of(tenant: str) -> dict:
        return tenants.setdefault(tenant, {
            "cap": caps.get(tenant, default_cap), "running": 0, "waiting": 0, "deferred": 0,
            "succeeded": 0, "failed": 0, "dead": 0, "started": 0, "started_late": 0})

    #: priority -> starts, late starts and the wait histogram (the whole fleet's)
    urgency: dict[int, dict] = collections.defaultdict(
        lambda: {"started": 0, "late": 0, "waits": [0] * (len(WAIT_EDGES) + 1)})

    for hour in rows:
        for tenant, fields in hour.tenants.items():
            row = row_of(tenant)
            row["deferred"] += int(fields.get("defers", 0))
            row["started"] += int(fields.get("started", 0))
            for status in _DONE:
                row[status] += int(fields.get(status, 0))
            row["started_late"] += int(fields.get("late", 0))
            for i in range(len(WAIT_EDGES) + 1):
                waits[tenant][i] += int(fields.get(f"w{i}", 0))
        for priority, fields in hour.priorities.items():
            for name in ("started", "late"):
                urgency[priority][name] += int(fields.get(name, 0))
            for i in range(len(WAIT_EDGES) + 1):
                urgency[priority]["waits"][i] += int(fields.get(f"w{i}", 0))
    oldest = None
    for job in open_jobs:
        row = row_of(job.tenant_id)
        if job.status is JobStatus.RUNNING:
            row["running"] += 1
        elif job.status in WAITING:
            row["waiting"] += 1
            when = job.submitted_at if job.submitted_at is not None else job.received_at
            if when is not None and (oldest is None or when < oldest[0]):
                oldest = (when, job)
    for tenant, row in tenants.items():
        row.update(queue_wait_p50=histogram_percentile(waits[tenant], 50),
                   queue_wait_p95=histogram_percentile(waits[tenant], 95))
    hosts = hosts_seen(rows)
    slots_total = sum(hosts.values()) or slots_per_host
    busy = sum(r.busy for r in rows)
    contention = Contention(stranded_slot_seconds=sum(r.stranded for r in rows),
                            stranded_seconds=sum(r.stranded_time for r in rows),
                            shortage_seconds=sum(r.shortage for r in rows),
                            busy_slot_seconds=busy)
    oldest_job = None if oldest is None else {
        "job_id": oldest[1].job_id, "tenant_id": oldest[1].tenant_id,
        "age_seconds": round(now - oldest[0], 3), "status": oldest[1].status.value,
        "wait_reason": oldest[1].wait_reason}
    cluster = {
        "hosts": sorted(hosts), "slots_total": slots_total,
        "slot_utilisation": round(busy / (slots_total * window), 4) if window else None,
        "running": sum(t["running"] for t in tenants.values()),
        "waiting": sum(t["waiting"] for t in tenants.values()),
        "oldest_waiting": oldest_job,
        "stranded_slot_seconds": round(contention.stranded_slot_seconds, 3),
        "stranded_seconds": round(contention.stranded_seconds, 3),
        "shortage_seconds": round(contention.shortage_seconds, 3),
        "busy_slot_seconds": round(busy, 3),
        "verdict": verdict_words(contention),
    }
    cluster["started_late"] = sum(t["started_late"] for t in tenants.values())
    priorities = {str(p): {"started": u["started"], "started_late": u["late"],
                           "queue_wait_p50": histogram_percentile(u["waits"], 50),
                           "queue_wait_p95": histogram_percentile(u["waits"], 95)}
                  for p, u in sorted(urgency.items())}
    return {"window": {"start": since, "end": now, "seconds": round(window, 3)},
            "cluster": cluster, "tenants": dict(sorted(tenants.items())),
            "priorities": priorities}
