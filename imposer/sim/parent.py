"""One host's parent: a pass of its loop (``Supervisor.run``), and its slots.

A pass settles the children that finished (the slot decision's ``Releasing``
first, then ``Completer.settle``: slot freed; message deleted, retried after the
backoff or requeued after the deferral), gives each freed slot its next owner
(``Released``), dispatches what the receive brought and asks again for a message
per free slot and room for parking.
"""

from __future__ import annotations

from imposer.sim.schedule import Attempt
from imposer.sim.state import (
    CALLS,
    DONE,
    FINISH,
    IDLE,
    RUNNING,
    RX_DONE,
    RX_NONE,
    RX_WAIT,
    VISIBLE,
    WAITING,
    Host,
)
from imposer.worker import allocation
from imposer.worker.allocation import Kind


class Parent:
    """The parent loop's pass, and starting and settling a child in a slot.

    Mixed into ``engine._Fleet``: its methods read and move the fleet's state
    (the queue, the counters, the hosts) as the event loop reaches each step.
    """

    # -- one pass of the parent loop -----------------------------------------------------
    def _pass(self, host: Host):
        """``Supervisor.run``'s loop body: settle, wake, dispatch what came, ask again.

        Yields while waiting on AWS.
        """
        done, host.done = host.done, []
        freed = []
        for n, (job, slot, borrowed) in enumerate(done):
            # ``Settler.settle``: promise the slot (the finished children's slots are all
            # free), release, start the job it was handed to
            promise = yield from self._promise(host, job, len(host.free) + len(done) - n,
                                               borrowed)
            yield from self._settle(job, host, slot, borrowed)
            if promise.kind is Kind.HAND_OVER and self._hand_over(host, promise):
                if promise.borrow:
                    freed.append((self.tenant[job], True))  # lend more, as after any
                continue
            if not borrowed:  # ``CapMemo.freed``: a slot of it is free here
                host.memo.freed(self.tenant[job])
            if promise.kind is not Kind.NOTHING_PARKED or self.sharing:
                freed.append((self.tenant[job], borrowed))
        if done:
            host.stale = -1  # slots and counters moved: a receive may bring work again
        for tenant, borrowed in freed:  # ``Refiller.wake``, once the pass's jobs are settled
            yield from self._allocate(host, allocation.Released(tenant, borrowed),
                                      prefer=tenant if borrowed else None)
        if host.view != host.viewed:  # ``Supervisor.restart_parked``: once per view read
            host.viewed = host.view
            yield from self._allocate(host, allocation.ViewRead(host.empty),
                                      below_cap=self._below_cap(host))
        if host.looked:  # ``Intake.fill``: what a look brought goes first
            looked, host.looked = host.looked, []
            if not (yield from self._dispatch(host, looked)):
                host.stale = self.shown
        if self._behind(host):
            yield  # the receive's answer may have come meanwhile
        if host.rx == RX_DONE:
            batch, host.rx_result, host.rx = host.rx_result, [], RX_NONE
            progress = yield from self._dispatch(host, batch)
            host.empty = all(self.cap[self.tenant[job]] <= 0 for job in batch)
            if not batch:
                self.demand.clear()  # the queue had nothing visible: nobody waits there
                yield from self._allocate(host, allocation.QueueEmpty())  # owed, then lent
            elif not progress:
                host.stale = self.shown  # asking again brings the same until something moves
            if self.sharing:
                yield from self._allocate(host, allocation.BatchDone())
        if self._behind(host):
            yield  # the last calls' time: what follows is decided when they are done
        if host.free and host.rx == RX_NONE and self.left and host.stale != self.shown:
            self._ask(host)
        elif host.owed and host.rx == RX_WAIT and self.policy.poll_seconds <= 0:
            self._answer(host, host.clock, [])  # asking at once again finds nothing: pay
        if host.done or host.rx == RX_DONE:
            self._schedule(host, host.clock)  # round again: something came meanwhile
        else:
            host.state = IDLE


    # -- slots -------------------------------------------------------------------------
    def _start(self, job: int, host: Host, borrowed: bool) -> None:
        tenant, spec = self.tenant[job], self.jobs[job]
        slot = host.free.pop()
        if borrowed:
            self.borrowed[tenant] += 1
        else:
            self.inflight[tenant] += 1
        if self.counted[job]:
            self.counted[job] = False
            self.blocking[tenant] -= 1
        self.state[job] = RUNNING
        self.version[job] += 1
        n = self.attempt_no[job]
        self.attempt_no[job] = n + 1
        fate = spec.fates[min(n, len(spec.fates) - 1)]
        now = host.clock
        if self.first_start[job] is None:
            self.first_start[job] = now
        self._began(job, now)
        end = now + spec.run
        self.attempts.append(Attempt(job, host.index, slot, now, end, borrowed, fate))
        self._push(end, FINISH, job, host.index, slot, borrowed)

    def _settle(self, job: int, host: Host, slot: int, borrowed: bool):
        """``Completer.settle``: free the slot, then delete, retry or requeue the message."""
        tenant, p = self.tenant[job], self.policy
        fates = self.jobs[job].fates
        fate = fates[min(self.attempt_no[job] - 1, len(fates) - 1)]
        if fate == "retry":
            self._spend(host, 1)  # the job's failures so far
        self._spend(host, 1)
        if self._behind(host):
            yield  # the release transaction commits: the counter is down from here
        self.end[job] = host.clock  # the record's finished_at is the release's
        self._charge(job, host.clock)  # (the release transaction's usage term)
        host.free.append(slot)
        if borrowed:
            self.borrowed[tenant] -= 1
        else:
            self.inflight[tenant] -= 1
        delay = None
        if fate == "retry":
            self.failures[job] += 1
            if self.rules.is_dead(self.failures[job], p.max_attempts):
                fate = "dead"
            else:
                delay = self.rules.retry_delay(p.retry_seconds, self.failures[job])
        elif fate == "requeue":
            delay = p.defer_seconds
        self._spend(host, CALLS[fate] - 1 - (fate in ("retry", "dead")))
        if delay is None:
            self.state[job], self.status[job] = DONE, fate
            self.in_flight_group[tenant] -= 1
            self.left -= 1
            return
        self.counts["retries"] += 1
        self.state[job] = WAITING
        self._count_waiting(job)
        self.version[job] += 1
        self._push(host.clock + delay, VISIBLE, job, self.version[job])

