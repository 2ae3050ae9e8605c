"""No tool outlives its lease: a frozen parent's tools stop, a dead run's helpers die first.

Real `imposer run` processes against the local stack, with the fake tool.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from imposer.models import JobStatus
from tests.fixtures.jobs import record_of
from tests.fixtures.workers import Worker, layout, submit_jobs, wait_for
from tests.fixtures.workers import workers  # noqa: F401 (fixture)
from tests.worker.test_faults import tool_processes


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
class TestLeaseFence:
    def test_a_frozen_parents_tool_stops_before_its_lease_can_be_reclaimed(
            self, settings, backends, tmp_path, workers):
        """Parent SIGSTOPped mid-job (its children run on): the child kills the tool before
        the lease expires, though no renewal came and no sweep ran; thawed, the parent
        requeues the job without counting a failure."""
        job = submit_jobs(settings, tmp_path, "acme", 1, layout(fake_sleep=600))[0]
        worker = Worker(settings, tmp_path, "frozen", "--slots", "1")
        workers.append(worker)
        wait_for(lambda: tool_processes(job), 60, "the tool to start")
        (held,) = wait_for(lambda: backends.leases.leases(), 30, "the job's lease")
        os.kill(worker.proc.pid, signal.SIGSTOP)  # the parent only: not its pool child
        try:
            wait_for(lambda: not tool_processes(job), 60, "the fence to stop the tool")
            # nobody reclaimed the lease: what stopped the tool was its own child
            assert [lease.epoch for lease in backends.leases.leases()] == [held.epoch]
        finally:
            os.kill(worker.proc.pid, signal.SIGCONT)
        (fenced,) = wait_for(lambda: worker.actions("lease_fenced"), 30, "the fence's log line")
        assert fenced["job_id"] == job
        (finished,) = wait_for(lambda: worker.actions("job_finished"), 60,
                               "the parent to settle the fenced attempt")
        assert finished["status"] == JobStatus.RETRYING.value
        assert "lease ran out" in finished["message"], finished
        record = record_of(backends, job)
        assert record.failures == 0, "a fenced attempt counted against the job"
        worker.signal(signal.SIGTERM)
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker.tail()

    def test_a_restart_kills_a_dead_runs_helpers_before_it_reaches_aws(self, settings, tmp_path,
                                                                       workers):
        """A killed run's detached helper dies when the host restarts, before the boot's
        wait for AWS (which here never answers), not after its lease was reclaimed."""
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        helper = subprocess.Popen(sleeper, start_new_session=True, env={
            **os.environ, "IMPOSER_TOOL_OWNER": "early-host/oldboot/0"})
        try:
            worker = Worker(settings, tmp_path, "early-host", "--slots", "1", env={
                "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}",
                "IMPOSER_BOOT_RETRY_SECONDS": "600", "AWS_MAX_ATTEMPTS": "1"})
            workers.append(worker)
            assert helper.wait(60) == -signal.SIGKILL
            (cleared,) = wait_for(lambda: worker.actions("leftovers_cleared"), 30,
                                  "the leftovers' log line")
            assert cleared["killed"] == 1
            assert not worker.actions("boot"), "AWS answered: the test proves nothing"
            worker.signal(signal.SIGTERM)
            assert worker.wait(60) == 0, worker.tail()
        finally:
            helper.kill()
            helper.wait()
