"""Fair share's usage items: charged by the release that ends each job, read back decayed."""

from __future__ import annotations

import pytest

from imposer.aws import session
from imposer.models import JobStatus
from imposer.models.usage import ERA_HALF_LIVES, usage_at
from imposer.worker.wiring import connect
from tests.fixtures.jobs import request
from tests.state.test_leases import successor_of

HALF_LIFE = 60.0


@pytest.fixture
def shared(settings, clock):
    """Stores wired with a usage half-life of a minute."""
    return connect(settings.evolve(share_half_life=HALF_LIFE), clock=clock)


class TestCharge:
    def test_the_release_charges_the_jobs_licence_seconds_in_its_own_call(self, shared,
                                                                           clock):
        """A job held for 30 s: its release is still one TransactWriteItems, and the
        tenant's usage reads 30 s at once and 15 s a half-life later."""
        lease = shared.leases.acquire(request(), "h", 0).lease
        clock.advance(30)
        session.CALLS.reset()
        shared.leases.release(lease, JobStatus.SUCCEEDED, finished_at=clock.time())
        assert session.CALLS.snapshot() == {"dynamodb.TransactWriteItems": 1}
        terms = shared.leases.usage()["acme"]
        assert usage_at(terms, clock.time(), HALF_LIFE) == pytest.approx(30.0)
        assert usage_at(terms, clock.time() + HALF_LIFE, HALF_LIFE) == pytest.approx(15.0)

    def test_a_hand_over_charges_the_job_it_ends(self, shared, clock):
        """The release that starts the tenant's next job charges the one that ended."""
        first = shared.leases.acquire(request(), "h", 0).lease
        successor = successor_of(shared, request(), clock, cap=4)
        clock.advance(12)
        session.CALLS.reset()
        assert shared.leases.hand_over(first, JobStatus.SUCCEEDED, successor,
                                       output_epoch=first.epoch, finished_at=clock.time())
        assert session.CALLS.snapshot() == {"dynamodb.TransactWriteItems": 1}
        assert usage_at(shared.leases.usage()["acme"], clock.time(), HALF_LIFE) == \
            pytest.approx(12.0)

    def test_charges_add_up_across_hosts_and_an_era_change(self, shared, clock):
        """Two releases either side of an era's end sum as their decayed charges; a third,
        two eras on, drops the older eras' terms (decayed by 2^-64 and more: nothing)."""
        span = ERA_HALF_LIVES * HALF_LIFE
        clock.advance(span - clock.time() % span - 10)  # 10 s before an era ends
        a = shared.leases.acquire(request(), "h1", 0).lease
        b = shared.leases.acquire(request(), "h2", 0).lease
        clock.advance(5)
        shared.leases.release(a, JobStatus.SUCCEEDED, finished_at=clock.time())
        clock.advance(20)
        shared.leases.release(b, JobStatus.FAILED, finished_at=clock.time())
        terms = shared.leases.usage()["acme"]
        assert len(terms) == 2
        expected = 5.0 * 2 ** (-20 / HALF_LIFE) + 25.0
        assert usage_at(terms, clock.time(), HALF_LIFE) == pytest.approx(expected)
        c = shared.leases.acquire(request(), "h1", 0).lease
        clock.advance(2 * span)
        shared.leases.release(c, JobStatus.SUCCEEDED, finished_at=clock.time())
        assert list(shared.leases.usage()["acme"]) == [max(terms) + 2]

    def test_every_try_of_a_release_is_the_same_request(self, shared, clock):
        """A retried release (its first reply lost) repeats its first request exactly, as
        its ClientRequestToken requires, though the clock moved: the charge is made from
        when the job ended, not from when the release is tried."""
        lease = shared.leases.acquire(request(), "h", 0).lease
        clock.advance(30)
        ended = clock.time()
        first = shared.leases._release_items(lease, JobStatus.RETRYING, 1, {}, ended)
        clock.advance(7)
        assert shared.leases._release_items(lease, JobStatus.RETRYING, 1, {}, ended) == first
        shared.leases.release(lease, JobStatus.RETRYING, failures=1, ended_at=ended)
        assert usage_at(shared.leases.usage()["acme"], ended, HALF_LIFE) == \
            pytest.approx(30.0)

    def test_a_reclaimed_lease_charges_its_time_up_to_its_last_renewal(self, shared, clock):
        """A host died 100 s into a job, just after renewing its lease: the sweep's reclaim,
        still one TransactWriteItems, charges those 100 s (as of the renewal; the time after
        it is not known to have been used); a lease never renewed is charged nothing."""
        lease = shared.leases.acquire(request(), "dead", 0).lease
        never = shared.leases.acquire(request(), "dead", 1).lease
        clock.advance(100)
        lease = shared.leases.renew(lease)
        renewed = clock.time()
        clock.advance(shared.settings.lease_ttl_seconds + 1)
        session.CALLS.reset()
        assert shared.leases.reclaim(lease, "its host died")
        assert session.CALLS.snapshot() == {"dynamodb.TransactWriteItems": 1}
        assert usage_at(shared.leases.usage()["acme"], renewed, HALF_LIFE) == \
            pytest.approx(100.0)
        assert shared.leases.reclaim(never, "its host died")
        assert usage_at(shared.leases.usage()["acme"], renewed, HALF_LIFE) == \
            pytest.approx(100.0)

    def test_a_job_given_back_unstarted_is_charged_nothing(self, shared, clock):
        """A lease given back before its job started (QUEUED) used no licence time."""
        lease = shared.leases.acquire(request(), "h", 0).lease
        clock.advance(30)
        shared.leases.release(lease, JobStatus.QUEUED, wait_reason="not started")
        assert shared.leases.usage() == {}

    def test_a_half_life_of_years_still_releases(self, settings, clock):
        """A half-life so long that the time is in era 0 or 1 names no negative era."""
        store = connect(settings.evolve(share_half_life=10 * 365 * 86400.0), clock=clock)
        lease = store.leases.acquire(request(), "h", 0).lease
        clock.advance(30)
        store.leases.release(lease, JobStatus.SUCCEEDED, finished_at=clock.time())
        assert usage_at(store.leases.usage()["acme"], clock.time(),
                        10 * 365 * 86400.0) == pytest.approx(30.0)

    def test_without_a_half_life_nothing_is_charged(self, backends, clock):
        """IMPOSER_SHARE_HALF_LIFE=0: the release writes what it always did, no usage item."""
        lease = backends.leases.acquire(request(), "h", 0).lease
        clock.advance(30)
        backends.leases.release(lease, JobStatus.SUCCEEDED, finished_at=clock.time())
        assert backends.leases.usage() == {}
