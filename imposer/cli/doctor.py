"""`imposer doctor`: a host's preflight checklist, so a misconfigured host refuses to start.

systemd runs it as the worker's ``ExecStartPre``: any failed check exits 3
(configuration) with one line per check saying what was found. AWS is asked
only things that cannot change state: reads, and writes that AWS authorizes
before it finds them impossible (a condition that never holds, a receipt
handle that does not exist), so a permission probe proves the grant and
leaves every table and queue as it was.
"""

from __future__ import annotations

import email.utils
import importlib
import json
import os
import shutil
import sys
import uuid
from typing import Callable, Iterator

import attrs
import click

from imposer.cli.common import ALL_NAMES, settings_options
from imposer.errors import BackendError, EndpointUnreachable, ImposerError
from imposer.models.exits import Exit
from imposer.settings import Settings

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
#: A condition no item can meet: a probe write is authorized, then refused.
NEVER = "attribute_exists(#k) AND attribute_not_exists(#k)"


@attrs.frozen(kw_only=True)
class Check:
    """One line of the checklist."""

    name: str
    #: ok, warn, fail or skip; only fail makes doctor exit non-zero.
    status: str
    detail: str


def clock_skew(date_header: str, sent: float, received: float) -> float:
    """Seconds this host's clock is ahead of AWS's, from a response's ``Date`` header.

    The header has whole seconds (truncated), so its middle is half a second
    later; the request's own time is the middle of its round trip.
    """
    aws = email.utils.parsedate_to_datetime(date_header).timestamp() + 0.5
    return (sent + received) / 2 - aws


class Doctor:
    """Run every check of one host in order; AWS checks stop early if AWS cannot be reached."""

    def __init__(self, settings: Settings, *, max_skew: float, min_free_mb: float) -> None:
        self.s = settings
        self.max_skew = max_skew
        self.min_free_mb = min_free_mb
        self.probe_key = f"doctor-probe-{uuid.uuid4().hex}"

    def run(self) -> list[Check]:
        checks = [self.engine(), self.work_dir(), *self.identity()]
        if any(c.name in ("endpoint", "credentials") and c.status == FAIL for c in checks):
            return checks + [Check(name="aws resources", status=SKIP,
                                   detail="not checked: AWS cannot be asked")]
        for step in (self.queues, self.tables, self.bucket):
            checks += list(step())
        if any(c.status == FAIL for c in checks):
            return checks + [Check(name="permissions", status=SKIP,
                                   detail="not probed: fix the failures above first")]
        return checks + list(self.permissions())

    # -- this host ---------------------------------------------------------------------------
    def engine(self) -> Check:
        """The tool the worker runs must be there before a job reaches it."""
        if self.s.engine == "open":
            try:
                pikepdf = importlib.import_module("pikepdf")
                importlib.import_module("imposer.engine")
            except ImportError as exc:
                return Check(name="engine", status=FAIL, detail=f"open engine: {exc}")
            return Check(name="engine", status=OK,
                         detail=f"open engine (pikepdf {pikepdf.__version__})")
        path = shutil.which(self.s.pdftoolbox)
        if path is None or not os.access(path, os.X_OK):
            return Check(name="engine", status=FAIL, detail=(
                f"pdfToolbox not found or not executable at {self.s.pdftoolbox!r} (set "
                "IMPOSER_PDFTOOLBOX, or IMPOSER_ENGINE=open)"))
        return Check(name="engine", status=OK, detail=f"pdfToolbox at {path}")

    def work_dir(self) -> Check:
        """Job files live here: one job needs its input and its plate side by side."""
        root = self.s.work_root
        existing = next(p for p in (root, *root.parents) if p.exists())
        if not os.access(existing, os.W_OK):
            return Check(name="work dir", status=FAIL, detail=f"{existing} is not writable")
        free_mb = shutil.disk_usage(existing).free / 2**20
        detail = f"{root}: {free_mb / 1024:.1f} GiB free"
        if free_mb < self.min_free_mb:
            return Check(name="work dir", status=FAIL,
                         detail=f"{detail}; needs {self.min_free_mb / 1024:.1f} GiB")
        return Check(name="work dir", status=OK, detail=detail)

    # -- AWS ---------------------------------------------------------------------------------
    def identity(self) -> Iterator[Check]:
        """Who we are to AWS, and whether our clock agrees with AWS's (leases expire by it)."""
        from imposer.aws import session

        try:
            reply, sent, received = session.caller_identity(self.s.region)
        except EndpointUnreachable as exc:
            yield Check(name="endpoint", status=FAIL, detail=str(exc))
            return
        except BackendError as exc:
            yield Check(name="credentials", status=FAIL, detail=str(exc))
            return
        yield Check(name="endpoint", status=OK, detail=session.endpoint())
        yield Check(name="credentials", status=OK,
                    detail=f"{reply['Arn']} in region {self.s.region}")
        date = reply["ResponseMetadata"].get("HTTPHeaders", {}).get("date")
        if not date:
            yield Check(name="clock", status=WARN, detail="AWS sent no Date header to compare")
            return
        skew = clock_skew(date, sent, received)
        status = OK if abs(skew) <= self.max_skew else FAIL
        yield Check(name="clock", status=status, detail=(
            f"{abs(skew):.1f} s {'ahead of' if skew > 0 else 'behind'} AWS (limit "
            f"{self.max_skew:g} s; leases expire by wall clock across hosts)"))

    def queues(self) -> Iterator[Check]:
        """Retention, redrive and visibility are what keep a deferred job alive and single."""
        from imposer.aws.sqs import JobQueue

        queue = JobQueue(self.s.region, self.s.queue_name, self.s.dlq_name)
        dlq = yield from self._guard(f"queue {self.s.dlq_name}",
                                     lambda: queue.attributes(self.s.dlq_name))
        if dlq is not None:
            yield self._queue_check(self.s.dlq_name, dlq, None)
        jobs = yield from self._guard(f"queue {self.s.queue_name}",
                                      lambda: queue.attributes(self.s.queue_name))
        if jobs is not None:
            yield self._queue_check(self.s.queue_name, jobs,
                                    dlq.get("QueueArn", "") if dlq else "")

    def _queue_check(self, name: str, attrs_: dict, dlq_arn: str | None) -> Check:
        """Judge the job queue (*dlq_arn* given: its redrive target) or the DLQ (None)."""
        problems = []
        retention = int(attrs_.get("MessageRetentionPeriod", 0))
        want = int(min(self.s.retention_seconds, 1209600))
        if retention < want:
            problems.append(f"retention {retention} s is below IMPOSER_RETENTION_SECONDS ({want} s)"
                            ": messages would expire before imposer re-publishes them")
        detail = f"retention {retention} s"
        if dlq_arn is not None:
            visibility = int(attrs_.get("VisibilityTimeout", 0))
            if visibility < self.s.lease_ttl_seconds:
                problems.append(f"visibility {visibility} s is below the lease TTL "
                                f"({self.s.lease_ttl_seconds:g} s)")
            detail += f", visibility {visibility} s"
            redrive = json.loads(attrs_.get("RedrivePolicy") or "{}")
            count = int(redrive.get("maxReceiveCount", 0))
            if redrive.get("deadLetterTargetArn") != dlq_arn:
                problems.append(f"no redrive to {self.s.dlq_name}")
            elif count <= self.s.republish_receive_count:
                problems.append(f"redrive after {count} receives would dead-letter deferred jobs "
                                f"(imposer re-publishes at {self.s.republish_receive_count})")
            detail += f", redrive to the DLQ after {count} receives"
        if problems:
            return Check(name=f"queue {name}", status=FAIL, detail="; ".join(problems))
        return Check(name=f"queue {name}", status=OK, detail=detail)

    def tables(self) -> Iterator[Check]:
        """Every table with its keys, indexes and TTL, as its store declares it."""
        from imposer.aws import tables
        from imposer.aws.dynamodb import Dynamo
        from imposer.state.provision import table_specs

        dynamo = Dynamo(self.s.region)
        for spec in table_specs(self.s):
            found = yield from self._guard(f"table {spec.name}",
                                           lambda: tables.describe(dynamo, spec.name))
            if found is None:
                continue
            problems = []
            if found["KeySchema"] != spec.key_schema():
                problems.append(f"key {found['KeySchema']} is not {spec.key_schema()}")
            have = {i["IndexName"]: i for i in found.get("GlobalSecondaryIndexes", [])}
            for index in spec.indexes:
                if index.name not in have:
                    problems.append(f"index {index.name} is missing")
                elif have[index.name].get("IndexStatus", "ACTIVE") != "ACTIVE":
                    problems.append(f"index {index.name} is {have[index.name]['IndexStatus']}")
            ttl = found["TimeToLive"]
            if spec.ttl_attribute and (ttl.get("AttributeName") != spec.ttl_attribute or
                                       ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING")):
                problems.append(f"TTL is not on {spec.ttl_attribute}")
            if problems:
                yield Check(name=f"table {spec.name}", status=FAIL,
                            detail="; ".join(problems) + " (run `imposer init` or update the stack)")
            else:
                indexes = ", ".join(i.name for i in spec.indexes) or "no indexes"
                yield Check(name=f"table {spec.name}", status=OK, detail=(
                    f"{indexes}; TTL on {spec.ttl_attribute}" if spec.ttl_attribute else indexes))

    def bucket(self) -> Iterator[Check]:
        """The bucket, and a rule that removes plates of attempts that never committed."""
        from imposer.aws.s3 import Storage

        storage = Storage(self.s.region)
        name = f"bucket {self.s.bucket}"

        def head():
            if not storage.bucket_exists(self.s.bucket):
                raise BackendError(f"bucket {self.s.bucket} does not exist (run `imposer "
                                   "init` or create the stack)")
            return True

        if (yield from self._guard(name, head)) is None:
            return
        try:
            rules = storage.lifecycle_rules(self.s.bucket)
        except BackendError as exc:
            rules, why = [], str(exc)
        else:
            why = "no rule expires attempts/"
        expiring = [r for r in rules if r.get("Status") == "Enabled" and "Expiration" in r and
                    (r.get("Prefix") or r.get("Filter", {}).get("Prefix", "")) == "attempts/"]
        if expiring:
            yield Check(name=name, status=OK, detail=(
                f"attempts/ expire after {expiring[0]['Expiration'].get('Days')} day(s)"))
        else:
            yield Check(name=name, status=WARN, detail=(
                f"{why}: plates of attempts that never committed stay forever "
                "(deploy/imposer.yaml sets the rule)"))

    def permissions(self) -> Iterator[Check]:
        """Probe each kind of call the worker makes, with calls that cannot change state."""
        from imposer.aws.dynamodb import Dynamo, TransactionCancelled, op
        from imposer.aws.s3 import Storage
        from imposer.aws.sqs import JobQueue
        from imposer.models import S3Uri

        s, key, dynamo = self.s, self.probe_key, Dynamo(self.s.region)
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
            dynamo.put(s.tenants_table, {"tenant_id": key}, NEVER, names={"#k": "tenant_id"})
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

        def objects():
            storage = Storage(s.region)
            for prefix in ("tenants", "attempts"):
                storage.epoch_of(S3Uri.parse(f"s3://{s.bucket}/{prefix}/{key}/probe.pdf"))
            return True

        for name, probe in (
                ("lease transaction", settle),
                ("conditional writes", updates),
                ("reads and indexes", reads),
                ("message visibility and delete", messages),
                ("objects under tenants/ and attempts/", objects)):
            if (yield from self._guard(f"permission: {name}", probe)) is not None:
                yield Check(name=f"permission: {name}", status=OK, detail="granted")
        yield Check(name="permission: the rest", status=SKIP, detail=(
            "sqs:ReceiveMessage, sqs:SendMessage, s3:PutObject and s3:DeleteObject are not "
            "probed: no call of them is sure to change nothing"))

    def _guard(self, name: str, call: Callable[[], object]):
        """Return *call*'s result, or yield a failed check naming the error and return None."""
        try:
            return call()
        except ImposerError as exc:
            yield Check(name=name, status=FAIL, detail=str(exc))
            return None


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as a JSON object.")
@click.option("--max-clock-skew", type=float, default=5.0, show_default=True,
              help="Seconds this host's clock may differ from AWS's.")
@click.option("--min-free-mb", type=float, default=None,
              help="Free space the work dir needs [default: 2 x IMPOSER_MAX_INPUT_MB].")
@settings_options(*ALL_NAMES)
def doctor(settings: Settings, as_json: bool, max_clock_skew: float, min_free_mb) -> None:
    """Check this host before the worker starts; exit 3 if anything would stop it.

    Engine, work dir space, AWS credentials, endpoint and clock, each queue,
    table, index and the bucket with the settings imposer relies on, and the
    permissions the worker needs (probed with calls that change nothing).
    systemd runs it as ExecStartPre.
    """
    checks = Doctor(settings, max_skew=max_clock_skew,
                    min_free_mb=2 * settings.max_input_mb if min_free_mb is None
                    else min_free_mb).run()
    failed = [c for c in checks if c.status == FAIL]
    if as_json:
        click.echo(json.dumps({"ok": not failed, "host": settings.host_id,
                               "checks": [attrs.asdict(c) for c in checks]}, indent=2))
    else:
        click.echo(f"imposer doctor on {settings.host_id}")
        width = max(len(c.name) for c in checks)
        for c in checks:
            click.echo(f"  {c.status.upper() if c.status == FAIL else c.status:5} "
                       f"{c.name:{width}}  {c.detail}")
        click.echo(f"{len(failed)} check(s) failed" if failed else "all checks passed")
    sys.exit(int(Exit.CONFIG) if failed else int(Exit.OK))
