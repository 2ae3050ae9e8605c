"""The guard that keeps the parent alive."""

from __future__ import annotations

import logging

from imposer.errors import TransientBackendError
from imposer.logs import guard
from imposer.models import Received
from tests.fixtures.jobs import request


def message(n: int, sent: float) -> Received:
    return Received(message_id=f"m{n}", receipt=f"r{n}", body="{}", group_id="acme",
                    sent_at=sent, receive_count=1)


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

    def test_an_aws_error_is_one_warning_without_traceback(self, caplog):
        """An AWS hiccup is expected: a warning naming the job, no handler_error, no traceback."""
        req = request()
        logging.getLogger("imposer").propagate = True
        with caplog.at_level(logging.WARNING, logger="imposer.worker.supervisor"):
            with guard(req):
                raise TransientBackendError("read tenants: connection was closed")
        # (a set: in some test orders the capture sees one record twice)
        assert {(r.levelno, r.action, r.job_id, r.exc_info is None) for r in caplog.records} \
            == {(logging.WARNING, "aws_error", req.job_id, True)}
        assert "connection was closed" in caplog.records[0].getMessage()

    def test_lets_interrupts_through(self):
        """KeyboardInterrupt and SystemExit are not swallowed."""
        import pytest

        with pytest.raises(SystemExit):
            with guard(None):
                raise SystemExit(3)
