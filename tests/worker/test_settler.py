"""The Settler: a finished job's fate, its slot's promise, the release, the slot's next owner.

A parent built by ``wiring.build`` with two real pool slots and the fake
pdfToolbox: acme (cap 1) has one job running and one parked; the running
one's result is collected, and the Settler is then driven by hand.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from imposer.aws import session
from imposer.clock import ManualClock
from imposer.models import JobStatus, TenantConfig
from imposer.worker import executor
from imposer.worker.dispatch.pool import Pool
from imposer.worker.settle.promise import Promise
from imposer.worker.wiring import build, connect
from tests.fixtures.jobs import record_of
from tests.fixtures.workers import FAKE, layout, loop_pass, submit_jobs, wait_for


class TickingClock(ManualClock):
    """A hand-driven clock whose wall time moves on a millisecond at each reading, so two
    things recorded one after the other never share a timestamp."""

    def time(self) -> float:
        self.advance(0.001)
        return super().time()


def settled(supervisor, plan):
    """Run a settle's plan as the parent does: its looks at the queue are the intake's."""
    return executor.run(plan, supervisor.look)


def never() -> bool:
    return False


@contextlib.contextmanager
def one_finished_one_parked(settings, tmp_path, ran: float = 0.0, **overrides):
    """Cap 1 on two slots: acme's first job has run (for *ran* seconds of the clock) and
    its result is collected (not yet settled); its second is parked. Yields the
    supervisor, its backends and the job ids. *overrides*: more settings."""
    s = settings.evolve(slots=2, engine="pdftoolbox", pdftoolbox=str(FAKE),
                        lease_ttl_seconds=600.0, park_seconds=300.0,
                        work_dir=str(tmp_path / "work"), **overrides)
    clock = TickingClock(start=time.time())
    backends = connect(s, clock=clock)
    backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
    supervisor = build(s, backends=backends, pool=Pool(2, s))
    supervisor.pool.start()
    first_gate, parked_gate = tmp_path / "gate-first", tmp_path / "gate-parked"
    try:
        (first,) = submit_jobs(s, tmp_path, "acme", 1, layout(fake_until=first_gate))
        (parked,) = submit_jobs(s, tmp_path, "acme", 1, layout(fake_until=parked_gate))
        wait_for(lambda: (loop_pass(supervisor), len(supervisor.running) == 1
                          and backends.waiting.oldest("acme"))[1], 60,
                 "one job to run and the other to be parked")
        clock.advance(ran)
        first_gate.touch()
        wait_for(lambda: (supervisor.collect_finished(0.1), supervisor.running.settling())[1],
                 60, "the first job's result")
        yield supervisor, backends, first, parked
    finally:
        first_gate.touch()
        parked_gate.touch()
        supervisor.receiver.stop(0)
        supervisor.pool.stop(timeout=0)


@pytest.mark.slow
class TestSettler:
    def test_a_jobs_end_is_recorded_before_its_successors_start(self, settings, tmp_path):
        """The finished job's fate is decided (its finish time taken) before its slot is
        promised (the successor's lease dated): the record of its end is never later than
        the start of the job that took its slot."""
        with one_finished_one_parked(settings, tmp_path) as (supervisor, backends, first,
                                                             parked):
            (job,) = supervisor.running.settling()
            assert settled(supervisor, supervisor.settler.settle(job, never)) == [], "no refill owed: it was handed"
            ended, started = record_of(backends, first), record_of(backends, parked)
            assert (ended.status, started.status) == (JobStatus.SUCCEEDED, JobStatus.RUNNING)
            assert ended.finished_at < started.started_at
            assert [j.request.job_id for j in supervisor.running.running()] == [parked]

    def test_a_settle_with_a_hand_over_is_one_transaction(self, settings, tmp_path):
        """Settling the due jobs ends the finished one and starts the parked one in its slot
        with a single TransactWriteItems: no acquire of the successor's own, and the
        tenant's counter never leaves 1."""
        with one_finished_one_parked(settings, tmp_path) as (supervisor, backends, first,
                                                             parked):
            session.CALLS.reset()
            settled(supervisor, supervisor.settler.settle_due(never))
            calls = session.CALLS.snapshot()
            assert calls.get("dynamodb.TransactWriteItems") == 1, calls
            assert [j.request.job_id for j in supervisor.running.running()] == [parked]
            assert backends.leases.counters()["acme"].inflight == 1
            assert backends.waiting.oldest("acme") == []

    def test_fair_share_counts_a_release_at_once(self, settings, tmp_path):
        """Fair share on: the settle's release charges the job's 100 s to acme's usage at
        once, so the standing a decision reads right after it (before the background read
        of the usage) is the one that read then finds. Without the charge it would hold only
        the successor's running time, half of it, and the next freed slot would be decided
        on a usage from before the release (the stop-47 defect)."""
        with one_finished_one_parked(settings, tmp_path, ran=100.0,
                                     share_half_life=3600.0) as (supervisor, backends, first,
                                                                 parked):
            shares = supervisor.dispatch.shares
            shares.refresh()  # the background read, from before the release
            (job,) = supervisor.running.settling()
            settled(supervisor, supervisor.settler.settle(job, never))
            assert [j.request.job_id for j in supervisor.running.running()] == [parked]
            at_once = {t.tenant: t.usage for t in shares.standing()}["acme"]
            shares.refresh()  # the next background read has the release in the table
            read = {t.tenant: t.usage for t in shares.standing()}["acme"]
            assert read >= 150, "the release's 100 s and the successor's typical run"
            assert at_once == pytest.approx(read, rel=0.02)

    def test_a_refused_hand_over_leaves_the_slot_free(self, settings, tmp_path):
        """The slot was promised to the parked job, but another host took its note before the
        release: the release is a plain one, nothing starts in the slot, and the slot is
        free and owed to the refill (``Refiller.wake``) as after any release."""
        with one_finished_one_parked(settings, tmp_path) as (supervisor, backends, first,
                                                             parked):
            (job,) = supervisor.running.settling()
            job = supervisor.reaper.completer.decide(job)
            promise, job = settled(supervisor, supervisor.settler.promise_slot(job, never))
            assert promise is Promise.MADE and job.handover.note.job_id == parked
            backends.dynamo.transact([backends.waiting.claim_op(job.handover.note)],
                                     "another host takes the parked job's note")
            assert settled(supervisor, supervisor.settler.settle(job, never)) == [("acme", False)]
            assert record_of(backends, first).status is JobStatus.SUCCEEDED
            assert record_of(backends, parked).status is not JobStatus.RUNNING
            assert not len(supervisor.running)
            assert job.slot in supervisor.pool.free()
            assert backends.leases.counters()["acme"].inflight == 0
