"""Carry out the slot decision for every slot no promise with a release reached.

The cheapest refill is not here: a settling job's release itself starts the
tenant's oldest parked job when its slot was promised to it
(``Settler.promise_slot``, ``LeaseStore.hand_over``). Every other trigger of
``imposer.worker.allocation`` comes here, and ``allocate`` carries its steps out:
a plain release (``wake``: a start, or a hand-off owed when the slot was the
host's last), a receive that found the queue empty (``wake_idle``: the hand-offs
owed paid, idle slots lent with borrowing on), the end of a receive's batch
(``share_fill``: fair share's choice), and a read of the waiting view
(``restart_parked``: parked jobs a failed release, hand-over or read of the notes
left, within the cap). Which slot goes to whom is the decision's; a start is
``ParkedStarts``'.
"""

from __future__ import annotations

import logging
from typing import Callable

from imposer.logs import extra
from imposer.worker import allocation, executor
from imposer.worker.allocation import Kind
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.dispatch.capmemo import CapMemo
from imposer.worker.dispatch.handoff import HandOff
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.settle.parked import ParkedStarts

logger = logging.getLogger(__name__)


class Refiller:
    """Give free slots to parked jobs as the slot decision says, and keep what is owed."""

    def __init__(self, *, slots: int, starts: ParkedStarts, memo: CapMemo,
                 handoff: HandOff, borrowing: BorrowPolicy,
                 shares: SharePolicy | None = None) -> None:
        #: This host's slots (the most hand-offs owed to one tenant).
        self.slots = slots
        #: Starts a tenant's oldest parked job in a free slot (the decision's START).
        self.starts = starts
        self.memo, self.handoff, self.borrowing = memo, handoff, borrowing
        #: Fair share (IMPOSER_SHARE_HALF_LIFE): a freed slot goes to the tenant furthest
        #: below its weighted share, not always to the settled job's tenant.
        self.shares = shares if shares is not None and shares.enabled else None
        #: The waiting view's generation ``restart_parked`` last acted on.
        self._restarted_at_view = 0
        #: tenant -> hand-offs owed to it: its jobs settled here while no slot could be given
        #: (paid and added to by the slot decision's plan, ``executor.allocate``)
        self.owed: dict[str, int] = {}

    def wake(self, tenant: str, free: list[int], stopping: Callable[[], bool],
             borrowed: bool = False) -> None:
        """A job of *tenant* was released here with no hand-over: give its slot to the
        tenant's oldest parked job (under fair share, the chosen tenant's), or owe it
        (``allocation.Released``).

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
        if not stopping() and not borrowed:
            self.memo.freed(tenant)
        self.allocate(allocation.Released(tenant, borrowed), free, stopping,
                      prefer=(tenant,) if borrowed else ())

    @property
    def owes(self) -> bool:
        """True while a hand-off is owed: the next receive should not wait for messages."""
        return bool(self.owed)

    def queue_empty(self, free: list[int], stopping: Callable[[], bool]) -> None:
        """A receive came back empty: nobody's work waits in the queue (fair share forgets
        the demand it saw there), so the free slots go as ``wake_idle`` gives them."""
        if self.shares is not None:
            self.shares.queue_empty()
        if free:
            self.wake_idle(free, stopping)

    def wake_idle(self, free: list[int], stopping: Callable[[], bool]) -> int:
        """The queue had nothing for the free slots: pay the hand-offs owed, oldest first,
        then lend the idle slots (``allocation.QueueEmpty``). Returns how many started.

        Nothing waits in the queue, so no tenant below its cap is passed over
        when a capped tenant's parked job takes even the last free slot.
        """
        return self.allocate(allocation.QueueEmpty(), free, stopping)

    def share_fill(self, free: list[int], stopping: Callable[[], bool]) -> int:
        """Fair share: free slots to the parked work of the tenants furthest below their
        share, one hand-off each (``allocation.BatchDone``); a tenant with no parked note to
        start is passed over. Returns how many jobs started."""
        if self.shares is None:
            return 0
        return self.allocate(allocation.BatchDone(), free, stopping)

    def borrowers(self, prefer: tuple[str, ...] = ()) -> dict[str, int]:
        """The borrow rule's candidates (``BorrowPolicy.borrowers``), *prefer* first."""
        return self.borrowing.borrowers(prefer, self.handoff.parked_tenants())

    def restart_parked(self, free: list[int], stopping: Callable[[], bool], queue_empty: bool,
                look: Callable[[str], bool] | None = None) -> None:
        """Once per read of the waiting view: start parked jobs no hand-off reached, then
        lend idle slots (``allocation.ViewRead``).

        Parked jobs that a failed release, hand-over or read of the notes left
        waiting are started here, within the cap, under ``policy.may_hand_off``;
        the host's last free slot only if the last receive found the queue
        empty (*queue_empty*) and a *look* now finds nothing another tenant
        could start (one that sent since is not passed over). Costs nothing
        while nobody waits.
        """
        view = self.borrowing.view()
        if view.generation == self._restarted_at_view or stopping():
            return
        self._restarted_at_view = view.generation
        self.allocate(allocation.ViewRead(queue_empty), free, stopping, look=look,
                      below_cap=tuple(view.below_cap))

    # -- carrying the decision out ----------------------------------------------------------
    def allocate(self, trigger: allocation.Trigger, free: list[int],
                 stopping: Callable[[], bool], *, prefer: tuple[str, ...] = (),
                 look: Callable[[str], bool] | None = None,
                 below_cap: tuple[str, ...] = ()) -> int:
        """Carry out the slot decision's plan for the free slots under *trigger*
        (``executor.allocate``); returns how many jobs started.

        *prefer*: a tenant whose borrowed job just ended here (first among the
        borrowers); *look*: a look at the queue for the host's last slot; *below_cap*:
        the waiting view's tenants below their cap with queued work (``ViewRead``).
        """
        def carry(step: allocation.Step) -> bool | None:
            if step.kind is Kind.LOOK:
                return look is not None and look(step.tenant)
            if step.kind is not Kind.START:
                return None  # (OWE, FORGIVE: the plan's own)
            if self.starts.start(step.tenant, free, borrow=step.borrow):
                if isinstance(trigger, allocation.ViewRead) and not step.borrow:
                    logger.info("started a parked job of %s that no hand-off had reached",
                                step.tenant, extra=extra("redriven", step.tenant))
                return True
            if self.shares is not None and not step.borrow and isinstance(
                    trigger, (allocation.Released, allocation.BatchDone)):
                self.shares.nothing_to_start(step.tenant)  # its next choice passes it over
            return False

        parent = _Parent(self, free, stopping, below_cap)
        return executor.run(executor.allocate(trigger, parent, prefer=prefer), carry)


class _Parent:
    """The refill as the plan sees it (``executor.Parent``) for one trigger: the free
    slots, the hand-offs owed, and the standing read from the parts that keep it."""

    def __init__(self, refill: Refiller, free: list[int], stopping: Callable[[], bool],
                 below_cap: tuple[str, ...]) -> None:
        self.refill, self.free, self.stopping, self.below_cap = refill, free, stopping, below_cap
        self.slots, self.owed = refill.slots, refill.owed
        self.borrowers = refill.borrowers

    def standing(self, trigger: allocation.Trigger,
                 progress: executor.Progress) -> allocation.Standing:
        """What ``decide`` needs now (no AWS call)."""
        refill, borrowing = self.refill, self.refill.borrowing
        parked = tuple(refill.handoff.parked_tenants())
        choice = None
        if refill.shares is not None and isinstance(trigger, (allocation.Released,
                                                              allocation.BatchDone)):
            choice = refill.shares.choice(parked, exclude=progress.tried)
        return allocation.Standing(
            free=len(self.free), stopping=self.stopping(), parked=parked,
            capped=frozenset(t for t in self.below_cap
                             if refill.memo.cap(t) is not None),
            owed=dict(self.owed), looked=dict(progress.looked),
            tried=frozenset(progress.tried), started=progress.started,
            borrow=borrowing.enabled, reserve=borrowing.reserve,
            blockers=borrowing.blockers() if borrowing.enabled else frozenset(),
            express=borrowing.express(), borrowers=dict(progress.borrowers),
            below_cap=self.below_cap, sharing=refill.shares is not None, choice=choice)
