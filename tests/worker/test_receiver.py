"""The long poll runs beside the loop: a job that ends during a poll is settled at once."""

from __future__ import annotations

import json
import time

from imposer.clock import ManualClock
from imposer.models import JobStatus
from imposer.worker.dispatch.pool import Pool
from imposer.worker.wiring import build, connect
from tests.fixtures.jobs import record_of
from tests.fixtures.parents import last_slot_held
from tests.fixtures.workers import (FAKE, Worker, layout, loop_pass, submit_jobs,
                                    wait_for)


class TestLongPollBesideTheLoop:
    def test_a_job_ending_during_a_long_poll_is_settled_before_the_poll_returns(
            self, settings, tmp_path):
        """Two slots, SQS's longest poll (20 s), an empty queue: the loop settles the job
        that ends while the receive for the free slot is still in flight."""
        gate = tmp_path / "gate"
        s = settings.evolve(slots=2, engine="pdftoolbox", pdftoolbox=str(FAKE), poll_seconds=20,
                            work_dir=str(tmp_path / "work"))
        backends = connect(s, clock=ManualClock(start=time.time()))
        supervisor = build(s, backends=backends, pool=Pool(2, s))
        supervisor.pool.start()
        try:
            job = submit_jobs(s, tmp_path, "acme", 1, layout(fake_until=gate))[0]
            wait_for(lambda: (supervisor.fill_free_slots(), len(supervisor.running))[1] == 1, 30,
                     "the job to start")
            supervisor.fill_free_slots()  # the other slot's receive: nothing comes for 20 s
            wait_for(lambda: supervisor.receiver.busy, 10, "the long poll to be in flight")
            gate.touch()
            wait_for(lambda: (supervisor.collect_finished(), supervisor.settle_finished(),
                              not len(supervisor.running))[-1], 30, "the job to be settled")
            assert supervisor.receiver.busy, "the poll ended first: nothing was proved"
            assert record_of(backends, job).status is JobStatus.SUCCEEDED
        finally:
            supervisor.receiver.stop(0)
            supervisor.pool.stop(timeout=0)

    def test_a_hand_off_owed_asks_without_waiting(self, settings, tmp_path):
        """A capped tenant's job ends in its host's last free slot: the hand-off is owed,
        and the receive asked for that slot does not long-poll (20 s here) first.

        acme (cap 1) runs one job and has one parked; globex holds the other
        slot. When acme's job ends, the next receive is a short one; it finds
        the queue empty, so the parked job starts in the freed slot.
        """
        with last_slot_held(settings.evolve(poll_seconds=20), tmp_path) as (
                supervisor, backends, gate, first, parked):
            running = {j.request.job_id for j in supervisor.running.snapshot()}
            assert first in running and parked not in running, \
                "the parked job started before the hand-off"
            waits: list[int] = []
            backends.queue.client.meta.events.register(
                "provide-client-params.sqs.ReceiveMessage",
                lambda params, **_: waits.append(params["WaitTimeSeconds"]))
            gate.touch()
            wait_for(lambda: (loop_pass(supervisor), parked in {j.request.job_id for j in
                                                 supervisor.running.running()})[1], 60,
                     "the parked job to take the freed slot")
            assert waits and waits[0] == 0, f"the receive for the owed slot waited: {waits}"
            assert record_of(backends, first).status is JobStatus.SUCCEEDED

    def test_a_message_received_while_draining_goes_straight_back(self, settings, backends,
                                                                  tmp_path):
        """SIGTERM while a long poll is in flight: what it brings is made visible again at once,
        not held for the lease TTL (10 min here), and the drain still ends the worker with 0."""
        gate = tmp_path / "gate"
        s = settings.evolve(poll_seconds=20, lease_ttl_seconds=600.0)
        worker = Worker(s, tmp_path, "drain-rx", "--slots", "2")
        try:
            running = submit_jobs(s, tmp_path, "acme", 1, layout(fake_until=gate))[0]
            wait_for(lambda: (r := record_of(backends, running)) and
                     r.status is JobStatus.RUNNING, 60, "the first job to start")
            worker.signal()  # drain: the running job may finish; nothing new starts
            wait_for(lambda: worker.actions("drain"), 30, "the drain to begin")
            late = submit_jobs(s, tmp_path, "globex", 1, layout())[0]
            wait_for(lambda: worker.actions("drain_give_back"), 60,
                     "the worker's poll in flight to bring the late message and give it back")
            got = wait_for(lambda: backends.queue.receive(1, 1, 600), 120,
                           "the late message to be visible again")
            assert json.loads(got[0].body)["job_id"] == late
            assert got[0].receive_count >= 2, "the worker's poll never brought it: nothing proved"
            assert record_of(backends, late) is None or \
                record_of(backends, late).status is not JobStatus.RUNNING
            gate.touch()
            assert worker.wait(120) == 0
        finally:
            gate.touch()
            worker.close()
