"""`imposer init`: create queues, tables and bucket, idempotently."""

from __future__ import annotations

from imposer.aws.dynamodb import Dynamo
from imposer.aws.s3 import Storage
from imposer.aws.sqs import JobQueue
from imposer.settings import Settings


def provision(settings: Settings) -> list[tuple[str, str, bool]]:
    """Make every resource imposer needs; return (kind, name, created) rows."""
    rows = []
    queue = JobQueue(settings.region, settings.queue_name, settings.dlq_name)
    made = queue.ensure(settings.retention_seconds, settings.max_receive_count,
                        settings.lease_ttl_seconds)
    rows += [("queue", name, created) for name, created in made.items()]
    dynamo = Dynamo(settings.region)
    for table, key in ((settings.leases_table, "pk"), (settings.jobs_table, "job_id"),
                       (settings.tenants_table, "tenant_id")):
        rows.append(("table", table, dynamo.ensure_table(table, key)))
    storage = Storage(settings.region)
    rows.append(("bucket", settings.bucket, storage.ensure_bucket(settings.bucket, settings.region)))
    return rows
