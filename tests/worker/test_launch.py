"""Launching a leased job: into the first free slot with its queue wait counted, a nearly
spent lease renewed first, and a lease that will not run given back at once.

The launcher is the one a hand-driven worker wires (a started one-slot pool with the fake
pdfToolbox, the local AWS stack); each test leases a job the way dispatch does.
"""

from __future__ import annotations

import time

import pytest

from imposer.client import submit
from imposer.errors import AcquireUncertain
from imposer.models import JobStatus
from imposer.models.urgency import format_due
from imposer.reports.history import HostHour
from imposer.worker.threads.sweep import sweep
from imposer.worker.timing import FENCE_SHARE
from tests.fixtures.jobs import record_of
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import layout
from tests.fixtures.parents import hand_driven


@pytest.fixture
def wired(settings, tmp_path):
    supervisor, backends, clock = hand_driven(settings, tmp_path)
    yield supervisor, backends, clock
    supervisor.pool.stop(timeout=0)


def leased(settings, backends, tmp_path, slot: int = 0):
    """A job submitted as a tenant would, its message received and its lease taken."""
    request = submit("acme", numbered_pdf(tmp_path / "art.pdf", 2), layout(),
                     bucket=settings.bucket, queue=settings.queue_name)
    (message,) = backends.queue.receive(1, 1, 60)
    lease = backends.leases.acquire(request, settings.host_id, slot, sent_at=message.sent_at,
                                    receipt=message.receipt).lease
    return request, message, lease


def launch(supervisor, request, message, free, lease, received_at: float | None = None) -> bool:
    """Launch as dispatch does, the message received at *received_at* (monotonic; now)."""
    return supervisor.dispatch.launcher.launch(
        request, message, free, lease,
        received_at=supervisor.dispatch.clock.monotonic() if received_at is None else received_at)


class TestLaunch:
    def test_a_leased_job_starts_in_the_first_free_slot(self, settings, wired, tmp_path,
                                                         logged):
        """The job takes ``free[0]``, runs in the pool, and its queue wait (from submission to
        its lease) is one queue_wait data point and the job_started line, which also says
        how long the parent took from the message's receipt to the start."""
        supervisor, backends, clock = wired
        clock.advance(60)  # the lease is taken a minute after the job was submitted
        request, message, lease = leased(settings, backends, tmp_path)
        received_at = clock.monotonic()
        clock.advance(0.25)
        free = [0]
        before = time.monotonic()
        assert launch(supervisor, request, message, free, lease, received_at) is True
        after = time.monotonic()
        assert free == [] and supervisor.pool.free() == []
        assert supervisor.running.in_slot(0).request == request
        # its tools stop the fence margin before its lease could be reclaimed
        expires_at = supervisor.running.in_slot(0).lease.expires_at
        run_for = expires_at - clock.time() - FENCE_SHARE * settings.lease_ttl_seconds
        assert before + run_for <= supervisor.pool.slots[0].deadline.value <= after + run_for
        assert supervisor.dispatch.launcher.started == 1
        wait = round(lease.acquired_at - request.submitted_at, 3)
        assert wait > 0
        lines = logged()
        (point,) = [line for line in lines if line.get("metric") == "queue_wait"]
        assert (point["queue_wait"], point["tenant_id"]) == (wait, "acme") and "_aws" in point
        (started,) = [line for line in lines if line.get("action") == "job_started"]
        assert (started["job_id"], started["slot"], started["borrowed"],
                started["dispatch_ms"]) == (request.job_id, 0, False, 250.0)

    def test_a_start_after_the_due_time_is_counted_where_operators_read_it(
            self, settings, wired, tmp_path, logged):
        """A priority-1 job due 30 s after it was sent and leased a minute after: one
        started_late EMF point for its tenant, the job_started line says its priority, due
        time and how late, and the host's rollup counts the start under its priority and as
        late (what `imposer stats` reads)."""
        supervisor, backends, clock = wired
        due = clock.time() + 30
        request = submit("acme", numbered_pdf(tmp_path / "art.pdf", 2), layout(),
                         bucket=settings.bucket, queue=settings.queue_name, priority=1,
                         due=format_due(due))
        clock.advance(60)
        (message,) = backends.queue.receive(1, 1, 60)
        lease = backends.leases.acquire(request, settings.host_id, 0, sent_at=message.sent_at,
                                        receipt=message.receipt).lease
        assert launch(supervisor, request, message, [0], lease) is True
        lines = logged()
        (point,) = [line for line in lines if line.get("metric") == "started_late"]
        assert (point["started_late"], point["tenant_id"]) == (1, "acme") and "_aws" in point
        (started,) = [line for line in lines if line.get("action") == "job_started"]
        late_by = lease.acquired_at - request.due
        assert (started["priority"], started["due"]) == (1, request.due)
        assert started["late_by"] == pytest.approx(late_by, abs=1e-3) and late_by > 29
        assert "after its due time" in started["message"]
        supervisor.dispatch.launcher.rollups.flush()
        (hour,) = [HostHour.from_item(i) for i in
                   backends.rollups.read(clock.time() - 3600, clock.time() + 3600)]
        assert (hour.late, hour.tenants["acme"]["late"]) == (1, 1)
        assert (hour.priorities[1]["started"], hour.priorities[1]["late"]) == (1, 1)

    def test_a_lease_a_slow_acquire_nearly_spent_is_renewed_first(self, settings, wired,
                                                                   tmp_path):
        """With less than two thirds of its TTL left, the lease is renewed before the job
        starts, so a sweep cannot take a job that is only starting."""
        supervisor, backends, clock = wired
        request, message, lease = leased(settings, backends, tmp_path)
        clock.advance(settings.lease_ttl_seconds / 2)
        assert launch(supervisor, request, message, [0], lease) is True
        expires = clock.time() + settings.lease_ttl_seconds
        assert supervisor.running.in_slot(0).lease.expires_at == expires
        assert [held.expires_at for held in backends.leases.leases()] == [expires]

    def test_a_lease_lost_before_the_launch_starts_nothing(self, settings, wired, tmp_path,
                                                           logged):
        """A lease reclaimed while its acquire crawled is not renewed: no slot is taken,
        nothing reaches the pool, and the job waits for its message's next delivery."""
        supervisor, backends, clock = wired
        request, message, lease = leased(settings, backends, tmp_path)
        clock.advance(settings.lease_ttl_seconds + 1)
        sweep(backends.leases, backends.metrics)
        free = [0]
        assert launch(supervisor, request, message, free, lease) is False
        assert free == [0] and supervisor.pool.free() == [0] and not len(supervisor.running)
        assert [line["job_id"] for line in logged()
                if line.get("action") == "acquire_slow"] == [request.job_id]
        assert record_of(backends, request.job_id).status == JobStatus.QUEUED


class TestGivingBack:
    def test_a_lease_that_will_not_run_is_released_at_once(self, settings, wired, tmp_path):
        """``unwind`` gives the slot back now (not at the lease's expiry) and says why the
        job did not start."""
        supervisor, backends, _ = wired
        request, _, lease = leased(settings, backends, tmp_path)
        supervisor.dispatch.launcher.unwind(lease, "its parked message is gone")
        assert backends.leases.leases() == []
        assert backends.leases.counters()["acme"].inflight == 0
        record = record_of(backends, request.job_id)
        assert (record.status, record.wait_reason) == (
            JobStatus.QUEUED, "not started: its parked message is gone")

    def test_an_acquire_whose_reply_was_lost_is_undone(self, settings, wired, tmp_path,
                                                       logged):
        """The leases an uncertain acquire may have committed are given back, with one
        acquire_error line; a lease that never committed changes nothing."""
        supervisor, backends, _ = wired
        request, _, lease = leased(settings, backends, tmp_path)
        never = backends.leases.new_lease(request, settings.host_id, 1)
        supervisor.dispatch.launcher.acquire_failed(
            request, AcquireUncertain("the reply was lost", lease, never))
        assert backends.leases.leases() == []
        assert backends.leases.counters()["acme"].inflight == 0
        assert [line["job_id"] for line in logged()
                if line.get("action") == "acquire_error"] == [request.job_id]
