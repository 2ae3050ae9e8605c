"""Hand-offs: a freed slot goes to its tenant's oldest parked job, or is owed to it.

``Settler.promise_slot`` hands the slot over with its release if another
slot stays free (``may_hand_off``), or, for the host's last free slot, if a
look at the queue (``Intake.look``) finds nothing another tenant could start;
else the tenant is owed that hand-off, and a receive that comes back empty
pays what is owed, oldest tenant first (``Refiller.wake_idle``).

With borrowing on, a borrowed job's freed slot, and the idle slots an empty
receive finds, go to capped tenants' parked jobs under the borrow rule
(``Refiller.lend``, ``policy.borrow_turns``); the freed slot's job is started
by the release's own transaction (``Settler.promise_slot``), no call of its
own. The worker's periodic ``redrive`` is not replayed: it starts only what a
failed AWS call left, and here none fails.
"""

from __future__ import annotations

import heapq

from imposer.sim.state import CALLS, NOTES_READ, PARKED, RX_NONE, Host


class HandOffs:
    """``Refiller.wake``, ``wake_idle`` and ``_hand_off``.

    Mixed into ``engine._Fleet``: its methods read and move the fleet's state
    (the queue, the counters, the hosts) as the event loop reaches each step.
    """

    def _look_first(self, host: Host, tenant: str, free: int):
        """``promise_slot``'s look, before the release: None if it makes none, else
        whether the queue held nothing another tenant could start."""
        if self.rules.may_hand_off(free) or host.rx != RX_NONE or \
                not self.rules.may_hand_off(free, True) or not self._parked(tenant) or \
                not self._parked_lately(host, tenant):
            return None
        return (yield from self._look(host, tenant, free))

    def _wake(self, host: Host, tenant: str, looked: bool | None = None,
              borrowed: bool = False):
        """``Settler.promise_slot`` and ``wake``: one parked job of the tenant takes the
        freed slot, started by the release's own transaction, or is owed it.

        The host's last free slot is handed over only if the look made before
        the release (*looked*, ``_look_first``) found nothing another tenant
        could start (``Intake.look``; none while a receive is outstanding, and
        only for a tenant this host parked or read notes of within a park
        window: ``HandOff.parked_lately``). A *borrowed* job's slot is lent
        again (``_lend``), the first start riding on the release."""
        if borrowed and self.policy.borrow:
            yield from self._lend(host, prefer=tenant, with_release=True)
            return
        host.capped.pop(tenant, None)
        if self.sharing:  # the slot goes to whoever is furthest below its share
            tenant = self._share_choice(host.clock)
            if tenant is None or not self._parked(tenant):
                return  # nobody waits parked: the slot is the receive's
        free = len(host.free)
        if self.rules.may_hand_off(free):
            yield from self._hand_off(host, tenant, with_release=True)
            return
        if host.rx == RX_NONE and self.rules.may_hand_off(free, True) and \
                self._parked_lately(host, tenant):
            if not self._parked(tenant):  # ``promise_slot`` read its notes: none
                yield from self._hand_off(host, tenant, with_release=True)
                return
            if looked is not None and self.rules.may_hand_off(free, queue_empty=looked):
                yield from self._hand_off(host, tenant, with_release=True)
                return
        host.owed[tenant] = min(self.policy.slots, host.owed.get(tenant, 0) + 1)
        self.counts["owed"] += 1

    def _wake_idle(self, host: Host):
        """``Refiller.wake_idle``: the receive came back empty; pay what is owed, oldest first."""
        owed = host.owed
        for tenant in list(owed):
            while owed.get(tenant):
                if not self.rules.may_hand_off(len(host.free), queue_empty=True):
                    if host.free:  # the rule says no even now: nothing to wait for
                        owed.pop(tenant, None)
                    break
                owed[tenant] -= 1
                started = yield from self._hand_off(host, tenant)
                if not started:
                    owed.pop(tenant, None)
            if not owed.get(tenant):
                owed.pop(tenant, None)

    def _borrowers(self, host: Host, prefer: str | None = None) -> dict[str, int]:
        """``Refiller.lend``'s candidates: tenants at their cap with a parked job (the
        waiting view, here exact), and *prefer*; each with the slots it borrows."""
        out = {}
        for tenant in ([prefer] if prefer else []) + sorted(self.notes):
            if self._parked(tenant) and self.cap[tenant] > 0:
                out[tenant] = self.borrowed[tenant]
        return out

    def _turns(self, host: Host, prefer: str | None = None) -> list[str]:
        p = self.policy
        return self.rules.borrow_turns(p.borrow, len(host.free), p.reserve,
                                  self._borrowers(host, prefer), self._blockers())

    def _lend(self, host: Host, prefer: str | None = None, with_release: bool = False):
        """``Refiller.lend``: idle slots beyond the reserve to capped tenants' parked jobs.

        *with_release*: a borrowed job's slot was just freed, and the first turn
        whose tenant has a parked job starts it in the release's own transaction
        (``Settler._promise_lent``); the turns after it acquire as usual."""
        tried: set[str] = set()
        while host.free:
            turns = [t for t in self._turns(host, prefer) if t not in tried]
            if not turns:
                return
            parked = self._parked(turns[0])
            started = yield from self._hand_off(host, turns[0], with_release=with_release,
                                                borrow=True)
            with_release = with_release and not parked  # (a turn with none passes it on)
            if not started:
                tried.add(turns[0])

    def _parked_lately(self, host: Host, tenant: str) -> bool:
        """``HandOff.parked_lately``: this host parked, or read notes of, the tenant within
        a park window (and no read since found none)."""
        seen = host.parked_seen.get(tenant)
        return seen is not None and host.clock - seen < self.policy.park_seconds

    def _parked(self, tenant: str) -> bool:
        """The tenant has a parked job (``promise_slot`` finds one in its notes)."""
        return any(self._live(note) for note in self.notes.get(tenant, ()))

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

    def _live(self, note: tuple[float, int, int, int]) -> bool:
        return self.version[note[3]] == note[2] and self.state[note[3]] == PARKED

    def _hand_off(self, host: Host, tenant: str, with_release: bool = False,
                  borrow: bool = False):
        """``Refiller._hand_off``: read the tenant's oldest notes (a Query, unless notes
        of the last one are left), this host's own first, and start the first still
        parked in a free slot, inside the acquire, or inside the release that freed it
        (no call of its own); True if one started. With *borrow*, on a borrowed slot,
        if the tenant is still at its cap (``Refiller._take_one``)."""
        calls = self._cap_calls(host, tenant) if with_release else 0  # (``promise_slot``'s)
        cached = host.notes_left.get(tenant, 0) > 0
        if not cached:
            calls += CALLS["notes"]
        if calls:
            self._spend(host, calls)
            if self._behind(host):
                yield
        notes = self.notes.get(tenant)
        read = []
        while notes and len(read) < NOTES_READ:
            note = heapq.heappop(notes)
            if self._live(note):  # a note taken, or back in the queue, is gone
                read.append(note)
        for note in read:
            heapq.heappush(notes, note)
        read = self.rules.own_first(read, lambda note: self.parked_by[note[3]] == host.index)
        if read and not cached:  # (``HandOff.notes``)
            host.parked_seen[tenant] = host.clock
        elif not cached:
            host.parked_seen.pop(tenant, None)
        # the worker tries the notes one Query read before it reads again
        host.notes_left[tenant] = host.notes_left[tenant] - 1 if cached else len(read) - 1
        for note in read:
            if not borrow and not self._share_allows(tenant, host.clock):
                return False  # another tenant is further below its share now
            if with_release:
                with_release = False  # (the release's transaction is counted with the settle)
            else:
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
