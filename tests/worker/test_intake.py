"""The receive side of the loop: a message asked for per free slot and dispatched, a failing
receive paced, a look at the queue, what a drain gives back, and when there is no work left.

The intake is the one a hand-driven worker wires (a started one-slot pool with the fake
pdfToolbox, the local AWS stack, a hand-moved clock); the receive is the real thread.
"""

from __future__ import annotations

import os
import select

import pytest

from imposer.models import TenantConfig
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.workers import layout, submit_jobs, wait_for
from tests.fixtures.parents import hand_driven
from imposer.worker.supervisor import Until


@pytest.fixture
def wired(settings, tmp_path):
    supervisor, backends, clock = hand_driven(settings, tmp_path)
    yield supervisor, backends, clock
    supervisor.pool.stop(timeout=0)


def never() -> bool:
    return False


def filled_until(intake, predicate, what: str):
    """Call ``fill`` (as each pass of the loop does) until *predicate* holds."""
    return wait_for(lambda: (intake.fill(never, None), predicate())[1], 60, what)


class TestFill:
    def test_a_message_for_the_free_slot_is_received_and_started(self, settings, wired,
                                                                 tmp_path):
        """With a slot free, fill asks for a message, and the next pass that has it starts
        the job in that slot."""
        supervisor, _, _ = wired
        (job,) = submit_jobs(settings, tmp_path, "acme", 1, layout())
        filled_until(supervisor.intake, lambda: len(supervisor.running), "the job to start")
        assert supervisor.running.in_slot(0).request.job_id == job
        assert supervisor.pool.free() == []

    def test_a_limit_on_jobs_counts_the_starts_of_the_same_fill(self, settings, tmp_path):
        """``--max-jobs 2`` with three slots free: the fill that starts job 1 asks for one
        message more, not two (the limit read after its own starts, not before)."""
        supervisor, _, _ = hand_driven(settings, tmp_path, slots=3)
        asked: list[int] = []
        real_ask = supervisor.receiver.ask

        def ask(count: int, poll: bool = True) -> bool:
            asked.append(count)
            return real_ask(count, poll)

        supervisor.receiver.ask = ask
        left = Until(max_jobs=2).left
        try:
            submit_jobs(settings, tmp_path, "acme", 1, layout())
            wait_for(lambda: (supervisor.intake.fill(never, left),
                              len(supervisor.running))[1], 60, "job 1 to start")
            assert asked[0] == 2, "before any start: one per job the limit leaves"
            assert asked[-1] == 1, f"after job 1 started, asked for {asked[-1]}"
        finally:
            supervisor.receiver.stop(0)
            supervisor.pool.stop(timeout=0)

    def test_a_failing_receive_backs_off_doubling(self, settings, tmp_path, monkeypatch,
                                                  logged):
        """A receive SQS keeps failing is one warning per try, 0.5 s then 1 s apart on the
        loop's clock; no receive is asked meanwhile and nothing is raised."""
        proxy = FaultProxy(os.environ["AWS_ENDPOINT_URL"], "intake").start()
        supervisor, _, clock = hand_driven(settings, tmp_path, proxy.url, monkeypatch)
        intake = supervisor.intake
        try:
            proxy.inject("error", 600, service="sqs", operation="ReceiveMessage")
            for failures, delay in ((1, 0.5), (2, 1.0)):
                filled_until(intake, lambda: intake.paused_until > clock.monotonic(),
                             f"receive failure {failures}")
                assert intake.paused_until == clock.monotonic() + delay
                # the loop waits on the pool until a receive may be asked again; stopping,
                # it waits as long as it may (no receive is asked then)
                assert (intake.may_wait(False, most=10), intake.may_wait(True, most=10)) == (
                    delay, 10)
                intake.fill(never, None)
                assert not supervisor.receiver.busy, "a receive was asked while backing off"
                clock.advance(delay)
                assert intake.may_wait(False, most=10) == 0
            warnings = [line for line in logged() if line.get("action") == "receive_error"]
            assert [line["failures"] for line in warnings] == [1, 2]
        finally:
            proxy.clear()
            supervisor.pool.stop(timeout=0)
            proxy.stop()


class TestLook:
    def test_a_look_says_whether_another_tenant_could_start(self, settings, wired,
                                                            tmp_path):
        """An empty queue, or only the settling tenant's own messages, says nothing else
        waits; another tenant's message says otherwise and is started by the next fill."""
        supervisor, _, _ = wired
        intake = supervisor.intake
        assert intake.look("acme") is True
        (own,) = submit_jobs(settings, tmp_path, "acme", 1, layout())
        looked = wait_for(lambda: intake.look("acme") and intake.take_looked(), 30,
                          "acme's own message in a look")
        assert [m.group_id for m in looked] == ["acme"] and own in looked[0].body
        (job,) = submit_jobs(settings, tmp_path, "globex", 1, layout())
        wait_for(lambda: not intake.look("acme"), 30, "globex's message in a look")
        intake.fill(never, None)
        assert supervisor.running.in_slot(0).request.job_id == job


class TestDrain:
    def test_what_a_receive_in_flight_brings_goes_straight_back(self, settings, wired,
                                                               tmp_path, logged):
        """Draining, the messages of a receive that was already asked for are made visible
        again at once for another host, not held for their visibility timeout."""
        supervisor, backends, _ = wired
        submit_jobs(settings, tmp_path, "acme", 1, layout())
        assert supervisor.receiver.ask(1)
        assert select.select([supervisor.receiver.wake_fd], [], [], 60)[0], "no receive came"
        supervisor.intake.give_back_received()
        (line,) = [r for r in logged() if r.get("action") == "drain_give_back"]
        assert line["count"] == 1
        assert len(backends.queue.receive(1, 1, 30)) == 1, "the message was not given back"
        assert not len(supervisor.running)


class TestIdle:
    def test_idle_only_after_an_empty_receive_of_an_empty_queue(self, settings, wired,
                                                                tmp_path):
        """No work left is said only once a receive came back empty and the queue holds
        nothing visible or delayed."""
        supervisor, _, _ = wired
        intake = supervisor.intake
        assert intake.idle() is False  # nothing received yet
        filled_until(intake, lambda: intake.empty_poll, "an empty receive")
        assert intake.idle() is True
        submit_jobs(settings, tmp_path, "acme", 1, layout())
        assert intake.idle() is False

    def test_a_paused_tenants_parked_messages_do_not_count_as_work(self, settings, wired,
                                                                   tmp_path):
        """Messages of a paused tenant (cap 0) wait for an operator, not for this host: with
        only those in the queue the host is idle."""
        supervisor, backends, _ = wired
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=0))
        submit_jobs(settings, tmp_path, "acme", 1, layout())
        filled_until(supervisor.intake, lambda: supervisor.intake.idle(),
                     "the paused tenant's message to be set aside")
        assert supervisor.intake.left.paused_messages() == 1 and not len(supervisor.running)
