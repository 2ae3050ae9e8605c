"""Vet a received message before any slot is spent on it: parse, check, or reject.

An invalid message is recorded (under the tenant that sent it) and moved to
the DLQ at once; one whose SQS sender may not send for the tenant it names
(``senders``) is moved there unrecorded; a message whose handling keeps
failing for a bug of ours goes there too after ``POISON_FAILURES`` tries, so
no message crashes the parent or comes back for ever.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

from imposer.clock import Clock
from imposer.errors import BackendError, InvalidMessage, SenderRefused
from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import JobRequest, JobStatus, Received, WebhookStatus
from imposer.state.jobs import JobStore
from imposer.state.outbox import Event, OutboxStore, event_id
from imposer.webhooks.delivery import build_event, encode
from imposer.worker.messages import Messages
from imposer.worker.receive.senders import SenderCheck

logger = logging.getLogger(__name__)

#: Times handling one message may raise (a bug, not AWS) before it is dead-lettered.
POISON_FAILURES = 3


class Vetting:
    """Parse and check messages; reject the invalid and put poison aside."""

    def __init__(self, *, bucket: str, jobs: JobStore, messages: Messages, metrics: Metrics,
                 senders: SenderCheck, clock: Clock, outbox: OutboxStore | None = None) -> None:
        #: The bucket every job's input and output must be under.
        self.bucket = bucket
        self.jobs, self.messages, self.metrics = jobs, messages, metrics
        self.senders, self.outbox, self.clock = senders, outbox, clock
        #: message id -> times handling it raised on this host (bounded)
        self._failures: dict[str, int] = {}

    def parse(self, message: Received) -> JobRequest:
        """The message's job request; InvalidMessage if its body, sender, group or keys are
        wrong."""
        found = JobRequest.salvage(message.body)
        if found is not None:  # before the rest is read: a refused sender gets no record
            self.senders.check(found["tenant_id"], message.sender_id)
        request = JobRequest.from_body(message.body)
        if found is None or found["tenant_id"] != request.tenant_id:
            self.senders.check(request.tenant_id, message.sender_id)
        if message.group_id is None:
            logger.warning("message for %s has no MessageGroupId (layer 1 fairness is off)",
                           request.tenant_id,
                           extra=extra("no_group_id", request.tenant_id, request.job_id))
        elif message.group_id != request.tenant_id:
            raise InvalidMessage(f"MessageGroupId {message.group_id!r} is not the tenant "
                                 f"{request.tenant_id!r}")
        request.check_prefix(self.bucket)
        return request

    def reject(self, message: Received, exc: InvalidMessage) -> None:
        """Record why and tell the tenant's webhook, move the message to the DLQ, delete it.

        Whatever else is wrong with the body, readable ids get a failed record
        and (with a webhook URL) a completion event, written in one transaction;
        but never for a message whose sender may not send for the tenant it names.
        """
        found = JobRequest.salvage(message.body)
        claimed = found["tenant_id"] if found else None
        if isinstance(exc, SenderRefused) or (
                found is not None and message.group_id not in (None, found["tenant_id"])):
            found = None  # a record belongs to the tenant that sent the message
        tenant, job_id = (found["tenant_id"], found["job_id"]) if found else (None, None)
        logger.error("rejected message %s: %s", message.message_id, exc,
                     extra=extra(exc.kind if isinstance(exc, SenderRefused) else
                                 "invalid_message", tenant, job_id,
                                 message_id=message.message_id, claimed_tenant=claimed,
                                 sender_id=message.sender_id, error_kind=exc.kind))
        if found:
            event = self._event(found, message, exc)
            fields = {"webhook_status": WebhookStatus.PENDING, "webhook_event": event.event_id} \
                if event else {}
            self.jobs.finish_unleased(tenant, job_id, JobStatus.FAILED, str(exc), exc.kind,
                                      submitted_at=message.sent_at,
                                      also=[self.outbox.put_op(event)] if event else (),
                                      **fields)
        self.messages.dead_letter(message, str(exc))
        # An unreadable message names no tenant; its data point still needs the dimension.
        self.metrics.emit("jobs", 1, outcome="invalid", tenant_id=tenant or "unknown")
        self.metrics.emit("failures", 1, kind=exc.kind)

    def _event(self, found: dict, message: Received, exc: InvalidMessage) -> Event | None:
        """The failed job's completion event, if it named a webhook; its id is the message's,
        so a redelivery of the same message never makes a second one."""
        if not found["webhook"] or self.outbox is None:
            return None
        now = self.clock.time()
        tenant, job_id = found["tenant_id"], found["job_id"]
        body = encode(build_event(job_id=job_id, tenant_id=tenant, status=JobStatus.FAILED,
                                  token=found["token"] or job_id, error=str(exc),
                                  error_kind=exc.kind, submitted_at=message.sent_at,
                                  finished_at=now))
        return Event(event_id=event_id(tenant, job_id, f"invalid-{message.message_id}"),
                     tenant_id=tenant, job_id=job_id, url=found["webhook"], body=body,
                     due_at=now, created_at=now)

    @contextlib.contextmanager
    def guard(self, message: Received) -> Iterator[None]:
        """Never let one message crash the parent, nor come back for ever if it always fails.

        An AWS error that may pass is not the message's fault: it is logged and
        the message comes back by itself. A bug met while handling a message
        is logged and the message returns after the deferral; the third time
        this host fails on it, it goes to the DLQ with the error as its reason
        (the receive count would also count its deferrals and hand-offs).
        """
        try:
            yield
        except BackendError as exc:
            logger.warning("AWS error while handling message %s: %s; it will come back",
                           message.message_id, exc,
                           extra=extra("aws_error", message.group_id,
                                       message_id=message.message_id))
        except Exception as exc:
            failures = self._failures.get(message.message_id, 0) + 1
            self._failures[message.message_id] = failures
            while len(self._failures) > 10_000:
                self._failures.pop(next(iter(self._failures)))
            logger.exception("error while handling message %s (failure %s)",
                             message.message_id, failures,
                             extra=extra("handler_error", message.group_id,
                                         message_id=message.message_id))
            try:
                if failures >= POISON_FAILURES:
                    self._failures.pop(message.message_id, None)
                    self.messages.dead_letter(message, f"handling failed {failures} times: "
                                              f"{type(exc).__name__}: {exc}")
                else:
                    self.messages.back_off(message)
            except Exception:
                logger.exception("could not put message %s aside", message.message_id,
                                 extra=extra("handler_error", message.group_id))
