"""Doctor's permission probes: each kind of call the worker makes, asked so it changes nothing.

AWS authorizes a call before it finds it impossible, so a write whose
condition never holds, or a delete of a receipt handle that does not exist,
proves the grant and leaves every table and queue as it was.
"""

from __future__ import annotations

from collections.abc import Iterator

from imposer.cli.doctor.check import OK, SKIP, Check, guard
from imposer.errors import BackendError
from imposer.settings import Settings

#: A condition no item can meet: a probe write is authorized, then refused.
NEVER = "attribute_exists(#k) AND attribute_not_exists(#k)"


def permissions(s: Settings, key: str) -> Iterator[Check]:
    """Probe each kind of call the worker makes, with calls that cannot change state."""
    from imposer.aws.dynamodb import Dynamo, TransactionCancelled, op
    from imposer.aws.sqs import JobQueue

    dynamo = Dynamo(s.region)
    never = {"condition": NEVER}

    def settle():
        names = {"#k": "pk"}
        items = [op("Put", s.leases_table, {"pk": key + "#1"}, names=names, **never),
                 op("Update", s.leases_table, {"pk": key + "#2"}, update="SET probe = :p",
                    values={":p": 1}, names=names, **never),
                 op("Delete", s.leases_table, {"pk": key + "#3"}, names=names, **never),
                 op("Update", s.jobs_table, {"job_id": key}, update="SET probe = :p",
                    values={":p": 1}, names={"#k": "job_id"}, **never),
                 op("Put", s.outbox_table, {"event_id": key}, names={"#k": "event_id"},
                    **never),
                 op("Delete", s.waiting_table, {"tenant_id": key, "order": key},
                    names={"#k": "tenant_id"}, **never)]
        try:
            dynamo.transact(items, "probe the lease transaction")
        except TransactionCancelled:
            return True
        raise BackendError("the probe transaction was not refused")

    def updates():
        for table, field in ((s.leases_table, "pk"), (s.jobs_table, "job_id"),
                             (s.outbox_table, "event_id")):
            dynamo.update(table, {field: key}, "SET probe = :p", {":p": 1},
                          {"#k": field}, NEVER)
        dynamo.update(s.rollups_table, {"pk": key, "sk": key}, "SET probe = :p",
                      {":p": 1}, {"#k": "pk"}, NEVER)
        dynamo.put(s.waiting_table, {"tenant_id": key, "order": key}, NEVER,
                   names={"#k": "tenant_id"})
        return True

    def reads():
        for table, field in ((s.jobs_table, "job_id"), (s.tenants_table, "tenant_id"),
                             (s.outbox_table, "event_id")):
            dynamo.get(table, {field: key})
        dynamo.batch_get(s.jobs_table, [{"job_id": key}])
        for index, field in (("by-tenant", "tenant_id"), ("open", "open_shard"),
                             ("by-job", "job")):
            dynamo.query(s.jobs_table, "#k = :v", {":v": key}, {"#k": field}, index=index,
                         limit=1)
        dynamo.query(s.outbox_table, "due_shard = :v", {":v": key}, index="due", limit=1)
        dynamo.query(s.rollups_table, "pk = :v", {":v": key}, limit=1)
        dynamo.query(s.waiting_table, "tenant_id = :v", {":v": key}, limit=1)
        for table in (s.leases_table, s.tenants_table):
            next(dynamo.scan(table, "pk = :v" if table == s.leases_table else
                             "tenant_id = :v", {":v": key}), None)
        return True

    def messages():
        queue = JobQueue(s.region, s.queue_name, s.dlq_name)
        queue.change_visibility("doctor-probe-not-a-receipt", 0)
        try:
            queue.delete("doctor-probe-not-a-receipt")
        except BackendError as exc:  # authorized, then refused: what the probe wants
            if "ReceiptHandleIsInvalid" not in str(exc) and \
                    "InvalidParameterValue" not in str(exc):
                raise
        return True

    for name, probe in (
            ("lease transaction", settle),
            ("conditional writes", updates),
            ("reads and indexes", reads),
            ("message visibility and delete", messages)):
        if (yield from guard(f"permission: {name}", probe)) is not None:
            yield Check(name=f"permission: {name}", status=OK, detail="granted")
    yield Check(name="permission: the rest", status=SKIP, detail=(
        "sqs:ReceiveMessage, sqs:SendMessage, s3:PutObject and s3:DeleteObject are not "
        "probed: no call of them is sure to change nothing; nor s3:GetObject: without "
        "s3:ListBucket (a worker has none) S3 refuses a missing key alike whether reading "
        "is granted or not"))
