"""A freed or idle slot in virtual time: the worker's own decision, carried out on the fleet.

Who gets a slot is ``imposer.worker.allocation.decide``, the function the worker's
settler and refill ask: before a release (``Releasing``: hand the slot over with it,
after a read of the tenant's notes and, for the host's last slot, a look at the
queue), after a plain release (``Released``: start, owe, or lend a borrowed slot
again), on an empty receive (``QueueEmpty``: pay what is owed, lend idle slots) and
after a batch (``BatchDone``: fair share's fill), asked step by step by the worker's
own executor (``imposer.worker.executor``). This module builds the decision's
``Standing`` from the fleet's state and carries out each step the executor yields,
charging each AWS call the worker's step makes; and at each read of the waiting view
(``ViewRead``, every ``redrive_seconds``), the restart of parked jobs no hand-off reached
and, borrowing, the lend of idle slots.
"""

from __future__ import annotations

import heapq

from imposer.sim.state import CALLS, NOTES_READ, PARKED, RX_NONE, Host
from imposer.worker import allocation, executor
from imposer.worker.allocation import Kind, Read, Step


class HandOffs:
    """``Promiser.promise`` and ``Refiller.allocate`` on the fleet: their plans
    (``executor.releasing``, ``executor.allocate``), the steps carried out here.

    Mixed into ``engine._Fleet``: its methods read and move the fleet's state
    (the queue, the counters, the hosts) as the event loop reaches each step.
    """

    def _promise(self, host: Host, job: int, free: int, borrowed: bool):
        """Before *job*'s release, with *free* slots of the host free: the plan's last
        step (``HAND_OVER``, ``LEAVE`` or ``NOTHING_PARKED``), its reads and look done."""
        tenant = self.tenant[job]
        borrowers = self._borrowers(host, tenant) if borrowed and self.policy.borrow else {}

        def standing(progress: executor.Progress) -> allocation.Standing:
            yields = None
            if self.sharing and not borrowed and tenant in progress.reads and \
                    not self._share_allows(tenant, host.clock, ending=True):
                yields = tenant  # (whom to: ``Released`` asks the share rule after it)
            return self._standing(host, free, reads=dict(progress.reads),
                                  looked=dict(progress.looked),
                                  borrowers=dict(progress.borrowers), yields_to=yields)

        plan = executor.releasing(allocation.Releasing(tenant, borrowed), standing, borrowers,
                                  self.rules)
        return (yield from self._carry_out(host, plan, free))

    def _allocate(self, host: Host, trigger, prefer: str | None = None,
                  below_cap: tuple[str, ...] = ()):
        """``Refiller.allocate``: the worker's plan for the free slots, carried out here;
        *below_cap*: the waiting view's tenants below their cap with work waiting."""
        plan = executor.allocate(trigger, _Parent(self, host, below_cap), rules=self.rules,
                                 prefer=(prefer,) if prefer else ())
        return (yield from self._carry_out(host, plan, len(host.free),
                                           restart=isinstance(trigger, allocation.ViewRead)))

    def _below_cap(self, host: Host) -> tuple[str, ...]:
        """``WaitingView.below_cap``: tenants below their cap with work waiting (here
        exact, read at the pass, and retrying jobs counted as waiting too)."""
        return tuple(sorted(self._blockers()))

    def _carry_out(self, host: Host, plan: executor.Plan, free: int, restart: bool = False):
        """Drive *plan* in virtual time: each step's AWS calls spent as the worker's are.

        *restart*: the plan restarts parked jobs at a read of the waiting view; its look
        counts what earlier looks brought too (``Intake.nothing_waiting``), and a start
        that is no borrow is ``redriven``."""
        def carry(step: Step):
            if step.kind is Kind.READ:
                return (yield from self._read(host, step.tenant))
            if step.kind is Kind.LOOK:  # (none while the host's receive is out)
                earlier = list(host.looked)
                return host.rx == RX_NONE and (yield from self._look(
                    host, step.tenant, free)) and (not restart or self._none_for_others(
                        host, earlier, step.tenant))
            if step.kind is Kind.START:
                started = yield from self._hand_off(host, step.tenant, borrow=step.borrow)
                if started and restart and not step.borrow:
                    self.counts["redriven"] += 1
                return started
            if step.kind is Kind.OWE:
                self.counts["owed"] += 1
            return None  # (OWE, FORGIVE: the plan's own)
        return (yield from executor.carried(plan, carry))

    def _standing(self, host: Host, free: int, **known) -> allocation.Standing:
        """The decision's view of *host* now, with what the caller learnt (*known*)."""
        p = self.policy
        parked = tuple(t for t in host.parked_seen if self._parked_lately(host, t))
        return allocation.Standing(
            free=free, parked=parked, owed=dict(host.owed), borrow=p.borrow,
            reserve=p.reserve, blockers=frozenset(self._blockers()) if p.borrow else frozenset(),
            express=frozenset(p.express) if p.borrow else frozenset(),
            sharing=self.sharing, **{k: (frozenset(v) if k == "tried" else v)
                                     for k, v in known.items()})

    def _hand_over(self, host: Host, step: Step) -> bool:
        """The release's own transaction starts the tenant's oldest parked job in the slot
        it freed (``LeaseStore.hand_over``: no call of its own); False if refused (the note
        taken meanwhile, or, borrowed, the tenant no longer at its cap)."""
        tenant = step.tenant
        for note in self._notes(host, tenant):
            if step.borrow:  # (refused below the cap: its own slot is handed over elsewhere)
                if self.rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]) or \
                        not host.free:
                    return False
                self._start(note[3], host, True)
                self.counts["borrowed"] += 1
            else:
                if not self.rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]):
                    return False
                self._start(note[3], host, False)  # its note goes stale: no count moves
                self.counts["handed_off"] += 1
            host.notes_left[tenant] = host.notes_left.get(tenant, 1) - 1
            return True
        return False

    def _read(self, host: Host, tenant: str):
        """``Settler._next_parked``: the tenant's cap (its cache) and oldest notes (a Query,
        unless notes of the last one are left); what it found."""
        calls = self._cap_calls(host, tenant)
        cached = host.notes_left.get(tenant, 0) > 0
        if not cached and self.cap[tenant] > 0:
            calls += CALLS["notes"]
        if calls:
            self._spend(host, calls)
            if self._behind(host):
                yield
        if self.cap[tenant] <= 0:
            return Read.PAUSED
        if cached:
            return Read.PARKED if self._parked(tenant) else Read.NONE
        read = self._notes(host, tenant)
        self._seen_notes(host, tenant, bool(read))
        host.notes_left[tenant] = len(read)
        return Read.PARKED if read else Read.NONE

    def _borrowers(self, host: Host, prefer: str | None = None) -> dict[str, int]:
        """``Refiller.borrowers``: tenants at their cap with a parked job (the waiting
        view, here exact), and *prefer*; each with the slots it borrows."""
        out = {}
        for tenant in ([prefer] if prefer else []) + sorted(self.notes):
            if self._parked(tenant) and self.cap[tenant] > 0:
                out[tenant] = self.borrowed[tenant]
        return out

    def _turns(self, host: Host, prefer: str | None = None) -> list[str]:
        p = self.policy
        return self.rules.borrow_turns(p.borrow, len(host.free), p.reserve,
                                       self._borrowers(host, prefer), self._blockers(),
                                       frozenset(p.express))

    def _parked_lately(self, host: Host, tenant: str) -> bool:
        """``HandOff.parked_lately``: this host parked, or read notes of, the tenant within
        a park window (and no read since found none)."""
        seen = host.parked_seen.get(tenant)
        return seen is not None and host.clock - seen < self.policy.park_seconds

    def _seen_notes(self, host: Host, tenant: str, found: bool) -> None:
        """``HandOff.seen_parked``: a read found notes of the tenant (or, none, forgets it)."""
        host.parked_seen.pop(tenant, None)
        if found:
            host.parked_seen[tenant] = host.clock

    def _parked(self, tenant: str) -> bool:
        """The tenant has a parked job (``promise_slot`` finds one in its notes). The notes
        gone stale at the top of its heap are dropped on the way (a stale note never
        becomes live again: its job's version moved on)."""
        notes = self.notes.get(tenant)
        while notes and not self._live(notes[0]):
            heapq.heappop(notes)
        return bool(notes)

    def _notes(self, host: Host, tenant: str) -> list[tuple]:
        """The tenant's most urgent, then oldest, live notes, as one read takes them, in the
        order the decision takes them (``allocation.in_turn``)."""
        notes = self.notes.get(tenant)
        read = []
        while notes and len(read) < NOTES_READ:
            note = heapq.heappop(notes)
            if self._live(note):  # a note taken, or back in the queue, is gone
                read.append(note)
        for note in read:
            heapq.heappush(notes, note)
        return allocation.in_turn(read, lambda note: self.parked_by[note[3]] == host.index,
                                  lambda note: note[0][:2], self.rules)

    def _look(self, host: Host, tenant: str, free: int):
        """``Intake.look``: a receive that does not wait, on the parent's own time, for
        *free* slots and parking room; True if it brought nothing another tenant could
        start here. What it brought is dispatched with the pass's receive (``fill``)."""
        self.counts["receives"] += 1
        self.counts["calls"] += CALLS["receive"]
        host.clock += self.policy.receive_seconds / 2
        if self._behind(host):
            yield  # SQS has it: it takes what is visible then
        batch = self._take(self.rules.receive_size(free, host.parks))
        host.clock += self.policy.receive_seconds / 2
        host.looked.extend(batch)
        return self._none_for_others(host, batch, tenant)

    def _none_for_others(self, host: Host, batch: list[int], tenant: str) -> bool:
        """``Intake._none_for_others``: nothing in *batch* another tenant could start here
        (its own, or of tenants known to be at their cap)."""
        memo = self.policy.memo  # (off: nothing is recorded, and nothing need be asked)
        return all(self.tenant[job] == tenant or
                   (memo and host.memo.cap(self.tenant[job]) is not None) for job in batch)

    def _live(self, note: tuple) -> bool:
        return self.version[note[3]] == note[2] and self.state[note[3]] == PARKED

    def _hand_off(self, host: Host, tenant: str, borrow: bool = False):
        """``Refiller._hand_off``: read the tenant's oldest notes (a Query, unless notes
        of the last one are left), this host's own first, and start the first still
        parked in a free slot, inside the acquire; True if one started. With *borrow*,
        on a borrowed slot, if the tenant is still at its cap (``Refiller._take_one``)."""
        if not borrow and not self._share_allows(tenant, host.clock):
            return False  # another tenant is further below its share now (no read)
        cached = host.notes_left.get(tenant, 0) > 0
        if not cached:
            self._spend(host, CALLS["notes"])
            if self._behind(host):
                yield
        read = self._notes(host, tenant)
        if not cached:  # (``HandOff.notes``)
            self._seen_notes(host, tenant, bool(read))
        # the worker tries the notes one Query read before it reads again
        host.notes_left[tenant] = host.notes_left[tenant] - 1 if cached else len(read) - 1
        for note in read:
            yield from self._acquire(host, tenant)
            if not self._live(note):
                continue  # another host took it meanwhile: the next one
            if borrow:  # (refused below the cap: its own slot is handed over elsewhere)
                if self.rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]) or \
                        not host.free:
                    return False
                self._start(note[3], host, True)
                self.counts["borrowed"] += 1
                return True
            if not self.rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]):
                self._known_capped(host, tenant)
                return False
            self._start(note[3], host, False)  # its note goes stale: no count moves
            self.counts["handed_off"] += 1
            return True
        return False


class _Parent:
    """One host as the worker's plan sees it (``executor.Parent``, as ``refill._Parent``)."""

    def __init__(self, fleet: HandOffs, host: Host, below_cap: tuple[str, ...] = ()) -> None:
        self.fleet, self.host, self.below_cap = fleet, host, below_cap
        self.slots, self.owed = fleet.policy.slots, host.owed

    def standing(self, trigger, progress: executor.Progress) -> allocation.Standing:
        fleet, host = self.fleet, self.host
        choice = None
        if fleet.sharing and isinstance(trigger, (allocation.Released, allocation.BatchDone)):
            choice = fleet._share_choice(host.clock, exclude=progress.tried)
        memo = fleet.policy.memo
        return fleet._standing(host, len(host.free), tried=progress.tried,
                               started=progress.started, borrowers=progress.borrowers,
                               looked=dict(progress.looked), choice=choice,
                               below_cap=self.below_cap,
                               capped=frozenset(t for t in self.below_cap if memo and
                                                host.memo.cap(t) is not None))

    def borrowers(self, prefer: tuple[str, ...]) -> dict[str, int]:
        return self.fleet._borrowers(self.host, prefer[0] if prefer else None)
