"""Settle finished jobs and give each freed slot its next owner, in one fixed order.

For each finished job that is due (``settle_due``, one step of the loop):

1. **decide** its fate (``Completer.decide``): its end is recorded before
   any start in its slot;
2. **promise** its slot (``promise_slot``) to its tenant's oldest parked job,
   or, a borrowed slot, to the parked job the borrow rule lends it to: the
   release then starts that job in the same transaction;
3. **settle** it (``Completer.settle``): the release (handing the slot over
   when promised), the plate, the message;
4. **start** the job the slot was handed to (``start_handed``), or let the
   refused promise go;
5. once every due job of the pass is settled, **wake** the refill
   (``Refiller.wake``) for each slot freed with no hand-over, so a tenant's
   counter is down before its next job is tried.
"""

from __future__ import annotations

import enum
import logging
from typing import Callable

import attrs

from imposer.clock import Clock
from imposer.errors import BackendError
from imposer.logs import extra, guard
from imposer.metrics import Metrics
from imposer.models import JobRequest
from imposer.state.leases import LeaseStore, Successor
from imposer.state.waiting import Parked
from imposer.worker import allocation, executor
from imposer.worker.allocation import Kind
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.dispatch.dispatcher import Dispatcher
from imposer.worker.dispatch.handoff import HandOff, Handover
from imposer.worker.dispatch.launch import Launcher
from imposer.worker.dispatch.pool import Pool
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.messages import Messages
from imposer.worker.running import Running, RunningTable
from imposer.worker.settle.completion import Completer, Handed, Settled
from imposer.worker.settle.parked import ParkedStarts
from imposer.worker.settle.refill import Refiller

logger = logging.getLogger(__name__)


class Promise(enum.Enum):
    """What ``Settler.promise_slot`` did with a settling job's slot."""

    #: Promised to the tenant's oldest parked job: its release starts that job.
    MADE = "made"
    #: The tenant has nothing parked: no hand-off to try after the release either.
    NOTHING_PARKED = "nothing parked"
    #: No promise may be made now (the hand-off rule, a borrowed slot, stopping):
    #: the release is a plain one and ``wake`` decides after it.
    NOT_NOW = "not now"


class Settler:
    """Take each finished job from its fate to its slot's next owner."""

    def __init__(self, *, host_id: str, completer: Completer, refill: Refiller,
                 starts: ParkedStarts, running: RunningTable, pool: Pool,
                 leases: LeaseStore, handoff: HandOff, dispatch: Dispatcher,
                 launcher: Launcher, borrowing: BorrowPolicy, messages: Messages,
                 metrics: Metrics, clock: Clock, shares: SharePolicy | None = None) -> None:
        self.host_id, self.completer, self.refill, self.running = (host_id, completer, refill,
                                                                    running)
        self.starts = starts
        self.pool, self.leases, self.handoff, self.dispatch = pool, leases, handoff, dispatch
        self.launcher, self.borrowing, self.messages = launcher, borrowing, messages
        self.metrics, self.clock = metrics, clock
        #: Fair share (IMPOSER_SHARE_HALF_LIFE): a freed slot goes to the tenant furthest
        #: below its weighted share, not always to the settled job's tenant.
        self.shares = shares if shares is not None and shares.enabled else None

    def settle_due(self, stopping: Callable[[], bool], force: bool = False) -> executor.Plan:
        """Settle every finished job that is due (all of them with *force*); then refill the
        slots freed with no hand-over from parked work.

        A plan (``executor``): it yields the ``LOOK`` steps of the promises it makes,
        which the parent answers (``Supervisor.look``: True if the queue holds nothing
        another tenant could start), so the settler never receives a message itself.
        """
        now, freed = self.clock.monotonic(), []
        for job in self.running.settling():
            if force or job.retry_at <= now:
                with guard(job.request):
                    freed += yield from self.settle(job, stopping)
        for tenant, borrowed in freed:
            with guard(None):
                self.refill.wake(tenant, self.pool.free(), stopping, borrowed)

    def settle(self, job: Running, stopping: Callable[[], bool]) -> executor.Plan:
        """Settle one finished job: decide, promise its slot, release, start its successor.

        A plan, as ``settle_due``; returns the slots to wake the refill for once the pass
        is over: (tenant, borrowed) of a job whose slot was freed with no start of the
        parked job it was promised to.
        """
        job = self.completer.decide(job)  # its end is recorded before any start
        promise, job = yield from self.promise_slot(job, stopping)
        settlement = self.completer.settle(job)
        if self.shares is not None and settlement.state is Settled.DONE and job.finished:
            self.shares.ran(job.request.tenant_id, job.finished - job.started)
        if settlement.handed is not None and \
                self.start_handed(settlement.handed, job.slot, stopping):
            handover = settlement.handed.handover
            # as after any borrowed job: lend more (a parked job has the slot itself)
            return [(job.request.tenant_id, True)] if handover.successor.lease.borrowed else []
        if settlement.state is Settled.DONE and (promise is not Promise.NOTHING_PARKED
                                                 or self.shares is not None):
            return [(job.request.tenant_id, job.lease.borrowed)]
        return []

    def promise_slot(self, job: Running, stopping: Callable[[], bool]) -> executor.Plan:
        """Before *job* settles: promise its slot to a parked job, for its release to start
        (``allocation.Releasing``: the decision, asked by ``executor.releasing``; this
        carries out its reads and its look).

        An own slot goes to the tenant's oldest parked job while another slot stays
        free: a capped tenant's slot passes to its next job for one call instead of
        two (``LeaseStore.hand_over``). When the slot is the host's last free one and
        this host parked or saw parked jobs of the tenant lately
        (``HandOff.parked_lately``: else the slot is left to the queue with no read),
        the queue is looked at first, without waiting (the plan's ``LOOK``, answered by
        the parent through ``Intake.look``): the promise
        is made only if no other tenant has work there this host could start, so
        quiet tenants still come first and the slot costs one receive and one
        transaction, not a release, a receive and an acquire (the owed hand-off of
        ``Refiller.wake``). A borrowed slot goes to the parked job the borrow rule
        lends it to (``policy.borrow_turns``: the reserve kept, nobody below its cap
        waiting; the settling tenant first among equals), its lease a borrowed one,
        so the release starts it in the same transaction (refused unless its tenant
        is at its cap): one call, not a release and a borrowing acquire. A plan, as
        ``settle_due``; returns what was done, and the job's entry as it now is.
        """
        if job.handover is not None:
            return Promise.MADE, job
        if job.released or job.status is None:
            return Promise.NOT_NOW, job
        tenant, borrowed = job.request.tenant_id, job.lease.borrowed
        borrowers = self.refill.borrowers((tenant,)) if borrowed and self.borrowing.enabled \
            else {}
        found: dict[str, tuple[int, Parked | None, JobRequest | None]] = {}

        def carry(step: allocation.Step) -> executor.Plan:
            turn = step.tenant
            if step.kind is Kind.LOOK:
                return bool((yield step))  # the parent looks
            try:  # READ
                found[turn] = cap, note, _ = self._next_parked(turn, job)
            except BackendError as exc:  # a plain release follows; the job waits its turn
                logger.warning("no %s with the release of %s: %s", "borrowed start"
                               if borrowed else "hand-over", job.request.key, exc,
                               extra=extra("aws_error", turn, job.request.job_id))
                return allocation.Read.FAILED
            return allocation.Read.PAUSED if cap <= 0 else \
                allocation.Read.NONE if note is None else allocation.Read.PARKED

        plan = executor.releasing(allocation.Releasing(tenant, borrowed),
                                  lambda progress: self._standing(job, stopping, progress),
                                  borrowers)
        step = yield from executor.carried(plan, carry)
        if step.kind is Kind.HAND_OVER:
            cap, note, request = found[step.tenant]
            return Promise.MADE, self._promise(job, note, request, cap, borrow=step.borrow)
        if step.kind is Kind.NOTHING_PARKED:
            if not borrowed:  # as ``Refiller.wake`` does: a slot of it is free
                self.dispatch.known_free(tenant)
            return Promise.NOTHING_PARKED, job
        return Promise.NOT_NOW, job

    def _standing(self, job: Running, stopping: Callable[[], bool],
                  progress: executor.Progress) -> allocation.Standing:
        """What ``decide`` needs for *job*'s slot now (no AWS call)."""
        tenant, parked = job.request.tenant_id, tuple(self.handoff.parked_tenants())
        yields_to = None
        if self.shares is not None and not job.lease.borrowed and tenant in progress.reads:
            yields_to = self.shares.yields_to(tenant, parked, ending=job.epoch)
        return allocation.Standing(
            free=len(self.pool.free()), stopping=stopping(), 
            parked=parked, reads=dict(progress.reads), looked=dict(progress.looked),
            borrow=self.borrowing.enabled, reserve=self.borrowing.reserve,
            blockers=self.borrowing.blockers() if job.lease.borrowed and self.borrowing.enabled
            else frozenset(), express=self.borrowing.express(),
            borrowers=dict(progress.borrowers), sharing=self.shares is not None,
            yields_to=yields_to)

    def _next_parked(self, tenant: str, job: Running) -> tuple[int, Parked | None,
                                                               JobRequest | None]:
        """The tenant's cap and its oldest job still parked (not *job*), or None if none.

        Reads the cap (cached) and the tenant's notes (one Query unless notes of
        the last are left); raises BackendError. A paused tenant's notes are not read.
        """
        cap = self.leases.tenants.cap_for(tenant)
        notes, _ = self.handoff.notes(tenant) if cap > 0 else ([], False)
        for note, request in self.starts.still_parked(notes):
            if note.job_id != job.request.job_id:
                return cap, note, request
        return cap, None, None

    def _promise(self, job: Running, note: Parked, request: JobRequest, cap: int,
                 borrow: bool = False) -> Running:
        """Record on *job*'s entry that its release starts *note*'s job in its slot."""
        successor = Successor(
            request=request, sent_at=note.sent_at, cap=cap,
            lease=self.leases.new_lease(request, self.host_id, job.slot, note.receipt, borrow),
            claim=self.handoff.waiting.claim_op(note))
        promised = Handover(note=note, successor=successor)
        return self.running.update(job, handover=promised) or \
            attrs.evolve(job, handover=promised)

    def start_handed(self, handed: Handed, slot: int, stopping: Callable[[], bool]) -> bool:
        """After the settling job's release: launch the job its slot was handed to.

        False when the hand-over was refused (the note was taken elsewhere, or
        the tenant is over a lowered cap): the slot is then free as after any
        release. A handed job the worker cannot launch now (it is stopping, its
        message is gone, or, borrowed, the borrow rule no longer allows it) has
        its lease given back.
        """
        note, successor = handed.handover.note, handed.handover.successor
        self.handoff.taken(note)
        if not handed.committed:  # most likely another host took the note: the rest of that
            self.handoff.forget(note.tenant_id)  # read is as stale; the next hand-off reads anew
            return False
        request, lease, message = successor.request, successor.lease, note.message
        received_at = self.clock.monotonic()
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
            if self.launcher.launch(request, message, free, lease, received_at=received_at):
                self.metrics.emit("borrowed" if lease.borrowed else "handed_off", 1,
                                  tenant_id=request.tenant_id)
        return True
