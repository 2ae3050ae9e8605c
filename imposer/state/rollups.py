"""Hourly rollups: the bounded history that reports read instead of job records.

Each host adds to one item per hour it worked: ``pk = day#<UTC date>``,
``sk = <hour>#<host>``. An item holds plain counters, so hosts only ever ADD
to it: busy slot-seconds, the host's slot count, jobs started and a wait
histogram, stranded and shortage seconds, and the same per tenant under
``t|<tenant>|<field>`` names. Reading four weeks is one Query per day over
hosts x 24 small items: O(hosts x hours), never O(jobs).
"""

from __future__ import annotations

import bisect
import datetime
from typing import Any, Iterator, Mapping, Sequence

from imposer.aws.dynamodb import Dynamo
from imposer.aws.expressions import Update
from imposer.aws.tables import TableSpec

#: Upper edges (seconds) of the wait histogram's buckets; the last bucket is open.
#: 180 s, the licence rule's threshold, is an edge, so its count is exact.
WAIT_EDGES = (1, 2, 5, 10, 20, 30, 60, 90, 120, 180, 300, 600, 900, 1800, 3600, 7200, 14400)
#: What the licence rule reads of a rollup item.
CAPACITY_FIELDS = ("slots", "busy", "started", *(f"w{i}" for i in range(len(WAIT_EDGES) + 1)))
#: Counters a rollup item may hold per tenant (besides the wait buckets ``w<i>``).
TENANT_FIELDS = ("started", "succeeded", "failed", "dead", "defers", "run_seconds", "late")
#: Rollups older than this are deleted by TTL (the licence window needs 28 days).
RETENTION_DAYS = 400
#: Attributes per UpdateItem, to keep each expression well under DynamoDB's 4 KB.
_CHUNK = 40


def table_spec(name: str) -> TableSpec:
    return TableSpec(name=name, hash_key="pk", range_key="sk", ttl_attribute="expires_at")


def bucket(wait: float) -> int:
    """Return the index of the histogram bucket holding *wait* seconds."""
    return bisect.bisect_left(WAIT_EDGES, wait)


def hour_of(epoch: float) -> int:
    return int(epoch // 3600 * 3600)


def item_key(hour: int, host: str) -> dict[str, str]:
    when = datetime.datetime.fromtimestamp(hour, datetime.timezone.utc)
    return {"pk": f"day#{when:%Y-%m-%d}", "sk": f"{when:%H}#{host}"}


def tenant_field(tenant: str, field: str) -> str:
    return f"t|{tenant}|{field}"


def priority_field(priority: int, field: str) -> str:
    """A fleet-wide counter of the jobs of one priority (``started``, wait buckets ``w<i>``,
    ``late``: started after their due time)."""
    return f"p|{priority}|{field}"


class RollupStore:
    """Add hour deltas and read them back by day."""

    def __init__(self, dynamo: Dynamo, table: str) -> None:
        self.dynamo = dynamo
        self.table = table

    def add(self, hour: int, host: str, slots: int, deltas: Mapping[str, float],
            flushed_at: float | None = None) -> None:
        """ADD *deltas* to the host's item of *hour* (several writes for a wide hour).

        *flushed_at* (epoch seconds) says how fresh the item is: a report tells
        how far behind the rollups are from the newest of them.
        """
        names = sorted(deltas)
        chunks = [names[i:i + _CHUNK] for i in range(0, len(names), _CHUNK)] or [[]]
        for chunk in chunks:
            up = Update().set(host=host, hour=hour, slots=slots,
                              expires_at=hour + RETENTION_DAYS * 86400)
            if flushed_at is not None:
                up.set(flushed_at=round(flushed_at, 3))
            up.add({name: round(deltas[name], 3) for name in chunk})
            self.dynamo.update(self.table, item_key(hour, host), up.expression, up.values,
                               up.names)

    def read(self, start: float, end: float,
             fields: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        """Yield every host-hour item whose hour overlaps [start, end).

        *fields* limits what is read to those attributes (the capacity report
        needs no per-tenant counters), besides the hour and the host.
        """
        day = datetime.datetime.fromtimestamp(start, datetime.timezone.utc).date()
        last = datetime.datetime.fromtimestamp(end, datetime.timezone.utc).date()
        extra: dict[str, Any] = {}
        if fields:
            names = {f"#f{i}": name for i, name in enumerate(("hour", "host", *fields))}
            extra = {"ProjectionExpression": ", ".join(names)}
        else:
            names = None
        while day <= last:
            for item in self.dynamo.query_all(self.table, "pk = :p", {":p": f"day#{day}"},
                                              names, **extra):
                if start - 3600 < item.get("hour", 0) < end:
                    yield item
            day += datetime.timedelta(days=1)
