"""Refill free slots from parked jobs, on any host: after a release, when owed, lent, redriven.

The cheapest refill is not here: a settling job's release itself starts the
tenant's oldest parked job when its slot was promised to it
(``Settler.promise_slot``, ``LeaseStore.hand_over``). What this owns is
every other way a parked job takes a free slot. Failing a promise, ``wake``
hands the slot over right after the release; and when no slot may be handed
over now, the hand-off is owed and paid by the next receive that finds the
queue empty (``wake_idle``). Each obeys ``policy.may_hand_off``: another
slot stays free for a tenant waiting in the queue, or a look at the queue
found none waiting there, so quiet tenants still come first.

With borrowing on, idle slots beyond the reserve go to capped tenants'
parked jobs (``lend``): when a borrowed job ends, when a receive finds the
queue empty, and once per read of the waiting view. Under fair share, free
slots go to the parked work of the tenants furthest below their share
(``share_fill``). And parked jobs that no hand-off reached (a failed release,
hand-over or read of the notes) are started by ``redrive`` once per read of
that view, within the cap.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

from imposer.clock import Clock
from imposer.errors import BackendError, InvalidMessage
from imposer.logs import extra, guard
from imposer.metrics import Metrics
from imposer.models import JobRequest
from imposer.state.leases import LeaseStore, Verdict
from imposer.state.waiting import Parked
from imposer.worker import policy
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.dispatch.dispatcher import Dispatcher
from imposer.worker.dispatch.handoff import HandOff
from imposer.worker.dispatch.launch import Launcher
from imposer.worker.dispatch.pool import Pool
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.messages import Messages

logger = logging.getLogger(__name__)


class Refiller:
    """Give a freed slot of a capped tenant to the tenant's oldest parked job."""

    def __init__(self, *, host_id: str, slots: int, dispatch: Dispatcher, launcher: Launcher,
                 leases: LeaseStore, handoff: HandOff, messages: Messages, metrics: Metrics,
                 pool: Pool, borrowing: BorrowPolicy, clock: Clock,
                 shares: SharePolicy | None = None) -> None:
        #: This host, and its slots (the most hand-offs owed to one tenant).
        self.host_id, self.slots = host_id, slots
        self.dispatch, self.launcher, self.leases, self.handoff = (dispatch, launcher, leases,
                                                                   handoff)
        self.borrowing, self.messages, self.metrics, self.pool = borrowing, messages, metrics, pool
        self.clock = clock
        #: Fair share (IMPOSER_SHARE_HALF_LIFE): a freed slot goes to the tenant furthest
        #: below its weighted share, not always to the settled job's tenant.
        self.shares = shares if shares is not None and shares.enabled else None
        #: The waiting view's generation ``redrive`` last acted on.
        self._redriven = 0
        #: tenant -> hand-offs owed to it: its jobs settled here while no slot could be given
        self._owed: dict[str, int] = {}

    def wake(self, tenant: str, free: list[int], stopping: Callable[[], bool],
             borrowed: bool = False) -> None:
        """A job of *tenant* was settled here: give its slot to the tenant's oldest parked job.

        One parked job per settled one, and only while another slot stays
        free, so a tenant waiting in the queue still finds one on the next
        receive (quiet tenants first). When no slot may be handed over now,
        the hand-off is owed: the next receive, which does not wait for
        messages while one is owed (``owes``), pays it if it finds the queue
        empty (``wake_idle``), so a capped tenant whose job ended in its
        host's only free slot loses no more than one receive's round trip.

        A *borrowed* job's slot is lent again instead (``lend``, the borrow
        rule), first to the same tenant: its own slots are all still held
        (after a borrowed start with the release, the host's other idle slots).
        """
        if stopping():
            return
        if borrowed:
            self.lend(free, stopping, prefer=(tenant,))
            return
        self.dispatch.known_free(tenant)
        if self.shares is not None:  # the slot is for whoever is furthest below its share
            tenant = self.shares.choice(self.handoff.parked_tenants())
            if tenant is None:
                return  # nobody waits parked: the slot is the queue's
        if policy.may_hand_off(len(free)):
            if not self._hand_off(tenant, free) and self.shares is not None:
                self.shares.nothing_to_start(tenant)
        else:
            self._owed[tenant] = min(self.slots, self._owed.get(tenant, 0) + 1)

    @property
    def owes(self) -> bool:
        """True while a hand-off is owed: the next receive should not wait for messages."""
        return bool(self._owed)

    def wake_idle(self, free: list[int], stopping: Callable[[], bool]) -> None:
        """The queue had nothing for the free slots: pay the hand-offs owed, oldest first.

        Nothing waits in the queue, so no tenant below its cap is passed over
        when a capped tenant's parked job takes even the last free slot.
        """
        for tenant in list(self._owed):
            while self._owed.get(tenant) and not stopping():
                if not policy.may_hand_off(len(free), queue_empty=True):
                    if free:  # the rule says no even now: nothing to wait for
                        self._owed.pop(tenant, None)
                    break
                self._owed[tenant] -= 1
                if not self._hand_off(tenant, free):
                    self._owed.pop(tenant, None)
            if not self._owed.get(tenant):
                self._owed.pop(tenant, None)

    def share_fill(self, free: list[int], stopping: Callable[[], bool]) -> int:
        """Fair share: free slots to the parked work of the tenants furthest below their
        share, one hand-off each (``SharePolicy.choice``); a tenant with no parked note to
        start is passed over. Returns how many jobs started."""
        if self.shares is None:
            return 0
        tried: set[str] = set()
        started = 0
        while free and not stopping():
            chosen = self.shares.choice(self.handoff.parked_tenants(), exclude=tried)
            if chosen is None:
                break
            if self._hand_off(chosen, free):
                started += 1
            else:
                tried.add(chosen)
                self.shares.nothing_to_start(chosen)
        return started

    def lend(self, free: list[int], stopping: Callable[[], bool],
             prefer: tuple[str, ...] = ()) -> int:
        """Borrowing: give idle slots beyond the reserve to capped tenants' parked jobs.

        The candidates are the tenants at their cap with work waiting (the
        waiting view), those this host parked lately, and *prefer* (a tenant
        whose borrowed job just ended here); ``policy.borrow_turns`` says
        which of them each slot goes to, under the borrow rule. Each turn
        claims one parked note inside a borrowed acquire, so two hosts never
        start one note. Returns how many jobs started.
        """
        if not self.borrowing.enabled or stopping():
            return 0
        borrowers = self.borrowers(prefer)
        started = 0
        while free and borrowers and not stopping():
            turns = self.borrowing.turns(len(free), borrowers)
            if not turns:
                break
            if self._hand_off(turns[0], free, borrow=True):
                borrowers[turns[0]] += 1
                started += 1
            else:
                borrowers.pop(turns[0])
        return started

    def borrowers(self, prefer: tuple[str, ...] = ()) -> dict[str, int]:
        """``lend``'s candidates, each with the slots it borrows: *prefer*, the tenants this
        host parked lately, and those the waiting view names at their cap with work waiting."""
        borrowers = dict.fromkeys((*prefer, *self.handoff.parked_tenants()), 0)
        borrowers.update(self.borrowing.view().at_cap)
        return borrowers

    def redrive(self, free: list[int], stopping: Callable[[], bool], queue_empty: bool,
                look: Callable[[str], bool] | None = None) -> None:
        """Once per read of the waiting view: start parked jobs no hand-off reached.

        Parked jobs that a failed release, hand-over or read of the notes left
        waiting are started here, within the cap, under ``policy.may_hand_off``;
        the host's last free slot only if the last receive found the queue
        empty (*queue_empty*) and a *look* now finds nothing another tenant
        could start (one that sent since is not passed over). Then idle slots
        are lent (``lend``). Costs nothing while nobody waits.
        """
        view = self.borrowing.view()
        if view.generation == self._redriven or stopping():
            return
        self._redriven = view.generation
        for tenant in view.below_cap:
            while free and not stopping() and policy.may_hand_off(len(free), queue_empty and (
                    policy.may_hand_off(len(free)) or look is not None and look(tenant))):
                if self.dispatch.known_cap(tenant) is not None or \
                        not self._hand_off(tenant, free):
                    break
                logger.info("started a parked job of %s that no hand-off had reached", tenant,
                            extra=extra("redriven", tenant))
        self.lend(free, stopping)

    def _hand_off(self, tenant: str, free: list[int], borrow: bool = False) -> bool:
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
        except BackendError as exc:  # the next redrive reads them again
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
                request = self.dispatch.vet.parse(note.message)
            except InvalidMessage:
                self.handoff.waiting.drop(note)
                self.handoff.taken(note)
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
        by the host that freed it (or by a redrive), and taking it here
        would spread the tenant's own jobs over the hosts, each of which
        then keeps its reserve beside them (one slot fewer in use on two hosts).
        """
        for note, request in self.still_parked(notes):
            message, received_at = note.message, self.clock.monotonic()
            with guard(request):
                try:
                    acq = self.leases.acquire(request, self.host_id, free[0],
                                              message.sent_at, message.receipt, borrow=borrow,
                                              also=[self.handoff.waiting.claim_op(note)],
                                              limit=limit)
                except BackendError as exc:
                    self.launcher.acquire_failed(request, exc)
                    return False  # the note stays; a redrive or its window brings it back
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
                    self.handoff.waiting.drop(note)
                    self.handoff.taken(note)
                    self.dispatch.finish_duplicate(request, message, acq)
                elif acq.verdict in (Verdict.RUNNING, Verdict.STALE):
                    self.handoff.waiting.drop(note)
                    self.handoff.taken(note)
                elif acq.verdict == Verdict.CLAIMED:
                    self.handoff.taken(note)  # another host took it, or it was parked anew
                    if not fresh:
                        self.handoff.forget(note.tenant_id)
                        return False
        return False
