"""Webhook statuses: one definition, read by the outbox, an attempt's result and the job record."""

from __future__ import annotations

from imposer.aws.dynamodb import deserialize
from imposer.models import WebhookStatus
from imposer.state.outbox import Event, OutboxStore, event_id
from imposer.webhooks.delivery import WebhookSender


class TestWebhookStatus:
    def test_the_strings_are_the_ones_the_tables_and_the_metric_hold(self):
        """The values are a stored format (outbox items, job records, the ``webhooks``
        metric's outcome): renaming one would strand every item written before."""
        assert {name: getattr(WebhookStatus, name) for name in dir(WebhookStatus)
                if name.isupper()} == {
            "PENDING": "pending", "RETRY": "retry", "RETRYING": "retrying",
            "DELIVERED": "delivered", "FAILED": "failed", "REFUSED": "refused"}

    def test_an_event_is_written_pending(self):
        """The release transaction's outbox item says pending, whatever the event held."""
        event = Event(event_id=event_id("acme", "j1", "e1"), tenant_id="acme", job_id="j1",
                      url="https://x/h", body="{}", status=WebhookStatus.DELIVERED)
        item = OutboxStore(None, "outbox").put_op(event)["Put"]["Item"]
        assert deserialize(item)["status"] == WebhookStatus.PENDING
        assert Event(event_id=event_id("acme", "j2", "e1"), tenant_id="acme", job_id="j2",
                     url="https://x/h", body="{}").status == WebhookStatus.PENDING

    def test_an_attempt_without_a_secret_is_refused(self):
        """An attempt's result speaks the same words: no secret is refused, never sent."""
        result = WebhookSender().send("https://hooks.example.com/h", "{}", "", "msg_1",
                                      ("hooks.example.com",))
        assert result.status == WebhookStatus.REFUSED
