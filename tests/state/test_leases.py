"""The lease layer against the local AWS stack over HTTP."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from imposer.aws import session
from imposer.errors import AcquireUncertain, LeaseLost, TransientBackendError
from imposer.models import JobStatus, Received, TenantConfig
from imposer.state.leases import Successor, Verdict
from imposer.state.waiting import Parked
from imposer.worker.threads.sweep import sweep
from imposer.worker.wiring import connect
from tests.fixtures.jobs import record_of, request


class TestAcquire:
    def test_cap_then_defer(self, backends):
        """The default cap admits four jobs of a tenant; the fifth is at cap."""
        verdicts = [backends.leases.acquire(request(), "h", i).verdict for i in range(5)]
        assert verdicts == [Verdict.ACQUIRED] * 4 + [Verdict.AT_CAP]
        assert backends.leases.counters()["acme"].inflight == 4

    def test_tenants_are_independent(self, backends):
        """One tenant at cap does not block another."""
        for i in range(4):
            backends.leases.acquire(request("acme"), "h", i)
        assert backends.leases.acquire(request("globex"), "h", 4).verdict == Verdict.ACQUIRED

    def test_tier_override_takes_effect_next_acquire(self, backends):
        """A cap set in the config table applies to the next acquire, no restart."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        assert backends.leases.acquire(request(), "h", 0).verdict == Verdict.ACQUIRED
        assert backends.leases.acquire(request(), "h", 1).verdict == Verdict.AT_CAP
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=2))
        assert backends.leases.acquire(request(), "h", 1).verdict == Verdict.ACQUIRED

    def test_cap_zero_pauses_a_new_tenant(self, backends):
        """A cap of 0 defers even a tenant that never had a counter."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=0))
        assert backends.leases.acquire(request(), "h", 0).verdict == Verdict.AT_CAP

    def test_duplicate_of_running_job(self, backends):
        """A second delivery of a running job is refused as running, holder named."""
        req = request()
        first = backends.leases.acquire(req, "h", 0)
        again = backends.leases.acquire(req, "h2", 1)
        assert again.verdict == Verdict.RUNNING
        assert again.holder.epoch == first.lease.epoch
        assert backends.leases.counters()["acme"].inflight == 1

    def test_duplicate_of_finished_job(self, backends):
        """A job that reached a final state is never run again."""
        req = request()
        lease = backends.leases.acquire(req, "h", 0).lease
        backends.leases.release(lease, JobStatus.SUCCEEDED, finished_at=1.0)
        again = backends.leases.acquire(req, "h", 0)
        assert again.verdict == Verdict.DONE and again.status == "succeeded"
        assert backends.leases.counters()["acme"].inflight == 0

    def test_retrying_job_can_be_acquired_again(self, backends):
        """A failed attempt released as retrying may run again, attempts counted."""
        req = request()
        lease = backends.leases.acquire(req, "h", 0).lease
        backends.leases.release(lease, JobStatus.RETRYING, failures=1, error="boom")
        assert backends.leases.acquire(req, "h", 0).verdict == Verdict.ACQUIRED
        record = record_of(backends, req.job_id)
        assert (record.attempts, record.failures, record.status) == (2, 1, JobStatus.RUNNING)

    def test_expired_lease_reported_stale(self, backends, clock):
        """A delivery that finds an expired lease says so, so it can be reclaimed."""
        req = request()
        backends.leases.acquire(req, "h", 0)
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        assert backends.leases.acquire(req, "h", 0).verdict == Verdict.STALE

    def test_record_written_on_acquire(self, backends, clock):
        """Acquire marks the job running with host, slot, epoch and queue wait."""
        req = request()
        lease = backends.leases.acquire(req, "hostA", 3, sent_at=clock.time() - 12).lease
        record = record_of(backends, req.job_id)
        assert record.status == JobStatus.RUNNING
        assert (record.host, record.slot, record.epoch) == ("hostA", 3, lease.epoch)
        assert record.queue_wait == pytest.approx(12)


def burst(*requests, sent_at: float = 1.0e9) -> list:
    """(request, received message) pairs, as a receive brings them."""
    return [(req, Received(message_id=f"m-{req.job_id}", receipt=f"r-{req.job_id}",
                           body=req.to_body(), group_id=req.tenant_id, sent_at=sent_at,
                           receive_count=1)) for req in requests]


class TestBurst:
    def test_a_tenants_burst_is_one_transaction(self, backends, clock):
        """Three jobs of one tenant: three leases on the slots given, every record running,
        the counter at 3, in one TransactWriteItems."""
        reqs = [request() for _ in range(3)]
        session.CALLS.reset()
        leases, cap = backends.leases.acquire_burst(burst(*reqs, sent_at=clock.time() - 5),
                                                    "h", [5, 2, 7, 1])
        assert cap == 4
        assert session.CALLS.snapshot().get("dynamodb.TransactWriteItems") == 1
        assert [(lease.job_id, lease.slot) for lease in leases] == \
            [(reqs[0].job_id, 5), (reqs[1].job_id, 2), (reqs[2].job_id, 7)]
        assert backends.leases.counters()["acme"].inflight == 3
        for req, lease in zip(reqs, leases):
            record = record_of(backends, req.job_id)
            assert (record.status, record.epoch, record.slot) == \
                (JobStatus.RUNNING, lease.epoch, lease.slot)
            assert record.queue_wait == pytest.approx(5)
        assert {lease.receipt for lease in leases} == {f"r-{r.job_id}" for r in reqs}

    def test_at_most_the_cap_is_taken_and_the_rest_left(self, backends):
        """Six jobs at the default cap 4: the first four are leased, the last two are not."""
        reqs = [request() for _ in range(6)]
        leases, _ = backends.leases.acquire_burst(burst(*reqs), "h", list(range(8)))
        assert [lease.job_id for lease in leases] == [r.job_id for r in reqs[:4]]
        assert backends.leases.counters()["acme"].inflight == 4
        assert record_of(backends, reqs[4].job_id) is None

    def test_no_room_for_all_writes_nothing(self, backends):
        """Three running, two more asked (cap 4): no lease and no record is written, and
        one by one the first is acquired and the second is at cap."""
        for i in range(3):
            backends.leases.acquire(request(), "h", i)
        reqs = [request(), request()]
        assert backends.leases.acquire_burst(burst(*reqs), "h", [3, 4]) == ([], 4)
        assert backends.leases.counters()["acme"].inflight == 3
        assert [record_of(backends, r.job_id) for r in reqs] == [None, None]
        assert [backends.leases.acquire(r, "h", 3).verdict for r in reqs] == \
            [Verdict.ACQUIRED, Verdict.AT_CAP]

    def test_a_job_running_elsewhere_writes_nothing(self, backends):
        """One job of the burst already runs on another host: nothing is written (the one by
        one path then says RUNNING for it and acquires the other)."""
        running, fresh = request(), request()
        holder = backends.leases.acquire(running, "other", 0).lease
        assert backends.leases.acquire_burst(burst(fresh, running), "h", [0, 1]) == ([], 4)
        assert backends.leases.counters()["acme"].inflight == 1
        assert record_of(backends, running.job_id).epoch == holder.epoch
        assert record_of(backends, fresh.job_id) is None

    def test_a_single_job_or_a_cap_of_one_is_not_a_burst(self, backends):
        backends.tenants.put(TenantConfig(tenant_id="globex", cap=1))
        assert backends.leases.acquire_burst(burst(request()), "h", [0, 1]) == ([], 4)
        two = burst(request("globex"), request("globex"))
        assert backends.leases.acquire_burst(two, "h", [0, 1]) == ([], 1)
        assert backends.leases.acquire_burst(burst(request(), request()), "h", [0]) == ([], 4)
        assert backends.leases.counters() == {}

    def test_a_lost_reply_names_every_lease_it_may_have_written(self, backends, monkeypatch):
        """The transaction committed but its reply was lost: AcquireUncertain carries all
        the burst's leases, and releasing them gives every slot back."""
        real = backends.dynamo.transact

        def commit_then_lose(items, what, token=None):
            real(items, what, token=token)
            raise TransientBackendError("TransactWriteItems: read timeout")

        monkeypatch.setattr(backends.dynamo, "transact", commit_then_lose)
        reqs = [request(), request()]
        with pytest.raises(AcquireUncertain) as lost:
            backends.leases.acquire_burst(burst(*reqs), "h", [0, 1])
        monkeypatch.undo()
        assert [lease.job_id for lease in lost.value.leases] == [r.job_id for r in reqs]
        assert backends.leases.counters()["acme"].inflight == 2
        for lease in lost.value.leases:
            backends.leases.release(lease, JobStatus.QUEUED, wait_reason="not started")
        assert backends.leases.counters()["acme"].inflight == 0
        assert backends.leases.leases() == []


class TestFencing:
    def test_reclaimed_lease_cannot_renew_or_release(self, backends, clock):
        """The old holder of a reclaimed lease is refused; the counter stays right."""
        req = request()
        lease = backends.leases.acquire(req, "h", 0).lease
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        report = sweep(backends.leases, backends.metrics)
        assert [l.job_id for l in report.reclaimed] == [req.job_id]
        with pytest.raises(LeaseLost):
            backends.leases.renew(lease)
        with pytest.raises(LeaseLost):
            backends.leases.release(lease, JobStatus.SUCCEEDED)
        assert backends.leases.counters()["acme"].inflight == 0

    def test_old_holder_cannot_touch_new_lease(self, backends, clock):
        """After a reclaim and a new acquire, the stale holder cannot release the new lease."""
        req = request()
        old = backends.leases.acquire(req, "h", 0).lease
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        sweep(backends.leases, backends.metrics)
        new = backends.leases.acquire(req, "h2", 1).lease
        with pytest.raises(LeaseLost):
            backends.leases.release(old, JobStatus.FAILED)
        assert backends.leases.leases() == [new]
        assert backends.leases.counters()["acme"].inflight == 1
        backends.leases.release(new, JobStatus.SUCCEEDED)
        assert backends.leases.counters()["acme"].inflight == 0

    def test_a_release_tried_again_after_it_committed_is_done(self, backends):
        """A release repeated after its reply was lost finds its own commit in the job record."""
        req = request()
        lease = backends.leases.acquire(req, "h", 0).lease
        backends.leases.release(lease, JobStatus.SUCCEEDED, output_epoch=lease.epoch,
                                finished_at=1.0)
        backends.leases.release(lease, JobStatus.SUCCEEDED, output_epoch=lease.epoch,
                                finished_at=1.0)
        assert backends.leases.counters()["acme"].inflight == 0
        with pytest.raises(LeaseLost):  # the record says succeeded, not failed: not this one
            backends.leases.release(lease, JobStatus.FAILED, finished_at=1.0)

    def test_every_try_of_a_release_carries_one_request_token(self, backends):
        """The tries of one release share a ClientRequestToken; another attempt's differ."""
        tokens: list[str] = []
        backends.leases.dynamo.client.meta.events.register(
            "provide-client-params.dynamodb.TransactWriteItems",
            lambda params, **kw: tokens.append(params.get("ClientRequestToken")))
        first = backends.leases.acquire(request(), "h", 0).lease
        other = backends.leases.acquire(request(), "h", 1).lease
        tokens.clear()
        for lease in (first, first, other):
            backends.leases.release(lease, JobStatus.FAILED, finished_at=1.0)
        assert tokens[0] and tokens[0] == tokens[1] != tokens[2]

    def test_renew_extends_expiry(self, backends, clock):
        """A renewed lease survives a sweep past its first expiry."""
        lease = backends.leases.acquire(request(), "h", 0).lease
        clock.advance(backends.settings.lease_ttl_seconds * 0.9)
        renewed = backends.leases.renew(lease)
        assert renewed.expires_at > lease.expires_at
        clock.advance(backends.settings.lease_ttl_seconds * 0.5)
        assert sweep(backends.leases, backends.metrics).reclaimed == ()


class TestRepair:
    def test_repair_fixes_drifted_counter(self, backends):
        """A counter that disagrees with its live leases is set right."""
        backends.leases.acquire(request(), "h", 0)
        backends.dynamo.update(backends.settings.leases_table, {"pk": "counter#acme"},
                               "SET inflight = :n", {":n": 3})
        assert backends.leases.repair() == {"acme": (3, 1)}
        assert backends.leases.counters()["acme"].inflight == 1

def _racer(settings, tenants, cycles, host, results):
    """Acquire and release as fast as possible; report (acquired, at_cap)."""
    backends = connect(settings)
    got = capped = 0
    for i in range(cycles):
        tenant = tenants[i % len(tenants)]
        acq = backends.leases.acquire(request(tenant), host, i % 8)
        if acq.verdict == Verdict.ACQUIRED:
            got += 1
            time.sleep(0.02)
            backends.leases.release(acq.lease, JobStatus.SUCCEEDED)
        else:
            assert acq.verdict == Verdict.AT_CAP
            capped += 1
    results.put((got, capped))


@pytest.mark.parametrize("caps", [{"acme": None}, {"acme": 3, "globex": 2}])
class TestRace:
    def test_cap_holds_across_processes(self, settings, caps):
        """Eight processes racing acquire/release never exceed the cap; nothing leaks."""
        backends = connect(settings)
        for tenant, cap in caps.items():
            if cap is not None:
                backends.tenants.put(TenantConfig(tenant_id=tenant, cap=cap))
        limits = {t: c or settings.default_cap for t, c in caps.items()}
        tenants = tuple(caps)
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        procs = [ctx.Process(target=_racer, args=(settings, tenants, 40, f"host{n}", results))
                 for n in range(8)]
        for p in procs:
            p.start()
        samples, worst = 0, {}
        while any(p.is_alive() for p in procs):
            per_tenant: dict[str, int] = {}
            for lease in backends.leases.leases():
                per_tenant[lease.tenant_id] = per_tenant.get(lease.tenant_id, 0) + 1
            for t, n in per_tenant.items():
                worst[t] = max(worst.get(t, 0), n)
            samples += 1
        for p in procs:
            p.join()
            assert p.exitcode == 0
        outcomes = [results.get(timeout=5) for _ in procs]
        assert samples > 10
        assert all(worst[t] <= limits[t] for t in worst), (worst, limits)
        assert sum(c for _, c in outcomes) > 0, "the race never hit the cap"
        assert backends.leases.leases() == []
        assert all(c.inflight == 0 for c in backends.leases.counters().values())
        done = [r for t in tenants
                for r in backends.jobs.for_tenant(t, statuses=["succeeded"], limit=1000)[0]]
        assert len(done) == sum(g for g, _ in outcomes)
        assert backends.jobs.open_jobs() == [], "every finished job left the open index"


def successor_of(backends, req, clock, cap: int, slot: int = 0, borrow: bool = False,
                 host: str = "h", park: bool = True) -> Successor:
    """Park *req* in the waiting table (unless *park* is False: it is already) and build
    the hand-over to it, in a borrowed lease with *borrow*."""
    note = Parked(tenant_id=req.tenant_id, order=f"{clock.time():017.5f}#{req.job_id}",
                  job_id=req.job_id, body=req.to_body(), receipt=f"r-{req.job_id}",
                  message_id=f"m-{req.job_id}", sent_at=clock.time(), receive_count=1,
                  visible_at=clock.time() + 300)
    if park:
        backends.waiting.park(note)
    return Successor(request=req, sent_at=note.sent_at, cap=cap,
                     lease=backends.leases.new_lease(req, host, slot, note.receipt, borrow),
                     claim=backends.waiting.claim_op(note))


class TestHandOver:
    def test_one_write_ends_a_job_and_starts_the_tenants_next(self, backends, clock):
        """Cap 1: the release of the running job starts the parked one, in one transaction.

        The counter stays at 1 (never 0, never 2), the note is gone, and each
        job record says what happened to it.
        """
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        first, second = request(), request()
        lease = backends.leases.acquire(first, "h", 0).lease
        successor = successor_of(backends, second, clock, cap=1)
        session.CALLS.reset()
        assert backends.leases.hand_over(lease, JobStatus.SUCCEEDED, successor,
                                         output_epoch=lease.epoch, finished_at=clock.time())
        assert session.CALLS.snapshot() == {"dynamodb.TransactWriteItems": 1}
        assert backends.leases.counters()["acme"].inflight == 1
        assert [held.job_id for held in backends.leases.leases()] == [second.job_id]
        assert backends.waiting.oldest("acme") == []
        assert record_of(backends, first.job_id).status is JobStatus.SUCCEEDED
        started = record_of(backends, second.job_id)
        assert (started.status, started.epoch) == (JobStatus.RUNNING, successor.lease.epoch)

    def test_a_note_taken_elsewhere_refuses_it_and_writes_nothing(self, backends, clock):
        """The parked job was started by another host: False, and the release can go as usual."""
        first, second = request(), request()
        lease = backends.leases.acquire(first, "h", 0).lease
        successor = successor_of(backends, second, clock, cap=4)
        backends.waiting.drop(backends.waiting.oldest("acme")[0])
        assert not backends.leases.hand_over(lease, JobStatus.SUCCEEDED, successor,
                                             finished_at=clock.time())
        assert record_of(backends, first.job_id).status is JobStatus.RUNNING
        assert backends.leases.counters()["acme"].inflight == 1
        backends.leases.release(lease, JobStatus.SUCCEEDED, finished_at=clock.time())
        assert backends.leases.counters()["acme"].inflight == 0

    def test_a_lowered_cap_refuses_it(self, backends, clock):
        """Two running, the cap lowered to 1: the slot is not passed on, the counter drops."""
        leases = [backends.leases.acquire(request(), "h", i).lease for i in range(2)]
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        successor = successor_of(backends, request(), clock, cap=1)
        assert not backends.leases.hand_over(leases[0], JobStatus.FAILED, successor,
                                             finished_at=clock.time())
        assert backends.leases.counters()["acme"].inflight == 2
        assert len(backends.waiting.oldest("acme")) == 1

    def test_a_hand_over_tried_again_after_it_committed_is_done(self, backends, clock):
        """Its reply lost, the same hand-over tried again finds its commit in the job record;
        one whose lease was reclaimed first raises LeaseLost and starts nothing."""
        first, second = request(), request()
        lease = backends.leases.acquire(first, "h", 0).lease
        successor = successor_of(backends, second, clock, cap=4)
        for _ in range(2):
            assert backends.leases.hand_over(lease, JobStatus.FAILED, successor,
                                             finished_at=1.0)
        assert backends.leases.counters()["acme"].inflight == 1
        third, fourth = request(), request()
        reclaimed = backends.leases.acquire(third, "h", 1).lease
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        assert sweep(backends.leases, backends.metrics).reclaimed
        with pytest.raises(LeaseLost):
            backends.leases.hand_over(reclaimed, JobStatus.FAILED,
                                      successor_of(backends, fourth, clock, cap=4),
                                      finished_at=1.0)
        assert record_of(backends, fourth.job_id) is None

    def test_a_hand_over_after_a_plain_release_committed_unseen_starts_nothing(
            self, backends, clock):
        """A plain release that committed with its reply lost, then a hand-over tried on
        the next pass: False (it did not commit; before, it was taken for its own lost
        reply and the successor launched with no lease), the successor's note kept parked
        and no lease held; the plain release tried again finds itself done."""
        first, second = request(), request()
        lease = backends.leases.acquire(first, "h", 0).lease
        backends.leases.release(lease, JobStatus.SUCCEEDED, output_epoch=lease.epoch,
                                finished_at=1.0)
        successor = successor_of(backends, second, clock, cap=4)
        assert not backends.leases.hand_over(lease, JobStatus.SUCCEEDED, successor,
                                             output_epoch=lease.epoch, finished_at=1.0)
        assert backends.leases.leases() == []
        assert [n.job_id for n in backends.waiting.oldest("acme")] == [second.job_id]
        assert record_of(backends, second.job_id) is None
        backends.leases.release(lease, JobStatus.SUCCEEDED, output_epoch=lease.epoch,
                                finished_at=1.0)
        assert backends.leases.counters()["acme"].inflight == 0


def counter(backends, tenant: str) -> tuple[int, int]:
    c = backends.leases.counters()[tenant]
    return c.inflight, c.borrowed


def at_cap_with_a_borrow(backends, tenant: str) -> tuple:
    """*tenant* at its cap of 1, with a borrowed job beside it: (own lease, borrowed lease)."""
    backends.tenants.put(TenantConfig(tenant_id=tenant, cap=1))
    own = backends.leases.acquire(request(tenant), "h", 0).lease
    return own, backends.leases.acquire(request(tenant), "h", 1, borrow=True).lease


class TestBorrowedHandOver:
    def test_a_borrowed_slot_passes_to_the_tenants_next_parked_job_in_one_write(
            self, backends, clock):
        """A borrowed job's release starts its tenant's parked job in a borrowed lease, in
        one TransactWriteItems: the counter stays at 1 own and 1 borrowed throughout."""
        own, lent = at_cap_with_a_borrow(backends, "acme")
        nxt = request()
        successor = successor_of(backends, nxt, clock, cap=1, slot=1, borrow=True)
        session.CALLS.reset()
        assert backends.leases.hand_over(lent, JobStatus.SUCCEEDED, successor,
                                         output_epoch=lent.epoch, finished_at=clock.time())
        assert session.CALLS.snapshot() == {"dynamodb.TransactWriteItems": 1}
        assert counter(backends, "acme") == (1, 1)
        held = {lease.job_id: lease.borrowed for lease in backends.leases.leases()}
        assert held == {own.job_id: False, nxt.job_id: True}
        assert backends.waiting.oldest("acme") == []
        assert record_of(backends, lent.job_id).status is JobStatus.SUCCEEDED
        started = record_of(backends, nxt.job_id)
        assert (started.status, started.epoch) == (JobStatus.RUNNING, successor.lease.epoch)

    def test_a_borrowed_slot_is_lent_to_another_capped_tenant_in_one_write(self, backends,
                                                                           clock):
        """globex's borrowed job ends: its release gives globex's borrow back and starts
        acme's parked job in a borrowed lease (acme at its cap), in one TransactWriteItems."""
        at_cap_with_a_borrow(backends, "globex")
        globex_lent = [lease for lease in backends.leases.leases() if lease.borrowed][0]
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        backends.leases.acquire(request("acme"), "h", 2)
        nxt = request("acme")
        successor = successor_of(backends, nxt, clock, cap=1, slot=1, borrow=True)
        session.CALLS.reset()
        assert backends.leases.hand_over(globex_lent, JobStatus.FAILED, successor,
                                         finished_at=clock.time())
        assert session.CALLS.snapshot() == {"dynamodb.TransactWriteItems": 1}
        assert (counter(backends, "globex"), counter(backends, "acme")) == ((1, 0), (1, 1))
        assert record_of(backends, nxt.job_id).status is JobStatus.RUNNING
        assert backends.waiting.oldest("acme") == []

    @pytest.mark.parametrize("lender", ["acme", "globex"])
    def test_a_borrow_below_the_cap_is_refused_and_writes_nothing(self, backends, clock,
                                                                  lender):
        """acme fell below its cap (its own job ended): a borrowed start of its parked job is
        refused, from its own borrowed slot or another tenant's, and nothing is written; the
        release then goes as usual."""
        own, lent = at_cap_with_a_borrow(backends, lender)
        if lender != "acme":
            backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        else:
            backends.leases.release(own, JobStatus.SUCCEEDED, finished_at=clock.time())
        nxt = request("acme")
        successor = successor_of(backends, nxt, clock, cap=1, slot=1, borrow=True)
        before = counter(backends, lender)
        assert not backends.leases.hand_over(lent, JobStatus.SUCCEEDED, successor,
                                             finished_at=clock.time())
        assert counter(backends, lender) == before
        assert record_of(backends, nxt.job_id) is None
        assert len(backends.waiting.oldest("acme")) == 1
        backends.leases.release(lent, JobStatus.SUCCEEDED, finished_at=clock.time())
        assert counter(backends, lender) == (before[0], 0)

    def test_a_hand_over_within_a_tenant_keeps_the_slots_kind(self, backends, clock):
        """An own slot is never handed to a borrowed start of its own tenant (one counter
        item cannot give one kind back and take the other): refused before any call."""
        own, _ = at_cap_with_a_borrow(backends, "acme")
        successor = successor_of(backends, request(), clock, cap=1, borrow=True)
        session.CALLS.reset()
        with pytest.raises(ValueError):
            backends.leases.hand_over(own, JobStatus.SUCCEEDED, successor)
        assert not session.CALLS.snapshot().get("dynamodb.TransactWriteItems")


class TestTwoHostsOneNote:
    def test_a_note_two_hosts_read_is_started_by_one_of_them_only(self, settings, clock):
        """Hosts A and B read the same parked note: A's borrowed release starts its job,
        which then ends to be retried; B's release, promising the same (now stale) note,
        is refused by the note's claim, is released as usual, and starts nothing."""
        a, b = connect(settings, clock=clock), connect(settings, clock=clock)
        a.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        a.leases.acquire(request(), "ha", 0)
        lent_a = a.leases.acquire(request(), "ha", 1, borrow=True).lease
        lent_b = b.leases.acquire(request(), "hb", 1, borrow=True).lease
        nxt = request()
        via_a = successor_of(a, nxt, clock, cap=1, slot=1, borrow=True, host="ha")
        via_b = successor_of(b, nxt, clock, cap=1, slot=1, borrow=True, host="hb",
                             park=False)
        assert a.leases.hand_over(lent_a, JobStatus.SUCCEEDED, via_a, finished_at=1.0)
        a.leases.release(via_a.lease, JobStatus.RETRYING, failures=1, error="x")
        assert not b.leases.hand_over(lent_b, JobStatus.SUCCEEDED, via_b, finished_at=1.0)
        b.leases.release(lent_b, JobStatus.SUCCEEDED, finished_at=1.0)
        record = record_of(a, nxt.job_id)
        assert (record.status, record.attempts, record.epoch) == \
            (JobStatus.RETRYING, 1, via_a.lease.epoch)
        assert counter(a, "acme") == (1, 0)
        assert [lease.host for lease in a.leases.leases()] == ["ha"]

    def test_hosts_racing_for_one_note_start_it_once(self, settings, clock):
        """Two processes (hosts) release borrowed slots at once, each promising them to the
        same parked note, eight notes in a row: each note's job starts exactly once, and
        each loser's release goes through as usual (counters exact, nothing leaked)."""
        backends = connect(settings, clock=clock)
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        backends.leases.acquire(request(), "h0", 0)
        rounds, jobs, work = 8, [], {"ha": [], "hb": []}
        for _ in range(rounds):
            nxt, park = request(), True
            jobs.append(nxt.job_id)
            for host in work:
                lent = backends.leases.acquire(request(), host, 1, borrow=True).lease
                work[host].append((lent, successor_of(backends, nxt, clock, cap=1, slot=1,
                                                      borrow=True, host=host, park=park)))
                park = False
        ctx = multiprocessing.get_context("spawn")
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_hand_over_racer, args=(settings, steps, barrier, results))
                 for steps in work.values()]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            assert p.exitcode == 0
        won = [results.get(timeout=5) for _ in procs]
        assert [a + b for a, b in zip(*won)] == [1] * rounds, won
        for job in jobs:
            record = record_of(backends, job)
            assert (record.status, record.attempts) == (JobStatus.RUNNING, 1)
        held = backends.leases.leases()
        assert sorted(lease.job_id for lease in held if lease.borrowed) == sorted(jobs)
        assert counter(backends, "acme") == (1, rounds)
        assert backends.waiting.oldest("acme") == []


def _hand_over_racer(settings, steps, barrier, results):
    """Release each borrowed lease handing it over, in step with the other host; report
    which hand-overs committed (a refused one is released as usual)."""
    backends = connect(settings)
    won = []
    for lease, successor in steps:
        barrier.wait(60)
        committed = backends.leases.hand_over(lease, JobStatus.SUCCEEDED, successor,
                                              finished_at=time.time())
        if not committed:
            backends.leases.release(lease, JobStatus.SUCCEEDED, finished_at=time.time())
        won.append(int(committed))
    results.put(won)
