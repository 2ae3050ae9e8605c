"""The heartbeat against the local AWS stack: a renewal that finds its lease gone; what a hold costs."""

from __future__ import annotations

import logging

import attrs
import pytest

from imposer.aws import session
from imposer.errors import LeaseLost
from imposer.models import Fate, JobStatus, Outcome, Received
from imposer.worker.threads.heartbeat import LeaseRenewer, MessageHolder
from imposer.worker.messages import Messages
from imposer.worker.overrun import OverrunPolicy
from imposer.worker.running import Running, RunningTable
from imposer.worker.timing import FENCE_SHARE, LeaseTiming
from imposer.worker.threads.sweep import sweep
from tests.fixtures.jobs import request


@pytest.fixture
def renewing(backends, clock):
    """A running table with one leased job, and a renewer over it."""
    req = request()
    lease = backends.leases.acquire(req, "h", 0).lease
    message = Received(message_id="m", receipt="r", body="{}", group_id=req.tenant_id,
                       sent_at=0.0, receive_count=1)
    table = RunningTable()
    table.add(Running(slot=0, request=req, message=message, lease=lease,
                      started=clock.monotonic()))
    renewer = LeaseRenewer(table, backends.leases, OverrunPolicy(job_timeout=60, heartbeat=1),
                           LeaseTiming.from_settings(backends.settings), clock)
    return table, renewer


def settled(table: RunningTable, status: JobStatus) -> Running:
    """Record the child's report and the fate decided on it, as the completer does."""
    (job,) = table.snapshot()
    return table.update(job, outcome=Outcome(job_id=job.request.job_id, fate=Fate.SUCCEEDED),
                        status=status, finished=1.0)


def errors(caplog) -> list[str]:
    return [getattr(r, "action", None) for r in caplog.records if r.levelno >= logging.ERROR]


class TestLeaseRenewer:
    def test_a_renewal_that_races_the_release_is_no_loss(self, backends, renewing, caplog):
        """A renewal that finds the lease taken by the job's own release (its reply not yet
        heard) logs no error and flags nothing."""
        caplog.set_level(logging.DEBUG, logger="imposer.worker.threads.heartbeat")
        table, renewer = renewing
        job = settled(table, JobStatus.SUCCEEDED)
        backends.leases.release(job.lease, JobStatus.SUCCEEDED, output_epoch=job.epoch,
                                finished_at=1.0)
        renewer.beat()
        assert not table.snapshot()[0].lost
        assert errors(caplog) == []
        assert [r.action for r in caplog.records
                if getattr(r, "action", None) == "lease_released"] == ["lease_released"]

    def test_a_renewal_after_the_release_was_recorded_is_no_loss(self, backends, renewing,
                                                                   caplog):
        """A renewal of an attempt the running table already shows released flags nothing."""
        table, renewer = renewing
        stale = settled(table, JobStatus.FAILED)
        backends.leases.release(stale.lease, JobStatus.FAILED, finished_at=1.0)
        table.update(stale, released=True)
        with pytest.raises(LeaseLost) as lost:
            backends.leases.renew(stale.lease)
        renewer.lost(stale, lost.value)
        assert not table.snapshot()[0].lost
        assert errors(caplog) == []

    @pytest.mark.parametrize("settling", [False, True])
    def test_a_reclaimed_lease_is_lost(self, backends, renewing, clock, caplog, settling):
        """A lease the sweep took (while the job runs or settles) is an error: the job is lost."""
        table, renewer = renewing
        if settling:
            settled(table, JobStatus.SUCCEEDED)
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        assert sweep(backends.leases, backends.metrics).reclaimed
        renewer.beat()
        assert table.snapshot()[0].lost
        assert errors(caplog) == ["lease_lost"]

    def test_a_renewal_moves_the_running_jobs_fence(self, backends, renewing, clock):
        """Each renewal tells the slot's child how long its tools may now run: the lease's
        new time left less the fence margin; a job that already reported (its slot may run
        another) moves no fence."""
        table, renewer = renewing
        moved = []
        renewer.fence = lambda slot, epoch, run_for: moved.append((slot, epoch, run_for))
        clock.advance(2.0)
        renewer.beat()
        (job,) = table.snapshot()
        ttl = backends.settings.lease_ttl_seconds
        assert moved == [(0, job.epoch, ttl - FENCE_SHARE * ttl)]
        settled(table, JobStatus.SUCCEEDED)
        renewer.beat()
        assert len(moved) == 1


class TestMessageHolder:
    def test_a_message_invisible_for_long_enough_is_not_touched(self, backends, clock):
        """The receive made it invisible for a lease TTL: no visibility change until it is due.

        Then one hold, which moves its deadline a TTL on; a beat right after
        changes nothing again.
        """
        settings = backends.settings.evolve(lease_ttl_seconds=60.0, heartbeat_seconds=1.0)
        req = request()
        backends.queue.send(req.to_body(), req.tenant_id)
        (message,) = backends.queue.receive(1, 1, settings.lease_ttl_seconds)
        message = attrs.evolve(message, visible_until=clock.time() + settings.lease_ttl_seconds)
        lease = backends.leases.acquire(req, "h", 0).lease
        table = RunningTable()
        table.add(Running(slot=0, request=req, message=message, lease=lease,
                          started=clock.monotonic()))
        holder = MessageHolder(table, Messages(backends.queue, settings, clock,
                                               LeaseTiming.from_settings(settings)))

        def beat() -> dict[str, int]:
            session.CALLS.reset()
            holder.beat()
            return session.CALLS.snapshot()

        assert beat() == {}, "nothing is due while the receive's visibility runs"
        clock.advance(settings.lease_ttl_seconds - 2 * settings.heartbeat_seconds - 4)
        assert beat() == {"sqs.ChangeMessageVisibility": 1}
        (job,) = table.snapshot()
        assert job.message.visible_until == clock.time() + settings.lease_ttl_seconds
        assert beat() == {}, "the hold moved the deadline on"
        assert backends.queue.receive(1, 0, 60) == []
