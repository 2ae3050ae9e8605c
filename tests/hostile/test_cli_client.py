"""Hostile calls of the command line and the tenant client: one clear line, nothing sent."""

from __future__ import annotations

import subprocess
import sys

import boto3
import pytest

from imposer.client import WebhookVerificationError, submit, verify_webhook
from imposer.dev.samples import A5, numbered_pdf
from tests.fixtures.aws import env_for


def imposer(env, *args):
    return subprocess.run([sys.executable, "-m", "imposer", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def queue_is_empty(settings) -> bool:
    sqs = boto3.client("sqs")
    url = sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return attrs["ApproximateNumberOfMessages"] == "0"


def bucket_is_empty(settings) -> bool:
    return boto3.client("s3").list_objects_v2(Bucket=settings.bucket).get("KeyCount", 0) == 0


def one_clear_line(got, code: int, text: str) -> None:
    lines = got.stderr.strip().splitlines()
    assert got.returncode == code, got.stderr
    assert "Traceback" not in got.stderr and text in got.stderr, got.stderr
    assert len(lines) == 1 and lines[0].startswith("imposer: "), got.stderr


@pytest.fixture
def artwork(tmp_path):
    return numbered_pdf(tmp_path / "a5.pdf", 4, *A5)


class TestCommandLine:
    @pytest.mark.parametrize("tenant", ["hA19\n", "", "a b", "acmé", "x" * 200, "../etc"])
    def test_submit_refuses_bad_tenant_ids(self, settings, artwork, tenant):
        """A tenant id the worker would refuse is refused by submit, before any upload."""
        got = imposer(env_for(settings), "submit", "--tenant", tenant, "--pdf", str(artwork),
                      "--layout", "a5-4up-sra3")
        one_clear_line(got, 2, "invalid tenant id")
        assert bucket_is_empty(settings) and queue_is_empty(settings)

    @pytest.mark.parametrize("tenant", ["hA19\n", "a b", "x" * 200, "tenant;drop"])
    def test_tenants_set_refuses_bad_ids(self, settings, tenant):
        """`tenants set` with an impossible id says so in words, never a DynamoDB error."""
        got = imposer(env_for(settings), "tenants", "set", tenant, "--cap", "2")
        one_clear_line(got, 2, "is not a tenant id")

    @pytest.mark.parametrize("args, text", [
        (["--cap", "2", "--clear-cap"], "contradict"),
        ([], "nothing to set"),
        (["--cap", "-1"], "--cap"),
    ])
    def test_tenants_set_refuses_nonsense(self, settings, args, text):
        """Contradictory or empty `tenants set` calls are usage errors that change nothing."""
        got = imposer(env_for(settings), "tenants", "set", "acme", *args)
        one_clear_line(got, 2, text)

    @pytest.mark.parametrize("job_id", ["bad id!", "x\n", ""])
    def test_why_refuses_bad_ids(self, settings, job_id):
        """`why` with an id that cannot exist is a usage error."""
        one_clear_line(imposer(env_for(settings), "why", job_id), 2, "is not an id")

    @pytest.mark.parametrize("layout, kind", [("saddle-2up", "bad_layout"),
                                              ("missing-file.json", "bad_layout")])
    def test_submit_checks_the_layout_first(self, settings, artwork, layout, kind):
        """An unknown preset or a missing layout file fails locally, nothing uploaded."""
        got = imposer(env_for(settings), "submit", "--tenant", "acme", "--pdf", str(artwork),
                      "--layout", layout)
        one_clear_line(got, 2, f"imposer: {kind}: ")
        assert bucket_is_empty(settings) and queue_is_empty(settings)

    def test_submit_checks_the_pdf_first(self, settings, tmp_path):
        """A file that is not a PDF fails locally as bad_pdf, without the worker's paths."""
        fake = tmp_path / "not.pdf"
        fake.write_bytes(b"GIF89a" + b"\0" * 100)
        got = imposer(env_for(settings), "submit", "--tenant", "acme", "--pdf", str(fake),
                      "--layout", "a5-4up-sra3")
        one_clear_line(got, 2, "imposer: bad_pdf: ")
        assert bucket_is_empty(settings) and queue_is_empty(settings)

    def test_webhooks_redeliver_refuses_a_bad_event_id(self, settings):
        """An event id that is not one is refused before any call."""
        got = imposer(env_for(settings), "webhooks", "redeliver", "../../x")
        one_clear_line(got, 2, "an event id looks like msg_")


class TestClient:
    @pytest.mark.parametrize("kwargs, text", [
        ({"token": "order\u0007"}, "token must be"),
        ({"token": "t" * 300}, "token must be"),
        ({"webhook": "https://x/" + "a" * 3000}, "webhook is longer than"),
        ({"job_id": "job\n"}, "invalid job id"),
    ])
    def test_submit_refuses_what_the_worker_would(self, settings, artwork, kwargs, text):
        """The client runs the worker's validation and raises ValueError, publishing nothing."""
        with pytest.raises(ValueError, match=text):
            submit("acme", artwork, "a5-4up-sra3", bucket=settings.bucket,
                   queue=settings.queue_name, **kwargs)
        assert bucket_is_empty(settings) and queue_is_empty(settings)

    @pytest.mark.parametrize("headers", [
        {}, {"webhook-id": "msg_1"}, {"webhook-signature": "v1,AAAA", "webhook-id": "m",
                                      "webhook-timestamp": "not-a-number"},
        {"X-Imposer-Signature": "v1=" + "0" * 64, "X-Imposer-Timestamp": "1"},
        {"webhook-signature": "v2,xyz", "webhook-id": "m", "webhook-timestamp": "0"},
    ])
    def test_verify_refuses_forged_requests(self, headers):
        """Missing, malformed, stale or foreign signatures are refused, never accepted."""
        with pytest.raises(WebhookVerificationError):
            verify_webhook(headers, b'{"job_id": "x"}', "whsec_c2VjcmV0", now=1_700_000_000)
