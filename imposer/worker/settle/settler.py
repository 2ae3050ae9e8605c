"""Settle finished jobs and give each freed slot its next owner, in one fixed order.

For each finished job that is due (``settle_due``, one step of the loop):

1. **decide** its fate (``Completer.decide``): its end is recorded before
   any start in its slot;
2. **promise** its slot (``promise_slot``, ``Promiser``) to its tenant's oldest parked job,
   or, a borrowed slot, to the parked job the borrow rule lends it to: the
   release then starts that job in the same transaction;
3. **settle** it (``Completer.settle``): the release (handing the slot over
   when promised), the plate, the message;
4. **start** the job the slot was handed to (``Successors.start``), or let the
   refused promise go;
5. once every due job of the pass is settled, **wake** the refill
   (``Refiller.wake``) for each slot freed with no hand-over, so a tenant's
   counter is down before its next job is tried.
"""

from __future__ import annotations

from typing import Callable

import attrs

from imposer.clock import Clock
from imposer.logs import guard
from imposer.worker import executor
from imposer.worker.dispatch.pool import Pool
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.running import Running, RunningTable
from imposer.worker.settle.completion import Completer, Settled
from imposer.worker.settle.promise import Promise, Promiser
from imposer.worker.settle.refill import Refiller
from imposer.worker.settle.successor import Successors


class Settler:
    """Take each finished job from its fate to its slot's next owner."""

    def __init__(self, *, completer: Completer, promiser: Promiser, successors: Successors,
                 refill: Refiller, running: RunningTable, pool: Pool, clock: Clock,
                 shares: SharePolicy | None = None) -> None:
        self.completer, self.promiser, self.successors = completer, promiser, successors
        self.refill, self.running, self.pool, self.clock = refill, running, pool, clock
        #: Fair share (IMPOSER_SHARE_HALF_LIFE): each job settled charges its run time.
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
        if self.shares is not None and settlement.charged is not None:
            self.shares.charged(job.request.tenant_id, *settlement.charged)
        if self.shares is not None and settlement.state is Settled.DONE and job.finished:
            self.shares.ran(job.request.tenant_id, job.finished - job.started)
        if settlement.handed is not None and \
                self.successors.start(settlement.handed, job.slot, stopping):
            handover = settlement.handed.handover
            # as after any borrowed job: lend more (a parked job has the slot itself)
            return [(job.request.tenant_id, True)] if handover.successor.lease.borrowed else []
        if settlement.state is Settled.DONE and (promise is not Promise.NOTHING_PARKED
                                                 or self.shares is not None):
            return [(job.request.tenant_id, job.lease.borrowed)]
        return []

    def promise_slot(self, job: Running, stopping: Callable[[], bool]) -> executor.Plan:
        """Before *job* settles: promise its slot to a parked job (``Promiser.promise``),
        the promise kept on its entry; a settle tried again keeps the promise it made.

        A plan, as ``settle_due``; returns what was done, and the job's entry as it now is.
        """
        if job.handover is not None:
            return Promise.MADE, job
        if job.released or job.status is None:
            return Promise.NOT_NOW, job
        promise, handover = yield from self.promiser.promise(job, stopping)
        if handover is None:
            return promise, job
        return promise, self.running.update(job, handover=handover) or \
            attrs.evolve(job, handover=handover)
