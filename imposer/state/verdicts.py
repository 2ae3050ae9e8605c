"""What a lease transaction answers: an acquire's verdict, and a hand-over's successor.

Values only, shared by the lease store, the worker and ``imposer why``.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from imposer.models import JobRequest, Lease


class Verdict(str, enum.Enum):
    """The result of an acquire attempt."""

    ACQUIRED = "acquired"
    #: The tenant holds its cap: defer the message.
    AT_CAP = "at_cap"
    #: The job runs under a live lease elsewhere: a duplicate delivery.
    RUNNING = "running"
    #: The job already reached a final state: a duplicate delivery.
    DONE = "done"
    #: An expired lease of a lost worker still sits on the job: reclaim it first.
    STALE = "stale"
    #: The parked note this acquire was to take was taken (or replaced) by someone else.
    CLAIMED = "claimed"


@attrs.frozen(kw_only=True)
class Acquisition:
    verdict: Verdict
    cap: int
    #: Our new lease when ACQUIRED.
    lease: Lease | None = None
    #: The lease in the way when RUNNING or STALE.
    holder: Lease | None = None
    #: The job's final status when DONE.
    status: str | None = None
    #: When DONE after a success: the attempt whose plate was committed.
    output_epoch: str | None = None


@attrs.frozen(kw_only=True)
class Successor:
    """The tenant's next job, to start in the slot a release frees (``LeaseStore.hand_over``)."""

    request: JobRequest
    #: Its lease, built once (``new_lease``) so every try of the hand-over is the same.
    lease: Lease
    sent_at: float | None
    #: The tenant's cap, which the counter must not be above.
    cap: int
    #: The transaction item that claims its parked note.
    claim: dict[str, Any] = attrs.field(eq=False, repr=False)
