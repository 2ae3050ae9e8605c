"""The parent's background threads: a pass that fails is logged, and AWS's bad moments quietly."""

from __future__ import annotations

import logging

from imposer.errors import TransientBackendError
from imposer.worker.threads.periodic import Periodic


def one_pass(error: Exception) -> Periodic:
    """A Periodic whose single pass raises *error*, then stops; run in this thread."""
    thread = Periodic("sweep", 0.0, lambda: None)

    def fail() -> None:
        thread.stop_event.set()
        raise error

    thread.fn = fail
    thread.run()
    return thread


class TestPeriodic:
    def test_a_transient_aws_error_is_one_warning_line(self, caplog):
        """Throttling in the sweep thread is one aws_error warning, no traceback, as elsewhere."""
        with caplog.at_level(logging.INFO, logger="imposer"):
            one_pass(TransientBackendError("scan leases: ThrottlingException: slow down"))
        (record,) = [r for r in caplog.records if r.name == "imposer.worker.threads.periodic"]
        assert (record.levelno, record.action, record.exc_info) == (
            logging.WARNING, "aws_error", None)
        assert "ThrottlingException" in record.getMessage() and record.thread_name == "sweep"

    def test_a_bug_is_an_error_with_its_traceback(self, caplog):
        """Anything else is logged at ERROR with its traceback, and the thread lives on."""
        with caplog.at_level(logging.INFO, logger="imposer"):
            one_pass(KeyError("lease"))
        (record,) = [r for r in caplog.records if r.name == "imposer.worker.threads.periodic"]
        assert (record.levelno, record.action) == (logging.ERROR, "sweep_error")
        assert record.exc_info is not None


class TestLastPass:
    def test_a_last_pass_runs_at_the_stop_once_the_thread_is_done(self):
        """The rollups' thread writes what its last interval gathered when the worker stops
        (``last_pass``); a thread without it does not pass again."""
        passes, plain = [], []
        flushing = Periodic("rollups", 3600, lambda: passes.append(1), last_pass=True)
        other = Periodic("sweep", 3600, lambda: plain.append(1))
        for thread in (flushing, other):
            thread.start()
            thread.stop()
        assert (passes, plain) == ([1], [])
        assert not flushing.is_alive()
