"""The dispatcher's memory of deferred work, and the guard that keeps the parent alive."""

from __future__ import annotations

import logging

from imposer.logs import guard
from imposer.models import Received
from imposer.worker.dispatch import DeferredMemo
from tests.fixtures.jobs import request


def message(n: int, sent: float) -> Received:
    return Received(message_id=f"m{n}", receipt=f"r{n}", body="{}", group_id="acme",
                    sent_at=sent, receive_count=1)


class TestDeferredMemo:
    def test_takes_earliest_submission_first(self):
        """The next job of a tenant to start is its earliest submitted, not its last deferred."""
        memo = DeferredMemo(limit=10)
        late, early = request(), request()
        memo.remember(late, message(1, sent=200.0), until=50.0)
        memo.remember(early, message(2, sent=100.0), until=50.0)
        assert memo.take("acme", now=10.0)[0] is early
        assert memo.take("acme", now=10.0)[0] is late
        assert memo.take("acme", now=10.0) is None

    def test_expired_deferrals_are_dropped(self):
        """A message whose deferral may have run out is never used: someone else may hold it."""
        memo = DeferredMemo(limit=10)
        memo.remember(request(), message(1, sent=1.0), until=5.0)
        assert memo.take("acme", now=6.0) is None

    def test_bounded_per_tenant(self):
        """The memo keeps at most its limit per tenant, dropping the oldest."""
        memo = DeferredMemo(limit=2)
        kept = [request() for _ in range(3)]
        for n, req in enumerate(kept):
            memo.remember(req, message(n, sent=float(n)), until=99.0)
        got = [memo.take("acme", 0.0)[0] for _ in range(2)]
        assert got == kept[1:] and memo.take("acme", 0.0) is None

    def test_other_tenants_untouched(self):
        """Taking for one tenant never returns another tenant's message."""
        memo = DeferredMemo(limit=10)
        memo.remember(request("globex"), message(1, sent=1.0), until=99.0)
        assert memo.take("acme", 0.0) is None


class TestGuard:
    def test_logs_and_swallows_errors(self, caplog):
        """A bug while handling one job is logged with its ids and does not propagate."""
        req = request()
        logging.getLogger("imposer").propagate = True
        with caplog.at_level(logging.ERROR, logger="imposer.worker.supervisor"):
            with guard(req):
                raise RuntimeError("boom")
        record = caplog.records[-1]
        assert (record.action, record.job_id) == ("handler_error", req.job_id)
        assert "boom" in caplog.text

    def test_lets_interrupts_through(self):
        """KeyboardInterrupt and SystemExit are not swallowed."""
        import pytest

        with pytest.raises(SystemExit):
            with guard(None):
                raise SystemExit(3)


class TestDrainMemo:
    def test_drain_returns_live_entries_and_forgets_all(self):
        """On stop the memo hands back every message still ours, and nothing after."""
        memo = DeferredMemo(limit=10)
        keep, expired = request(), request("globex")
        memo.remember(keep, message(1, sent=1.0), until=50.0)
        memo.remember(expired, message(2, sent=1.0), until=5.0)
        assert [r for r, _ in memo.drain(now=10.0)] == [keep]
        assert memo.drain(now=10.0) == [] and memo.take("acme", 0.0) is None
