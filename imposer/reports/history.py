"""Host-hours: the rollup items reports read, and how job records turn into them.

``from_item`` reads what workers wrote (``imposer.state.rollups``);
``from_records`` computes the same host-hours from job records, for the
upgrade of a stack whose history predates rollups and as the reference the
tests hold the live rollups to. Cluster-wide contention (stranded and
shortage time), which no single host sees, goes on rows of host ``""``
that carry no slots.
"""

from __future__ import annotations

import collections
import math
from typing import Iterable, Mapping, Sequence

import attrs

from imposer.models import JobRecord
from imposer.models.urgency import DEFAULT_PRIORITY
from imposer.reports.stats import busy_span, queue_wait, stranded_and_shortage, timeline
from imposer.state.rollups import WAIT_EDGES, bucket, hour_of, priority_field, tenant_field

HOUR = 3600


@attrs.frozen(kw_only=True)
class HostHour:
    """What one host did in one hour."""

    hour: int
    host: str
    #: The host's slot count (0 on the cluster-wide contention rows).
    slots: int = 0
    #: Slot-seconds held by jobs in this hour.
    busy: float = 0.0
    #: Jobs that got a slot in this hour, and their queue waits as a histogram.
    started: int = 0
    waits: tuple[int, ...] = (0,) * (len(WAIT_EDGES) + 1)
    defers: int = 0
    stranded: float = 0.0
    stranded_time: float = 0.0
    shortage: float = 0.0
    #: tenant -> field (started, succeeded, failed, dead, defers, run_seconds, late, w<i>)
    #: -> value.
    tenants: Mapping[str, Mapping[str, float]] = attrs.field(factory=dict)
    #: priority -> field (started, late, w<i>) -> value, for the whole fleet.
    priorities: Mapping[int, Mapping[str, float]] = attrs.field(factory=dict)
    #: Jobs that got a slot in this hour after their due time.
    late: int = 0

    @classmethod
    def from_item(cls, item: Mapping) -> "HostHour":
        tenants: dict[str, dict[str, float]] = collections.defaultdict(dict)
        priorities: dict[int, dict[str, float]] = collections.defaultdict(dict)
        for name, value in item.items():
            if name.startswith("t|"):
                _, tenant, field = name.split("|", 2)
                tenants[tenant][field] = value
            elif name.startswith("p|"):
                _, priority, field = name.split("|", 2)
                priorities[int(priority)][field] = value
        return cls(hour=int(item["hour"]), host=item.get("host", ""),
                   slots=int(item.get("slots", 0)), busy=float(item.get("busy", 0)),
                   started=int(item.get("started", 0)),
                   waits=tuple(int(item.get(f"w{i}", 0)) for i in range(len(WAIT_EDGES) + 1)),
                   defers=int(item.get("defers", 0)), stranded=float(item.get("stranded", 0)),
                   stranded_time=float(item.get("stranded_time", 0)),
                   shortage=float(item.get("shortage", 0)), tenants=dict(tenants),
                   priorities=dict(priorities), late=int(item.get("late", 0)))


def to_deltas(row: HostHour) -> dict[str, float]:
    """Return the row as the counters a host ADDs to its rollup item (the inverse of from_item)."""
    deltas: dict[str, float] = {"busy": row.busy, "started": row.started, "defers": row.defers,
                                "stranded": row.stranded, "stranded_time": row.stranded_time,
                                "shortage": row.shortage, "late": row.late}
    deltas.update({f"w{i}": n for i, n in enumerate(row.waits) if n})
    for tenant, fields in row.tenants.items():
        deltas.update({tenant_field(tenant, name): value for name, value in fields.items()})
    for priority, fields in row.priorities.items():
        deltas.update({priority_field(priority, name): value for name, value in fields.items()})
    return {k: v for k, v in deltas.items() if v}


def histogram_percentile(counts: Sequence[int], q: float) -> float | None:
    """Return the upper edge of the bucket holding the nearest-rank *q*-th percentile."""
    total = sum(counts)
    if not total:
        return None
    rank = max(1, math.ceil(q / 100 * total))
    seen = 0
    for index, count in enumerate(counts):
        seen += count
        if seen >= rank:
            return float(WAIT_EDGES[min(index, len(WAIT_EDGES) - 1)])
    return float(WAIT_EDGES[-1])


def slow_count(counts: Sequence[int], threshold: float) -> int:
    """Jobs whose wait was above *threshold* (exact when it is a bucket edge)."""
    return sum(c for i, c in enumerate(counts) if i > 0 and WAIT_EDGES[i - 1] >= threshold)


def from_records(records: Sequence[JobRecord], *, slots_per_host: int, now: float,
                 caps: Mapping[str, int] | None = None, default_cap: int = 4,
                 host: str = "unknown") -> list[HostHour]:
    """Compute the host-hours a fleet would have written for these job records."""
    rows: dict[tuple[int, str], dict] = collections.defaultdict(lambda: {
        "busy": 0.0, "started": 0, "waits": [0] * (len(WAIT_EDGES) + 1), "defers": 0,
        "late": 0, "tenants": collections.defaultdict(collections.Counter),
        "priorities": collections.defaultdict(collections.Counter)})
    for r in records:
        where = r.host or host
        span = busy_span(r, now)
        if span is not None:
            start, end = span
            wait = queue_wait(r)
            row = rows[(hour_of(start), where)]
            if wait is not None:
                row["started"] += 1
                row["waits"][bucket(wait)] += 1
                row["tenants"][r.tenant_id]["started"] += 1
                row["tenants"][r.tenant_id][f"w{bucket(wait)}"] += 1
                priority = DEFAULT_PRIORITY if r.priority is None else r.priority
                row["priorities"][priority]["started"] += 1
                row["priorities"][priority][f"w{bucket(wait)}"] += 1
                if r.due is not None and start > r.due:
                    row["late"] += 1
                    row["tenants"][r.tenant_id]["late"] += 1
                    row["priorities"][priority]["late"] += 1
            while start < end:
                stop = min(end, hour_of(start) + HOUR)
                rows[(hour_of(start), where)]["busy"] += stop - start
                start = stop
        if r.status.final and (r.finished_at is not None):
            rows[(hour_of(r.finished_at), where)]["tenants"][r.tenant_id][r.status.value] += 1
        if r.defers:
            when = r.last_defer_at or r.submitted_at or r.received_at or now
            rows[(hour_of(when), where)]["defers"] += r.defers
            rows[(hour_of(when), where)]["tenants"][r.tenant_id]["defers"] += r.defers
    out = [HostHour(hour=h, host=name, slots=slots_per_host, busy=v["busy"],
                    started=v["started"], waits=tuple(v["waits"]), defers=v["defers"],
                    tenants={t: dict(c) for t, c in v["tenants"].items()},
                    priorities={p: dict(c) for p, c in v["priorities"].items()}, late=v["late"])
           for (h, name), v in sorted(rows.items())]
    return out + _contention(records, slots_per_host, now, caps or {}, default_cap)


def _contention(records, slots_per_host, now, caps, default_cap) -> list[HostHour]:
    """Split the records' stranded and shortage time into cluster rows, hour by hour."""
    tl = timeline(records, slots_per_host, now, caps=caps, default_cap=default_cap)
    hours: dict[int, list] = collections.defaultdict(list)
    for seg in tl.segments:
        start = seg.start
        while start < seg.end:
            stop = min(seg.end, hour_of(start) + HOUR)
            hours[hour_of(start)].append(attrs.evolve(seg, start=start, end=stop))
            start = stop
    rows = []
    for hour, segments in sorted(hours.items()):
        c = stranded_and_shortage(attrs.evolve(tl, segments=tuple(segments)))
        if c.stranded_slot_seconds or c.shortage_seconds:
            rows.append(HostHour(hour=hour, host="", stranded=c.stranded_slot_seconds,
                                 stranded_time=c.stranded_seconds, shortage=c.shortage_seconds))
    return rows


def hosts_seen(rows: Iterable[HostHour]) -> dict[str, int]:
    """Hosts that held a slot in these rows, with their slot counts."""
    return {r.host: r.slots for r in rows if r.host and r.slots and (r.busy or r.started)}
