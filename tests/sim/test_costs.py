"""The simulator's cost table is what the worker spends, counted at the boto3 boundary.

Every calls-per-job figure the simulator reports, and every guard in
tests/sim/test_headlines.py that rests on one, charges a step the AWS calls
``imposer.sim.state.CALLS`` gives it. Here each step is made by the worker's
own part (the receive, the cap read, the acquire, the park, the deferral, the
notes read, the give-back, and the settle of each fate) on the local stack,
and the calls boto3 sent (``session.CALLS``, the counter every client has)
must be the table's: a change to the worker that costs a call more fails here,
not in a 17-minute benchmark.
"""

from __future__ import annotations

import attrs
import pytest

from imposer.aws import session
from imposer.models import Fate, JobRequest, TenantConfig
from imposer.sim.state import CALLS
from imposer.worker.dispatch.contention import ContentionMeter
from imposer.worker.dispatch.deferral import Deferral
from imposer.worker.dispatch.handoff import HandOff
from imposer.state.leases import Verdict
from imposer.worker.messages import Messages
from imposer.worker.settle.completion import Settled
from imposer.worker.threads.rollup import RollupRecorder
from imposer.worker.timing import LeaseTiming
from tests.fixtures.jobs import request
from tests.fixtures.settling import completer_for, reported


def spent(step) -> tuple[dict[str, int], object]:
    """The AWS calls boto3 sent while *step* ran, by operation (tables folded), and its
    result. Every call counts: the queues' URLs are looked up first (``warm``), as a
    running worker has them (one lookup a process, the DLQ's at its first dead letter)."""
    session.CALLS.reset()
    result = step()
    calls: dict[str, int] = {}
    for name, n in session.CALLS.snapshot().items():
        op = name.split("@")[0]
        calls[op] = calls.get(op, 0) + n
    return calls, result


@pytest.fixture(autouse=True)
def warm(backends, settings):
    """The queue's and the DLQ's URLs known, as in a worker that ran a while."""
    backends.queue.url()
    backends.queue.url(settings.dlq_name)


def received(backends, req: JobRequest, clock, visibility: float | None = None):
    """*req*'s message sent and received as the worker receives (hidden for a lease TTL,
    ``LeaseTiming.visibility``, unless *visibility*), on *clock*'s time."""
    visibility = visibility or LeaseTiming.from_settings(backends.settings).visibility
    backends.queue.send(req.to_body(), req.tenant_id)
    (message,) = backends.queue.receive(1, 1, visibility)
    return attrs.evolve(message, visible_until=clock.time() + visibility)


@pytest.fixture
def messages(backends, settings, clock):
    return Messages(backends.queue, settings, clock, LeaseTiming.from_settings(settings))


@pytest.fixture
def deferral(backends, settings, clock, messages):
    return Deferral(tenants=backends.tenants, jobs=backends.jobs, messages=messages,
                    handoff=HandOff(settings, backends.waiting, messages, clock,
                                    LeaseTiming.from_settings(settings)),
                    metrics=backends.metrics,
                    contention=ContentionMeter(settings.slots, 5.0, clock, backends.metrics,
                                               settings.host_id),
                    rollups=RollupRecorder(backends.rollups, settings.host_id,
                                           settings.slots, clock), clock=clock)


class TestReceiving:
    def test_a_receive_is_one_call(self, backends):
        backends.queue.send(request().to_body(), "acme")
        calls, got = spent(lambda: backends.queue.receive(10, 1, 60))
        assert len(got) == 1
        assert calls == {"sqs.ReceiveMessage": CALLS["receive"]}

    def test_a_cap_is_read_once_per_cache_window(self, backends, settings, clock):
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=2))
        assert settings.cap_cache_seconds > 0
        calls, cap = spent(lambda: backends.tenants.cap_for("acme"))
        assert cap == 2 and calls == {"dynamodb.GetItem": CALLS["cap"]}
        clock.advance(settings.cap_cache_seconds / 2)
        again, _ = spent(lambda: backends.tenants.cap_for("acme"))
        assert again == {}, "within cap_cache_seconds a host reads no cap"
        clock.advance(settings.cap_cache_seconds / 2)
        later, _ = spent(lambda: backends.tenants.cap_for("acme"))
        assert later == {"dynamodb.GetItem": CALLS["cap"]}, "read again once the window ends"

    def test_an_acquire_is_one_transaction(self, backends, settings, clock):
        """The tenant's cap read aside (its own entry, once per cache window)."""
        req = request()
        message = received(backends, req, clock)
        backends.tenants.cap_for(req.tenant_id)
        calls, got = spent(lambda: backends.leases.acquire(
            req, settings.host_id, 0, message.sent_at, message.receipt))
        assert got.lease is not None
        assert calls == {"dynamodb.TransactWriteItems": CALLS["acquire"]}

    def test_an_acquire_refused_at_cap_is_one_transaction(self, backends, settings, clock):
        """The common case under a capped backlog: the transaction is cancelled at the cap
        (the next one within the cap memo costs none: ``CapMemo``)."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        first, second = request(), request()
        for req in (first, second):
            message = received(backends, req, clock)
            backends.tenants.cap_for(req.tenant_id)
            calls, got = spent(lambda: backends.leases.acquire(
                req, settings.host_id, 0, message.sent_at, message.receipt))
        assert got.verdict is Verdict.AT_CAP
        assert calls == {"dynamodb.TransactWriteItems": CALLS["acquire"]}

    def test_a_paused_tenants_acquire_costs_nothing(self, backends, settings, clock):
        """Cap 0: refused before any transaction (the simulator charges it no call)."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=0))
        req = request()
        message = received(backends, req, clock)
        backends.tenants.cap_for(req.tenant_id)
        calls, got = spent(lambda: backends.leases.acquire(
            req, settings.host_id, 0, message.sent_at, message.receipt))
        assert (got.verdict, got.cap, calls) == (Verdict.AT_CAP, 0, {})

    def test_a_burst_is_one_transaction(self, backends, settings, clock):
        """A tenant's jobs that fit under its cap start in one acquire
        (``Dispatcher.take_bursts``): the simulator charges the burst one acquire."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=3))
        burst = [(req, received(backends, req, clock)) for req in (request(), request())]
        backends.tenants.cap_for("acme")
        calls, (leases, cap) = spent(lambda: backends.leases.acquire_burst(
            burst, settings.host_id, [0, 1]))
        assert (len(leases), cap) == (2, 3)
        assert calls == {"dynamodb.TransactWriteItems": CALLS["acquire"]}

    def test_a_give_back_is_one_visibility_change(self, backends, messages, clock):
        message = received(backends, request(), clock)
        calls, ok = spent(lambda: messages.give_back(message))
        assert ok and calls == {"sqs.ChangeMessageVisibility": CALLS["give_back"]}


class TestWaiting:
    def test_a_park_at_cap_is_one_transaction(self, backends, settings, clock, deferral):
        """The receive's visibility (a lease TTL) covers the park window: no visibility
        change, the note and the job's waiting note in one write."""
        assert LeaseTiming.from_settings(settings).visibility >= settings.park_seconds, \
            "the one-call park needs the receive to hide the message for the park window"
        req = request()
        message = received(backends, req, clock)
        calls, _ = spent(lambda: deferral.at_cap(req, message, cap=1))
        assert calls == {"dynamodb.TransactWriteItems": CALLS["park"]}
        assert [n.job_id for n in backends.waiting.oldest("acme")] == [req.job_id]

    def test_a_paused_tenants_deferral_is_its_note_and_a_visibility_change(
            self, backends, clock, deferral):
        req = request()
        message = received(backends, req, clock)
        calls, _ = spent(lambda: deferral.at_cap(req, message, cap=0))
        assert sum(calls.values()) == CALLS["defer"]
        assert calls["sqs.ChangeMessageVisibility"] == 1
        assert backends.waiting.oldest("acme") == [], "a paused tenant's message is not parked"

    def test_a_read_of_a_tenants_notes_is_one_query(self, backends, settings, clock, messages):
        handoff = HandOff(settings, backends.waiting, messages, clock,
                          LeaseTiming.from_settings(settings))
        for _ in range(3):
            req = request()
            handoff.park(req, received(backends, req, clock))
        calls, (notes, fresh) = spent(lambda: handoff.notes("acme"))
        assert fresh and len(notes) == 3
        assert calls == {"dynamodb.Query": CALLS["notes"]}


#: The sim's fate -> the child's report that makes it, and the attempts allowed (the
#: dead one's single attempt is its last).
FATES = {"succeeded": (Fate.SUCCEEDED, 3), "failed": (Fate.FAILED, 3),
         "retry": (Fate.RETRY, 3), "dead": (Fate.RETRY, 1), "requeue": (Fate.REQUEUE, 3)}


class TestSettling:
    @pytest.mark.parametrize("fate", sorted(FATES))
    def test_each_fates_settle_costs_what_the_table_says(self, fate, settings, backends,
                                                         clock, tmp_path):
        """A real job received, leased and (a success) its attempt's plate uploaded as a
        child would; its settle, without a hand-over, spends ``CALLS[fate]``."""
        report, attempts = FATES[fate]
        completer = completer_for(settings, backends, clock, attempts)
        job = reported(completer, settings, backends, clock, tmp_path, report,
                       plate=report == Fate.SUCCEEDED)
        req = job.request
        calls, settlement = spent(lambda: completer.settle(job))
        assert settlement.state is Settled.DONE
        record = backends.jobs.get("acme", req.job_id)
        assert record.status.value == {"requeue": "retrying", "retry": "retrying"}.get(
            fate, fate)
        assert sum(calls.values()) == CALLS[fate], calls
        assert calls["dynamodb.TransactWriteItems"] == 1, "one release, no hand-over"


#: Each entry of the cost table -> the case here that measures it.
MEASURED_BY = {
    "receive": TestReceiving.test_a_receive_is_one_call,
    "cap": TestReceiving.test_a_cap_is_read_once_per_cache_window,
    "acquire": TestReceiving.test_an_acquire_is_one_transaction,
    "give_back": TestReceiving.test_a_give_back_is_one_visibility_change,
    "park": TestWaiting.test_a_park_at_cap_is_one_transaction,
    "defer": TestWaiting.test_a_paused_tenants_deferral_is_its_note_and_a_visibility_change,
    "notes": TestWaiting.test_a_read_of_a_tenants_notes_is_one_query,
    **{fate: TestSettling.test_each_fates_settle_costs_what_the_table_says for fate in FATES},
}


def test_the_table_names_every_step_measured_here():
    """Nothing in the cost table goes unmeasured: a new entry needs its case here, and
    each case named reads the entry it measures."""
    import inspect

    assert set(CALLS) == set(MEASURED_BY)
    for step, case in MEASURED_BY.items():
        source = inspect.getsource(case)
        assert f'CALLS["{step}"]' in source or "CALLS[fate]" in source, (step, case)
