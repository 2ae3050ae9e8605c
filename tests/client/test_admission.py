"""imposer.client.admission against a real redis-server, with a hand-driven clock."""

from __future__ import annotations

import multiprocessing
import threading

import pytest
import redis

from imposer.client import (
    Admission,
    AdmissionUnavailable,
    DuplicateToken,
    InflightCapReached,
    Limits,
    RateLimited,
)
from imposer.clock import ManualClock


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def admission(redis_url, clock):
    """Admission with the seed's limits on the test's empty Redis."""
    adm = Admission.from_url(redis_url, now=clock.time)
    yield adm
    adm.close()


def fill(admission: Admission, count: int, tenant: str = "acme", start: int = 0) -> None:
    for n in range(start, start + count):
        admission.admit(tenant, f"tok-{n}", f"job-{n}")


def _race(url: str, barrier, results, job_id: str) -> None:
    """Child process: wait for the others, then try to admit the shared token."""
    admission = Admission.from_url(url)
    barrier.wait(timeout=30)
    try:
        admission.admit("acme", "shared-token", job_id)
        results.put(("admitted", job_id))
    except DuplicateToken as exc:
        results.put(("duplicate", exc.job_id))
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(("error", repr(exc)))


class TestIdempotency:
    def test_duplicate_in_flight(self, admission):
        """A token already in flight is refused with the id of the job holding it."""
        admission.admit("acme", "order-42", "job-1")
        with pytest.raises(DuplicateToken) as caught:
            admission.admit("acme", "order-42", "job-2")
        assert caught.value.job_id == "job-1"
        assert caught.value.in_flight and not caught.value.completed

    def test_duplicate_completed(self, admission):
        """A token whose job was confirmed stays refused, now as completed."""
        admission.admit("acme", "order-42", "job-1")
        assert admission.confirm("acme", "order-42") is True
        with pytest.raises(DuplicateToken) as caught:
            admission.admit("acme", "order-42", "job-2")
        assert caught.value.job_id == "job-1"
        assert caught.value.state == "completed"

    def test_token_kept_for_ttl(self, admission, redis_url):
        """The token record expires after the 48-hour idempotency TTL, not before."""
        admission.admit("acme", "order-42", "job-1")
        with redis.Redis.from_url(redis_url) as client:
            (key,) = client.keys("*order-42*")
            ttl = client.pttl(key) / 1000
        assert 48 * 3600 - 5 < ttl <= 48 * 3600

    def test_tokens_are_per_tenant(self, admission):
        """Two tenants may use the same token without colliding."""
        admission.admit("acme", "order-42", "job-1")
        admission.admit("globex", "order-42", "job-2")

    def test_concurrent_processes(self, redis_url):
        """Of eight processes submitting one token at once, exactly one is admitted."""
        ctx = multiprocessing.get_context("spawn")
        barrier, results = ctx.Barrier(8), ctx.Queue()
        procs = [ctx.Process(target=_race, args=(redis_url, barrier, results, f"job-{n}"))
                 for n in range(8)]
        for proc in procs:
            proc.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(timeout=30)
        admitted = [job for kind, job in outcomes if kind == "admitted"]
        assert len(admitted) == 1, outcomes
        assert sorted(outcomes) == sorted(
            [("admitted", admitted[0])] + [("duplicate", admitted[0])] * 7)


class TestUndo:
    def test_undo_lets_retry(self, admission):
        """After a failed publish is undone, the same token is admitted again and counted once."""
        admission.admit("acme", "order-42", "job-1")
        assert admission.undo("acme", "order-42", "job-1") is True
        assert admission.inflight("acme") == 0
        admission.admit("acme", "order-42", "job-2")
        assert admission.inflight("acme") == 1

    def test_undo_returns_rate_entry(self, redis_url, clock):
        """An undone submission no longer counts toward the rate limit."""
        adm = Admission.from_url(redis_url, now=clock.time, rate_limit=1)
        adm.admit("acme", "a", "job-a")
        adm.undo("acme", "a")
        adm.admit("acme", "b", "job-b")

    def test_undo_other_job_ignored(self, admission):
        """Undo naming another job leaves the admitted one in place."""
        admission.admit("acme", "order-42", "job-1")
        assert admission.undo("acme", "order-42", "job-9") is False
        with pytest.raises(DuplicateToken):
            admission.admit("acme", "order-42", "job-2")

    def test_undo_never_forgets_completed(self, admission):
        """A completed token cannot be undone into a second run."""
        admission.admit("acme", "order-42", "job-1")
        admission.confirm("acme", "order-42")
        assert admission.undo("acme", "order-42") is False
        with pytest.raises(DuplicateToken):
            admission.admit("acme", "order-42", "job-2")


class TestRateLimit:
    def test_101st_in_a_minute_refused(self, admission, clock):
        """The 101st job within 60 s is refused, and admitted once the window has passed."""
        fill(admission, 100)
        with pytest.raises(RateLimited) as caught:
            admission.admit("acme", "tok-100", "job-100")
        assert caught.value.retry_after == pytest.approx(60.0)
        clock.advance(59.0)
        with pytest.raises(RateLimited) as caught:
            admission.admit("acme", "tok-100", "job-100")
        assert caught.value.retry_after == pytest.approx(1.0)
        clock.advance(1.0)
        admission.admit("acme", "tok-100", "job-100")

    def test_window_slides(self, admission, clock):
        """Only submissions older than the window are forgotten, not the whole minute."""
        fill(admission, 50)
        clock.advance(30)
        fill(admission, 50, start=50)
        clock.advance(30)
        fill(admission, 50, start=100)
        with pytest.raises(RateLimited) as caught:
            admission.admit("acme", "tok-150", "job-150")
        assert caught.value.retry_after == pytest.approx(30.0)

    def test_refusal_leaves_no_mark(self, admission, clock):
        """A rate-limited token is not remembered, so it is not a duplicate later."""
        fill(admission, 100)
        with pytest.raises(RateLimited):
            admission.admit("acme", "late", "job-late")
        clock.advance(60)
        admission.admit("acme", "late", "job-late")

    def test_tenants_limited_apart(self, admission):
        """One tenant at its rate limit does not slow another."""
        fill(admission, 100)
        admission.admit("globex", "tok-0", "job-0")


class TestInflightCap:
    @pytest.fixture
    def admission(self, redis_url, clock):
        adm = Admission.from_url(redis_url, now=clock.time, rate_limit=10_000)
        yield adm
        adm.close()

    def test_501st_refused_until_confirm(self, admission):
        """The 501st unconfirmed job is refused; one confirmation lets the next one in."""
        fill(admission, 500)
        assert admission.inflight("acme") == 500
        with pytest.raises(InflightCapReached) as caught:
            admission.admit("acme", "tok-500", "job-500")
        assert caught.value.cap == 500
        admission.confirm("acme", "tok-7")
        assert admission.inflight("acme") == 499
        admission.admit("acme", "tok-500", "job-500")

    def test_stale_entries_dropped(self, admission, clock):
        """In-flight entries older than the safety TTL stop counting: a lost webhook cannot wedge."""
        fill(admission, 500)
        clock.advance(24 * 3600 - 1)
        with pytest.raises(InflightCapReached):
            admission.admit("acme", "tok-500", "job-500")
        clock.advance(1)
        assert admission.inflight("acme") == 0
        admission.admit("acme", "tok-500", "job-500")
        assert admission.inflight("acme") == 1

    def test_stale_token_still_duplicate(self, admission, clock):
        """Dropping a stale in-flight entry does not make its token submittable again."""
        admission.admit("acme", "order-42", "job-1")
        clock.advance(24 * 3600 + 1)
        with pytest.raises(DuplicateToken):
            admission.admit("acme", "order-42", "job-2")


class TestLimits:
    def test_override_mapping(self, redis_url, clock):
        """A per-tenant override applies to that tenant only."""
        adm = Admission.from_url(redis_url, now=clock.time,
                                 overrides={"small": Limits(inflight_cap=1)})
        adm.admit("small", "a", "job-a")
        with pytest.raises(InflightCapReached) as caught:
            adm.admit("small", "b", "job-b")
        assert caught.value.cap == 1
        fill(adm, 5, tenant="acme")

    def test_override_callable(self, redis_url, clock):
        """Overrides may come from a function; None means the defaults."""
        limits = {"small": Limits(rate_limit=2)}
        adm = Admission.from_url(redis_url, now=clock.time, overrides=limits.get)
        fill(adm, 2, tenant="small")
        with pytest.raises(RateLimited):
            adm.admit("small", "c", "job-c")
        assert adm.limits_for("acme") == Limits()

    def test_bad_tenant_refused(self, admission):
        """A tenant id that could break the key layout is rejected outright."""
        with pytest.raises(ValueError):
            admission.admit("ac}me", "t", "job-1")

    def test_exit_codes_distinct(self):
        """Each refusal has its own exit code for the command line."""
        codes = {DuplicateToken.exit_code, RateLimited.exit_code, InflightCapReached.exit_code}
        assert len(codes) == 3


class TestConcurrency:
    def test_150_threads_share_one_admission(self, redis_url):
        """150 threads admitting at once through one Admission (a pool of 50) are each
        admitted: they wait for a connection, never see a pool error."""
        adm = Admission.from_url(redis_url, rate_limit=10_000, inflight_cap=10_000)
        start = threading.Barrier(150)
        errors: list[BaseException] = []

        def publish(n: int) -> None:
            start.wait(timeout=60)
            for k in range(3):
                try:
                    adm.admit(f"tenant-{n % 5}", f"tok-{n}-{k}", f"job-{n}-{k}")
                except BaseException as exc:  # reported below, with the others
                    errors.append(exc)

        threads = [threading.Thread(target=publish, args=(n,)) for n in range(150)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == [] and not any(t.is_alive() for t in threads)
        assert sum(adm.inflight(f"tenant-{t}") for t in range(5)) == 450
        assert len(adm.redis.connection_pool._connections) <= 50
        adm.close()

    def test_no_connection_in_time_is_admission_unavailable(self, redis_url):
        """With every connection of the pool taken, a call waits its bound, then raises
        AdmissionUnavailable; nothing was admitted."""
        adm = Admission.from_url(redis_url, max_connections=1, wait=0.2)
        held = adm.redis.connection_pool.get_connection()
        try:
            with pytest.raises(AdmissionUnavailable, match="cannot admit a job"):
                adm.admit("acme", "tok", "job")
        finally:
            adm.redis.connection_pool.release(held)
        assert adm.inflight("acme") == 0
        adm.close()

    def test_unreachable_redis_is_admission_unavailable(self):
        """Redis that is not there is AdmissionUnavailable, with the exit code for a backend."""
        adm = Admission.from_url("redis://127.0.0.1:9/0", wait=1)
        with pytest.raises(AdmissionUnavailable) as caught:
            adm.admit("acme", "tok", "job")
        assert caught.value.exit_code == 4
