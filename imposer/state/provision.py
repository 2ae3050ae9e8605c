"""`imposer init`: create queues, tables and bucket, idempotently, and upgrade old tables.

Every table's layout comes from the store that owns it (``table_spec``), so
``init``, the stores and the CloudFormation template cannot drift apart.
Run on tables made by an older imposer, ``init`` adds the indexes and TTL
they lack and moves open job records to the (tenant, job) keys.
"""

from __future__ import annotations

from typing import Callable, Iterable

import attrs

from imposer.aws import tables
from imposer.aws.dynamodb import Dynamo
from imposer.aws.s3 import Storage
from imposer.aws.sqs import JobQueue
from imposer.models import JobRecord
from imposer.settings import Settings
from imposer.state import jobs, leases, outbox, rollups, tenants, waiting


@attrs.frozen(kw_only=True)
class Row:
    """One resource and what init did to it."""

    kind: str
    name: str
    #: "created", "exists", or what changed ("added index open; TTL on expires_at").
    done: str


def table_specs(settings: Settings) -> list[tables.TableSpec]:
    """Every table imposer uses, as its store declares it."""
    return [leases.table_spec(settings.leases_table), jobs.table_spec(settings.jobs_table),
            tenants.table_spec(settings.tenants_table), outbox.table_spec(settings.outbox_table),
            rollups.table_spec(settings.rollups_table), waiting.table_spec(settings.waiting_table)]


def provision(settings: Settings) -> list[Row]:
    """Make every resource imposer needs; return one Row per resource."""
    rows = []
    queue = JobQueue(settings.region, settings.queue_name, settings.dlq_name)
    made = queue.ensure(settings.retention_seconds, settings.max_receive_count,
                        settings.lease_ttl_seconds)
    rows += [Row(kind="queue", name=name, done="created" if created else "exists")
             for name, created in made.items()]
    dynamo = Dynamo(settings.region)
    for spec in table_specs(settings):
        done = tables.ensure(dynamo, spec)
        rows.append(Row(kind="table", name=spec.name, done="; ".join(done) or "exists"))
    storage = Storage(settings.region)
    created = storage.ensure_bucket(settings.bucket, settings.region)
    rows.append(Row(kind="bucket", name=settings.bucket, done="created" if created else "exists"))
    return rows


def stale_records(settings: Settings) -> Iterable[dict]:
    """Yield job items an older imposer wrote that the upgrade must touch (one Scan)."""
    dynamo = Dynamo(settings.region)
    yield from dynamo.scan(
        settings.jobs_table,
        "attribute_not_exists(#job) OR (attribute_not_exists(open_shard) AND #st IN "
        "(:q, :r, :t)) OR (attribute_not_exists(expires_at) AND #st IN (:s, :f, :d))",
        {":q": "queued", ":r": "running", ":t": "retrying", ":s": "succeeded",
         ":f": "failed", ":d": "dead"}, {"#job": "job", "#st": "status"})


def upgrade(settings: Settings, items: Iterable[dict],
            tick: Callable[[], None] = lambda: None) -> dict[str, int]:
    """Bring old job records to this version's layout; return counts of what was done.

    Open records move to their (tenant, job) key with ``open_shard`` set, so
    their redelivered messages find them; final ones keep their key, gain the
    ``job`` attribute (for ``why`` by id) and an expiry.
    """
    dynamo = Dynamo(settings.region)
    done = {"moved": 0, "opened": 0, "expiring": 0}
    for item in items:
        tick()
        record = JobRecord.from_item(item)
        new = record.to_item()
        if record.status.final:
            when = record.finished_at or record.started_at or record.received_at or 0
            new.update(job_id=item["job_id"], expires_at=int(
                when + settings.job_retention_days * 86400))
            done["expiring"] += 1
        else:
            new["open_shard"] = jobs.open_shard(record.tenant_id, record.job_id)
            done["opened"] += 1
        dynamo.put(settings.jobs_table, new)
        if new["job_id"] != item["job_id"]:
            dynamo.delete(settings.jobs_table, {"job_id": item["job_id"]})
            done["moved"] += 1
    return done
