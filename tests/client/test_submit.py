"""imposer.client.submit against in-process moto and a real redis-server."""

from __future__ import annotations

import json
import time

import boto3
import pytest
from moto import mock_aws

from imposer.client import Admission, DuplicateToken, SubmitError, submit
from imposer.client.aws import Aws
from imposer.models import JobRequest

BUCKET, QUEUE, REGION = "imposer-artwork", "imposer-jobs", "us-east-1"


@pytest.fixture
def aws(monkeypatch):
    """An in-process moto account with the artwork bucket and a standard job queue."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
        boto3.client("sqs", region_name=REGION).create_queue(QueueName=QUEUE)
        yield Aws(region=REGION)


@pytest.fixture
def admission(redis_url):
    adm = Admission.from_url(redis_url)
    yield adm
    adm.close()


def received(aws: Aws, queue: str = QUEUE) -> list[dict]:
    """Read back every message on the queue with all its system attributes."""
    url = aws.queue_url(queue)
    messages: list[dict] = []
    while True:
        batch = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                        MessageSystemAttributeNames=["All"]).get("Messages", [])
        if not batch:
            return messages
        messages.extend(batch)


def keys(aws: Aws, prefix: str = "") -> list[str]:
    reply = aws.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(item["Key"] for item in reply.get("Contents", []))


class TestPublish:
    def test_group_id_is_tenant(self, aws, make_pdf):
        """Every published message carries MessageGroupId equal to its tenant id."""
        for tenant in ("acme", "globex", "acme"):
            submit(tenant, make_pdf(), "2up", aws=aws)
        messages = received(aws)
        assert len(messages) == 3
        for message in messages:
            tenant = json.loads(message["Body"])["tenant_id"]
            assert message["Attributes"]["MessageGroupId"] == tenant

    def test_body_is_job_request(self, aws, make_pdf):
        """The message body parses back into the returned request, submit time set."""
        request = submit("acme", make_pdf(), {"nup": 2}, webhook="https://hooks.acme.test/x",
                         token="order-42", aws=aws)
        (message,) = received(aws)
        assert JobRequest.from_body(message["Body"]) == request
        assert request.token == "order-42" and request.submitted_at is not None
        assert request.layout == {"nup": 2}

    def test_priority_and_due_are_in_the_body(self, aws, make_pdf):
        """A priority and a due time given to submit reach the message the worker parses."""
        due = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        request = submit("acme", make_pdf(), "2up", priority=1, due=due, aws=aws)
        (message,) = received(aws)
        parsed = JobRequest.from_body(message["Body"])
        assert (parsed.priority, parsed.due) == (1, request.due)
        assert json.loads(message["Body"])["due"] == due

    def test_inputs_under_tenant_prefix(self, aws, make_pdf):
        """The PDF lands under tenants/<tenant>/jobs/<job>/ and passes the worker's prefix check."""
        pdf = make_pdf()
        request = submit("acme", pdf, "2up", job_id="job-1", aws=aws)
        assert keys(aws) == ["tenants/acme/jobs/job-1/input.pdf"]
        assert request.input == f"s3://{BUCKET}/tenants/acme/jobs/job-1/input.pdf"
        assert request.output == f"s3://{BUCKET}/tenants/acme/jobs/job-1/plate.pdf"
        body = aws.s3.get_object(Bucket=BUCKET, Key="tenants/acme/jobs/job-1/input.pdf")["Body"]
        assert body.read() == pdf.read_bytes()
        request.check_prefix(BUCKET)

    def test_layout_file_uploaded(self, aws, make_pdf, tmp_path):
        """A layout given as a JSON file is uploaded beside the input and sent by URI."""
        layout = tmp_path / "layout.json"
        layout.write_text(json.dumps({"nup": 4}))
        request = submit("acme", make_pdf(), layout, job_id="job-1", aws=aws)
        assert request.layout == f"s3://{BUCKET}/tenants/acme/jobs/job-1/layout.json"
        stored = aws.s3.get_object(Bucket=BUCKET, Key="tenants/acme/jobs/job-1/layout.json")
        assert json.loads(stored["Body"].read()) == {"nup": 4}
        request.check_prefix(BUCKET)

    def test_preset_name_inline(self, aws, make_pdf):
        """A layout string that is not a file is sent as a preset name."""
        request = submit("acme", make_pdf(), "saddle-2up", aws=aws)
        assert request.layout == {"preset": "saddle-2up"}

    def test_region_without_adapter(self, aws, make_pdf):
        """Without an adapter, submit builds its own clients for the given region."""
        submit("acme", make_pdf(), "2up", region=REGION)
        assert len(received(aws)) == 1


class TestAdmissionAroundPublish:
    def test_duplicate_not_published(self, aws, admission, make_pdf):
        """A second submit of one token is refused before anything is uploaded or sent."""
        first = submit("acme", make_pdf(), "2up", token="order-42", admission=admission, aws=aws)
        with pytest.raises(DuplicateToken) as caught:
            submit("acme", make_pdf(), "2up", token="order-42", admission=admission, aws=aws)
        assert caught.value.job_id == first.job_id
        assert len(received(aws)) == 1
        assert keys(aws) == [f"tenants/acme/jobs/{first.job_id}/input.pdf"]

    def test_missing_queue_undoes_admission(self, aws, admission, make_pdf):
        """A publish to a missing queue raises SubmitError and frees the token for a retry."""
        pdf = make_pdf()
        with pytest.raises(SubmitError, match="does not exist"):
            submit("acme", pdf, "2up", token="order-42", admission=admission, aws=aws,
                   queue="no-such-queue")
        assert admission.inflight("acme") == 0
        request = submit("acme", pdf, "2up", token="order-42", admission=admission, aws=aws)
        assert admission.inflight("acme") == 1
        assert [json.loads(m["Body"])["job_id"] for m in received(aws)] == [request.job_id]

    def test_missing_bucket_undoes_admission(self, aws, admission, make_pdf):
        """An upload to a missing bucket raises SubmitError and leaves nothing in flight."""
        with pytest.raises(SubmitError, match="bucket"):
            submit("acme", make_pdf(), "2up", token="order-42", admission=admission, aws=aws,
                   bucket="no-such-bucket")
        assert admission.inflight("acme") == 0
        assert received(aws) == []

    @pytest.mark.parametrize("urgency, reason", [
        ({"priority": 12}, "priority must be a whole number"),
        ({"due": "next tuesday"}, "due is not an ISO-8601 time"),
        ({"due": "2026-01-01T00:00:00"}, "due has no timezone"),
    ])
    def test_bad_urgency_is_refused_before_anything_is_sent(self, aws, admission, make_pdf,
                                                            urgency, reason):
        """A priority or due time the worker would refuse is refused here, nothing admitted."""
        with pytest.raises(ValueError, match=reason):
            submit("acme", make_pdf(), "2up", admission=admission, aws=aws, **urgency)
        assert received(aws) == [] and admission.inflight("acme") == 0


class TestArguments:
    def test_missing_pdf(self, aws, admission, tmp_path):
        """A missing input file is reported before admission or upload."""
        with pytest.raises(FileNotFoundError):
            submit("acme", tmp_path / "nope.pdf", "2up", admission=admission, aws=aws)
        assert admission.inflight("acme") == 0

    def test_bad_tenant(self, aws, make_pdf):
        """A tenant id unusable in an S3 key is rejected."""
        with pytest.raises(ValueError, match="tenant"):
            submit("../acme", make_pdf(), "2up", aws=aws)

    def test_bad_layout_file(self, aws, make_pdf, tmp_path):
        """A layout file that is not a JSON object is rejected before anything is sent."""
        layout = tmp_path / "layout.json"
        layout.write_text("not json")
        with pytest.raises(ValueError, match="not JSON"):
            submit("acme", make_pdf(), layout, aws=aws)
        assert received(aws) == []
