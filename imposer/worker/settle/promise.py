"""Promise a settling job's slot to a parked job, for its release to start it.

The slot decision before a release (``allocation.Releasing``, asked step by step
by ``executor.releasing``) says whether the slot goes with the release and to
whom; this carries out its reads of the tenants' parked notes and yields its
looks at the queue to the parent. A promise made is a ``Handover``: the release
(``LeaseStore.hand_over``) starts that job in the same transaction, and
``successor`` launches it after.
"""

from __future__ import annotations

import enum
import logging
from typing import Callable

from imposer.errors import BackendError
from imposer.logs import extra
from imposer.models import JobRequest
from imposer.state.leases import LeaseStore, Successor
from imposer.state.waiting import Parked
from imposer.worker import allocation, executor
from imposer.worker.allocation import Kind
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.dispatch.capmemo import CapMemo
from imposer.worker.dispatch.handoff import HandOff, Handover
from imposer.worker.dispatch.pool import Pool
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.running import Running
from imposer.worker.settle.parked import ParkedStarts

logger = logging.getLogger(__name__)


class Promise(enum.Enum):
    """What ``Promiser.promise`` did with a settling job's slot."""

    #: Promised to the tenant's oldest parked job: its release starts that job.
    MADE = "made"
    #: The tenant has nothing parked: no hand-off to try after the release either.
    NOTHING_PARKED = "nothing parked"
    #: No promise may be made now (the hand-off rule, a borrowed slot, stopping):
    #: the release is a plain one and ``Refiller.wake`` decides after it.
    NOT_NOW = "not now"


class Promiser:
    """Decide, before a release, whether its slot goes with it, and to which parked job."""

    def __init__(self, *, host_id: str, starts: ParkedStarts, pool: Pool, leases: LeaseStore,
                 handoff: HandOff, memo: CapMemo, borrowing: BorrowPolicy,
                 shares: SharePolicy | None = None) -> None:
        self.host_id, self.starts, self.pool, self.leases = host_id, starts, pool, leases
        self.handoff, self.memo, self.borrowing = handoff, memo, borrowing
        #: Fair share (IMPOSER_SHARE_HALF_LIFE): a freed slot goes to the tenant furthest
        #: below its weighted share, not always to the settled job's tenant.
        self.shares = shares if shares is not None and shares.enabled else None

    def promise(self, job: Running, stopping: Callable[[], bool]) -> executor.Plan:
        """Before *job* settles: promise its slot to a parked job, for its release to start
        (``allocation.Releasing``: the decision, asked by ``executor.releasing``; this
        carries out its reads and its look).

        An own slot goes to the tenant's oldest parked job while another slot stays
        free: a capped tenant's slot passes to its next job for one call instead of
        two (``LeaseStore.hand_over``). When the slot is the host's last free one and
        this host parked or saw parked jobs of the tenant lately
        (``HandOff.parked_lately``: else the slot is left to the queue with no read),
        the queue is looked at first, without waiting (the plan's ``LOOK``, answered
        by the parent through ``Intake.look``): the promise is made only if no other
        tenant has work there this host could start, so quiet tenants still come
        first and the slot costs one receive and one transaction, not a release, a
        receive and an acquire (the owed hand-off of ``Refiller.wake``). A borrowed slot goes to the parked job the borrow rule
        lends it to (``policy.borrow_turns``: the reserve kept, nobody below its cap
        waiting; the settling tenant first among equals), its lease a borrowed one,
        so the release starts it in the same transaction (refused unless its tenant
        is at its cap): one call, not a release and a borrowing acquire. A plan
        (``executor``: its ``LOOK`` steps are the parent's); returns what was done,
        and the hand-over promised (None unless ``MADE``).
        """
        tenant, borrowed = job.request.tenant_id, job.lease.borrowed
        borrowers = self.borrowing.borrowers((tenant,), self.handoff.parked_tenants()) \
            if borrowed and self.borrowing.enabled else {}
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
            return Promise.MADE, self._handover(job, note, request, cap, borrow=step.borrow)
        if step.kind is Kind.NOTHING_PARKED:
            if not borrowed:  # as ``Refiller.wake`` does: a slot of it is free
                self.memo.freed(tenant)
            return Promise.NOTHING_PARKED, None
        return Promise.NOT_NOW, None

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
        cap = self.leases.cap_for(tenant)
        notes, _ = self.handoff.notes(tenant) if cap > 0 else ([], False)
        for note, request in self.starts.still_parked(notes):
            if note.job_id != job.request.job_id:
                return cap, note, request
        return cap, None, None

    def _handover(self, job: Running, note: Parked, request: JobRequest, cap: int,
                  borrow: bool = False) -> Handover:
        """What *job*'s release does to start *note*'s job in its slot."""
        successor = Successor(
            request=request, sent_at=note.sent_at, cap=cap,
            lease=self.leases.new_lease(request, self.host_id, job.slot, note.receipt, borrow),
            claim=self.handoff.claim_op(note))
        return Handover(note=note, successor=successor)
