"""The pool: one long-lived child per slot; a job's outcome comes back by its slot, and a
child that dies or is killed is reported, replaced, and leaves no tool and no file behind.

Real forkserver children run real jobs (S3 on the local stack, the fake pdfToolbox).
"""

from __future__ import annotations

import uuid

import boto3
import pytest

from imposer.client import submit
from imposer.models import Fate, S3Uri, TaskSpec
from imposer.worker.dispatch.pool import Pool
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import FAKE, layout, wait_for
from tests.worker.test_faults import tool_processes


@pytest.fixture
def pool(settings, tmp_path):
    """Two started slots whose children run the fake pdfToolbox."""
    started = Pool(2, settings.evolve(engine="pdftoolbox", pdftoolbox=str(FAKE),
                                      work_dir=str(tmp_path / "work")))
    started.start()
    yield started
    started.stop(timeout=0)


def spec_for(settings, pool: Pool, slot: int, tmp_path, **variables) -> TaskSpec:
    """A job submitted as a tenant would (artwork in S3), as the parent sends it to *slot*."""
    pdf = tmp_path / "art.pdf"
    if not pdf.exists():
        numbered_pdf(pdf, 2)
    request = submit("acme", pdf, layout(**variables), bucket=settings.bucket,
                     queue=settings.queue_name)
    epoch = uuid.uuid4().hex
    return TaskSpec(request=request, timeout=60, epoch=epoch,
                    upload_to=request.attempt_uri(epoch), workdir=str(pool.slot_dir(slot)),
                    owner=pool.owner(slot))


def events_of(pool: Pool, what: str) -> list:
    """Wait for the pool's next events (a finished job or a dead child)."""
    events: list = []
    wait_for(lambda: events.extend(pool.wait(0.5)) or events, 60, what)
    return events


class TestPool:
    def test_a_job_comes_back_from_the_slot_it_was_sent_to(self, settings, pool, tmp_path):
        """A submitted job holds its slot until its outcome comes back by that slot, and the
        plate is at its attempt's key."""
        gate = tmp_path / "gate"
        spec = spec_for(settings, pool, 1, tmp_path, fake_until=gate)
        pool.submit(1, spec, run_for=60.0)
        assert (pool.free(), pool.busy_count()) == ([0], 1)
        gate.touch()
        (event,) = events_of(pool, "the job's outcome")
        assert (event.slot, event.exitcode, event.outcome.fate) == (1, None, Fate.SUCCEEDED)
        assert pool.free() == [0, 1]
        plate = S3Uri.parse(spec.upload_to)
        assert boto3.client("s3").head_object(Bucket=plate.bucket, Key=plate.key)

    def test_a_child_that_dies_mid_job_is_reported_and_replaced(self, settings, pool,
                                                                tmp_path, logged):
        """kill -9 of a busy child: its slot reports the exit code, the tool it started is
        killed, its work directory emptied, and a fresh child runs the slot's next job."""
        spec = spec_for(settings, pool, 0, tmp_path, fake_hang=1)
        pool.submit(0, spec, run_for=60.0)
        tool = wait_for(lambda: tool_processes(spec.request.job_id), 60, "the tool")[0]
        tool.parent().kill()
        (event,) = events_of(pool, "the child's death")
        assert (event.slot, event.outcome, event.exitcode) == (0, None, -9)
        wait_for(lambda: not tool_processes(spec.request.job_id), 30, "the orphaned tool")
        assert list(pool.slot_dir(0).iterdir()) == []
        (line,) = [r for r in logged() if r.get("action") == "child_died"]
        assert (line["slot"], line["exitcode"], line["level"]) == (0, -9, "ERROR")
        pool.submit(0, spec_for(settings, pool, 0, tmp_path), run_for=60.0)
        (event,) = events_of(pool, "the next job on the fresh child")
        assert (event.slot, event.outcome.fate) == (0, Fate.SUCCEEDED)

    def test_kill_ends_the_slots_tree_and_frees_the_slot(self, settings, pool, tmp_path):
        """Killing a slot (an overrun, a lost lease) ends its child and tools at once; the
        slot is free for the next job and reports nothing for the killed one."""
        spec = spec_for(settings, pool, 0, tmp_path, fake_hang=1)
        pool.submit(0, spec, run_for=60.0)
        wait_for(lambda: tool_processes(spec.request.job_id), 60, "the tool")
        pool.kill(0)
        wait_for(lambda: not tool_processes(spec.request.job_id), 30, "the killed slot's tool")
        assert pool.free() == [0, 1] and pool.wait(0.5) == []
        pool.submit(0, spec_for(settings, pool, 0, tmp_path), run_for=60.0)
        (event,) = events_of(pool, "the next job")
        assert (event.slot, event.outcome.fate) == (0, Fate.SUCCEEDED)

    def test_stop_hands_over_a_result_already_sent(self, settings, pool, tmp_path):
        """A job that finished just before the stop is returned by ``stop``, not lost."""
        spec = spec_for(settings, pool, 0, tmp_path)
        pool.submit(0, spec, run_for=60.0)
        wait_for(lambda: pool.has_result(0), 60, "the child's result in the pipe")
        (event,) = pool.stop(timeout=5)
        assert (event.slot, event.outcome.job_id, event.outcome.fate) == (
            0, spec.request.job_id, Fate.SUCCEEDED)
