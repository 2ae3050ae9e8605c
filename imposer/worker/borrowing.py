"""Work-conserving caps: when a tenant at its cap may borrow an idle slot.

Jobs cannot be preempted, so fairness to a tenant that arrives later comes
from a reserve: borrowed work never leaves fewer than ``reserve_slots`` slots
of this host free, so a newcomer starts at once on a reserved slot and its
further jobs wait at most for borrowed jobs to end. And a tenant never
borrows while another tenant below its cap has work waiting, as far as
imposer knows: the open-jobs index (queued or retrying jobs: live work, not
history) and this batch of messages.
"""

from __future__ import annotations

import logging
import threading

from imposer.state.jobs import JobStore
from imposer.state.leases import LeaseStore
from imposer.state.tenants import TenantStore
from imposer.worker import policy

logger = logging.getLogger(__name__)


class BorrowPolicy:
    """Say whether a tenant at its cap may take one more, borrowed, slot."""

    def __init__(self, enabled: bool, reserve: int, leases: LeaseStore, jobs: JobStore,
                 tenants: TenantStore) -> None:
        self.enabled = enabled
        self.reserve = reserve
        self.leases, self.jobs, self.tenants = leases, jobs, tenants
        self._blockers: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def refresh(self) -> frozenset[str]:
        """Re-read which tenants below their cap have work waiting (a background pass)."""
        waiting = {r.tenant_id for r in self.jobs.open_jobs(("queued", "retrying"))}
        if waiting:
            counters = self.leases.counters()
            caps = self.tenants.caps()
            waiting = {t for t in waiting if policy.may_take_own_slot(
                counters[t].inflight if t in counters else 0,
                caps.get(t, self.tenants.default_cap))}
        with self._lock:
            self._blockers = frozenset(waiting)
        return self._blockers

    def blockers(self) -> frozenset[str]:
        with self._lock:
            return self._blockers

    def allows(self, tenant: str, free_slots: int) -> str | None:
        """Return None if *tenant* may borrow now, else the reason it may not."""
        return policy.why_not_borrow(self.enabled, free_slots, self.reserve, tenant,
                                     self.blockers())
