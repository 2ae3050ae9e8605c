"""The refill: a free slot to parked work when no promise with a release reached it.

``Refiller`` owes a capped tenant the hand-off its last-slot release could not make,
pays it once the queue has nothing for the slot, and re-drives parked jobs that no
hand-off reached, never passing over a tenant waiting in the queue.
"""

from __future__ import annotations

import logging

import pytest

from imposer.models import JobStatus
from tests.fixtures.jobs import record_of
from tests.fixtures.parents import looked_at_the_last_slot
from tests.fixtures.workers import loop_pass, wait_for


@pytest.mark.slow
class TestTheLastFreeSlot:
    def test_a_look_that_finds_another_tenant_gives_it_the_last_slot(self, settings,
                                                                     tmp_path, caplog):
        """initech's job waits in the queue when acme's job ends in the last free slot: the
        look brings it, the release is a plain one, initech's job takes the slot and acme
        is owed the hand-off, paid when a slot is free and the queue empty again."""
        logging.getLogger("imposer").propagate = True
        with looked_at_the_last_slot(settings, tmp_path) as (supervisor, backends, first,
                                                             parked, quiet):
            assert record_of(backends, parked).status is JobStatus.QUEUED
            assert supervisor.refill.owes, "acme is owed the hand-off"
            supervisor.dispatch.clock.advance(0.5)  # the rest of the pass, before the next fill
            with caplog.at_level(logging.INFO, logger="imposer"):
                supervisor.fill_free_slots()  # what the look brought is dispatched first
            assert record_of(backends, quiet).status is JobStatus.RUNNING
            # one line, though a handler another test left on "imposer" may pass it twice
            (started,) = {(r.job_id, r.created): r for r in caplog.records if getattr(
                r, "action", None) == "job_started" and r.job_id == quiet}.values()
            assert started.dispatch_ms >= 500, "counted from the look that received it"
            assert record_of(backends, parked).status is JobStatus.QUEUED
            wait_for(lambda: (loop_pass(supervisor),
                              record_of(backends, parked).status is JobStatus.RUNNING)[1],
                     60, "acme's parked job, once initech's ends")
            assert record_of(backends, quiet).status is JobStatus.SUCCEEDED
            assert backends.leases.counters()["acme"].inflight == 1

    def test_a_redrive_leaves_the_last_slot_to_a_tenant_that_sent_since(self, settings,
                                                                         tmp_path):
        """acme's job ends in the last free slot while initech's message waits (the look
        brought it, no fill has dispatched it): the restart of parked jobs at the next view read, though
        the last receive found the queue empty, leaves acme's parked job parked, and the
        next fill starts initech's job in the slot (a restart used to give it to acme)."""
        with looked_at_the_last_slot(settings, tmp_path) as (supervisor, backends, first,
                                                             parked, quiet):
            assert len(supervisor.pool.free()) == 1
            supervisor.intake.empty_poll = True  # the last receive found the queue empty
            supervisor.dispatch.borrowing.refresh()  # a new read of the waiting view: acme below cap
            assert "acme" in supervisor.dispatch.borrowing.view().below_cap
            supervisor.restart_parked()
            assert record_of(backends, parked).status is JobStatus.QUEUED
            supervisor.fill_free_slots()
            assert record_of(backends, quiet).status is JobStatus.RUNNING
            assert record_of(backends, parked).status is JobStatus.QUEUED
