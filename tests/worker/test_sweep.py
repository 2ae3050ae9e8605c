"""The sweep: expired leases taken back (and counted), a restarted host's own at once,
counters that disagree with their leases repaired; against the local AWS stack."""

from __future__ import annotations

import json

from imposer.models import JobStatus, counter_key
from imposer.worker.messages import Messages
from imposer.worker.threads.sweep import reclaim_expired, reclaim_host, sweep
from imposer.worker.wiring import connect
from imposer.worker.timing import LeaseTiming
from tests.fixtures.jobs import record_of, request


def recovered_lines(lines: list[dict]) -> list[dict]:
    """The EMF data points of lease_recovered among imposer's JSON log lines."""
    return [line for line in lines if line.get("metric") == "lease_recovered"]


class TestSweep:
    def test_only_expired_leases_reclaimed(self, backends, clock):
        """Sweep reclaims expired leases only and counts lease_recovered per tenant and host."""
        old = backends.leases.acquire(request("acme"), "h1", 0).lease
        clock.advance(backends.settings.lease_ttl_seconds / 2)
        young = backends.leases.acquire(request("globex"), "h2", 0).lease
        clock.advance(backends.settings.lease_ttl_seconds / 2 + 0.1)
        report = sweep(backends.leases, backends.metrics)
        assert [l.job_id for l in report.reclaimed] == [old.job_id]
        assert backends.leases.leases() == [young]
        assert backends.metrics.total("lease_recovered", tenant_id="acme", host="h1") == 1
        assert backends.metrics.total("lease_recovered", tenant_id="globex") == 0
        record = record_of(backends, old.job_id)
        assert record.status == JobStatus.QUEUED and "expired" in record.wait_reason

    def test_two_sweepers_reclaim_once(self, backends, clock):
        """A second sweep finds nothing: a lease is reclaimed and decremented once."""
        backends.leases.acquire(request(), "h", 0)
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        other = connect(backends.settings, clock=clock)
        assert len(sweep(backends.leases, backends.metrics).reclaimed) == 1
        assert len(sweep(other.leases, other.metrics).reclaimed) == 0
        assert backends.leases.counters()["acme"].inflight == 0

    def test_a_reclaim_is_one_data_point_where_cloudwatch_reads_it(self, backends, clock,
                                                                    logged):
        """Each reclaimed lease is one EMF line of lease_recovered (its tenant and the host
        that held it) and one warning naming the job, the holder and the sweeper."""
        lease = backends.leases.acquire(request(), "host-a", 3).lease
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        sweep(backends.leases, backends.metrics, host="sweeper")
        lines = logged()
        (point,) = recovered_lines(lines)
        assert (point["lease_recovered"], point["tenant_id"], point["host"]) == (
            1, "acme", "host-a")
        assert point["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "lease_recovered"
        (warning,) = [line for line in lines if line.get("action") == "lease_recovered"]
        assert (warning["job_id"], warning["holder"], warning["slot"], warning["why"],
                warning["sweeper"]) == (lease.job_id, "host-a", 3, "expired", "sweeper")

    def test_a_reclaimed_jobs_message_is_visible_again_at_once(self, settings, backends,
                                                                clock):
        """Given the queue, the sweep makes a reclaimed job's message visible now, not when
        the visibility its receive set (here five minutes) runs out."""
        backends.queue.send(json.dumps({"job_id": "j1", "tenant_id": "acme"}), "acme")
        (message,) = backends.queue.receive(1, 1, 300)
        backends.leases.acquire(request(job="j1"), "host-a", 0, receipt=message.receipt)
        clock.advance(settings.lease_ttl_seconds + 1)
        messages = Messages(backends.queue, settings, clock, LeaseTiming.from_settings(settings))
        sweep(backends.leases, backends.metrics, messages=messages)
        again = backends.queue.receive(1, 1, 30)
        assert [m.message_id for m in again] == [message.message_id]

    def test_the_report_names_the_counters_it_repaired(self, settings, backends):
        """A counter off from the live leases is set back by the same pass, and reported."""
        backends.leases.acquire(request(), "host-a", 0)
        backends.dynamo.update(settings.leases_table, {"pk": counter_key("acme")},
                               "SET inflight = :n", {":n": 3})
        report = sweep(backends.leases, backends.metrics)
        assert (report.reclaimed, report.repaired) == ((), {"acme": (3, 1)})
        assert backends.leases.counters()["acme"].inflight == 1


class TestReclaimExpired:
    def test_an_expired_lease_met_on_redelivery_is_reclaimed_once(self, backends, clock):
        """The lease in the way of a redelivered job is taken back and counted; a second
        try finds it gone and counts nothing."""
        lease = backends.leases.acquire(request(), "host-a", 0).lease
        clock.advance(backends.settings.lease_ttl_seconds + 1)
        assert reclaim_expired(backends.leases, backends.metrics, lease, "host-b") is True
        assert reclaim_expired(backends.leases, backends.metrics, lease, "host-b") is False
        assert backends.metrics.count("lease_recovered", tenant_id="acme", host="host-a") == 1
        assert "reclaimed on redelivery" in record_of(backends, lease.job_id).wait_reason

    def test_a_lease_renewed_meanwhile_is_left_alone(self, backends, clock):
        """A holder that renewed after the redelivery looked keeps its lease."""
        lease = backends.leases.acquire(request(), "host-a", 0).lease
        clock.advance(backends.settings.lease_ttl_seconds - 1)
        backends.leases.renew(lease)
        clock.advance(2)  # past the first expiry, within the renewed one
        assert reclaim_expired(backends.leases, backends.metrics, lease) is False
        assert [held.job_id for held in backends.leases.leases()] == [lease.job_id]
        assert backends.metrics.count("lease_recovered") == 0


class TestReclaimHost:
    def test_restart_reclaims_own_host_at_once(self, backends):
        """A restarting host takes back its own live leases without waiting for expiry."""
        mine = backends.leases.acquire(request(), "me", 0).lease
        theirs = backends.leases.acquire(request(), "other", 0).lease
        got = reclaim_host(backends.leases, backends.metrics, "me")
        assert [l.job_id for l in got] == [mine.job_id]
        assert backends.leases.leases() == [theirs]
        assert backends.leases.counters()["acme"].inflight == 1

    def test_a_restart_is_counted_as_one_and_its_jobs_say_why(self, backends):
        """Each lease a restarted host takes back is a lease_recovered of that host, and its
        job waits again with the restart as its reason."""
        lease = backends.leases.acquire(request(), "me", 0).lease
        reclaim_host(backends.leases, backends.metrics, "me")
        assert backends.metrics.count("lease_recovered", tenant_id="acme", host="me") == 1
        record = record_of(backends, lease.job_id)
        assert record.status == JobStatus.QUEUED
        assert record.wait_reason == "host me restarted while running it; waiting for redelivery"
