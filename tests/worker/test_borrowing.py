"""Borrowing idle slots beyond the cap, without starving anyone."""

from __future__ import annotations

import time

import pytest

from imposer.models import JobStatus, TenantConfig
from imposer.state.leases import Verdict
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.threads.sweep import sweep
from tests.fixtures.jobs import record_of, request
from tests.fixtures.workers import Worker, layout, submit_jobs


def policy(backends, reserve=1):
    return BorrowPolicy(True, reserve, backends.leases, backends.jobs, backends.tenants)


class TestBorrowedLeases:
    def test_borrow_only_at_cap_and_counted_apart(self, backends):
        """A borrow below the cap is refused; at the cap it is counted in `borrowed`, not `inflight`."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        assert backends.leases.acquire(request(), "h", 0, borrow=True).verdict == Verdict.AT_CAP
        own = backends.leases.acquire(request(), "h", 0).lease
        lent = backends.leases.acquire(request(), "h", 1, borrow=True).lease
        assert (own.borrowed, lent.borrowed) == (False, True)
        counter = backends.leases.counters()["acme"]
        assert (counter.inflight, counter.borrowed) == (1, 1)
        assert backends.leases.acquire(request(), "h", 2).verdict == Verdict.AT_CAP
        backends.leases.release(lent, JobStatus.SUCCEEDED)
        counter = backends.leases.counters()["acme"]
        assert (counter.inflight, counter.borrowed) == (1, 0)

    def test_swept_borrowed_lease_returns_to_borrowed_count(self, backends, clock):
        """Reclaiming an expired borrowed lease decrements `borrowed`, leaving the cap count alone."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        backends.leases.acquire(request(), "h", 0)
        backends.leases.acquire(request(), "h", 1, borrow=True)
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        assert len(sweep(backends.leases, backends.metrics).reclaimed) == 2
        counter = backends.leases.counters()["acme"]
        assert (counter.inflight, counter.borrowed) == (0, 0)

    def test_repair_counts_own_and_borrowed_apart(self, backends):
        """A drifted counter is repaired to its own and borrowed lease counts separately."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        backends.leases.acquire(request(), "h", 0)
        backends.leases.acquire(request(), "h", 1, borrow=True)
        backends.dynamo.update(backends.settings.leases_table, {"pk": "counter#acme"},
                               "SET inflight = :n, borrowed = :n", {":n": 5})
        assert backends.leases.repair() == {"acme": (10, 2)}
        counter = backends.leases.counters()["acme"]
        assert (counter.inflight, counter.borrowed) == (1, 1)


class TestPolicy:
    def test_reserve_is_never_lent(self, backends):
        """With one slot in reserve, a tenant may borrow only while two or more slots are free."""
        p = policy(backends)
        assert p.allows("acme", 2) is None
        assert "reserve" in p.allows("acme", 1)

    def test_waiting_tenant_below_cap_blocks_borrowing(self, backends):
        """A queued job of another tenant below its cap stops everyone else from borrowing."""
        lease = backends.leases.acquire(request("globex"), "h", 0).lease
        backends.leases.release(lease, JobStatus.RETRYING, failures=1, error="x")
        p = policy(backends)
        assert p.refresh() == {"globex"}
        assert "globex" in p.allows("acme", 5)
        assert p.allows("globex", 5) is None

    def test_waiting_tenant_at_cap_does_not_block(self, backends):
        """A tenant waiting only because it is at its own cap does not stop others borrowing."""
        backends.tenants.put(TenantConfig(tenant_id="globex", cap=1))
        backends.leases.acquire(request("globex"), "h", 0)
        waiting = request("globex")
        backends.jobs.note_waiting(waiting, time.time(), "at tenant cap", deferred=True)
        p = policy(backends)
        assert p.refresh() == frozenset()
        assert p.allows("acme", 5) is None

    def test_the_view_names_capped_tenants_with_work_waiting(self, backends):
        """A tenant at its cap with a parked job is a borrower (with its borrowed count); one
        below its cap with a queued job is re-driven and blocks borrowing."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        backends.leases.acquire(request("acme"), "h", 0)
        backends.leases.acquire(request("acme"), "h", 1, borrow=True)
        backends.jobs.note_waiting(request("acme"), time.time(), "at tenant cap", deferred=True)
        backends.jobs.note_waiting(request("globex"), time.time(), "queued")
        p = policy(backends)
        p.refresh()
        view = p.view()
        assert (dict(view.at_cap), view.below_cap, view.blockers, view.generation) == \
            ({"acme": 1}, {"globex"}, {"globex"}, 1)

    def test_off_by_default(self, backends):
        """Borrowing stays off unless enabled, so the seed's static cap is the default."""
        assert backends.settings.borrow is False
        off = BorrowPolicy(False, 1, backends.leases, backends.jobs, backends.tenants)
        assert off.allows("acme", 8) == "borrowing is off"


@pytest.mark.slow
class TestTwoHostsBorrowing:
    def test_cap_and_reserve_hold_and_nothing_leaks_after_kill9(self, settings, backends,
                                                                 tmp_path):
        """Across two borrowing hosts the own count stays within the cap, the reserve stays free."""
        backends.tenants.put(TenantConfig(tenant_id="heavy", cap=2))
        ids = submit_jobs(settings, tmp_path, "heavy", 24, layout(fake_sleep=0.8))
        env = {"IMPOSER_BORROW": "1", "IMPOSER_RESERVE_SLOTS": "1"}
        a = Worker(settings, tmp_path, "host-a", "--slots", "4", env=env)
        b = Worker(settings, tmp_path, "host-b", "--slots", "4", "--exit-when-idle", env=env)
        try:
            worst_own, worst_lent, samples, killed = 0, {}, 0, False
            while b.proc.poll() is None:
                leases = backends.leases.leases()
                worst_own = max(worst_own, sum(not l.borrowed for l in leases))
                for host in ("host-a", "host-b"):
                    lent = sum(l.borrowed for l in leases if l.host == host)
                    worst_lent[host] = max(worst_lent.get(host, 0), lent)
                samples += 1
                if not killed and sum(l.host == "host-a" for l in leases) >= 2:
                    a.crash()
                    killed = True
                time.sleep(0.05)
                assert samples < 3000, "host-b did not finish"
            assert b.proc.returncode == 0, b.tail()
        finally:
            a.close()
            b.close()
        assert killed, "host-a never ran two jobs before the kill"
        assert worst_own <= 2
        assert max(worst_lent.values()) <= 3, worst_lent
        assert worst_lent["host-b"] >= 1, "host-b never borrowed"
        assert all(record_of(backends, j).status == JobStatus.SUCCEEDED for j in ids)
        assert backends.leases.leases() == []
        counter = backends.leases.counters()["heavy"]
        assert (counter.inflight, counter.borrowed) == (0, 0)
