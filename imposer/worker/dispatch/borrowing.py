"""Work-conserving caps: when a tenant at its cap may borrow an idle slot, and who waits.

Jobs cannot be preempted, so fairness to a tenant that arrives later comes
from a reserve: borrowed work never leaves fewer than ``reserve_slots`` slots
of this host free, so a newcomer starts at once on a reserved slot and its
further jobs wait at most for borrowed jobs to end. And a tenant never
borrows while another tenant below its cap has work waiting, as far as
imposer knows: the open-jobs index (queued or retrying jobs: live work, not
history) and this batch of messages.

The same background read (``refresh``, every ``IMPOSER_REDRIVE_SECONDS``)
says which tenants at their cap have work waiting (their parked jobs may
borrow idle slots, ``policy.borrow_turns``) and which tenants below their
cap have queued work: parked jobs no hand-off reached (a release or a read
of the notes failed) are started from there by ``Refiller.restart_parked``. Its
cost is one read of the open index, of the counters and of the tiers per
interval per host, whatever the number of jobs.
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable, Mapping

import attrs

from imposer.state.jobs import JobStore
from imposer.state.leases import LeaseStore
from imposer.state.tenants import TenantStore
from imposer.worker import policy

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class WaitingView:
    """Who has work waiting, as of the last read of the open index."""

    #: Tenants below their cap with queued or retrying work: they block borrowing.
    blockers: frozenset[str] = frozenset()
    #: Tenants below their cap with queued work (parked jobs a hand-off may have missed).
    below_cap: frozenset[str] = frozenset()
    #: Tenants at their cap (not paused) with work waiting -> slots they borrow now.
    at_cap: Mapping[str, int] = attrs.field(factory=dict)
    #: Tenants of the express class (their borrowed jobs may take the reserve), as of the
    #: same read of the tenants table.
    express: frozenset[str] = frozenset()
    #: Counts the reads; a step that acts once per read compares it.
    generation: int = 0


class BorrowPolicy:
    """Say whether a tenant at its cap may take one more, borrowed, slot; and who waits."""

    def __init__(self, enabled: bool, reserve: int, leases: LeaseStore, jobs: JobStore,
                 tenants: TenantStore) -> None:
        self.enabled = enabled
        self.reserve = reserve
        self.leases, self.jobs, self.tenants = leases, jobs, tenants
        self._view = WaitingView()
        self._lock = threading.Lock()

    def refresh(self) -> frozenset[str]:
        """Re-read who has work waiting (a background pass); return the blockers."""
        records = self.jobs.open_jobs(("queued", "retrying"))
        blockers, below, at_cap, express = set(), set(), {}, frozenset()
        if records:
            counters = self.leases.counters()
            configs = self.tenants.list()
            caps = {c.tenant_id: c.cap for c in configs if c.cap is not None}
            express = frozenset(c.tenant_id for c in configs if c.express)
            for r in records:
                counter = counters.get(r.tenant_id)
                cap = caps.get(r.tenant_id, self.tenants.default_cap)
                if policy.may_take_own_slot(counter.inflight if counter else 0, cap):
                    blockers.add(r.tenant_id)
                    if r.status.value == "queued":
                        below.add(r.tenant_id)
                elif cap > 0:
                    at_cap[r.tenant_id] = counter.borrowed if counter else 0
        with self._lock:
            self._view = WaitingView(blockers=frozenset(blockers), below_cap=frozenset(below),
                                     at_cap=at_cap, express=express,
                                     generation=self._view.generation + 1)
        return self._view.blockers

    def view(self) -> WaitingView:
        with self._lock:
            return self._view

    def blockers(self) -> frozenset[str]:
        return self.view().blockers

    def express(self) -> frozenset[str]:
        """The express tenants (none with borrowing off: the class only widens borrowing)."""
        return self.view().express if self.enabled else frozenset()

    def borrowers(self, prefer: Iterable[str], parked: Iterable[str]) -> dict[str, int]:
        """The borrow rule's candidates, each with the slots it borrows: *prefer*, the
        tenants this host *parked* lately, and those the waiting view names at their cap
        with work waiting."""
        borrowers = dict.fromkeys((*prefer, *parked), 0)
        borrowers.update(self.view().at_cap)
        return borrowers

    def allows(self, tenant: str, free_slots: int) -> str | None:
        """Return None if *tenant* may borrow now, else the reason it may not."""
        view = self.view()
        return policy.why_not_borrow(self.enabled, free_slots, self.reserve, tenant,
                                     view.blockers, view.express)

    def turns(self, free_slots: int, borrowers: Mapping[str, int]) -> list[str]:
        """The capped tenants whose parked jobs the idle slots go to now (``borrow_turns``)."""
        view = self.view()
        return policy.borrow_turns(self.enabled, free_slots, self.reserve, borrowers,
                                   view.blockers, view.express)
