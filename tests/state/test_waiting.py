"""The waiting table: parked notes of a tenant come back most urgent first, in one Query."""

from __future__ import annotations

import attrs

from imposer.models import Received
from imposer.state.waiting import Parked, band, order_of
from tests.fixtures.jobs import request


def park(backends, clock, submitted: float, **urgency):
    """Park a job of acme submitted at *submitted* with *urgency* (priority, due); return it."""
    req = attrs.evolve(request(), submitted_at=submitted, **urgency)
    message = Received(message_id=f"m-{req.job_id}", receipt=f"r-{req.job_id}",
                       body=req.to_body(), group_id="acme", sent_at=submitted, receive_count=1)
    backends.waiting.park(Parked.of(req, message, visible_at=clock.time() + 300))
    return req


class TestUrgencyOrder:
    def test_notes_come_back_most_urgent_first(self, backends, clock):
        """Priority first, then earliest due (none last), then oldest: whatever the parking order."""
        t = 1_800_000_000.0
        lazy = park(backends, clock, t + 1, priority=9)
        plain_old = park(backends, clock, t + 2)
        plain_new = park(backends, clock, t + 3)
        due_late = park(backends, clock, t + 4, due=t + 9000)
        due_soon = park(backends, clock, t + 5, due=t + 100)
        rush_no_due = park(backends, clock, t + 6, priority=0)
        rush_due = park(backends, clock, t + 7, priority=0, due=t + 5000)
        second = park(backends, clock, t + 8, priority=2)
        got = [n.job_id for n in backends.waiting.oldest("acme", limit=20)]
        want = [rush_due, rush_no_due, second, due_soon, due_late, plain_old, plain_new, lazy]
        assert got == [r.job_id for r in want]

    def test_one_query_of_a_few_reads_the_most_urgent(self, backends, clock):
        """A read of the first notes (what a hand-off takes) holds the rush job parked last."""
        t = 1_800_000_000.0
        for i in range(5):
            park(backends, clock, t + i)
        rush = park(backends, clock, t + 10, priority=1)
        assert backends.waiting.oldest("acme", limit=1)[0].job_id == rush.job_id

    def test_an_old_style_note_reads_as_default_priority_without_due(self, backends, clock):
        """A note keyed the way notes were before priorities sits with the default ones."""
        t = 1_800_000_000.0
        urgent = park(backends, clock, t + 5, priority=4)
        legacy = request()
        backends.waiting.park(Parked(
            tenant_id="acme", order=f"{t:017.5f}#{legacy.job_id}", job_id=legacy.job_id,
            body=legacy.to_body(), receipt="r", message_id="m", sent_at=t, receive_count=1,
            visible_at=clock.time() + 300))
        later = park(backends, clock, t + 1, priority=6)
        got = [n.job_id for n in backends.waiting.oldest("acme", limit=5)]
        assert got == [urgent.job_id, legacy.job_id, later.job_id]

    def test_default_jobs_keep_the_old_key(self):
        """A job of the default priority without a due time is keyed by age alone."""
        req = attrs.evolve(request(), submitted_at=1_800_000_000.0)
        message = Received(message_id="m", receipt="r", body="", group_id="acme",
                           sent_at=0.0, receive_count=1)
        assert order_of(req, message) == f"01800000000.00000#{req.job_id}"

    def test_bands_sort_in_priority_order_around_the_default(self):
        """Bands rise with priority, and the plain key (a digit) sits between 5 and 6."""
        bands = [band(p) for p in range(10)]
        assert bands == sorted(bands) and band(5) < "0" < "9" < band(6)

    def test_urgency_of_a_note_is_its_class_without_age(self, backends, clock):
        """Notes differing only in age share an urgency; a lower priority or due sorts first."""
        t = 1_800_000_000.0
        for i, urgency in enumerate([{}, {}, {"priority": 3}, {"priority": 3}, {"due": t}]):
            park(backends, clock, t + i, **urgency)
        notes = backends.waiting.oldest("acme", limit=10)
        classes = [n.urgency for n in notes]
        assert classes == sorted(classes) and len(set(classes)) == 3
        assert classes[0] == classes[1] and classes[-1] == classes[-2] == "0"


class TestAcrossTenants:
    def test_urgent_notes_of_one_tenant_never_reach_anothers_read(self, backends, clock):
        """Marking every job urgent reorders only the tenant's own notes: another tenant's
        read (what its freed slots hand over to) is exactly what it was."""
        t = 1_800_000_000.0
        def globex(submitted):
            req = attrs.evolve(request(tenant="globex"), submitted_at=submitted)
            message = Received(message_id=f"m-{req.job_id}", receipt=f"r-{req.job_id}",
                               body=req.to_body(), group_id="globex", sent_at=submitted,
                               receive_count=1)
            backends.waiting.park(Parked.of(req, message, visible_at=clock.time() + 300))
            return req.job_id
        theirs = [globex(t + i) for i in range(3)]
        before = [n.job_id for n in backends.waiting.oldest("globex", limit=10)]
        mine = {park(backends, clock, t - 10 + i, priority=0, due=t).job_id for i in range(5)}
        after = [n.job_id for n in backends.waiting.oldest("globex", limit=10)]
        assert before == after == theirs
        assert {n.job_id for n in backends.waiting.oldest("acme", limit=10)} == mine


class TestAheadOf:
    def test_the_keys_before_a_job_are_the_jobs_its_tenants_slots_go_to_first(self, backends,
                                                                            clock):
        """More urgent notes of any age, and equally urgent older ones; never another
        tenant's."""
        t = 1_800_000_000.0
        old_bulk, rush = park(backends, clock, t + 1), park(backends, clock, t + 5, priority=0)
        bulk = park(backends, clock, t + 3)
        park(backends, clock, t + 4)  # newer bulk: after it
        park(backends, clock, t + 2, priority=9)  # older but less urgent: after it
        message = Received(message_id="m", receipt="r", body=bulk.to_body(), group_id="acme",
                           sent_at=t + 3, receive_count=1)
        ahead = backends.waiting.ahead_of("acme", order_of(bulk, message))
        assert ahead == [order_of(rush, message), order_of(old_bulk, message)]
        assert backends.waiting.ahead_of("globex", "~") == []
