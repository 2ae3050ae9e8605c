"""The discrete-event simulation: imposer's dispatch in virtual time, decisions from the worker.

Each host runs the parent loop of `imposer run` (``Supervisor.run``): for each
child that finished, ask the worker's slot decision (``allocation.decide``,
``Releasing``) whether its release hands the slot over, settle it (slot freed;
message deleted, retried after the backoff or requeued after the deferral), then
give each slot no hand-over reached its next owner (``Released``: start, owe or
lend); after a read of the waiting view (every ``redrive_seconds`` while a job is
parked), start the parked jobs no hand-off reached (``ViewRead``); dispatch what the
receive brought (start, park, defer or lend for each
message, as ``imposer.worker.dispatch.dispatcher`` does), pay the hand-offs owed if
it brought nothing (``QueueEmpty``), fill what fair share leaves free
(``BatchDone``), and ask for a message per free slot and as many more as the
batch parked (``receive_size``). Who gets a freed slot is the worker's own
``imposer.worker.allocation.decide``; every other decision is a call into
``imposer.worker.policy`` (``rules.WORKER``, unless a run is given other
``Rules``, which the slot decision is given too): the cap (``may_take_own_slot``),
the borrow rule (``why_not_borrow``, ``borrow_turns``), the hand-off and its owed
payment (``may_hand_off``), the receive's size (``receive_size``), the order of
hand-offs (``own_first``), send order (``oldest_first``), retry backoff
(``retry_delay``) and dead-lettering (``is_dead``); with a usage half-life
set, who of the tenants waiting gets a free slot (``next_tenant``, see
``shares``).

Only time and AWS are simulated. The parent does one thing at a time and
each AWS call it makes takes ``call_seconds`` (the calls of each step are
counted as the worker makes them, see ``CALLS``; a tenant's cap is read at
most once per ``cap_cache_seconds`` per host), so parking a backlog takes
time, as it does for real. The receive runs beside the parent, as the
worker's receiver thread does (``imposer.worker.receive.receiver``): one at a time,
for a message per slot free when it was asked (and room for parking); it reaches SQS
``receive_seconds / 2`` after the ask and its answer comes back as long
after. With nothing visible it waits up to ``poll_seconds`` (the long poll)
for a message, and returns at once when one becomes visible; a child that
ends meanwhile is settled at once, the poll going on beside it. A
poll that returns empty is what pays an owed hand-off, so a capped tenant
whose job ended in its host's last free slot waits for the poll in flight
to end. A tenant found at its cap is taken to be at cap on that host for a
second (the worker's ``CapMemo``) unless one of its jobs ends there.

Delivery is that of ``imposer.dev.localstack.stack``, SQS fair queues: visible
messages of the groups with the fewest messages in flight first, each group
in send order (or strict send order with ``fair_queues=False``). A parked
message is invisible for the park window and comes back by itself unless a
hand-off, or a view read's restart, starts it first; a paused tenant's (cap 0)
messages never start.

``Policy.perfect`` is the limit of instant delivery: no AWS time, no poll,
no memo, and zero park and deferral windows, so a message at its tenant's
cap stays visible and is taken the moment its tenant is below its cap again
(the cap with instant refill).

This module has the event loop and the fleet's state; the steps it runs
are in ``parent`` (a pass of a host's loop, starting and settling
children), ``dispatch`` (start, park, defer or lend), ``handoff`` (the slot
decision's steps carried out on the fleet) and ``delivery`` (fair-queue delivery and the
receive); ``state`` has the call costs, the codes of events and states and
a host's record, ``policy`` and ``schedule`` what a run takes and returns.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from imposer.sim.delivery import Delivery
from imposer.sim.dispatch import Dispatch
from imposer.sim.handoff import HandOffs
from imposer.sim.parent import Parent
from imposer.sim.policy import Policy
from imposer.sim.rules import WORKER, Rules
from imposer.sim.schedule import Attempt, Schedule
from imposer.sim.shares import Shares
from imposer.sim.state import (
    BUSY,
    CALLS,
    FINISH,
    IDLE,
    NOTES_READ,
    PARKED,
    POLL_END,
    RECEIVE_MAX,
    RESUME,
    RX_BACK,
    RX_DONE,
    RX_NONE,
    RX_WAIT,
    SCHEDULED,
    SERVE,
    SERVE_ALL,
    TICK,
    VIEW,
    VISIBLE,
    WAITING,
    Host,
)
from imposer.sim.workload import SimJob

__all__ = ["CALLS", "NOTES_READ", "RECEIVE_MAX", "WORKER", "Attempt", "Policy",
           "Rules", "Schedule", "simulate"]


def simulate(jobs: Sequence[SimJob], policy: Policy, boot: Sequence[float] = (),
             rules: Rules = WORKER) -> Schedule:
    """Replay *jobs* under *policy*, deciding by *rules* (the worker's), and return every
    attempt.

    *boot*: when each host's parent starts, per host (the others at 0). Hosts
    that start together split a burst between them; one that starts later
    finds a tenant's cap already held by the first, and which way a real
    fleet goes is a draw.
    """
    fleet = _Fleet(jobs, policy, rules)
    for host, at in zip(fleet.hosts, boot):
        host.clock = at
    return fleet.run()


class _Fleet(Parent, Dispatch, HandOffs, Delivery, Shares):
    """The simulation's state: the queue, the hosts, counters and parked notes.

    A pass of a host's loop is a generator: it yields whenever the parent's
    own clock has run ahead of the fleet's (it waited on AWS), and resumes
    when the fleet gets there, so every decision (an acquire, a hand-off,
    what a receive takes) reads the queue and the counters as they are at
    that moment, between the other hosts' decisions. A host's receive moves
    through its own events beside its parent's passes.
    """

    def __init__(self, jobs: Sequence[SimJob], policy: Policy, rules: Rules = WORKER) -> None:
        self.jobs, self.policy, self.rules = tuple(jobs), policy, rules
        n = len(self.jobs)
        self.tenant = [j.tenant for j in self.jobs]
        self.cap = {t: policy.cap_of(t) for t in set(self.tenant)}
        # Send order: a tenant's jobs keep their submission order, as the queue's do.
        order = self.rules.oldest_first(range(n), lambda i: (self.jobs[i].arrival, i))
        self.seq = [0] * n
        for rank, i in enumerate(order):
            self.seq[i] = rank
        self.state = [WAITING] * n
        self.version = [0] * n
        #: The host that parked each job last (``HandOff._mine``: its own notes come first).
        self.parked_by = [-1] * n
        self.attempt_no = [0] * n
        self.failures = [0] * n
        self.seen = [False] * n
        self.counted = [False] * n
        self.first_start: list[float | None] = [None] * n
        self.end: list[float | None] = [None] * n
        self.status = ["waiting"] * n
        self.attempts: list[Attempt] = []
        self.hosts = [Host(h, policy.slots, policy.defer_seconds) for h in range(policy.hosts)]
        self.inflight = dict.fromkeys(self.cap, 0)
        self.borrowed = dict.fromkeys(self.cap, 0)
        self.in_flight_group = dict.fromkeys(self.cap, 0)
        self.visible: dict[str, list[tuple[int, int]]] = {}
        self.notes: dict[str, list[tuple]] = {}
        self.blocking: dict[str, int] = {}
        self.counts = dict.fromkeys(("receives", "received", "parked", "park_expired",
                                     "handed_off", "owed", "deferred", "borrowed", "retries",
                                     "calls", "cap_reads", "redriven"), 0)
        self.events: list[tuple] = []
        self._tick = 0
        self._turn = 0
        #: A fleet-wide serve of the long polls is due (one per instant messages show at).
        self._serving = False
        self.now = 0.0
        #: Messages made visible so far: a host whose receive could bring nothing new
        #: asks again once this moves.
        self.shown = 0
        #: Jobs not yet final: while some are, a host with free slots keeps polling.
        self.left = n
        self._share_init()
        for i, job in enumerate(self.jobs):
            self._push(job.arrival, VISIBLE, i, 0)
        #: When the next read of the waiting view is due (None: none is, nothing parked).
        self._view_due: float | None = None

    # -- the event loop ----------------------------------------------------------------
    def run(self) -> Schedule:
        events, hosts = self.events, self.hosts
        while events:
            now, _, kind, a, b, c, d = heapq.heappop(events)
            self.now = now
            if kind == FINISH:
                host = hosts[b]
                host.done.append((a, c, d))
                if host.state == IDLE:
                    self._schedule(host, now)
            elif kind == VISIBLE:
                if self.version[a] == b and self.state[a] in (WAITING, PARKED) and \
                        self._show(a):
                    self._poke(now)
            elif kind in (TICK, RESUME):
                host = hosts[a]
                if host.token == b:
                    if kind == TICK:
                        host.clock = max(host.clock, now)
                        self._unchain(host, host.clock)
                        host.state = BUSY
                        host.turn = self._pass(host)
                    self._resume(host)
            elif kind == SERVE_ALL:
                self._serve_polls(now)
            elif kind == VIEW:
                self._view_read(now)
            elif hosts[a].rx_token == b:  # the receive's own events
                host = hosts[a]
                if kind == SERVE:
                    self._serve(host, now)
                elif kind == POLL_END:
                    if host.rx == RX_WAIT:
                        self._poll_ended(host, now)
                elif host.rx == RX_BACK:  # ANSWER: the loop wakes on the receive's pipe
                    host.rx = RX_DONE
                    if host.state == IDLE:
                        self._schedule(host, now)
        last = max((e for e in self.end if e is not None), default=self.now)
        for host in hosts:
            self._unchain(host, last)  # count the empty polls up to the last job's end
        return Schedule(jobs=self.jobs, policy=self.policy, attempts=tuple(self.attempts),
                        first_start=tuple(self.first_start), end=tuple(self.end),
                        status=tuple(self.status), counts=dict(self.counts))

    def _push(self, at: float, kind: int, a, b=0, c=0, d=False) -> None:
        self._tick += 1
        heapq.heappush(self.events, (at, self._tick, kind, a, b, c, d))

    def _resume(self, host: Host) -> None:
        """Run the host's pass until it waits on AWS (then come back then) or ends."""
        for _ in host.turn:
            host.token += 1
            self._push(host.clock, RESUME, host.index, host.token)
            return
        host.turn = None

    def _schedule(self, host: Host, at: float) -> None:
        host.token += 1
        host.state = SCHEDULED
        self._push(max(at, host.clock), TICK, host.index, host.token)

    def _poke(self, now: float) -> None:
        """A message is visible: long polls return with it, idle parents with room ask."""
        if not self._serving:  # after every message shown at this instant (a later event)
            self._serving = True
            self._push(now, SERVE_ALL, 0)
        for host in self.hosts:
            if host.rx == RX_NONE and host.state == IDLE and host.free:
                self._schedule(host, now)

    def _view_read(self, now: float) -> None:
        """Every host reads who has work waiting (the ``waiting-view`` thread, every
        ``redrive_seconds``); a host acts on it in its next pass (``Refiller.restart_parked``).

        A read can start only parked jobs: while none is parked the reads are not
        simulated (the next park arms them again), and an idle host is woken for one
        only if a tenant with parked work is below its cap or, borrowing, may borrow
        (else its pass would decide nothing).
        """
        self._view_due = None
        if not any(self._parked(tenant) for tenant in self.notes):
            return
        useful = self.policy.borrow or any(self._parked(t) for t in self._blockers())
        for host in self.hosts:
            host.view += 1
            if host.state != IDLE:
                continue  # its pass in progress, or due, acts on it
            if useful and host.free:
                self._schedule(host, now)
            else:  # the worker's loop comes round within 0.5 s and finds nothing to do
                host.viewed = host.view
        self._arm_view(now)

    def _arm_view(self, now: float) -> None:
        """A job was parked: the next read of the waiting view after *now* is due (on the
        thread's period, counted from the clock's zero, not from a boot)."""
        period = self.policy.redrive_seconds
        if period > 0 and self._view_due is None:
            self._view_due = max((math.floor(now / period) + 1) * period, now + period / 2)
            self._push(self._view_due, VIEW, 0)

    def _behind(self, host: Host) -> bool:
        """Has something happened meanwhile that the host must see before it goes on?

        The host's clock ran ahead while it waited on AWS; it needs to wait
        for the fleet only if an event falls in between (or else nothing
        could have changed).
        """
        events = self.events
        return host.clock > self.now and bool(events) and events[0][0] <= host.clock

    def _spend(self, host: Host, calls: int) -> None:
        self.counts["calls"] += calls
        host.clock += calls * self.policy.call_seconds

