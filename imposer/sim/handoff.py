"""A freed or idle slot in virtual time: the worker's own decision, carried out on the fleet.

Who gets a slot is ``imposer.worker.allocation.decide``, the function the worker's
settler and refill ask: before a release (``Releasing``: hand the slot over with it,
after a read of the tenant's notes and, for the host's last slot, a look at the
queue), after a plain release (``Released``: start, owe, or lend a borrowed slot
again), on an empty receive (``QueueEmpty``: pay what is owed, lend idle slots) and
after a batch (``BatchDone``: fair share's fill). This module builds the decision's
``Standing`` from the fleet's state and carries out each step it returns, charging
each AWS call the worker's step makes. The worker's periodic restart of parked jobs (``ViewRead``)
is not replayed: it starts only what a failed AWS call left, and here none fails.
"""

from __future__ import annotations

import heapq

from imposer.sim.state import CALLS, NOTES_READ, PARKED, RX_NONE, Host
from imposer.worker import allocation
from imposer.worker.allocation import Kind, Read, Step


class HandOffs:
    """``Settler.promise_slot`` and ``Refiller.allocate`` on the fleet.

    Mixed into ``engine._Fleet``: its methods read and move the fleet's state
    (the queue, the counters, the hosts) as the event loop reaches each step.
    """

    def _promise(self, host: Host, job: int, free: int, borrowed: bool):
        """Before *job*'s release, with *free* slots of the host free: the decision's last
        step (``HAND_OVER``, ``LEAVE`` or ``NOTHING_PARKED``), its reads and look done."""
        tenant = self.tenant[job]
        trigger = allocation.Releasing(tenant, borrowed)
        borrowers = self._borrowers(host, tenant) if borrowed and self.policy.borrow else {}
        reads: dict[str, Read] = {}
        looked: dict[str, bool] = {}
        while True:
            yields = None
            if self.sharing and not borrowed and tenant in reads and \
                    not self._share_allows(tenant, host.clock, ending=True):
                yields = tenant  # (whom to: ``Released`` asks the share rule after it)
            step = allocation.decide(self._standing(
                host, free, reads=reads, looked=looked, borrowers=borrowers,
                yields_to=yields), trigger, self.rules)
            if step.kind is Kind.READ:
                reads[step.tenant] = yield from self._read(host, step.tenant)
            elif step.kind is Kind.LOOK:  # (none while the host's receive is out)
                looked[step.tenant] = host.rx == RX_NONE and \
                    (yield from self._look(host, step.tenant, free))
            else:
                return step

    def _allocate(self, host: Host, trigger, prefer: str | None = None):
        """``Refiller.allocate``: ask the decision and carry it out until it says no more."""
        tried: set[str] = set()
        lent: dict[str, int] | None = None
        started = 0
        while True:
            borrowers = lent if lent is not None else self._borrowers(host, prefer)
            choice = None
            if self.sharing and isinstance(trigger, (allocation.Released,
                                                     allocation.BatchDone)):
                choice = self._share_choice(host.clock, exclude=tried)
            step = allocation.decide(self._standing(
                host, len(host.free), tried=tried, started=started, borrowers=borrowers,
                choice=choice), trigger, self.rules)
            if step is None:
                return started
            tenant, owed = step.tenant, host.owed
            if step.kind is Kind.OWE:
                owed[tenant] = min(self.policy.slots, owed.get(tenant, 0) + 1)
                self.counts["owed"] += 1
                tried.add(tenant)
                continue
            if step.kind is Kind.FORGIVE:
                owed.pop(tenant, None)
                continue
            if step.borrow and lent is None:
                lent = dict(borrowers)
            paying = isinstance(trigger, allocation.QueueEmpty) and not step.borrow
            if paying:
                owed[tenant] -= 1
            if (yield from self._hand_off(host, tenant, borrow=step.borrow)):
                started += 1
                if step.borrow:
                    lent[tenant] += 1
            else:
                tried.add(tenant)
                if step.borrow:
                    lent.pop(tenant, None)
                if paying:
                    owed.pop(tenant, None)
            if paying and not owed.get(tenant):
                owed.pop(tenant, None)

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
        """The tenant has a parked job (``promise_slot`` finds one in its notes)."""
        return any(self._live(note) for note in self.notes.get(tenant, ()))

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
        memo = self.policy.memo
        return all(self.tenant[job] == tenant or
                   (memo and host.capped.get(self.tenant[job], -1.0) > host.clock)
                   for job in batch)

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
