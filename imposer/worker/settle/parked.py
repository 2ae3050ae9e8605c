"""Start a tenant's oldest parked job in a free slot: the ``START`` step of the decision.

A parked job is started by claiming its note inside the acquire transaction
(``LeaseStore.acquire(..., also=[claim])``), so two hosts never start one note;
its message is not received again. Notes one Query read are tried first
(``HandOff.notes``); a note whose message is visible again, invalid, or whose job
runs or ended is passed over, and one another host took makes the rest of that
read stale.
"""

from __future__ import annotations

import logging
from typing import Iterator

from imposer.clock import Clock
from imposer.errors import BackendError, InvalidMessage
from imposer.logs import extra, guard
from imposer.metrics import Metrics
from imposer.models import JobRequest
from imposer.state.leases import LeaseStore, Verdict
from imposer.state.waiting import Parked
from imposer.worker.dispatch.dispatcher import Dispatcher
from imposer.worker.dispatch.handoff import HandOff
from imposer.worker.dispatch.launch import Launcher
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.messages import Messages

logger = logging.getLogger(__name__)


class ParkedStarts:
    """Start parked jobs in free slots, one note claimed per start."""

    def __init__(self, *, host_id: str, dispatch: Dispatcher, launcher: Launcher,
                 leases: LeaseStore, handoff: HandOff, messages: Messages, metrics: Metrics,
                 clock: Clock, shares: SharePolicy | None = None) -> None:
        self.host_id, self.dispatch, self.launcher, self.leases = (host_id, dispatch, launcher,
                                                                   leases)
        self.handoff, self.messages, self.metrics, self.clock = handoff, messages, metrics, clock
        #: Fair share: a start's acquire is bounded by the slots its decision counted.
        self.shares = shares if shares is not None and shares.enabled else None

    def start(self, tenant: str, free: list[int], borrow: bool = False) -> bool:
        """Start the tenant's oldest parked job in ``free[0]``; False if none was started.

        Notes read by an earlier Query are tried first; if every one of them
        was gone, the waiting table is read again. With *borrow*, the job
        takes a borrowed slot, if the tenant is still at its cap. Under fair share a
        tenant that must leave the slot to another (``SharePolicy.yields_to``) takes none.
        """
        limit = None  # fair share: the acquire's bound, from the same read as the decision
        if not borrow and self.shares is not None:
            first, limit = self.shares.decide(tenant, self.handoff.parked_tenants())
            if first is not None:
                return False
        try:
            notes, fresh = self.handoff.notes(tenant)
            if notes and self._take_one(notes, free, fresh, borrow, limit):
                return True
            if fresh or self.handoff.has_notes_read(tenant):
                return False  # none parked, or one is kept for later (at cap again, AWS failed)
            notes, _ = self.handoff.notes(tenant, fresh=True)
        except BackendError as exc:  # the next restart of parked jobs reads them again
            logger.warning("could not read the parked jobs of %s: %s", tenant, exc,
                           extra=extra("aws_error", tenant))
            return False
        return bool(notes) and self._take_one(notes, free, True, borrow, limit)

    def still_parked(self, notes: list[Parked]) -> Iterator[tuple[Parked, JobRequest]]:
        """Each note still parked, with its job's request, as the caller goes through them.

        A note whose message is visible again is left to the queue (it will be
        received and parked anew); one whose message is invalid is dropped.
        """
        for note in notes:
            if note.visible_at <= self.clock.time():
                self.handoff.taken(note)  # its message is back in the queue by itself
                continue
            try:
                request = self.dispatch.parse(note.message)
            except InvalidMessage:
                self.handoff.drop(note)
                continue
            yield note, request

    def _take_one(self, notes: list[Parked], free: list[int], fresh: bool,
                  borrow: bool = False, limit: int | None = None) -> bool:
        """Start the first of *notes* that is still parked; False if none was started.

        A note whose message is invalid, or whose job already runs or ended,
        is dropped; one whose message is visible again (it will be received
        and parked anew) is skipped. One another host took meanwhile is
        skipped too, but if *notes* came from an earlier Query (not *fresh*)
        the rest of that read is forgotten: another host is going through the
        same notes, so the next hand-off reads the live ones instead of paying
        a refused transaction for each. A borrowing acquire is refused while
        the tenant is below its cap: its own slot is then being handed over
        by the host that freed it (or by a restart of parked jobs), and taking it here
        would spread the tenant's own jobs over the hosts, each of which
        then keeps its reserve beside them (one slot fewer in use on two hosts).
        """
        for note, request in self.still_parked(notes):
            message, received_at = note.message, self.clock.monotonic()
            with guard(request):
                try:
                    acq = self.leases.acquire(request, self.host_id, free[0],
                                              message.sent_at, message.receipt, borrow=borrow,
                                              also=[self.handoff.claim_op(note)],
                                              limit=limit)
                except BackendError as exc:
                    self.launcher.acquire_failed(request, exc)
                    return False  # the note stays; a restart or its window brings it back
                if acq.verdict == Verdict.ACQUIRED:
                    self.handoff.taken(note)
                    if self.messages.due(message):
                        held = self.messages.hold(message)
                        if held is None:
                            self.launcher.unwind(acq.lease, "its parked message is gone")
                            return False
                        message = held
                    if not self.launcher.launch(request, message, free, acq.lease,
                                                received_at=received_at):
                        return False
                    self.metrics.emit("borrowed" if acq.lease.borrowed else "handed_off", 1,
                                      tenant_id=request.tenant_id)
                    return True
                if acq.verdict == Verdict.AT_CAP:
                    if not borrow:
                        self.dispatch.known_capped(request.tenant_id, acq.cap)
                    return False
                if acq.verdict == Verdict.DONE:
                    self.handoff.drop(note)
                    self.dispatch.finish_duplicate(request, message, acq)
                elif acq.verdict in (Verdict.RUNNING, Verdict.STALE):
                    self.handoff.drop(note)
                elif acq.verdict == Verdict.CLAIMED:
                    self.handoff.taken(note)  # another host took it, or it was parked anew
                    if not fresh:
                        self.handoff.forget(note.tenant_id)
                        return False
        return False
