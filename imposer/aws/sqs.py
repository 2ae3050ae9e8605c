"""The SQS adapter: the only module that talks to SQS.

Visibility is whole seconds in SQS; fractions (used by fast tests) round up.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import botocore.exceptions

from imposer.aws import session
from imposer.errors import BackendError, ReplyLost
from imposer.logs import extra
from imposer.models.message import Received

logger = logging.getLogger(__name__)

#: SQS's own ceiling for a message's visibility timeout (12 hours).
MAX_VISIBILITY = 43200


def seconds(value: float) -> int:
    return max(0, min(MAX_VISIBILITY, int(math.ceil(value))))


class JobQueue:
    """The job queue and its dead-letter queue."""

    def __init__(self, region: str, name: str, dlq_name: str, wait_timeout: float = 25) -> None:
        self.region, self.read_timeout = region, max(30.0, wait_timeout + 10)
        self.client = session.client("sqs", region, read_timeout=self.read_timeout)
        self.name = name
        self.dlq_name = dlq_name
        self._urls: dict[str, str] = {}
        self._once: Any = None

    def url(self, name: str | None = None) -> str:
        name = name or self.name
        if name not in self._urls:
            with session.translated(f"find queue {name}"):
                self._urls[name] = self.client.get_queue_url(QueueName=name)["QueueUrl"]
        return self._urls[name]

    def receive(self, max_messages: int, wait: int, visibility: float) -> list[Received]:
        """Long-poll for at most *max_messages* (1-10), invisible for *visibility* s."""
        with session.translated(f"receive from {self.name}"):
            resp = self.client.receive_message(
                QueueUrl=self.url(), MaxNumberOfMessages=max(1, min(10, max_messages)),
                WaitTimeSeconds=wait, VisibilityTimeout=seconds(visibility),
                MessageSystemAttributeNames=["SenderId", "SentTimestamp",
                                             "ApproximateReceiveCount", "MessageGroupId"],
                MessageAttributeNames=["All"])
        out = []
        for m in resp.get("Messages", []):
            attrs_ = m.get("Attributes", {})
            out.append(Received(
                message_id=m["MessageId"], receipt=m["ReceiptHandle"], body=m["Body"],
                group_id=attrs_.get("MessageGroupId"),
                sent_at=int(attrs_.get("SentTimestamp", "0")) / 1000.0,
                receive_count=int(attrs_.get("ApproximateReceiveCount", "1")),
                sender_id=attrs_.get("SenderId"),
                attributes={k: v.get("StringValue", "")
                            for k, v in (m.get("MessageAttributes") or {}).items()},
            ))
        logger.debug("received %s of %s message(s) (waiting up to %ss)", len(out), max_messages,
                     wait, extra=extra("received", count=len(out), asked=max_messages,
                                       wait=wait))
        return out

    def change_visibility(self, message: Received | str, delay: float) -> bool:
        """Set when *message* (or a receipt handle) shows up again; False if no longer ours."""
        receipt = message if isinstance(message, str) else message.receipt
        try:
            with session.translated(f"change visibility on {self.name}"):
                self.client.change_message_visibility(
                    QueueUrl=self.url(), ReceiptHandle=receipt,
                    VisibilityTimeout=seconds(delay))
        except BackendError as exc:
            if "ReceiptHandleIsInvalid" in str(exc) or "MessageNotInflight" in str(exc) \
                    or "InvalidParameterValue" in str(exc):
                return False
            raise
        return True

    def delete(self, message: Received | str) -> None:
        """Delete *message* (or a receipt handle) from the job queue."""
        receipt = message if isinstance(message, str) else message.receipt
        with session.translated(f"delete from {self.name}"):
            self.client.delete_message(QueueUrl=self.url(), ReceiptHandle=receipt)

    def send(self, body: str, group_id: str, attributes: dict[str, str] | None = None,
             queue: str | None = None, once: bool = False) -> str:
        """Publish *body* with MessageGroupId = *group_id* (the tenant: layer 1).

        With *once*, botocore tries the call only once, and a reply lost after
        the request went out raises ReplyLost: standard SQS cannot deduplicate,
        so a retry of a send SQS already took would be a second message.
        """
        kwargs: dict[str, Any] = {"QueueUrl": self.url(queue), "MessageBody": body,
                                  "MessageGroupId": group_id}
        if attributes:
            kwargs["MessageAttributes"] = {
                k: {"DataType": "String", "StringValue": str(v)} for k, v in attributes.items()}
        what = f"send to {queue or self.name}"
        with session.translated(what):
            if not once:
                return self.client.send_message(**kwargs)["MessageId"]
            if self._once is None:
                self._once = session.client("sqs", self.region, self.read_timeout,
                                            retries=0)
            try:
                return self._once.send_message(**kwargs)["MessageId"]
            except (botocore.exceptions.ReadTimeoutError,
                    botocore.exceptions.ConnectionClosedError) as exc:
                raise ReplyLost(f"{what}: the request went out, its reply was lost: "
                                f"{exc}") from None

    def dead_letter(self, message: Received, reason: str,
                    identity: dict[str, str] | None = None) -> None:
        """Move *message* to the DLQ ourselves, with the reason, then delete it.

        *identity* (``imposer_dead_letter_id``, which a DLQ consumer dedupes on,
        and a dead job's ``imposer_job_id`` and ``imposer_epoch``) goes with
        it, and then the send is tried once (``send``'s *once*).
        """
        self.copy_to_dlq(message, reason, identity)
        self.delete(message)

    def copy_to_dlq(self, message: Received, reason: str,
                    identity: dict[str, str] | None = None) -> None:
        """Send *message*'s copy, with the reason, to the DLQ (the message stays)."""
        attributes = dict(message.attributes)
        attributes.update(imposer_error=reason[:1000],
                          imposer_receive_count=str(message.receive_count), **(identity or {}))
        self.send(message.body, message.group_id or "unknown", attributes, queue=self.dlq_name,
                  once=identity is not None)

    def republish(self, message: Received, body: str | None = None) -> str:
        """Send a fresh copy of *message* (same job, same group), then retire the old one."""
        attributes = dict(message.attributes)
        attributes["imposer_republished_from"] = message.message_id
        new_id = self.send(body or message.body, message.group_id or "unknown", attributes)
        self.delete(message)
        return new_id

    def attributes(self, name: str | None = None) -> dict[str, str]:
        """Every attribute of the job queue (or the queue *name*), as SQS spells them."""
        name = name or self.name
        with session.translated(f"read attributes of {name}"):
            return self.client.get_queue_attributes(
                QueueUrl=self.url(name), AttributeNames=["All"])["Attributes"]

    def depth(self) -> dict[str, int]:
        attrs_ = self.attributes()
        return {
            "visible": int(attrs_.get("ApproximateNumberOfMessages", 0)),
            "in_flight": int(attrs_.get("ApproximateNumberOfMessagesNotVisible", 0)),
            "delayed": int(attrs_.get("ApproximateNumberOfMessagesDelayed", 0)),
        }

    def ensure(self, attributes: dict[str, dict[str, str]]) -> dict[str, bool]:
        """Create each queue of *attributes* (name -> its attributes) that is missing, in
        order; return which were made. A queue that exists is left as it is: a stack or an
        operator owns its settings (``state.provision.drift`` says how they differ)."""
        made = {}
        for name, wanted in attributes.items():
            with session.translated(f"create queue {name}"):
                try:
                    self._urls[name] = self.client.get_queue_url(QueueName=name)["QueueUrl"]
                    made[name] = False
                    continue
                except botocore.exceptions.ClientError as exc:
                    if "NonExistentQueue" not in session.error_code(exc) and \
                            session.error_code(exc) != "QueueDoesNotExist":
                        raise
                self._urls[name] = self.client.create_queue(
                    QueueName=name, Attributes=wanted)["QueueUrl"]
                made[name] = True
        return made

    def arn(self, name: str) -> str:
        with session.translated(f"read arn of {name}"):
            return self.client.get_queue_attributes(
                QueueUrl=self.url(name), AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
