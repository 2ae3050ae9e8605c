"""Messages parked at their tenant's cap, by tenant and submission order, for any host.

A message found at its tenant's cap is made invisible for a long while (the
park window) and noted here with its receipt handle. Whichever host frees a
slot of that tenant takes the most urgent note and starts its job in the freed
slot at once; the note is deleted inside the acquire transaction, so two
hosts never start one note. A note whose message came back meanwhile (its
receipt went stale) is simply replaced when the message is parked again,
and notes nobody took expire by TTL: the message itself never leaves SQS.

Items: ``tenant_id`` (hash) and ``order`` (range: the job's urgency, then
zero-padded submission time and job id, so the one Query a hand-off makes
returns the tenant's most urgent first: priority, then earliest due, then
oldest). A job of the default priority without a due time keeps the key
notes had before priorities, so those still read as such.
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs

from imposer.aws.dynamodb import Dynamo, TransactionCancelled, op
from imposer.aws.tables import TableSpec
from imposer.models import JobRequest, Received
from imposer.models.urgency import DEFAULT_PRIORITY

#: A note lives this much longer than its park window (then DynamoDB's TTL drops it).
NOTE_SLACK = 3600


def table_spec(name: str) -> TableSpec:
    return TableSpec(name=name, hash_key="tenant_id", range_key="order",
                     ttl_attribute="expires_at")


def band(priority: int) -> str:
    """The key's first character for *priority*: more urgent ones sort before ``0``, which
    begins every key of the default priority without a due time (the submission time),
    and less urgent ones after ``9``."""
    if priority < DEFAULT_PRIORITY:
        return chr(ord("!") + priority)  # ! " # $ %
    return "/" if priority == DEFAULT_PRIORITY else chr(ord("A") + priority - 6)


def order_of(request: JobRequest, message: Received) -> str:
    return order_key(request.priority, request.due, request.submitted_at or message.sent_at,
                     request.job_id)


def order_key(priority: int, due: float | None, submitted: float, job_id: str) -> str:
    """A note's range key: its urgency (``urgency_key``), then its age."""
    age = f"{submitted:017.5f}#{job_id}"
    if priority == DEFAULT_PRIORITY and due is None:
        return age
    return f"{urgency_key(priority, due)}#{age}"


def urgency_key(priority: int, due: float | None) -> str:
    """The part of a key that says how urgent a job is: every key below it is more urgent.
    (``0`` for the default priority without a due time: its keys begin with a digit.)"""
    if priority == DEFAULT_PRIORITY and due is None:
        return "0"
    return band(priority) + ("~" if due is None else f"{due:017.5f}")  # "~": after every due


@attrs.frozen(kw_only=True)
class Parked:
    """A note of one parked message: enough to start its job without receiving it again."""

    tenant_id: str
    order: str
    job_id: str
    body: str
    receipt: str
    message_id: str
    sent_at: float
    receive_count: int
    group_id: str | None = None
    #: Wall-clock time the message becomes visible again by itself.
    visible_at: float = 0.0
    #: The message's SenderId, vetted again when the note is taken.
    sender_id: str | None = None

    @property
    def urgency(self) -> str:
        """The key's urgency part (band and due); ``0`` for the default, which sorts there."""
        if self.order[:1].isdigit():
            return "0"
        return self.order[:2] if self.order[1:2] == "~" else self.order[:18]

    @property
    def message(self) -> Received:
        return Received(message_id=self.message_id, receipt=self.receipt, body=self.body,
                        group_id=self.group_id, sent_at=self.sent_at,
                        receive_count=self.receive_count, visible_until=self.visible_at,
                        sender_id=self.sender_id)

    @classmethod
    def of(cls, request: JobRequest, message: Received, visible_at: float) -> "Parked":
        return cls(tenant_id=request.tenant_id, order=order_of(request, message),
                   job_id=request.job_id, body=message.body, receipt=message.receipt,
                   message_id=message.message_id, sent_at=message.sent_at,
                   receive_count=message.receive_count, group_id=message.group_id,
                   visible_at=visible_at, sender_id=message.sender_id)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "Parked":
        names = {a.name for a in attrs.fields(cls)}
        return cls(**{k: v for k, v in item.items() if k in names})


class WaitingStore:
    """Park, list and claim notes of parked messages."""

    def __init__(self, dynamo: Dynamo, table: str) -> None:
        self.dynamo = dynamo
        self.table = table

    def park(self, note: Parked, also: Sequence[dict[str, Any]] = ()) -> None:
        """Write *note*, with *also* (the job record's "waiting" note) in one transaction.

        If *also* is refused (the job started or ended meanwhile), the note
        is written alone: a stale note is only dropped by the hand-off.
        """
        item = {k: v for k, v in attrs.asdict(note).items() if v is not None}
        item["expires_at"] = int(note.visible_at + NOTE_SLACK)
        if also:
            try:
                self.dynamo.transact([op("Put", self.table, item), *also],
                                     f"park {note.job_id}")
                return
            except TransactionCancelled:
                pass
        self.dynamo.put(self.table, item)

    def oldest(self, tenant_id: str, limit: int = 3) -> list[Parked]:
        """The tenant's *limit* most urgent notes, most urgent first (the key's order)."""
        items, _ = self.dynamo.query(self.table, "tenant_id = :t", {":t": tenant_id},
                                     limit=limit, consistent=True)
        return [Parked.from_item(i) for i in items]

    def ahead_of(self, tenant_id: str, order: str) -> list[str]:
        """The keys of the tenant's notes before *order*: the parked jobs a slot of the
        tenant goes to first (bounded by the tenant's parked work, never by history)."""
        items = self.dynamo.query_all(self.table, "tenant_id = :t AND #o < :k",
                                      {":t": tenant_id, ":k": order},
                                      names={"#o": "order"}, ProjectionExpression="#o")
        return [i["order"] for i in items]

    def between(self, tenant_id: str, first: str, last: str) -> list[Parked]:
        """Every note of the tenant from *first* to *last* in order (both included)."""
        items = self.dynamo.query_all(self.table, "tenant_id = :t AND #o BETWEEN :a AND :b",
                                      {":t": tenant_id, ":a": first, ":b": last},
                                      names={"#o": "order"}, consistent=True)
        return [Parked.from_item(i) for i in items]

    def claim_op(self, note: Parked) -> dict[str, Any]:
        """The transaction item that takes *note*: it must still be there, with this receipt."""
        return op("Delete", self.table, {"tenant_id": note.tenant_id, "order": note.order},
                  condition="receipt = :r", values={":r": note.receipt})

    def claim(self, note: Parked, why: str) -> None:
        """Take *note* on its own (``claim_op``); raises BackendError if another took it."""
        self.dynamo.transact([self.claim_op(note)], why)

    def drop(self, note: Parked) -> None:
        self.dynamo.delete(self.table, {"tenant_id": note.tenant_id, "order": note.order})
