"""What a lease transaction answers: an acquire's verdict, and a hand-over's successor.

Values, and how a cancelled acquire's reasons become one (``why_refused``),
shared by the lease store, the worker and ``imposer why``.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from imposer.aws.dynamodb import TransactionCancelled
from imposer.errors import BackendError
from imposer.models import FINAL_STATUSES, JobRequest, Lease


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
    #: When DONE after a death: the record's ``dead_letter`` ("owed" until one was sent).
    dead_letter: str | None = None


@attrs.frozen(kw_only=True)
class Successor:
    """A parked job, to start in the slot a release frees (``LeaseStore.hand_over``): the
    tenant's next job, or, in a borrowed lease, a capped tenant's (borrowing)."""

    request: JobRequest
    #: Its lease, built once (``new_lease``) so every try of the hand-over is the same;
    #: a borrowed one when the slot is lent.
    lease: Lease
    sent_at: float | None
    #: Its tenant's cap, which the counter must not be above (or, borrowing, must be at).
    cap: int
    #: The transaction item that claims its parked note.
    claim: dict[str, Any] = attrs.field(eq=False, repr=False)


def why_refused(exc: TransactionCancelled, cap: int, now: float) -> Acquisition:
    """The verdict of a cancelled acquire, read from its items' cancellation reasons.

    The items are the counter's, the lease's and the job record's, then any
    that must commit with them (the claim of a parked note).
    """
    if len(exc.reasons) < 3:
        raise BackendError(f"unexpected cancellation: {exc}")
    counter, lease, job = exc.reasons[:3]
    if any(r.failed for r in exc.reasons[3:]):
        # the parked note it claims is gone: whoever took it owns the job and its
        # message, however far the job got (a host whose read of the notes is stale)
        return Acquisition(verdict=Verdict.CLAIMED, cap=cap)
    if job.failed and job.item and job.item.get("status") in FINAL_STATUSES:
        return Acquisition(verdict=Verdict.DONE, cap=cap, status=job.item["status"],
                           output_epoch=job.item.get("output_epoch"),
                           dead_letter=job.item.get("dead_letter"))
    if lease.failed:
        holder = Lease.from_item(lease.item) if lease.item else None
        stale = holder is not None and holder.expires_at < now
        return Acquisition(verdict=Verdict.STALE if stale else Verdict.RUNNING,
                           cap=cap, holder=holder)
    if job.failed:
        # Running without a lease item: a reclaim is racing us; treat as running.
        return Acquisition(verdict=Verdict.RUNNING, cap=cap)
    if counter.failed:  # (when borrowing: no longer at cap, take an own slot instead)
        return Acquisition(verdict=Verdict.AT_CAP, cap=cap)
    raise BackendError(f"acquire cancelled for no known reason: {exc}")
