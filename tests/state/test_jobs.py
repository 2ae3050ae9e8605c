"""The jobs table's layout: (tenant, job) keys, the sparse open index, paging, expiry."""

from __future__ import annotations

from imposer.models import JobStatus
from imposer.state.jobs import (DEAD_LETTER_OWED, DEAD_LETTER_SENT, claim_is_fresh,
                                dead_letter_claim, dead_letter_due)
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


class TestDeadLetterClaims:
    """A dead job's DLQ message is claimed by one host at a time; a claim that ages unsent
    is taken again, a sent one never."""

    def dead(self, backends) -> str:
        req = request("acme")
        backends.jobs.finish_unleased("acme", req.job_id, JobStatus.DEAD, "planted", "tool",
                                      dead_letter=DEAD_LETTER_OWED)
        return req.job_id

    def test_a_fresh_claim_holds_and_an_aged_one_is_taken_again(self, backends):
        """Another host's claim refuses a second claim while it is younger than the hold, and
        yields to one after it; the record then holds the new claim."""
        job = self.dead(backends)
        first = dead_letter_claim(1000.0, "host-a")
        assert backends.jobs.claim_dead_letter("acme", job, first)
        second = dead_letter_claim(1005.0, "host-b")
        assert not backends.jobs.claim_dead_letter("acme", job, second,
                                                   stale=dead_letter_claim(1000.0 - 1, ""))
        assert claim_is_fresh(first, now=1005.0, hold=10.0)
        assert backends.jobs.claim_dead_letter("acme", job, second,
                                               stale=dead_letter_claim(1000.0 + 1, ""))
        assert backends.jobs.get("acme", job).dead_letter == second
        assert not claim_is_fresh(first, now=1011.0, hold=10.0)

    def test_a_sent_or_old_style_claim_is_never_taken(self, backends):
        """Once recorded sent (or held in an older version's ``sending:`` form, which meant
        sent), no claim is taken however old, and nothing is due."""
        job = self.dead(backends)
        claim = dead_letter_claim(1000.0, "host-a")
        assert backends.jobs.claim_dead_letter("acme", job, claim)
        assert backends.jobs.sent_dead_letter("acme", job, claim)
        later = dead_letter_claim(9e9, "")
        assert not backends.jobs.claim_dead_letter("acme", job, dead_letter_claim(2000.0, "b"),
                                                   stale=later)
        assert not dead_letter_due(DEAD_LETTER_SENT) and not dead_letter_due("sending:ab12")
        assert dead_letter_due(DEAD_LETTER_OWED) and dead_letter_due(claim)
