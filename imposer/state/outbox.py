"""The webhook outbox: completion events that must reach tenants, kept in DynamoDB.

An event is written in the same transaction that settles its job, so it
survives a crash of the host that finished the job, and any host may send
it. Pending (and given-up) events carry ``due_shard``; the sparse ``due``
index (due_shard, due_at) answers "what is due now" without reading history.
A sender claims an event by moving its ``due_at`` forward under a condition
on the old value, so two hosts never send the same attempt. Delivered events
leave the index and expire by TTL.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterator

import attrs

from imposer.aws.dynamodb import Dynamo, op
from imposer.aws.tables import Index, TableSpec
from imposer.clock import Clock, SystemClock
from imposer.models import WebhookStatus

SHARDS = 4
#: due_at of an event nobody will send again until an operator redelivers it.
NEVER = 9_999_999_999.0


def table_spec(name: str) -> TableSpec:
    return TableSpec(name=name, hash_key="event_id", ttl_attribute="expires_at", indexes=(
        Index(name="due", hash_key="due_shard", range_key="due_at", range_type="N"),))


def event_id(tenant_id: str, job_id: str, epoch: str) -> str:
    """Return the webhook-id of a job's completion event: the same on every retry."""
    digest = hashlib.sha256(f"{tenant_id}\n{job_id}\n{epoch}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def _shard(event: str) -> str:
    return f"due#{int(event[-4:], 16) % SHARDS}"


@attrs.frozen(kw_only=True)
class Event:
    """One completion event on its way to a tenant."""

    event_id: str
    tenant_id: str
    job_id: str
    url: str
    #: The exact JSON body; every attempt sends these bytes, so the signature is stable.
    body: str
    status: str = WebhookStatus.PENDING
    attempts: int = 0
    due_at: float = 0.0
    created_at: float = 0.0
    last_error: str | None = None
    delivered_at: float | None = None
    #: For a succeeded job: the committed attempt's plate, its epoch and the output key;
    #: a sender promotes it before telling the tenant (see imposer.webhooks.outbox).
    attempt: str | None = None
    epoch: str | None = None
    output: str | None = None

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.body)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "Event":
        names = {a.name for a in attrs.fields(cls)}
        return cls(**{k: v for k, v in item.items() if k in names})


class OutboxStore:
    """Write, claim and close completion events."""

    def __init__(self, dynamo: Dynamo, table: str, clock: Clock | None = None,
                 retention_days: float = 35.0) -> None:
        self.dynamo = dynamo
        self.table = table
        self.clock = clock or SystemClock()
        self.retention_days = retention_days

    def put_op(self, event: Event) -> dict[str, Any]:
        """Return the transaction item that writes *event*, for the release transaction."""
        item = attrs.asdict(event)
        item.update(due_shard=_shard(event.event_id), status=WebhookStatus.PENDING)
        return op("Put", self.table, {k: v for k, v in item.items() if v is not None})

    def get(self, event: str) -> Event | None:
        item = self.dynamo.get(self.table, {"event_id": event})
        return Event.from_item(item) if item else None

    def due(self, limit: int = 25) -> list[Event]:
        """Return pending events whose time has come, oldest first, at most *limit*."""
        now, found = self.clock.time(), []
        for n in range(SHARDS):
            items, _ = self.dynamo.query(
                self.table, "due_shard = :s AND due_at <= :now",
                {":s": f"due#{n}", ":now": now, ":p": WebhookStatus.PENDING}, {"#st": "status"},
                index="due", filter="#st = :p", limit=limit)
            found += [Event.from_item(i) for i in items]
        return sorted(found, key=lambda e: e.due_at)[:limit]

    def claim(self, event: Event, hold: float) -> Event | None:
        """Take the next attempt of *event* for *hold* seconds; None if another host has it."""
        until = self.clock.time() + hold
        ok = self.dynamo.update(
            self.table, {"event_id": event.event_id},
            "SET due_at = :until, attempts = attempts + :one",
            {":until": until, ":old": event.due_at, ":one": 1, ":p": WebhookStatus.PENDING},
            {"#st": "status"}, condition="due_at = :old AND #st = :p")
        return attrs.evolve(event, due_at=until, attempts=event.attempts + 1) if ok else None

    def retry_at(self, event: Event, when: float, detail: str) -> None:
        self.dynamo.update(self.table, {"event_id": event.event_id},
                           "SET due_at = :at, last_error = :d",
                           {":at": when, ":d": detail[:500]})

    def close(self, event: Event, status: str, detail: str) -> None:
        """End an event: delivered leaves the index; failed or refused stays listed."""
        now = self.clock.time()
        values = {":st": status, ":d": detail[:500],
                  ":x": int(now + self.retention_days * 86400)}
        if status == WebhookStatus.DELIVERED:
            expression = ("SET #st = :st, last_error = :d, delivered_at = :now, "
                          "expires_at = :x REMOVE due_shard")
            values[":now"] = now
        else:
            expression = "SET #st = :st, last_error = :d, due_at = :never, expires_at = :x"
            values[":never"] = NEVER
        self.dynamo.update(self.table, {"event_id": event.event_id}, expression, values,
                           {"#st": "status"})

    def redeliver(self, event: str) -> bool:
        """Make a failed or refused event due now, with a fresh attempt count."""
        now = self.clock.time()
        return self.dynamo.update(
            self.table, {"event_id": event},
            "SET #st = :p, due_at = :now, attempts = :zero, due_shard = :shard REMOVE expires_at",
            {":p": WebhookStatus.PENDING, ":now": now, ":zero": 0, ":shard": _shard(event)},
            {"#st": "status"}, condition="attribute_exists(event_id)")

    def listed(self) -> Iterator[Event]:
        """Yield every pending, failed or refused event (delivered ones are not listed)."""
        for n in range(SHARDS):
            for item in self.dynamo.query_all(self.table, "due_shard = :s",
                                              {":s": f"due#{n}"}, index="due"):
                yield Event.from_item(item)
