"""The jobs table's layout: (tenant, job) keys, the sparse open index, paging, expiry."""

from __future__ import annotations

from imposer.models import JobStatus
from tests.fixtures.jobs import request


def finish(backends, tenant="acme", status=JobStatus.SUCCEEDED):
    req = request(tenant)
    lease = backends.leases.acquire(req, "h", 0).lease
    backends.leases.release(lease, status, finished_at=backends.clock.time())
    return req


class TestOpenIndex:
    def test_open_while_queued_or_running_gone_when_final(self, backends, clock):
        """A job is in the open index from its first note until the write that ends it."""
        req = request()
        backends.jobs.note_waiting(req, clock.time(), "at tenant cap", deferred=True)
        assert [(r.job_id, r.status) for r in backends.jobs.open_jobs()] == [
            (req.job_id, JobStatus.QUEUED)]
        lease = backends.leases.acquire(req, "h", 0).lease
        assert backends.jobs.open_jobs()[0].status == JobStatus.RUNNING
        backends.leases.release(lease, JobStatus.RETRYING, failures=1, error="x")
        assert backends.jobs.open_jobs()[0].status == JobStatus.RETRYING
        lease = backends.leases.acquire(req, "h", 0).lease
        backends.leases.release(lease, JobStatus.FAILED, finished_at=clock.time())
        assert backends.jobs.open_jobs() == []

    def test_final_record_expires_after_the_retention(self, backends, clock):
        """The write that makes a job final sets its TTL: finished + retention days."""
        req = finish(backends)
        record = backends.jobs.get(req.tenant_id, req.job_id)
        assert record.expires_at == int(clock.time() + 35 * 86400)
        item = backends.dynamo.get(backends.settings.jobs_table,
                                   backends.jobs.key(req.tenant_id, req.job_id))
        assert "open_shard" not in item

    def test_statuses_filter_and_order(self, backends, clock):
        """open_jobs keeps submission order across shards and filters by status."""
        reqs = [request() for _ in range(9)]
        for n, req in enumerate(reqs):
            backends.jobs.note_waiting(req, clock.time() + n, "waiting")
        backends.leases.acquire(reqs[4], "h", 0)
        assert [r.job_id for r in backends.jobs.open_jobs(("queued",))] == \
            [r.job_id for i, r in enumerate(reqs) if i != 4]
        assert [r.job_id for r in backends.jobs.open_jobs(("running",))] == [reqs[4].job_id]


class TestTenantPages:
    def test_pages_with_a_cursor_newest_first(self, backends, clock):
        """A tenant's jobs come newest first, a page at a time, never another tenant's."""
        mine = []
        for _ in range(5):
            mine.append(finish(backends).job_id)
            clock.advance(1)
        finish(backends, "globex")
        first, cursor = backends.jobs.for_tenant("acme", limit=3)
        second, last = backends.jobs.for_tenant("acme", limit=3, cursor=cursor)
        assert [r.job_id for r in first + second] == mine[::-1]
        assert last is None and len(first) == 3

    def test_status_and_since(self, backends, clock):
        """--status and --since narrow the page without reading other tenants."""
        old = finish(backends, status=JobStatus.FAILED)
        clock.advance(3600)
        new = finish(backends)
        got, _ = backends.jobs.for_tenant("acme", since=clock.time() - 60)
        assert [r.job_id for r in got] == [new.job_id]
        failed, _ = backends.jobs.for_tenant("acme", statuses=["failed"])
        assert [r.job_id for r in failed] == [old.job_id]

    def test_find_by_id_across_tenants(self, backends):
        """find() returns each tenant's job of an id, and nothing for an unknown one."""
        for tenant in ("acme", "globex"):
            req = request(tenant, job="same")
            lease = backends.leases.acquire(req, "h", 0).lease
            backends.leases.release(lease, JobStatus.SUCCEEDED, finished_at=1.0)
        assert sorted(r.tenant_id for r in backends.jobs.find("same")) == ["acme", "globex"]
        assert backends.jobs.find("nobody") == []
