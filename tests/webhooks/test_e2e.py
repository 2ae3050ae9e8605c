"""Layer 3 end to end: client submit -> `imposer run` -> signed webhook -> confirm."""

from __future__ import annotations

import json
import time

import pytest

from imposer.client import Admission, verify_webhook
from imposer.client.errors import WebhookVerificationError
from imposer.client.receiver import WebhookReceiver
from imposer.client.submit import submit
from imposer.dev.samples import numbered_pdf
from imposer.models import TenantConfig
from tests.fixtures.jobs import record_of
from tests.fixtures.workers import Worker, layout, wait_for

pytestmark = pytest.mark.slow


class TestCompletionWebhook:
    def test_signed_webhook_confirms_and_frees_inflight(self, settings, backends, tmp_path,
                                                        redis_url):
        """A finished job's signed event is verified, confirms the token and frees the slot."""
        admission = Admission.from_url(redis_url)
        receiver = WebhookReceiver({"acme": "s3cret"}, admission).start()
        raw: list[tuple[dict, bytes]] = []
        original = receiver.handle

        def keep(tenant, headers, body):
            raw.append((headers, body))
            return original(tenant, headers, body)

        receiver.handle = keep
        backends.tenants.put(TenantConfig(tenant_id="acme", webhook_secret="s3cret",
                                          webhook_hosts=("127.0.0.1",)))
        pdf = numbered_pdf(tmp_path / "in.pdf", 2)
        req = submit("acme", pdf, layout(), token="order-17", admission=admission,
                     webhook=receiver.url("acme"), bucket=settings.bucket,
                     queue=settings.queue_name)
        assert admission.inflight("acme") == 1
        worker = Worker(settings, tmp_path, "hooks", "--slots", "2", "--exit-when-idle",
                        env={"IMPOSER_WEBHOOK_ALLOW_LOOPBACK": "1"})
        try:
            assert worker.wait(60) == 0, worker.tail()
            wait_for(lambda: receiver.events, 10, "the webhook")
        finally:
            worker.close()
            receiver.stop()
        event = receiver.events[0]
        assert (event["job_id"], event["status"], event["token"]) == \
            (req.job_id, "succeeded", "order-17")
        assert event["output"] == req.output and event["queue_wait"] is not None
        assert admission.inflight("acme") == 0
        record = wait_for(lambda: (r := record_of(backends, req.job_id)) and
                          r.webhook_status == "delivered" and r, 10, "delivery to be recorded")
        assert record.webhook_status == "delivered"
        headers, body = raw[0]
        assert verify_webhook(headers, body, "s3cret")["job_id"] == req.job_id
        tampered = body.replace(b"succeeded", b"failed")
        with pytest.raises(WebhookVerificationError):
            verify_webhook(headers, tampered, "s3cret")
        with pytest.raises(WebhookVerificationError):
            verify_webhook(headers, body, "s3cret", now=time.time() + 3600)
        assert json.loads(body)["tenant_id"] == "acme"

    def test_refused_webhook_is_recorded_not_lost(self, settings, backends, tmp_path):
        """A webhook to a host outside the tenant's allow-list is refused and recorded."""
        backends.tenants.put(TenantConfig(tenant_id="acme", webhook_secret="s",
                                          webhook_hosts=("hooks.example.com",)))
        pdf = numbered_pdf(tmp_path / "in.pdf", 2)
        req = submit("acme", pdf, layout(), webhook="https://169.254.169.254/latest",
                     bucket=settings.bucket, queue=settings.queue_name)
        worker = Worker(settings, tmp_path, "refuse", "--slots", "1", "--exit-when-idle")
        try:
            assert worker.wait(60) == 0, worker.tail()
        finally:
            worker.close()
        record = wait_for(lambda: (r := record_of(backends, req.job_id)) and
                          r.webhook_status not in (None, "pending") and r, 10, "a recorded refusal")
        assert record.status.value == "succeeded"
        assert record.webhook_status == "refused"
