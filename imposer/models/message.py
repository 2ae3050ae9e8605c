"""A received SQS message, as the parent's threads pass it between them."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class Received:
    """One received message with the system attributes the worker needs."""

    message_id: str
    receipt: str
    body: str
    #: MessageGroupId (the tenant id, layer 1), if the publisher set it.
    group_id: str | None
    #: SentTimestamp, wall-clock epoch seconds.
    sent_at: float
    receive_count: int
    attributes: dict[str, str] = attrs.field(factory=dict)
    #: SenderId: the principal SQS says sent it (``models.senders``); None if not asked.
    sender_id: str | None = None
    #: Wall-clock time it shows up again by itself, as far as this worker knows
    #: (0: unknown, so any hold is due).
    visible_until: float = 0.0
