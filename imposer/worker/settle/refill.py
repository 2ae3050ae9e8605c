"""Refill a capped tenant's freed slot from its parked jobs, on any host, at once.

Three ways, cheapest first: the settling job's release itself starts the
tenant's oldest parked job (a promise, ``LeaseStore.hand_over``); failing
that, ``wake`` hands the slot over right after the release; and when no slot
may be handed over now, the hand-off is owed and paid by the next receive
that finds the queue empty. Each obeys ``policy.may_hand_off``: another slot
stays free for a tenant waiting in the queue, or a look at the queue found
none waiting there, so quiet tenants still come first.

With borrowing on, idle slots beyond the reserve go to capped tenants'
parked jobs (``lend``): when a borrowed job ends (its release itself starting
the parked job the borrow rule picks, in a borrowed lease: ``promise_slot``),
when a receive finds the queue empty, and once per read of the waiting view.
And parked jobs that no hand-off reached (a failed release, hand-over or read
of the notes) are started by ``redrive`` once per read of that view, within
the cap.
"""

from __future__ import annotations

import enum
import logging
from typing import Callable, Iterator

import attrs

from imposer.clock import Clock
from imposer.errors import BackendError, InvalidMessage
from imposer.logs import extra, guard
from imposer.metrics import Metrics
from imposer.models import JobRequest
from imposer.settings import Settings
from imposer.state.leases import LeaseStore, Successor, Verdict
from imposer.state.waiting import Parked
from imposer.worker import policy
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.dispatch.dispatcher import Dispatcher
from imposer.worker.dispatch.handoff import HandOff, Handover
from imposer.worker.messages import Messages
from imposer.worker.dispatch.pool import Pool
from imposer.worker.running import Running, RunningTable
from imposer.worker.dispatch.shares import SharePolicy

logger = logging.getLogger(__name__)


class Promise(enum.Enum):
    """What ``Refiller.promise_slot`` did with a settling job's slot."""

    #: Promised to the tenant's oldest parked job: its release starts that job.
    MADE = "made"
    #: The tenant has nothing parked: no hand-off to try after the release either.
    NOTHING_PARKED = "nothing parked"
    #: No promise may be made now (the hand-off rule, a borrowed slot, stopping):
    #: the release is a plain one and ``wake`` decides after it.
    NOT_NOW = "not now"


class Refiller:
    """Give a freed slot of a capped tenant to the tenant's oldest parked job."""

    def __init__(self, settings: Settings, *, dispatch: Dispatcher, leases: LeaseStore,
                 handoff: HandOff, messages: Messages, metrics: Metrics, pool: Pool,
                 running: RunningTable, borrowing: BorrowPolicy, clock: Clock,
                 shares: SharePolicy | None = None) -> None:
        self.settings, self.dispatch, self.leases, self.handoff = (settings, dispatch, leases,
                                                                   handoff)
        self.borrowing = borrowing
        #: Fair share (IMPOSER_SHARE_HALF_LIFE): a freed slot goes to the tenant furthest
        #: below its weighted share, not always to the settled job's tenant.
        self.shares = shares if shares is not None and shares.enabled else None
        #: The waiting view's generation ``redrive`` last acted on.
        self._redriven = 0
        self.messages, self.metrics, self.pool, self.running = messages, metrics, pool, running
        self.clock = clock
        self.launcher = dispatch.launcher
        #: tenant -> hand-offs owed to it: its jobs settled here while no slot could be given
        self._owed: dict[str, int] = {}
        #: Look at the queue without waiting (``Intake.look``): True if it holds nothing
        #: another tenant could start. None: never look (a host's last slot is not promised).
        self.look: Callable[[str], bool] | None = None

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
            self._owed[tenant] = min(self.settings.slots, self._owed.get(tenant, 0) + 1)

    @property
    def owes(self) -> bool:
        """True while a hand-off is owed: the next receive should not wait for messages."""
        return bool(self._owed)

    def promise_slot(self, job: Running,
                     stopping: Callable[[], bool]) -> tuple[Promise, Running]:
        """Before *job* settles: promise its slot to its tenant's oldest parked job.

        Under the same rule as ``wake`` (another slot stays free), the release
        then starts that job in the same transaction (``LeaseStore.hand_over``):
        a capped tenant's slot passes to its next job for one call instead of
        two. When the slot is the host's last free one and this host parked or
        saw parked jobs of the tenant lately (``HandOff.parked_lately``: else
        the slot is left to the queue with no read), the queue is looked at
        first, without waiting (``Intake.look``): the promise is made only if
        no other tenant has work there this host could start, so quiet tenants
        still come first and the slot costs one receive and one transaction,
        not a release, a receive and an acquire (the owed hand-off of
        ``wake``). A borrowed slot is promised under the borrow rule instead
        (``_promise_lent``). Returns what was done, and the job's entry as it
        now is.
        """
        if job.handover is not None:
            return Promise.MADE, job
        if job.released or job.status is None or stopping():
            return Promise.NOT_NOW, job
        if job.lease.borrowed:
            return self._promise_lent(job)
        free, tenant = len(self.pool.free()), job.request.tenant_id
        last = not policy.may_hand_off(free)  # the slot is for the queue, unless a look...
        if last and (self.look is None or not policy.may_hand_off(free, True)
                     or not self.handoff.parked_lately(tenant)):
            return Promise.NOT_NOW, job
        try:
            cap, note, request = self._next_parked(tenant, job)
        except BackendError as exc:  # a plain release follows; the parked job waits its turn
            logger.warning("no hand-over with the release of %s: %s", job.request.key, exc,
                           extra=extra("aws_error", tenant, job.request.job_id))
            return Promise.NOT_NOW, job
        if cap <= 0 or (self.shares is not None and self.shares.yields_to(
                tenant, self.handoff.parked_tenants(), ending=job.epoch) is not None):
            return Promise.NOT_NOW, job  # (fair share: ``wake`` gives it to whom it says)
        if note is None:
            self.dispatch.known_free(tenant)  # as ``wake`` does: a slot of the tenant is free
            return Promise.NOTHING_PARKED, job
        if last and not policy.may_hand_off(free, queue_empty=self.look(tenant)):
            return Promise.NOT_NOW, job  # the queue has work for the slot: it takes it
        return Promise.MADE, self._promise(job, note, request, cap)

    def _promise_lent(self, job: Running) -> tuple[Promise, Running]:
        """A borrowed job's slot: promise it to the parked job ``lend`` would start there.

        The turn is ``lend``'s after a release (``policy.borrow_turns``: the
        reserve kept, nobody below its cap waiting; the settling tenant first
        among equals), and the successor's lease is a borrowed one, so the
        release starts it in the same transaction (``LeaseStore.hand_over``,
        refused unless its tenant is at its cap): one call, not a release and
        a borrowing acquire. A turn whose tenant has nothing parked passes to
        the next, as in ``lend``; NOTHING_PARKED when no turn's tenant has
        any (a lend after the release would read the same), NOT_NOW when the
        rule gives no turn or a read failed (``wake`` lends after the release).
        """
        if not self.borrowing.enabled:
            return Promise.NOT_NOW, job
        free, borrowers = len(self.pool.free()), self._borrowers((job.request.tenant_id,))
        promise = Promise.NOT_NOW
        while turns := self.borrowing.turns(free, borrowers):
            try:
                cap, note, request = self._next_parked(turns[0], job)
            except BackendError as exc:
                logger.warning("no borrowed start with the release of %s: %s",
                               job.request.key, exc, extra=extra("aws_error", turns[0],
                                                                 job.request.job_id))
                return Promise.NOT_NOW, job
            if note is not None and cap > 0:
                return Promise.MADE, self._promise(job, note, request, cap, borrow=True)
            borrowers.pop(turns[0])
            promise = Promise.NOTHING_PARKED
        return promise, job

    def _next_parked(self, tenant: str, job: Running) -> tuple[int, Parked | None,
                                                               JobRequest | None]:
        """The tenant's cap and its oldest job still parked (not *job*), or None if none.

        Reads the cap (cached) and the tenant's notes (one Query unless notes of
        the last are left); raises BackendError. A paused tenant's notes are not read.
        """
        cap = self.leases.tenants.cap_for(tenant)
        notes, _ = self.handoff.notes(tenant) if cap > 0 else ([], False)
        for note, request in self._still_parked(notes):
            if note.job_id != job.request.job_id:
                return cap, note, request
        return cap, None, None

    def _promise(self, job: Running, note: Parked, request: JobRequest, cap: int,
                 borrow: bool = False) -> Running:
        """Record on *job*'s entry that its release starts *note*'s job in its slot."""
        successor = Successor(
            request=request, sent_at=note.sent_at, cap=cap,
            lease=self.leases.new_lease(request, self.settings.host_id, job.slot, note.receipt,
                                        borrow),
            claim=self.handoff.waiting.claim_op(note))
        promised = Handover(note=note, successor=successor)
        return self.running.update(job, handover=promised) or \
            attrs.evolve(job, handover=promised)

    def start_handed(self, handover: Handover, slot: int, committed: bool,
                     stopping: Callable[[], bool]) -> bool:
        """After the settling job's release: launch the job its slot was handed to.

        False when the hand-over was refused (the note was taken elsewhere, or
        the tenant is over a lowered cap): the slot is then free as after any
        release. A handed job the worker cannot launch now (it is stopping, its
        message is gone, or, borrowed, the borrow rule no longer allows it) has
        its lease given back.
        """
        note, successor = handover.note, handover.successor
        self.handoff.taken(note)
        if not committed:  # most likely another host took the note: the rest of that read is
            self.handoff.forget(note.tenant_id)  # as stale, so the next hand-off reads anew
            return False
        request, lease, message = successor.request, successor.lease, note.message
        self.launcher.received_at = self.clock.monotonic()
        with guard(request):
            free = self.pool.free()
            why = "the worker is stopping" if stopping() else None if free else "no free slot"
            if why is None and lease.borrowed:
                # the borrow rule again: a release tried again after an AWS error may find
                # the reserve taken meanwhile
                why = self.borrowing.allows(request.tenant_id, len(free))
            if slot in free:
                free = [slot]
            if why is not None:
                self.launcher.unwind(lease, why)
                self.messages.give_back(message)
                return True
            if self.messages.due(message):
                held = self.messages.hold(message)
                if held is None:
                    self.launcher.unwind(lease, "its parked message is gone")
                    return True
                message = held
            if self.launcher.launch(request, message, free, lease):
                self.metrics.emit("borrowed" if lease.borrowed else "handed_off", 1,
                                  tenant_id=request.tenant_id)
        return True

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
        borrowers = self._borrowers(prefer)
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

    def _borrowers(self, prefer: tuple[str, ...] = ()) -> dict[str, int]:
        """``lend``'s candidates, each with the slots it borrows: *prefer*, the tenants this
        host parked lately, and those the waiting view names at their cap with work waiting."""
        borrowers = dict.fromkeys((*prefer, *self.handoff.parked_tenants()), 0)
        borrowers.update(self.borrowing.view().at_cap)
        return borrowers

    def redrive(self, free: list[int], stopping: Callable[[], bool],
                queue_empty: bool) -> None:
        """Once per read of the waiting view: start parked jobs no hand-off reached.

        A tenant below its cap with queued work may have parked jobs that a
        failed release, hand-over or read of its notes left waiting for
        their park window: each is started here (within the cap, under the
        hand-off rule, ``policy.may_hand_off``). Then idle slots are lent to
        capped tenants' parked jobs (``lend``). Costs nothing while nobody
        waits; a tenant whose queued work is in the queue, not parked, costs
        one read of its notes per interval.
        """
        view = self.borrowing.view()
        if view.generation == self._redriven or stopping():
            return
        self._redriven = view.generation
        for tenant in view.below_cap:
            while free and not stopping() and policy.may_hand_off(len(free), queue_empty):
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
        if not borrow and self.shares is not None and \
                self.shares.yields_to(tenant, self.handoff.parked_tenants()) is not None:
            return False
        try:
            notes, fresh = self.handoff.notes(tenant)
            if notes and self._take_one(notes, free, fresh, borrow):
                return True
            if fresh or self.handoff.has_notes_read(tenant):
                return False  # none parked, or one is kept for later (at cap again, AWS failed)
            notes, _ = self.handoff.notes(tenant, fresh=True)
        except BackendError as exc:  # the next redrive reads them again
            logger.warning("could not read the parked jobs of %s: %s", tenant, exc,
                           extra=extra("aws_error", tenant))
            return False
        return bool(notes) and self._take_one(notes, free, True, borrow)

    def _still_parked(self, notes: list[Parked]) -> Iterator[tuple[Parked, JobRequest]]:
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
                  borrow: bool = False) -> bool:
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
        for note, request in self._still_parked(notes):
            message = note.message
            self.launcher.received_at = self.clock.monotonic()
            with guard(request):
                try:
                    limit = None if borrow or self.shares is None else \
                        self.shares.limit(request.tenant_id)
                    acq = self.leases.acquire(request, self.settings.host_id, free[0],
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
                    if not self.launcher.launch(request, message, free, acq.lease):
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
