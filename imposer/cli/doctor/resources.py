"""Doctor's AWS checks: who we are and our clock, then each queue, table and the bucket.

Everything here is a read; the settings each resource must have are the
ones imposer relies on to keep a deferred job alive and single.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Iterator

from imposer.cli.doctor.check import FAIL, OK, WARN, Check, guard
from imposer.errors import BackendError, ConfigError, EndpointUnreachable, MissingResource
from imposer.settings import Settings


def clock_skew(date_header: str, sent: float, received: float) -> float:
    """Seconds this host's clock is ahead of AWS's, from a response's ``Date`` header.

    The header has whole seconds (truncated), so its middle is half a second
    later; the request's own time is the middle of its round trip.
    """
    aws = email.utils.parsedate_to_datetime(date_header).timestamp() + 0.5
    return (sent + received) / 2 - aws


def identity(s: Settings, max_skew: float) -> Iterator[Check]:
    """Who we are to AWS, and whether our clock agrees with AWS's (leases expire by it)."""
    from imposer.aws import session

    try:
        session.check_endpoint()
    except ConfigError as exc:
        yield Check(name="endpoint", status=FAIL, detail=str(exc))
        return
    try:
        reply, sent, received = session.caller_identity(s.region)
    except EndpointUnreachable as exc:
        yield Check(name="endpoint", status=FAIL, detail=str(exc))
        return
    except (ConfigError, BackendError) as exc:  # none, or refused
        yield Check(name="credentials", status=FAIL, detail=str(exc))
        return
    yield Check(name="endpoint", status=OK, detail=session.endpoint())
    yield Check(name="credentials", status=OK, detail=f"{reply['Arn']} in region {s.region}")
    date = reply["ResponseMetadata"].get("HTTPHeaders", {}).get("date")
    if not date:
        yield Check(name="clock", status=WARN, detail="AWS sent no Date header to compare")
        return
    skew = clock_skew(date, sent, received)
    status = OK if abs(skew) <= max_skew else FAIL
    yield Check(name="clock", status=status, detail=(
        f"{abs(skew):.1f} s {'ahead of' if skew > 0 else 'behind'} AWS (limit "
        f"{max_skew:g} s; leases expire by wall clock across hosts)"))


def queues(s: Settings) -> Iterator[Check]:
    """Retention, redrive and visibility are what keep a deferred job alive and single."""
    from imposer.aws.sqs import JobQueue

    queue = JobQueue(s.region, s.queue_name, s.dlq_name)
    dlq = yield from guard(f"queue {s.dlq_name}", lambda: queue.attributes(s.dlq_name))
    if dlq is not None:
        yield _queue_check(s, s.dlq_name, dlq, None)
    jobs = yield from guard(f"queue {s.queue_name}", lambda: queue.attributes(s.queue_name))
    if jobs is not None:
        yield _queue_check(s, s.queue_name, jobs, dlq.get("QueueArn", "") if dlq else "")


def _queue_check(s: Settings, name: str, attrs_: dict, dlq_arn: str | None) -> Check:
    """Judge the job queue (*dlq_arn* given: its redrive target) or the DLQ (None)."""
    problems = []
    retention = int(attrs_.get("MessageRetentionPeriod", 0))
    want = int(min(s.retention_seconds, 1209600))
    if retention < want:
        problems.append(f"retention {retention} s is below IMPOSER_RETENTION_SECONDS ({want} s)"
                        ": messages would expire before imposer re-publishes them")
    detail = f"retention {retention} s"
    if dlq_arn is not None:
        visibility = int(attrs_.get("VisibilityTimeout", 0))
        if visibility < s.lease_ttl_seconds:
            problems.append(f"visibility {visibility} s is below the lease TTL "
                            f"({s.lease_ttl_seconds:g} s)")
        detail += f", visibility {visibility} s"
        redrive = json.loads(attrs_.get("RedrivePolicy") or "{}")
        count = int(redrive.get("maxReceiveCount", 0))
        if redrive.get("deadLetterTargetArn") != dlq_arn:
            problems.append(f"no redrive to {s.dlq_name}")
        elif count <= s.republish_receive_count:
            problems.append(f"redrive after {count} receives would dead-letter deferred jobs "
                            f"(imposer re-publishes at {s.republish_receive_count})")
        detail += f", redrive to the DLQ after {count} receives"
    if problems:
        return Check(name=f"queue {name}", status=FAIL, detail="; ".join(problems))
    return Check(name=f"queue {name}", status=OK, detail=detail)


def tables(s: Settings) -> Iterator[Check]:
    """Every table with its keys, indexes and TTL, as its store declares it."""
    from imposer.aws.dynamodb import Dynamo
    from imposer.aws.tables import describe
    from imposer.state.provision import table_specs

    dynamo = Dynamo(s.region)
    for spec in table_specs(s):
        found = yield from guard(f"table {spec.name}",
                                 lambda name=spec.name: describe(dynamo, name))
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


def bucket(s: Settings) -> Iterator[Check]:
    """The bucket, and a rule that removes plates of attempts that never committed."""
    from imposer.aws.s3 import Storage

    storage = Storage(s.region)
    name = f"bucket {s.bucket}"

    def lifecycle():
        # Read, not HeadBucket: a worker holds no s3:ListBucket, which HeadBucket needs.
        try:
            return storage.lifecycle_rules(s.bucket), "no rule expires attempts/"
        except MissingResource:
            raise BackendError(f"bucket {s.bucket} does not exist (run `imposer init` or "
                               "create the stack)") from None
        except BackendError as exc:
            if "NoSuchLifecycleConfiguration" not in str(exc):
                raise
            return [], str(exc)

    found = yield from guard(name, lifecycle)
    if found is None:
        return
    rules, why = found
    expiring = [r for r in rules if r.get("Status") == "Enabled" and "Expiration" in r and
                (r.get("Prefix") or r.get("Filter", {}).get("Prefix", "")) == "attempts/"]
    if expiring:
        yield Check(name=name, status=OK, detail=(
            f"attempts/ expire after {expiring[0]['Expiration'].get('Days')} day(s)"))
    else:
        yield Check(name=name, status=WARN, detail=(
            f"{why}: plates of attempts that never committed stay forever "
            "(deploy/imposer.yaml sets the rule)"))
