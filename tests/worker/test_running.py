"""The running table and the overrun policy: state shared by the loop and the heartbeat."""

from __future__ import annotations

import threading

import attrs

from imposer.models import Lease, Received
from imposer.worker.overrun import OverrunPolicy
from imposer.worker.running import Running, RunningTable
from tests.fixtures.jobs import request


def running(slot: int = 0, epoch: str = "e1") -> Running:
    req = request()
    lease = Lease(tenant_id=req.tenant_id, job_id=req.job_id, host="h", slot=slot, epoch=epoch,
                  acquired_at=1.0, expires_at=2.0)
    message = Received(message_id="m", receipt="r", body="{}", group_id="acme", sent_at=0.0,
                       receive_count=1)
    return Running(slot=slot, request=req, message=message, lease=lease, started=10.0)


class TestRunningTable:
    def test_update_replaces_the_same_job(self):
        """A renewal recorded while the job still holds its slot replaces the entry."""
        table = RunningTable()
        job = running()
        table.add(job)
        renewed = table.update(job, lease=attrs.evolve(job.lease, expires_at=9.0))
        assert renewed is not None and table.in_slot(0).lease.expires_at == 9.0
        assert job.lease.expires_at == 2.0, "entries are frozen; the old one is unchanged"

    def test_late_update_never_touches_the_next_job(self):
        """A heartbeat that learned about a finished job cannot mark the slot's new job."""
        table = RunningTable()
        old, new = running(), running(epoch="e2")
        table.add(old)
        table.remove(old)
        table.add(new)
        assert table.update(old, lost=True) is None
        assert table.in_slot(0) is new and not new.lost

    def test_changes_from_two_threads_both_land(self):
        """The renewer's lease and the loop's outcome, made on stale copies, are both kept."""
        table = RunningTable()
        job = running()
        table.add(job)
        table.update(job, lease=attrs.evolve(job.lease, expires_at=9.0))
        table.update(job, released=True)  # the loop still holds the first copy
        (current,) = table.snapshot()
        assert current.lease.expires_at == 9.0 and current.released

    def test_a_settling_job_leaves_its_slot(self):
        """Once the child reported, the slot holds no running job, but the job stays listed."""
        table = RunningTable()
        job = running()
        table.add(job)
        table.update(job, outcome="done")
        assert table.in_slot(0) is None and len(table) == 1 and table.settling()

    def test_concurrent_updates_keep_one_entry(self):
        """Threads racing to update one slot never lose the entry or resurrect an old one."""
        table = RunningTable()
        table.add(running())

        def hammer():
            for _ in range(200):
                current = table.in_slot(0)
                table.update(current, received=current.received + 1)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(table) == 1 and 1 <= table.in_slot(0).received <= 800


class TestOverrunPolicy:
    def test_limit_is_timeout_plus_two_heartbeats_and_margin(self):
        """The parent gives a job up only after the child had time to kill and report."""
        policy = OverrunPolicy(job_timeout=100, heartbeat=10, margin=5)
        assert (policy.tool_timeout, policy.limit) == (100, 125)
        assert not policy.overran(started=0, now=125)
        assert policy.overran(started=0, now=125.1)
