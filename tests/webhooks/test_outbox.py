"""The durable webhook outbox: any host sends, on a schedule, after the plate is there."""

from __future__ import annotations

import json
import logging
import os

import pytest

from imposer.aws.s3 import Storage
from imposer.clock import ManualClock
from imposer.models import JobStatus, S3Uri, TenantConfig
from imposer.models.signature import header
from imposer.state.outbox import Event, event_id
from imposer.webhooks.delivery import WebhookSender, build_event, encode
from imposer.webhooks.outbox import OutboxSender, Pacing
from imposer.worker.wiring import connect
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.jobs import record_of, request
from tests.fixtures.webhooks import receiver  # noqa: F401 (fixture)
from tests.fixtures.workers import wait_for

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def sender_for(backends, schedule=(5, 300)):
    return OutboxSender(backends.outbox, backends.tenants, backends.jobs,
                        Storage(backends.settings.region),
                        WebhookSender(allow_http_loopback=True, timeout=5),
                        Pacing(schedule, poll=0.05), clock=backends.clock,
                        metrics=backends.metrics)


def finish_with_webhook(backends, url, status=JobStatus.FAILED, **event_fields):
    """Settle a job the way the completer does: release and outbox entry in one transaction."""
    req = request()
    lease = backends.leases.acquire(req, "h", 0).lease
    event = Event(event_id=event_id(req.tenant_id, req.job_id, lease.epoch),
                  tenant_id=req.tenant_id, job_id=req.job_id, url=url,
                  body=encode(build_event(job_id=req.job_id, tenant_id=req.tenant_id,
                                          status=status)),
                  due_at=backends.clock.time(), created_at=backends.clock.time(), **event_fields)
    backends.leases.release(lease, status, also=[backends.outbox.put_op(event)],
                            finished_at=backends.clock.time(), webhook_status="pending",
                            webhook_event=event.event_id)
    return req, event


@pytest.fixture
def tenant(backends):
    backends.tenants.put(TenantConfig(tenant_id="acme", webhook_secret=SECRET,
                                      webhook_hosts=("127.0.0.1",)))


class TestPacing:
    def test_each_failed_attempt_waits_its_step_and_the_last_step_repeats(self):
        """The schedule on plain values: attempt n waits step n; past the schedule, no retry."""
        pacing = Pacing([5, 300, 1800], poll=2.0)
        assert [pacing.delay(n) for n in (1, 2, 3, 4)] == [5, 300, 1800, 1800]
        assert [pacing.retries(n) for n in (1, 3, 4)] == [True, True, False]
        assert pacing.schedule == (5, 300, 1800), "any sequence is kept as a tuple"

    def test_no_schedule_never_retries(self):
        pacing = Pacing((), poll=2.0)
        assert (pacing.retries(1), pacing.delay(1)) == (False, 0.0)


class TestOutbox:
    def test_any_host_sends_what_another_settled(self, backends, receiver, tenant):
        """An event written by a host that died is found through the index and delivered."""
        req, event = finish_with_webhook(backends, receiver.url)
        assert sender_for(backends).pass_once() == 1
        ((headers, body, _),) = receiver.requests
        assert json.loads(body)["job_id"] == req.job_id
        assert backends.outbox.get(event.event_id).status == "delivered"
        assert list(backends.outbox.listed()) == []
        record = record_of(backends, req.job_id)
        assert (record.webhook_status, record.webhook_event) == ("delivered", event.event_id)

    def test_a_kept_old_secret_signs_beside_the_new_one(self, backends, receiver):
        """During a rotation the outbox signs with the tenant's current and previous secret;
        once the previous one is dropped only the current one verifies."""
        from imposer.client import WebhookVerificationError, verify_webhook

        old, new = SECRET, "whsec_" + "c2Vjb25kLXNlY3JldC1vZi1hY21lLTMyYnl0ZXM="
        backends.tenants.put(TenantConfig(tenant_id="acme", webhook_secret=new,
                                          webhook_secret_previous=old,
                                          webhook_hosts=("127.0.0.1",)))
        finish_with_webhook(backends, receiver.url)
        assert sender_for(backends).pass_once() == 1
        ((headers, body, _),) = receiver.requests
        assert verify_webhook(headers, body, old)["tenant_id"] == "acme"
        assert verify_webhook(headers, body, new)["tenant_id"] == "acme"
        backends.tenants.put(TenantConfig(tenant_id="acme", webhook_secret=new,
                                          webhook_hosts=("127.0.0.1",)))
        finish_with_webhook(backends, receiver.url)
        assert sender_for(backends).pass_once() == 1
        headers, body, _ = receiver.requests[1]
        assert verify_webhook(headers, body, new)["tenant_id"] == "acme"
        with pytest.raises(WebhookVerificationError, match="does not match"):
            verify_webhook(headers, body, old)

    def test_retries_follow_the_schedule(self, backends, receiver, tenant, clock):
        """A 503 is tried again only when the next step of the schedule has passed."""
        receiver.codes[:] = [503, 503]
        _, event = finish_with_webhook(backends, receiver.url)
        sender = sender_for(backends, schedule=(5, 300))
        assert sender.pass_once() == 1
        assert backends.outbox.get(event.event_id).due_at == clock.time() + 5
        clock.advance(4)
        assert sender.pass_once() == 0
        clock.advance(1)
        assert sender.pass_once() == 1
        clock.advance(299)
        assert sender.pass_once() == 0
        clock.advance(1)
        assert sender.pass_once() == 1
        got = backends.outbox.get(event.event_id)
        assert (got.status, got.attempts, len(receiver.requests)) == ("delivered", 3, 3)

    def test_after_the_schedule_it_is_failed_listed_and_redeliverable(self, backends, receiver,
                                                                      tenant, clock):
        """A receiver down for the whole schedule leaves a failed event an operator can resend."""
        receiver.codes[:] = [500, 500, 500]
        _, event = finish_with_webhook(backends, receiver.url)
        sender = sender_for(backends, schedule=(1, 1))
        for _ in range(3):
            sender.pass_once()
            clock.advance(1)
        got = backends.outbox.get(event.event_id)
        assert (got.status, got.last_error) == ("failed", "HTTP 500 after 3 attempts")
        assert [e.event_id for e in backends.outbox.listed()] == [event.event_id]
        assert sender.pass_once() == 0, "a failed event is not sent again by itself"
        assert backends.outbox.redeliver(event.event_id)
        assert sender.pass_once() == 1
        assert backends.outbox.get(event.event_id).status == "delivered"

    def test_two_hosts_never_send_one_attempt_twice(self, backends, receiver, tenant):
        """Both hosts see the event due; the conditional claim lets exactly one send it."""
        _, event = finish_with_webhook(backends, receiver.url)
        first, second = sender_for(backends), sender_for(backends)
        due = backends.outbox.due()
        assert backends.outbox.claim(due[0], hold=30) is not None
        assert backends.outbox.claim(due[0], hold=30) is None
        assert second.pass_once() == 0 and first.pass_once() == 0
        assert receiver.requests == []

    def test_refused_is_final(self, backends, receiver, clock):
        """A URL off the tenant's allow-list is refused once and never retried."""
        backends.tenants.put(TenantConfig(tenant_id="acme", webhook_secret=SECRET,
                                          webhook_hosts=("hooks.example.com",)))
        _, event = finish_with_webhook(backends, receiver.url)
        sender = sender_for(backends)
        sender.pass_once()
        clock.advance(10_000)
        assert sender.pass_once() == 0
        got = backends.outbox.get(event.event_id)
        assert got.status == "refused" and "allow-list" in got.last_error
        assert receiver.requests == []

    def test_plate_is_promoted_before_the_tenant_hears(self, backends, receiver, tenant,
                                                       settings):
        """A success whose settling host died before promoting: the sender promotes first."""
        storage = Storage(settings.region)
        req = request(bucket=settings.bucket)
        lease = backends.leases.acquire(req, "h", 0).lease
        attempt = S3Uri.parse(req.attempt_uri(lease.epoch))
        storage.put_bytes(b"%PDF-1.7 plate", attempt)
        event = Event(event_id=event_id(req.tenant_id, req.job_id, lease.epoch),
                      tenant_id=req.tenant_id, job_id=req.job_id, url=receiver.url,
                      body=encode(build_event(job_id=req.job_id, tenant_id=req.tenant_id,
                                              status="succeeded", output=req.output)),
                      due_at=backends.clock.time(), attempt=str(attempt), epoch=lease.epoch,
                      output=req.output)
        backends.leases.release(lease, JobStatus.SUCCEEDED, also=[backends.outbox.put_op(event)],
                                finished_at=backends.clock.time(), output_epoch=lease.epoch)
        assert storage.epoch_of(S3Uri.parse(req.output)) is None
        assert sender_for(backends).pass_once() == 1
        assert storage.get_bytes(S3Uri.parse(req.output)) == b"%PDF-1.7 plate"
        assert receiver.requests, "the tenant heard only after the plate was in place"

    def test_a_host_killed_after_sending_lets_another_resend_with_the_same_id(
            self, backends, receiver, tenant, clock):
        """A host that sent an event and died before recording it: the next host resends it
        once its claim lapses, with the same webhook-id, so the tenant can drop the copy."""
        _, event = finish_with_webhook(backends, receiver.url)
        dying = sender_for(backends)
        claimed = backends.outbox.claim(event, hold=dying.sender.timeout + 30)
        dying.sender.send(claimed.url, claimed.body, SECRET, claimed.event_id, ("127.0.0.1",))
        assert sender_for(backends).pass_once() == 0  # its claim still holds
        clock.advance(dying.sender.timeout + 31)
        assert sender_for(backends).pass_once() == 1
        first, second = receiver.requests
        assert header(first[0], "webhook-id") == header(second[0], "webhook-id") \
            == event.event_id
        assert first[1] == second[1]
        assert backends.outbox.get(event.event_id).status == "delivered"

    def test_an_aws_error_in_a_pass_is_one_warning_line(self, settings, receiver, tenant,
                                                         monkeypatch, caplog):
        """AWS errors on the due query log one warning line each, no traceback, and the
        sender carries on once AWS answers again."""
        proxy = FaultProxy(os.environ["AWS_ENDPOINT_URL"], "outbox").start()
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        backends = connect(settings, clock=ManualClock())
        proxy.inject("error", 600, service="dynamodb", operation="Query")
        sender = sender_for(backends)
        sender.start()
        try:
            failed = lambda: [r for r in caplog.records  # noqa: E731
                              if getattr(r, "action", None) == "webhook_error"]
            wait_for(failed, 60, "a pass to fail")
            proxy.clear()
            finish_with_webhook(backends, receiver.url)
            wait_for(lambda: receiver.requests, 60, "the sender to carry on")
        finally:
            sender.stop()
            proxy.stop()
        assert {(r.levelno, r.exc_info) for r in failed()} == {(logging.WARNING, None)}
        assert "InternalServerError" in failed()[0].getMessage()
