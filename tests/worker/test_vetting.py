"""Vetting a message: parsed and checked before a slot is spent; whatever else is wrong with
it, readable ids get a fate the tenant hears; one that keeps failing is put aside."""

from __future__ import annotations

import json
import uuid

import attrs
import boto3
import pytest

from imposer.errors import InvalidMessage, TransientBackendError
from imposer.metrics import Metrics
from imposer.models import JobRequest, JobStatus, TenantConfig
from imposer.models.signature import header, verify
from imposer.worker.messages import Messages
from imposer.worker.receive.senders import SenderCheck
from imposer.worker.receive.vetting import Vetting
from imposer.worker.timing import LeaseTiming
from tests.fixtures.jobs import record_of, request
from tests.fixtures.webhooks import receiver  # noqa: F401 (fixture)
from tests.webhooks.test_outbox import SECRET, sender_for


def dlq_count(settings) -> int:
    sqs = boto3.client("sqs")
    url = sqs.get_queue_url(QueueName=settings.dlq_name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def python_body(settings, webhook: str | None, **fields) -> str:
    """A body as Python's json.dumps writes it: NaN in the layout, the ids readable."""
    job = uuid.uuid4().hex
    data = {"version": 1, "job_id": job, "tenant_id": "acme", "token": "order-7",
            "input": f"s3://{settings.bucket}/tenants/acme/in.pdf",
            "output": f"s3://{settings.bucket}/tenants/acme/{job}.pdf",
            "layout": {"version": 1, "kind": "nup", "sheet": {"width": float("nan"),
                                                             "height": float("inf")}},
            **fields}
    if webhook:
        data["webhook"] = webhook
    return json.dumps(data)


@pytest.fixture
def vet(settings, backends, clock):
    messages = Messages(backends.queue, settings, clock, LeaseTiming.from_settings(settings))
    senders = SenderCheck(backends.tenants, trusted="", require=False,
                          whoami=lambda: "AROAWORKER:i-0host1")
    return Vetting(bucket=settings.bucket, jobs=backends.jobs, messages=messages,
                   metrics=Metrics(), senders=senders, clock=clock, outbox=backends.outbox)


def received(backends, body: str):
    backends.queue.send(body, "acme")
    (message,) = backends.queue.receive(1, 1, 30)
    return message


class TestReject:
    def test_non_standard_numbers_get_a_failed_record_and_a_webhook(self, settings, backends,
                                                                    vet, receiver):
        """NaN and Infinity in a layout (ids readable): the job is failed, its webhook is
        delivered, signed, and the message is dead-lettered once."""
        backends.tenants.put(TenantConfig(tenant_id="acme", webhook_secret=SECRET,
                                          webhook_hosts=("127.0.0.1",)))
        message = received(backends, python_body(settings, receiver.url))
        with pytest.raises(InvalidMessage) as refused:
            vet.parse(message)
        vet.reject(message, refused.value)
        job = JobRequest.salvage(message.body)["job_id"]
        record = record_of(backends, job)
        assert (record.status, record.error_kind) == (JobStatus.FAILED, "invalid_message")
        assert "NaN is not a number" in record.error
        assert sender_for(backends).pass_once() == 1
        ((headers, body, _),) = receiver.requests
        event = json.loads(body)
        assert (event["job_id"], event["status"], event["error_kind"], event["token"]) == (
            job, "failed", "invalid_message", "order-7")
        verify(headers, body, SECRET)  # raises unless signed with the tenant's secret
        assert header(headers, "webhook-id") == record_of(backends, job).webhook_event
        assert dlq_count(settings) == 1

    def test_a_redelivered_invalid_message_makes_no_second_event(self, settings, backends, vet,
                                                                 receiver):
        """The same invalid message handled twice (a crash before its delete) writes one event."""
        message = received(backends, python_body(settings, receiver.url))
        for _ in range(2):
            vet.reject(message, refusal(message))
        assert len(list(backends.outbox.listed())) == 1

    def test_no_webhook_no_event(self, settings, backends, vet):
        """Without a webhook URL the failed record is all (and the DLQ message)."""
        message = received(backends, python_body(settings, None))
        vet.reject(message, refusal(message))
        assert list(backends.outbox.listed()) == []
        job = JobRequest.salvage(message.body)["job_id"]
        assert record_of(backends, job).status == JobStatus.FAILED

    def test_another_tenants_group_gets_no_record(self, settings, backends, vet, receiver):
        """Ids that name a tenant other than the sending group are not believed."""
        backends.queue.send(python_body(settings, receiver.url), "globex")
        (message,) = backends.queue.receive(1, 1, 30)
        vet.reject(message, refusal(message))
        assert list(backends.outbox.listed()) == []
        assert record_of(backends, JobRequest.salvage(message.body)["job_id"]) is None


def refusal(message) -> InvalidMessage:
    """The InvalidMessage that parsing *message* raises."""
    with pytest.raises(InvalidMessage) as refused:
        JobRequest.from_body(message.body)
    return refused.value


class TestParse:
    def test_a_valid_message_is_its_request(self, settings, backends, vet):
        """A body in the tenant's group, under the tenant's prefix, parses to its request."""
        sent = request(bucket=settings.bucket)
        assert vet.parse(received(backends, sent.to_body())) == sent

    def test_a_group_other_than_the_tenant_is_refused(self, settings, backends, vet):
        """A message sent in another tenant's group would be counted against that tenant:
        it is invalid."""
        backends.queue.send(request(bucket=settings.bucket).to_body(), "globex")
        (message,) = backends.queue.receive(1, 1, 30)
        with pytest.raises(InvalidMessage, match="MessageGroupId 'globex' is not the tenant"):
            vet.parse(message)

    def test_no_group_is_taken_with_a_warning(self, settings, backends, vet, logged):
        """A message without a MessageGroupId still runs; the line says fairness layer 1 is off."""
        sent = request(bucket=settings.bucket)
        message = attrs.evolve(received(backends, sent.to_body()), group_id=None)
        assert vet.parse(message) == sent
        (line,) = [r for r in logged() if r.get("action") == "no_group_id"]
        assert (line["tenant_id"], line["job_id"]) == ("acme", sent.job_id)

    def test_files_outside_the_bucket_are_refused(self, backends, vet):
        """Input or output outside the worker's bucket and the tenant's prefix is invalid."""
        with pytest.raises(InvalidMessage, match="is in bucket 'someone-elses'"):
            vet.parse(received(backends, request(bucket="someone-elses").to_body()))


class TestGuard:
    def test_an_aws_error_is_a_warning_and_the_message_comes_back(self, settings, backends,
                                                                   vet, logged):
        """An AWS error while handling a message is not its fault: one warning, nothing
        raised, and the message neither deferred nor dead-lettered."""
        message = received(backends, request(bucket=settings.bucket).to_body())
        with vet.guard(message):
            raise TransientBackendError("throttled")
        assert [r["message_id"] for r in logged() if r.get("action") == "aws_error"] == [
            message.message_id]
        assert dlq_count(settings) == 0

    def test_a_message_that_keeps_failing_is_dead_lettered_the_third_time(
            self, settings, backends, vet, logged):
        """A bug met while handling a message defers it twice; the third failure on this
        host moves it to the DLQ with the error as its reason, and the parent goes on."""
        message = received(backends, request(bucket=settings.bucket).to_body())
        for tries in (1, 2, 3):
            with vet.guard(message):
                raise RuntimeError("boom")
            assert dlq_count(settings) == (tries == 3)
        errors = [r for r in logged() if r.get("action") == "handler_error"]
        assert len(errors) == 3 and all(r["message_id"] == message.message_id for r in errors)
        sqs = boto3.client("sqs")
        url = sqs.get_queue_url(QueueName=settings.dlq_name)["QueueUrl"]
        (dead,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                                      WaitTimeSeconds=1)["Messages"]
        assert "handling failed 3 times: RuntimeError: boom" in dead["MessageAttributes"][
            "imposer_error"]["StringValue"]
