"""The jobs table: imposer's own record of every job it has seen.

Records are written by the parent only: on first receipt, on every deferral
(so the age of the oldest waiting job never depends on SQS's own metrics),
and by the lease transactions on acquire and release.

Nothing routine reads the whole table. The key is ``<tenant>/<job id>``; three
indexes answer the questions people ask:

* ``by-tenant`` (tenant, submitted_at): a tenant's jobs, newest first, paged;
* ``open`` (open_shard, submitted_at), *sparse*: only jobs that are queued,
  running or retrying carry ``open_shard``; the write that makes a job final
  removes it, so the index holds live work, never history;
* ``by-job`` (job): which tenant has a job of this id (keys only).

A final record carries ``expires_at`` (finished + retention days), DynamoDB's
TTL attribute, so history stays bounded.
"""

from __future__ import annotations

import hashlib
import heapq
from typing import Any, Iterable, Iterator

from imposer.aws.dynamodb import Dynamo, TransactionCancelled, op
from imposer.aws.expressions import Update
from imposer.aws.tables import Index, TableSpec
from imposer.clock import Clock, SystemClock
from imposer.models import FINAL_STATUSES, JobRecord, JobRequest, JobStatus, job_key
from imposer.models.urgency import record_fields

#: Partitions of the sparse open-jobs index; queries read each and merge.
OPEN_SHARDS = 4
#: Attributes the open-jobs index carries: enough for the borrow view, why and stats.
OPEN_FIELDS = ("job", "tenant_id", "status", "received_at", "started_at", "host", "slot", "defers",
               "wait_reason", "last_seen_at", "attempts", "failures", "queue_wait",
               "run_seconds", "last_defer_at")
OPEN_STATUSES = (JobStatus.QUEUED.value, JobStatus.RUNNING.value, JobStatus.RETRYING.value)


def table_spec(name: str) -> TableSpec:
    return TableSpec(
        name=name, hash_key="job_id", ttl_attribute="expires_at",
        indexes=(
            Index(name="by-tenant", hash_key="tenant_id", range_key="submitted_at",
                  range_type="N"),
            Index(name="open", hash_key="open_shard", range_key="submitted_at",
                  range_type="N", projection=OPEN_FIELDS),
            Index(name="by-job", hash_key="job", projection="KEYS_ONLY"),
        ))


def open_shard(tenant_id: str, job_id: str) -> str:
    """Return the open-index partition of a job: stable, spread evenly."""
    digest = hashlib.blake2s(job_key(tenant_id, job_id).encode(), digest_size=2).digest()
    return f"open#{int.from_bytes(digest, 'big') % OPEN_SHARDS}"


#: A dead job's record says its dead letter is owed from its release on, until a host
#: claims it for sending (``dead_letter`` then holds that claim, ``claim:<time>:<token>``),
#: and ``sent`` once SQS took it. A claim older than its hold is a host that died or lost
#: its reply mid-send: the job's returning message claims it again, so no dead job is left
#: without its DLQ message (a lost reply may make it two, with one dead-letter id).
#: Records of older versions hold ``sending:<token>``: sent, as they meant.
DEAD_LETTER_OWED = "owed"
DEAD_LETTER_SENT = "sent"
CLAIM_PREFIX = "claim:"


def dead_letter_claim(now: float, token: str) -> str:
    """A claim whose text sorts by its time (fixed width), so a condition can age it."""
    return f"{CLAIM_PREFIX}{now:017.3f}:{token}"


def claim_is_fresh(state: str | None, now: float, hold: float) -> bool:
    """Say whether *state* is a claim made within *hold* (its host may still be sending)."""
    return bool(state and state.startswith(CLAIM_PREFIX)
                and state >= dead_letter_claim(now - hold, ""))


def dead_letter_due(state: str | None) -> bool:
    """Say whether a dead job's record may still owe its DLQ message (owed, or claimed)."""
    return state == DEAD_LETTER_OWED or bool(state and state.startswith(CLAIM_PREFIX))


def free_to_start(update: Update) -> str:
    """Condition that a job is neither running nor final (or has no record yet).

    The one spelling of "may start or wait": acquire, the waiting note and an
    invalid message's record all use it, so a final record is never reopened
    and a running one never relabelled.
    """
    busy = ", ".join(update.value(s, "busy") for s in ("running", *FINAL_STATUSES))
    return f"attribute_not_exists(job_id) OR NOT ({update.name('status')} IN ({busy}))"


def mark_open(update: Update, tenant_id: str, job_id: str) -> Update:
    """Put the job in the open-jobs index (queued, running, retrying)."""
    return update.set(open_shard=open_shard(tenant_id, job_id), job=job_id,
                      tenant_id=tenant_id).remove("expires_at")


def mark_final(update: Update, finished_at: float, retention_days: float) -> Update:
    """Take the job out of the open index and give it its expiry, in the same write."""
    return update.set(expires_at=int(finished_at + retention_days * 86400)).remove("open_shard")


class JobStore:
    """Read and annotate job records."""

    def __init__(self, dynamo: Dynamo, table: str, clock: Clock | None = None,
                 retention_days: float = 35.0) -> None:
        self.dynamo = dynamo
        self.table = table
        self.clock = clock or SystemClock()
        self.retention_days = retention_days

    @staticmethod
    def key(tenant_id: str, job_id: str) -> dict[str, str]:
        return {"job_id": job_key(tenant_id, job_id)}

    def get(self, tenant_id: str, job_id: str) -> JobRecord | None:
        item = self.dynamo.get(self.table, self.key(tenant_id, job_id))
        return JobRecord.from_item(item) if item else None

    def find(self, job_id: str) -> list[JobRecord]:
        """Return every tenant's record of a job with this id (usually one)."""
        keys = [{"job_id": i["job_id"]} for i in self.dynamo.query_all(
            self.table, "#j = :j", {":j": job_id}, {"#j": "job"}, index="by-job")]
        return [JobRecord.from_item(i) for i in self.dynamo.batch_get(self.table, keys)]

    # -- writes outside the lease transactions -----------------------------------
    def note_waiting(self, request: JobRequest, sent_at: float, reason: str,
                     deferred: bool = False, **fields: Any) -> bool:
        """Record that *request* waits and why; no-op if it runs or has finished."""
        up = self._waiting(request, sent_at, reason, deferred, **fields)
        return self.dynamo.update(self.table, self.key(request.tenant_id, request.job_id),
                                  up.expression, up.values, up.names, free_to_start(up))

    def waiting_op(self, request: JobRequest, sent_at: float, reason: str,
                   deferred: bool = False) -> dict[str, Any]:
        """``note_waiting`` as a transaction item, to commit with the parking note."""
        up = self._waiting(request, sent_at, reason, deferred)
        return op("Update", self.table, self.key(request.tenant_id, request.job_id),
                  update=up.expression, condition=free_to_start(up), values=up.values,
                  names=up.names)

    def _waiting(self, request: JobRequest, sent_at: float, reason: str, deferred: bool,
                 **fields: Any) -> Update:
        now = self.clock.time()
        up = mark_open(Update(), request.tenant_id, request.job_id)
        up.set(token=request.token, wait_reason=reason, output=request.output,
               webhook=request.webhook, last_seen_at=now, **fields,
               **record_fields(request.priority, request.due))
        up.set_if_absent(status=JobStatus.QUEUED.value,
                         submitted_at=request.submitted_at or sent_at, received_at=now)
        if deferred:
            up.add(defers=1).set(last_defer_at=now)
        return up

    def started_under(self, request: JobRequest, epoch: str) -> bool:
        """Say whether the job's record shows a start under *epoch* (a hand-over's own)."""
        return getattr(self.get(request.tenant_id, request.job_id), "epoch", None) == epoch

    def claim_dead_letter(self, tenant_id: str, job_id: str, claim: str,
                          stale: str | None = None) -> bool:
        """Take a dead job's owed dead letter for sending under *claim*; False if it is not
        owed (sent already, or claimed by another host since after *stale*, a claim of
        the same form). A try of the claim whose reply was lost finds the claim its own,
        so botocore's retry never turns it into a refusal."""
        up = Update().set(dead_letter=claim)
        name = up.name("dead_letter")
        owed = f"{name} IN ({up.value(DEAD_LETTER_OWED, 'o')}, {up.value(claim, 'c')})"
        if stale is not None:
            owed += (f" OR (begins_with({name}, {up.value(CLAIM_PREFIX, 'p')}) "
                     f"AND {name} < {up.value(stale, 's')})")
        return self.dynamo.update(self.table, self.key(tenant_id, job_id), up.expression,
                                  up.values, up.names, owed)

    def sent_dead_letter(self, tenant_id: str, job_id: str, claim: str) -> bool:
        """Record that the dead letter sent under *claim* reached SQS."""
        up = Update().set(dead_letter=DEAD_LETTER_SENT)
        mine = f"{up.name('dead_letter')} = {up.value(claim, 'c')}"
        return self.dynamo.update(self.table, self.key(tenant_id, job_id), up.expression,
                                  up.values, up.names, mine)

    def owe_dead_letter(self, tenant_id: str, job_id: str, claim: str) -> bool:
        """Give a claimed dead letter back (SQS refused the send): the job's returning
        message sends it."""
        up = Update().set(dead_letter=DEAD_LETTER_OWED)
        mine = f"{up.name('dead_letter')} = {up.value(claim, 'c')}"
        return self.dynamo.update(self.table, self.key(tenant_id, job_id), up.expression,
                                  up.values, up.names, mine)

    def finish_unleased(self, tenant_id: str, job_id: str, status: JobStatus, error: str,
                        error_kind: str, submitted_at: float | None = None,
                        also: Iterable[dict[str, Any]] = (), **fields: Any) -> bool:
        """Put a final state on a job that never got a lease (an invalid request).

        *also* (transaction items: its webhook event) is written in the same
        transaction, so the record and the event exist together or not at all.
        False if the job runs or is final already.
        """
        now = self.clock.time()
        up = Update().set(tenant_id=tenant_id, job=job_id, status=status.value, error=error,
                          error_kind=error_kind, finished_at=now, **fields)
        up.set_if_absent(received_at=now, submitted_at=submitted_at or now)
        mark_final(up.remove("wait_reason"), now, self.retention_days)
        key, condition = self.key(tenant_id, job_id), free_to_start(up)
        also = list(also)
        if not also:
            return self.dynamo.update(self.table, key, up.expression, up.values, up.names,
                                      condition)
        try:
            self.dynamo.transact([op("Update", self.table, key, condition, up.expression,
                                     up.values, up.names), *also], f"fail job {job_id}")
        except TransactionCancelled as exc:
            if exc.reasons and exc.reasons[0].code == "ConditionalCheckFailed":
                return False
            raise
        return True

    def annotate(self, tenant_id: str, job_id: str, **fields: Any) -> None:
        """Set informational fields (e.g. webhook delivery) on an existing record."""
        up = Update().set(**fields)
        self.dynamo.update(self.table, self.key(tenant_id, job_id), up.expression, up.values,
                           up.names, "attribute_exists(job_id)")

    # -- reads over indexes ---------------------------------------------------------
    def for_tenant(self, tenant_id: str, *, since: float | None = None,
                   until: float | None = None, statuses: Iterable[str] | None = None,
                   limit: int = 100, cursor: dict | None = None,
                   newest_first: bool = True) -> tuple[list[JobRecord], dict | None]:
        """Return a page of a tenant's jobs by submission time, and the cursor to go on."""
        up = Update()
        cond = f"{up.name('tenant_id')} = {up.value(tenant_id)}"
        low = since if since is not None else 0
        high = until if until is not None else 1e12
        cond += f" AND {up.name('submitted_at')} BETWEEN {up.value(low)} AND {up.value(high)}"
        filt = None
        if statuses:
            filt = f"{up.name('status')} IN ({', '.join(up.value(s) for s in statuses)})"
        records: list[JobRecord] = []
        while len(records) < limit:
            items, cursor = self.dynamo.query(
                self.table, cond, up.values, up.names, index="by-tenant", filter=filt,
                limit=limit - len(records), newest_first=newest_first, start=cursor)
            records += [JobRecord.from_item(i) for i in items]
            if cursor is None:
                break
        return records, cursor

    def open_jobs(self, statuses: Iterable[str] | None = None) -> list[JobRecord]:
        """Return every queued, running or retrying job, oldest submission first.

        Reads the sparse open index only: its size is live work, not history.
        """
        wanted = set(statuses or OPEN_STATUSES)
        shards = [self._open_shard(f"open#{n}") for n in range(OPEN_SHARDS)]
        return [r for r in heapq.merge(*shards, key=lambda r: (r.submitted_at or 0, r.job_id))
                if r.status.value in wanted]

    def _open_shard(self, shard: str) -> Iterator[JobRecord]:
        for item in self.dynamo.query_all(self.table, "open_shard = :s", {":s": shard},
                                          index="open"):
            yield JobRecord.from_item(item)

    def export(self) -> Iterator[JobRecord]:
        """Yield every record: a full Scan, for an explicit export only."""
        for item in self.dynamo.scan(self.table):
            yield JobRecord.from_item(item)
