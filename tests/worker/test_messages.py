"""The one owner of a message's fate: hold, defer, retry later, give back, finish, dead-letter."""

from __future__ import annotations

import json
import logging

import boto3
import pytest

from imposer.aws.sqs import JobQueue
from imposer.clock import ManualClock
from imposer.errors import BackendError
from imposer.models import JobRequest
from imposer.worker.messages import Messages
from imposer.worker.threads.sweep import sweep
from imposer.worker.timing import LeaseTiming
from tests.fixtures.jobs import request


@pytest.fixture
def queue(backends):
    return backends.queue


def publish(queue, req: JobRequest) -> None:
    queue.send(req.to_body(), req.tenant_id)


def receive_one(queue, visibility: float = 30):
    got = queue.receive(1, 1, visibility)
    assert len(got) == 1
    return got[0]


def depth(queue) -> dict[str, int]:
    return queue.depth()


class TestMessages:
    def test_defer_pushes_back_for_the_deferral(self, settings, queue, clock):
        """A deferred message stays invisible for the deferral delay, then comes back."""
        messages = Messages(queue, settings.evolve(defer_seconds=600), clock,
                            LeaseTiming.from_settings(settings))
        req = request()
        publish(queue, req)
        message = receive_one(queue, visibility=0.0)
        assert messages.defer(req, message) is True
        assert queue.receive(1, 0, 30) == []
        assert depth(queue)["in_flight"] == 1

    def test_defer_republishes_before_the_redrive_count(self, settings, queue):
        """At the re-publish receive count a fresh copy goes in, keeping the first submission."""
        clock = ManualClock(start=2_000_000_000.0)
        messages = Messages(queue, settings.evolve(republish_receive_count=2), clock,
                            LeaseTiming.from_settings(settings))
        req = request()
        publish(queue, req)
        first = receive_one(queue, visibility=0)
        second = receive_one(queue, visibility=30)
        assert second.receive_count == 2
        assert messages.defer(req, second) is False
        fresh = receive_one(queue)
        assert fresh.message_id != first.message_id and fresh.receive_count == 1
        body = json.loads(fresh.body)
        assert body["job_id"] == req.job_id
        assert body["submitted_at"] == pytest.approx(first.sent_at)
        assert fresh.attributes["imposer_republished_from"] == second.message_id

    @pytest.mark.parametrize("give_back, answer", [("give_back", True),
                                                   ("give_back_quietly", None)])
    def test_give_back_makes_it_visible_now(self, settings, queue, clock, give_back, answer):
        """A message given back (quietly: no error to hand back) is visible to the next
        receive at once."""
        messages = Messages(queue, settings, clock, LeaseTiming.from_settings(settings))
        publish(queue, request())
        message = receive_one(queue, visibility=600)
        assert getattr(messages, give_back)(message) is answer
        assert receive_one(queue).message_id == message.message_id

    def test_give_back_quietly_returns_the_aws_error_instead_of_raising(self, settings,
                                                                         clock):
        """A give-back SQS refuses (here: the queue is gone) is handed back, not raised: the
        message comes back by itself when its visibility runs out."""
        gone = JobQueue(settings.region, f"{settings.queue_name}-gone", settings.dlq_name)
        gone_messages = Messages(gone, settings, clock, LeaseTiming.from_settings(settings))
        failed = gone_messages.give_back_quietly("a-receipt")
        assert isinstance(failed, BackendError) and "gone" in str(failed)

    def test_a_reclaim_that_cannot_give_back_says_so_and_goes_on(self, settings, backends,
                                                                 clock, caplog):
        """The sweep reclaims an expired lease even when SQS refuses to give its message
        back early, and says so in one info line (``message_return_skipped``)."""
        caplog.set_level(logging.INFO, logger="imposer.worker.threads.sweep")
        req = request()
        backends.leases.acquire(req, "other-host", 0, receipt="a-receipt")
        clock.advance(settings.lease_ttl_seconds + 1)
        gone = JobQueue(settings.region, f"{settings.queue_name}-gone", settings.dlq_name)
        report = sweep(backends.leases, backends.metrics, "test-host",
                       Messages(gone, settings, clock, LeaseTiming.from_settings(settings)))
        assert [l.job_id for l in report.reclaimed] == [req.job_id]
        assert [r.job_id for r in caplog.records
                if getattr(r, "action", None) == "message_return_skipped"] == [req.job_id]

    def test_a_receipt_no_longer_ours_is_refused_not_raised(self, settings, queue, clock):
        """Holding a message that was deleted meanwhile says False instead of failing."""
        messages = Messages(queue, settings, clock, LeaseTiming.from_settings(settings))
        publish(queue, request())
        message = receive_one(queue)
        messages.finish(message)
        assert messages.hold(message) is None

    def test_dead_letter_carries_the_reason(self, settings, queue, clock):
        """A dead-lettered message lands in the DLQ with imposer_error and leaves the queue."""
        messages = Messages(queue, settings, clock, LeaseTiming.from_settings(settings))
        publish(queue, request())
        messages.dead_letter(receive_one(queue), "too many failures: boom")
        sqs = boto3.client("sqs")
        url = sqs.get_queue_url(QueueName=settings.dlq_name)["QueueUrl"]
        got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
        assert got[0]["MessageAttributes"]["imposer_error"]["StringValue"] == \
            "too many failures: boom"
        assert depth(queue) == {"visible": 0, "in_flight": 0, "delayed": 0}
