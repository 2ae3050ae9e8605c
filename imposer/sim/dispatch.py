"""The parent's dispatch of a receive's batch: start, park, defer or lend each message.

As ``imposer.worker.dispatch.dispatcher`` does, with its rules from
``imposer.worker.policy``: the cap (``may_take_own_slot``) behind an acquire
(one per tenant for a burst that fits under its cap), the worker's own memo
of tenants found at their cap (``CapMemo``), the borrow rule (``why_not_borrow``) after
the batch's own starts.
"""

from __future__ import annotations

import heapq

from imposer.models.urgency import sort_key
from imposer.sim.state import CALLS, PARKED, VISIBLE, WAITING, Host

#: Under perfect delivery (no park window), how long a message the share rule held stays
#: parked unless a hand-off starts it first.
HELD_SECONDS = 300.0


class Dispatch:
    """``Dispatcher.take_batch`` and its acquire, park and deferral.

    Mixed into ``engine._Fleet``: its methods read and move the fleet's state
    (the queue, the counters, the hosts) as the event loop reaches each step.
    """

    def _acquire(self, host: Host, tenant: str):
        """One acquire's calls: the tenant's cap (unless this host read it lately), the
        transaction (none for a paused tenant); yields until the transaction commits."""
        calls = CALLS["acquire"] if self.cap[tenant] > 0 else 0
        self._spend(host, calls + self._cap_calls(host, tenant))
        if self._behind(host):
            yield

    def _cap_calls(self, host: Host, tenant: str) -> int:
        """The read of the tenant's cap, unless this host read it lately (its cache)."""
        read = host.cap_read.get(tenant)
        if read is None or host.clock - read >= self.policy.cap_cache_seconds:
            host.cap_read[tenant] = host.clock
            self.counts["cap_reads"] += CALLS["cap"]
            return CALLS["cap"]
        return 0

    def _bursts(self, host: Host, batch: list[int]):
        """``take_bursts``: each tenant's jobs among those the free slots take, in one
        transaction, if all of them (up to its cap) fit under its cap; returns the messages
        left for one by one, and whether any started."""
        groups: dict[str, list[int]] = {}
        for job in batch[:len(host.free)] if len(host.free) > 1 and not self.sharing else ():
            tenant = self.tenant[job]
            if not (self.policy.memo and host.memo.cap(tenant) is not None):
                groups.setdefault(tenant, []).append(job)
        taken: set[int] = set()
        for tenant, jobs in groups.items():
            count = min(len(jobs), len(host.free), self.cap[tenant])
            if count < 2:
                continue
            yield from self._acquire(host, tenant)
            if self.rules.may_take_own_slot(self.inflight[tenant] + count - 1, self.cap[tenant]):
                for job in jobs[:count]:
                    self._start(job, host, False)
                    taken.add(job)
                if count == self.cap[tenant]:  # it filled its cap
                    self._known_capped(host, tenant)
        return [job for job in batch if job not in taken], bool(taken)

    def _dispatch(self, host: Host, batch: list[int]):
        """``take_batch``: start, park, defer or lend; True if a message started or went away."""
        p, free = self.policy, host.free
        host.parks = 0
        batch, progress = yield from self._bursts(host, batch)
        candidates = []
        for job in batch:
            tenant = self.tenant[job]
            cap = self.cap[tenant]
            self._saw(tenant, host.clock)
            known_capped = p.memo and host.memo.cap(tenant) is not None
            if not free:  # ``park_or_give_back``: beyond the free slots (room for parking)
                if known_capped and cap > 0:
                    progress |= self._wait(job, cap, host)
                elif cap > 0 and not self._share_allows(tenant, host.clock):
                    progress |= self._wait(job, cap, host, held=True)  # held, as with a slot
                else:
                    self._spend(host, CALLS["give_back"])
                    self._back(job)
                continue
            if known_capped:
                own = False  # known at cap: no transaction
            elif self.rules.may_take_own_slot(self.inflight[tenant], cap) and \
                    not self._share_allows(tenant, host.clock):
                # held below its cap, another being further below its share: the view
                # read with the cap says so, and the transaction's condition would
                progress |= self._wait(job, cap, host, held=True)
                continue
            else:
                yield from self._acquire(host, tenant)
                own = self.rules.may_take_own_slot(self.inflight[tenant], cap)
                if not own and cap > 0:
                    self._known_capped(host, tenant)
            if own:
                self._start(job, host, False)
                progress = True
            elif cap > 0 and p.borrow:
                candidates.append(job)
            else:
                progress |= self._wait(job, cap, host)
        for job in candidates:  # lend_idle_slots: after the batch's own starts
            tenant = self.tenant[job]
            if self.rules.why_not_borrow(p.borrow, len(free), p.reserve, tenant,
                                         self._blockers(), frozenset(p.express)) is None:
                yield from self._acquire(host, tenant)
                if not self.rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]):
                    self._start(job, host, True)
                    self.counts["borrowed"] += 1
                    progress = True
                    continue
            progress |= self._wait(job, self.cap[tenant], host)
        return progress


    def _known_capped(self, host: Host, tenant: str) -> None:
        """``CapMemo.found``: the worker's memo (none for perfect delivery)."""
        if self.policy.memo:
            host.memo.found(tenant, self.cap[tenant])

    def _wait(self, job: int, cap: int, host: Host, held: bool = False) -> bool:
        """Park the message (at cap) or defer it (paused); a zero window keeps it visible.

        False when the message is visible again at once (nothing changed). One
        *held* by the share rule is parked even with a zero window (perfect
        delivery), for a hand-off to start: visible, it would fill every
        receive while the tenant the rule waits for stays in the queue.
        """
        tenant = self.tenant[job]
        self._count_waiting(job)
        window = self.policy.park_seconds if cap > 0 else self.policy.defer_seconds
        if held and window <= 0:
            window = HELD_SECONDS
        self._spend(host, CALLS["park"] if cap > 0 else CALLS["defer"])
        if window <= 0:
            self._back(job)
            return False
        self.version[job] += 1
        self._push(host.clock + window, VISIBLE, job, self.version[job])
        if cap > 0:
            host.parks += 1
            host.parked_seen[tenant] = host.clock  # (``HandOff.seen_parked``)
            self.state[job] = PARKED
            self.parked_by[job] = host.index
            self.counts["parked"] += 1
            self._arm_view(host.clock)
            j = self.jobs[job]  # (the waiting table's key: most urgent, then oldest, first)
            heapq.heappush(self.notes.setdefault(tenant, []),
                           ((*sort_key(j.priority, j.due), j.arrival), self.seq[job],
                            self.version[job], job))
        else:
            self.state[job] = WAITING
            self.counts["deferred"] += 1
        return True

    def _count_waiting(self, job: int) -> None:
        """A job seen waiting has a queued or retrying record: the borrow view counts it."""
        if not self.counted[job]:
            self.counted[job] = True
            tenant = self.tenant[job]
            self.blocking[tenant] = self.blocking.get(tenant, 0) + 1

    def _blockers(self) -> list[str]:
        """Tenants below their cap with work waiting, as the borrow view sees them."""
        return [t for t, n in self.blocking.items()
                if n and self.rules.may_take_own_slot(self.inflight[t], self.cap[t])]

