"""`imposer init`: create queues, tables and bucket, idempotently, and upgrade old tables.

Every table's layout comes from the store that owns it (``table_spec``), and
every other attribute from ``queue_attributes``, ``table_shape`` and
``bucket_settings`` here, so ``init``, the stores and the
CloudFormation template cannot drift apart (tests/deploy compares them all).
A resource init creates gets every attribute the template gives it. One that
exists is left as it is, whoever made it (a stack, an operator), except that
tables made by an older imposer get the indexes and TTL the code needs and
open job records move to the (tenant, job) keys; how it differs from what
init would make is reported (``drift``), and ``init --check`` only reports.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Iterable

import attrs

from imposer.aws import tables
from imposer.aws.dynamodb import Dynamo
from imposer.aws.s3 import Storage
from imposer.aws.sqs import JobQueue, seconds
from imposer.errors import MissingResource
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


#: Days before a plate left under attempts/ by an attempt that never committed is deleted
#: (the template's AttemptExpiryDays).
ATTEMPT_EXPIRY_DAYS = 2


def queue_attributes(settings: Settings, dlq_arn: str | None) -> dict[str, str]:
    """The DLQ's attributes (*dlq_arn* None) or the job queue's, redriving to *dlq_arn*."""
    out = {"MessageRetentionPeriod": str(int(min(settings.retention_seconds, 1209600))),
           "VisibilityTimeout": str(seconds(settings.lease_ttl_seconds)),
           "SqsManagedSseEnabled": "true"}
    if dlq_arn:
        out["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": dlq_arn,
                                           "maxReceiveCount": settings.max_receive_count})
    return out


def bucket_settings(settings: Settings) -> dict[str, Any]:
    """The bucket's settings as ``Storage.bucket_settings`` reads them (S3's API shapes)."""
    arn = f"arn:aws:s3:::{settings.bucket}"
    return {
        "Encryption": "AES256",
        "PublicAccessBlock": {"BlockPublicAcls": True, "IgnorePublicAcls": True,
                              "BlockPublicPolicy": True, "RestrictPublicBuckets": True},
        "Ownership": "BucketOwnerEnforced",
        "Versioning": "Enabled",
        "Lifecycle": [
            {"ID": "expire-job-objects", "Status": "Enabled", "Filter": {"Prefix": "tenants/"},
             "Expiration": {"Days": math.ceil(settings.job_retention_days)}},
            {"ID": "expire-uncommitted-attempts", "Status": "Enabled",
             "Filter": {"Prefix": "attempts/"}, "Expiration": {"Days": ATTEMPT_EXPIRY_DAYS},
             "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
            {"ID": "old-versions-and-incomplete-uploads", "Status": "Enabled",
             "Filter": {"Prefix": ""}, "Expiration": {"ExpiredObjectDeleteMarker": True},
             "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
             "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
        ],
        "Policy": [{"Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
                    "Resource": [arn, f"{arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}}}],
    }


def table_shape(spec: tables.TableSpec) -> dict[str, Any]:
    """What init makes of *spec*, in the shape ``described`` reads a table back in."""
    return {"KeySchema": spec.key_schema(),
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in
                                     sorted(spec.attribute_types().items())],
            "Indexes": {i.name: _index(i.to_api()) for i in spec.indexes},
            "TTL": spec.ttl_attribute, "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecovery": True}


def described(dynamo: Dynamo, name: str) -> dict[str, Any]:
    """A table's keys, indexes, TTL, billing and point-in-time recovery as AWS reports them."""
    table = tables.describe(dynamo, name)
    ttl = table["TimeToLive"]
    return {"KeySchema": table["KeySchema"],
            "AttributeDefinitions": sorted(table["AttributeDefinitions"],
                                           key=lambda d: d["AttributeName"]),
            "Indexes": {i["IndexName"]: _index(i)
                        for i in table.get("GlobalSecondaryIndexes", [])},
            "TTL": ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") in (
                "ENABLED", "ENABLING") else None,
            "BillingMode": table.get("BillingModeSummary", {}).get("BillingMode",
                                                                   "PROVISIONED"),
            "PointInTimeRecovery": tables.point_in_time_recovery(dynamo, name)}


def _index(index: dict) -> dict:
    projection = dict(index["Projection"])
    if "NonKeyAttributes" in projection:
        projection["NonKeyAttributes"] = sorted(projection["NonKeyAttributes"])
    return {"KeySchema": index["KeySchema"], "Projection": projection}


def queue_shape(attributes: dict[str, str]) -> dict[str, Any]:
    """Queue attributes with the redrive policy read as data (SQS may quote the count)."""
    out = dict(attributes)
    if "RedrivePolicy" in out:
        redrive = json.loads(out["RedrivePolicy"])
        out["RedrivePolicy"] = {"deadLetterTargetArn": redrive["deadLetterTargetArn"],
                                "maxReceiveCount": int(redrive["maxReceiveCount"])}
    return out


def provision(settings: Settings) -> list[Row]:
    """Make every resource imposer needs; return one Row per resource (what was done, and
    how one that exists differs from what init would make)."""
    done, rows = create(settings), []
    for row in drift(settings):
        said = [done.get(row.name) or "exists"] + ([row.done] if row.done != "matches" else [])
        rows.append(attrs.evolve(row, done="; ".join(said)))
    return rows


def create(settings: Settings) -> dict[str, str]:
    """Make every resource imposer needs, comparing nothing; resource name -> what was
    done, for those something was done to (``provision`` adds the comparison)."""
    queue = JobQueue(settings.region, settings.queue_name, settings.dlq_name)
    made = queue.ensure({settings.dlq_name: queue_attributes(settings, None)})
    made.update(queue.ensure({settings.queue_name: queue_attributes(
        settings, queue.arn(settings.dlq_name))}))
    dynamo = Dynamo(settings.region)
    done = {}
    for spec in table_specs(settings):
        done[spec.name] = "; ".join(tables.ensure(dynamo, spec))
    storage = Storage(settings.region)
    if storage.ensure_bucket(settings.bucket, settings.region):
        storage.configure_bucket(settings.bucket, bucket_settings(settings))
        done[settings.bucket] = "created"
    done.update({name: "created" for name, created in made.items() if created})
    return {name: what for name, what in done.items() if what}


def drift(settings: Settings) -> list[Row]:
    """Compare every resource with what init would make of it; change nothing.

    A Row per resource: "matches", "missing", or "differs (not changed): ..."
    naming each attribute, what it is and what init would make it.
    """
    queue = JobQueue(settings.region, settings.queue_name, settings.dlq_name)
    dynamo, storage = Dynamo(settings.region), Storage(settings.region)
    rows: list[Row] = []

    def one(kind: str, name: str, read: Callable[[], dict], want: Callable[[], dict]) -> None:
        try:
            have = read()
        except MissingResource:
            rows.append(Row(kind=kind, name=name, done="missing"))
            return
        try:
            wanted_ = want()
        except MissingResource as exc:
            rows.append(Row(kind=kind, name=name, done=f"cannot compare: {exc}"))
            return
        differ = [f"{k} is {json.dumps(have.get(k))}, init makes {json.dumps(v)}"
                  for k, v in wanted_.items() if have.get(k) != v]
        rows.append(Row(kind=kind, name=name, done="differs (not changed): " +
                        "; ".join(differ) if differ else "matches"))

    for name, dlq in ((settings.dlq_name, None), (settings.queue_name, settings.dlq_name)):
        one("queue", name, lambda n=name: queue_shape(queue.attributes(n)),
            lambda d=dlq: queue_shape(queue_attributes(settings, d and queue.arn(d))))
    for spec in table_specs(settings):
        one("table", spec.name, lambda n=spec.name: described(dynamo, n),
            lambda sp=spec: table_shape(sp))
    one("bucket", settings.bucket, lambda: storage.bucket_settings(settings.bucket),
        lambda: bucket_settings(settings))
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
