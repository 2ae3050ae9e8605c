"""A receive that brings one tenant several jobs starts them in one transaction."""

from __future__ import annotations

import json
import time

import attrs
import pytest

from imposer.aws import session
from imposer.clock import ManualClock
from imposer.errors import TransientBackendError
from imposer.models import TenantConfig
from imposer.worker.dispatch.pool import Pool
from imposer.worker.wiring import build, connect
from tests.fixtures.workers import FAKE, layout, submit_jobs, wait_for


@pytest.fixture
def gated(settings, tmp_path):
    """Eight slots whose jobs run until the gate is touched; the receiver stopped, so the
    test hands the dispatcher its messages itself. Yields (supervisor, backends, gate)."""
    gate = tmp_path / "gate"
    s = settings.evolve(slots=8, engine="pdftoolbox", pdftoolbox=str(FAKE),
                        lease_ttl_seconds=600.0, park_seconds=300.0,
                        work_dir=str(tmp_path / "work"))
    backends = connect(s, clock=ManualClock(start=time.time()))
    supervisor = build(s, backends=backends, pool=Pool(8, s))
    supervisor.pool.start()
    assert supervisor.receiver.stop(30) == []
    try:
        yield supervisor, backends, gate
    finally:
        gate.touch()
        supervisor.pool.stop(timeout=0)


def receive_all(backends, count: int) -> dict[str, list]:
    """Every message in the queue, by job id (a duplicate delivery makes a list of two),
    invisible for 600 s as the worker's receiver notes it."""
    got: list = []
    wait_for(lambda: (got.extend(attrs.evolve(m, visible_until=time.time() + 600)
                                 for m in backends.queue.receive(10, 1, 600)),
                      len(got) >= count)[1], 30, f"{count} messages")
    by_job: dict[str, list] = {}
    for message in got:
        by_job.setdefault(json.loads(message.body)["job_id"], []).append(message)
    return by_job


def running(supervisor) -> dict[str, int]:
    return {job.request.job_id: job.slot for job in supervisor.running.running()}


@pytest.mark.slow
class TestBursts:
    def test_one_transaction_per_tenant_then_one_by_one_for_the_rest(self, gated, tmp_path):
        """8 free slots; the receive brings acme a1 a2, globex g1, a copy of g1, acme a3 a4
        a5, globex g2 (the 8 that fit) and a6. acme's burst takes its cap (a1-a4) and
        globex's both, in one transaction each; acme has just filled its cap, so a5 and a6
        are parked on the memo without an acquire, and one by one the copy of g1 is kept
        back as running. Six run, each on the slot its lease names."""
        supervisor, backends, gate = gated
        settings = supervisor.settings
        a = submit_jobs(settings, tmp_path, "acme", 6, layout(fake_until=gate))
        g = submit_jobs(settings, tmp_path, "globex", 2, layout(fake_until=gate))
        by_job = receive_all(backends, 8)
        backends.queue.send(by_job[g[0]][0].body, "globex")
        by_job[g[0]] += receive_all(backends, 1)[g[0]]
        order = [by_job[a[0]][0], by_job[a[1]][0], by_job[g[0]][0], by_job[g[0]][1],
                 *(by_job[j][0] for j in a[2:5]), by_job[g[1]][0], by_job[a[5]][0]]
        session.CALLS.reset()
        supervisor.dispatch.take_batch(order, supervisor.pool.free(), lambda: False)
        calls = session.CALLS.snapshot()
        now = running(supervisor)
        assert set(now) == {*a[:4], *g}
        assert len(set(now.values())) == 6
        assert {lease.job_id: lease.slot for lease in backends.leases.leases()} == now
        counters = backends.leases.counters()
        assert (counters["acme"].inflight, counters["globex"].inflight) == (4, 2)
        assert {n.job_id for n in backends.waiting.oldest("acme")} == {a[4], a[5]}
        assert backends.waiting.oldest("globex") == []
        # 2 bursts + the copy's acquire (running) + 2 parks (their receive covers the park
        # window: no visibility change); the copy's deferral
        assert calls.get("dynamodb.TransactWriteItems") == 5
        assert calls.get("sqs.ChangeMessageVisibility") == 1
        assert len(supervisor.pool.free()) == 2

    def test_a_burst_whose_reply_is_lost_gives_its_slots_back_and_goes_one_by_one(
            self, gated, tmp_path, monkeypatch):
        """The burst's transaction commits but its reply is lost: its leases are given back
        (no slot leaks), and the same jobs are then taken one by one and run once each."""
        supervisor, backends, gate = gated
        settings = supervisor.settings
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=3))
        jobs = submit_jobs(settings, tmp_path, "acme", 3, layout(fake_until=gate))
        messages = [m for ms in receive_all(backends, 3).values() for m in ms]
        real = backends.dynamo.transact
        lost: list[str] = []

        def lose_the_bursts_reply(items, what, token=None):
            real(items, what, token=token)
            if what.startswith("acquire 3 leases"):
                lost.append(what)
                raise TransientBackendError("TransactWriteItems: read timeout")

        monkeypatch.setattr(backends.dynamo, "transact", lose_the_bursts_reply)
        supervisor.dispatch.take_batch(messages, supervisor.pool.free(), lambda: False)
        assert lost == ["acquire 3 leases for acme"]
        assert set(running(supervisor)) == set(jobs)
        leases = backends.leases.leases()
        assert sorted(lease.job_id for lease in leases) == sorted(jobs)
        assert backends.leases.counters()["acme"].inflight == 3
        assert {job.lease.epoch for job in supervisor.running.running()} == \
            {lease.epoch for lease in leases}, "each runs under its one-by-one lease"

    def test_a_burst_that_fills_the_cap_parks_the_tenants_next_without_a_slot(
            self, gated, tmp_path):
        """Four free slots, acme (cap 4) brings five: the burst takes four and fills the
        cap, so the fifth, beyond the free slots, is parked (no acquire) instead of being
        given back to the queue for a host that could not start it either."""
        supervisor, backends, gate = gated
        jobs = submit_jobs(supervisor.settings, tmp_path, "acme", 5, layout(fake_until=gate))
        by_job = receive_all(backends, 5)
        session.CALLS.reset()
        supervisor.dispatch.take_batch([by_job[j][0] for j in jobs],
                                       supervisor.pool.free()[:4], lambda: False)
        calls = session.CALLS.snapshot()
        assert set(running(supervisor)) == set(jobs[:4])
        assert [n.job_id for n in backends.waiting.oldest("acme")] == [jobs[4]]
        assert calls.get("dynamodb.TransactWriteItems") == 2, "the burst and the park"
        assert backends.queue.receive(10, 0, 60) == [], "nothing was given back"
