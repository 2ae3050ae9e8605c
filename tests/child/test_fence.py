"""The lease fence inside a pool child: a job whose lease ran out stops, and says why."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import boto3
import pytest

from imposer.child.fence import Fence
from imposer.child.task import TaskRunner
from imposer.client import submit
from imposer.errors import LeaseExpired
from imposer.models import Fate, S3Uri, TaskSpec
from imposer.worker.dispatch.pool import Pool
from imposer.worker.timing import FENCE_SHARE, LeaseTiming
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import layout

OWNER = "fence-test/boot/0"


@pytest.fixture
def tagged():
    """A stand-in tool carrying the slot's owner tag, and another slot's."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    procs = {tag: subprocess.Popen(sleeper, start_new_session=True,
                                   env={**os.environ, "IMPOSER_TOOL_OWNER": tag})
             for tag in (OWNER, "fence-test/boot/1")}
    yield procs
    for proc in procs.values():
        proc.kill()
        proc.wait()


def deadline(at: float):
    value = multiprocessing.RawValue(ctypes.c_double, at)
    return value


class TestFence:
    def test_a_job_past_its_deadline_has_its_tools_killed(self, tagged):
        """Past the deadline the running job's tools die, only its, and its steps stop."""
        fence = Fence(deadline(time.monotonic() - 1))
        fence.begin(OWNER, "acme", "j1")
        assert fence.look() is True
        assert tagged[OWNER].wait(10) == -signal.SIGKILL
        assert tagged["fence-test/boot/1"].poll() is None, "another slot's tool was killed"
        assert fence.look() is False, "a job is fenced once"
        with pytest.raises(LeaseExpired, match="lease ran out"):
            fence.check()

    def test_a_deadline_ahead_or_no_job_running_stops_nothing(self, tagged):
        """A deadline still ahead, or one that passes while no job runs (a renewal that
        raced the child's report), kills nothing."""
        value = deadline(time.monotonic() + 3600)
        fence = Fence(value)
        fence.begin(OWNER, "acme", "j1")
        assert fence.look() is False
        fence.check()
        fence.end()
        value.value = time.monotonic() - 1
        assert fence.look() is False
        assert tagged[OWNER].poll() is None
        fence.begin(OWNER, "acme", "j2")  # the next job: its own deadline is written first
        value.value = time.monotonic() + 3600
        assert fence.look() is False and not fence.tripped

    def test_the_thread_trips_when_the_deadline_passes(self, tagged):
        """Started, the fence needs no caller: the tool dies once the deadline passes."""
        value = deadline(time.monotonic() + 3600)
        fence = Fence(value, poll=0.05)
        fence.start()
        fence.begin(OWNER, "acme", "j1")
        value.value = time.monotonic()
        assert tagged[OWNER].wait(30) == -signal.SIGKILL
        assert fence.tripped


class TestFencedTask:
    def test_a_fenced_job_is_requeued_not_counted_and_uploads_nothing(self, settings,
                                                                      tmp_path):
        """A job whose lease ran out reports lease_expired (requeued, not counted against
        it) and never uploads its plate."""
        req = submit("acme", numbered_pdf(tmp_path / "art.pdf", 2), layout(),
                     bucket=settings.bucket, queue=settings.queue_name)
        spec = TaskSpec(request=req, timeout=60, upload_to=req.attempt_uri("e1"), epoch="e1",
                        workdir=str(tmp_path / "work"), owner=OWNER)
        fence = Fence(deadline(time.monotonic() - 1))
        outcome = TaskRunner(settings.evolve(engine="open"), fence).run(spec)
        assert (outcome.fate, outcome.error_kind) == (Fate.REQUEUE, "lease_expired"), outcome
        attempt = S3Uri.parse(spec.upload_to)
        listed = boto3.client("s3").list_objects_v2(Bucket=attempt.bucket, Prefix=attempt.key)
        assert "Contents" not in listed

    def test_a_job_within_its_lease_runs_as_before(self, settings, tmp_path):
        req = submit("acme", numbered_pdf(tmp_path / "art.pdf", 2), layout(),
                     bucket=settings.bucket, queue=settings.queue_name)
        spec = TaskSpec(request=req, timeout=60, upload_to=req.attempt_uri("e2"), epoch="e2",
                        workdir=str(tmp_path / "work"), owner=OWNER)
        fence = Fence(deadline(time.monotonic() + 3600))
        outcome = TaskRunner(settings.evolve(engine="open"), fence).run(spec)
        assert outcome.fate == Fate.SUCCEEDED, outcome


class TestPoolFence:
    def test_a_renewal_moves_only_its_own_attempts_deadline(self, settings, tmp_path):
        """The deadline is the lease's expiry less a share of the TTL (the time the renewal
        lets the tools run, ``LeaseTiming.tools_may_run``); a renewal of an attempt that
        has left the slot changes nothing."""
        pool = Pool(1, settings.evolve(work_dir=str(tmp_path / "work")))
        slot = pool.slots[0]
        slot.epoch = "e1"  # as submit leaves it
        margin = FENCE_SHARE * settings.lease_ttl_seconds
        run_for = LeaseTiming.from_settings(settings).tools_may_run(100.0)
        assert run_for == 100 - margin
        before = time.monotonic()
        pool.fence(0, "e1", run_for)
        assert before + 100 - margin <= slot.deadline.value <= time.monotonic() + 100 - margin
        moved = slot.deadline.value
        pool.fence(0, "e0", 1000.0)
        assert slot.deadline.value == moved
