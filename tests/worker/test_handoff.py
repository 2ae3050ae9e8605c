"""Parking at cap and handing a freed slot to the tenant's oldest parked job, on any host."""

from __future__ import annotations

import attrs
import pytest

from imposer.models import JobRequest, TenantConfig
from imposer.state.leases import Verdict
from imposer.state.waiting import Parked
from imposer.worker.handoff import HandOff
from imposer.worker.messages import Messages
from tests.fixtures.jobs import record_of, request
from tests.fixtures.workers import Worker, layout, submit_jobs, wait_for


def received(backends, req: JobRequest):
    backends.queue.send(req.to_body(), req.tenant_id)
    (message,) = backends.queue.receive(1, 1, 60)
    return message


class TestParking:
    def test_park_notes_the_message_and_hides_it(self, backends, settings, clock):
        """A parked message is noted oldest-first and stays invisible for the park window."""
        handoff = HandOff(settings, backends.waiting,
                          Messages(backends.queue, settings, clock), clock)
        later = attrs.evolve(request(), submitted_at=clock.time() - 50)
        early = attrs.evolve(request(), submitted_at=clock.time() - 90)
        for req in (later, early):
            assert handoff.park(req, received(backends, req))
        assert [n.job_id for n in handoff.notes("acme")] == [early.job_id, later.job_id]
        assert backends.queue.receive(1, 0, 60) == [], "parked messages are invisible"

    def test_a_note_is_taken_once(self, backends, settings, clock):
        """Two hosts racing for one note: the acquire that carries the claim wins once."""
        handoff = HandOff(settings, backends.waiting,
                          Messages(backends.queue, settings, clock), clock)
        req = request()
        handoff.park(req, received(backends, req))
        (note,) = handoff.notes("acme")
        first = backends.leases.acquire(req, "h1", 0, also=[backends.waiting.claim_op(note)])
        other = request()
        second = backends.leases.acquire(other, "h2", 0, also=[backends.waiting.claim_op(note)])
        assert (first.verdict, second.verdict) == (Verdict.ACQUIRED, Verdict.CLAIMED)
        assert handoff.notes("acme") == []
        assert backends.leases.counters()["acme"].inflight == 1, "the losing claim took no slot"

    def test_a_reparked_message_replaces_its_stale_note(self, backends, settings, clock):
        """The same job parked again (new receipt) leaves one note, with the new receipt."""
        handoff = HandOff(settings.evolve(park_seconds=0), backends.waiting,
                          Messages(backends.queue, settings, clock), clock)
        req = request()
        backends.queue.send(req.to_body(), "acme")
        first = backends.queue.receive(1, 1, 60)[0]
        handoff.park(req, first)
        second = backends.queue.receive(1, 1, 60)[0]
        handoff.park(req, second)
        (note,) = handoff.notes("acme")
        assert isinstance(note, Parked) and note.receipt == second.receipt


@pytest.mark.slow
class TestHandOffAcrossHosts:
    def test_a_freed_slot_takes_the_parked_job_at_once(self, settings, backends, tmp_path):
        """Cap 1, two hosts: each job of the tenant starts as the one before it ends.

        The park window (60 s) is far longer than the whole run, so every
        start after the first can only come from a hand-off.
        """
        backends.tenants.put(TenantConfig(tenant_id="heavy", cap=1))
        slow = settings.evolve(park_seconds=60.0)
        ids = submit_jobs(slow, tmp_path, "heavy", 5, layout(fake_sleep=1))
        hosts = [Worker(slow, tmp_path, name, "--slots", "3") for name in ("ha", "hb")]
        try:
            wait_for(lambda: all(
                (r := record_of(backends, j)) and r.status.value == "succeeded" for j in ids),
                90, "every job of the capped tenant")
        finally:
            for w in hosts:
                w.close()
        records = sorted((record_of(backends, j) for j in ids), key=lambda r: r.started_at)
        gaps = [b.started_at - a.finished_at for a, b in zip(records, records[1:])]
        assert max(gaps) < 30, f"a freed slot waited for a park window: {gaps}"
        assert sum(len(w.actions("cap_defer")) for w in hosts) >= 1
        handed = [r for w in hosts for r in w.records() if r.get("action") == "metric"
                  and r.get("metric") == "handed_off"]
        assert len(handed) >= 3, "the jobs after the first were handed off"
