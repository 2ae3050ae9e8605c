"""The SQS adapter's reads that doctor relies on: queue attributes and a delete by receipt."""

from __future__ import annotations

import json
import logging

import pytest

from imposer.aws.sqs import JobQueue
from imposer.errors import BackendError


@pytest.fixture
def queue(settings):
    return JobQueue(settings.region, settings.queue_name, settings.dlq_name)


class TestJobQueue:
    def test_attributes_read_the_job_queue_or_a_named_one(self, queue, settings):
        """With no name the job queue's attributes come back; with one, that queue's."""
        jobs, dlq = queue.attributes(), queue.attributes(settings.dlq_name)
        redrive = json.loads(jobs["RedrivePolicy"])
        assert redrive["deadLetterTargetArn"] == dlq["QueueArn"]
        assert "RedrivePolicy" not in dlq

    def test_depth_counts_from_the_attributes(self, queue):
        """An empty queue has nothing visible, in flight or delayed."""
        assert queue.depth() == {"visible": 0, "in_flight": 0, "delayed": 0}

    def test_a_receipt_that_is_not_one_is_refused(self, queue):
        """Deleting by a made-up receipt handle is authorized, then refused: a BackendError."""
        with pytest.raises(BackendError, match="ReceiptHandleIsInvalid|InvalidParameterValue"):
            queue.delete("not-a-receipt")

    def test_a_receive_logs_what_it_asked_and_brought_at_debug(self, queue, caplog):
        """One message sent, up to three asked: the DEBUG line says 1 of 3, and the wait."""
        queue.send(json.dumps({"n": 1}), "acme")
        caplog.set_level(logging.DEBUG, logger="imposer.aws.sqs")
        assert len(queue.receive(3, 1, 30)) == 1
        (line,) = [r for r in caplog.records if getattr(r, "action", None) == "received"]
        assert (line.count, line.asked, line.wait) == (1, 3, 1)
