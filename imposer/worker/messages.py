"""What happens to a job's SQS message next: the one owner of its fate.

A message is held while its job runs, deferred while its tenant is at its
cap, retried later after a failure, given back at once when a worker stops,
deleted when the job is final, or dead-lettered with a reason. Every
visibility change in the parent goes through here, so each delay has one
source: the settings (defer, retry backoff, lease TTL).

Nothing here is lost by a refusal: a receipt that is no longer ours (the
message was received again elsewhere) only means someone else decides now.
"""

from __future__ import annotations

import logging
import uuid

import attrs

from imposer.aws.sqs import JobQueue
from imposer.clock import Clock
from imposer.errors import BackendError, ReplyLost
from imposer.logs import extra
from imposer.models import JobRequest, Received
from imposer.settings import Settings
from imposer.state.jobs import JobStore, claim_is_fresh, dead_letter_claim
from imposer.worker import policy
from imposer.worker.timing import LeaseTiming

logger = logging.getLogger(__name__)


class Messages:
    """Carry out a message's fate on the job queue, with the delays the settings give."""

    def __init__(self, queue: JobQueue, settings: Settings, clock: Clock,
                 timing: LeaseTiming) -> None:
        self.queue = queue
        self.settings = settings
        #: The parent's one LeaseTiming (``wiring.build``).
        self.timing = timing
        self.clock = clock

    # -- while the job runs ----------------------------------------------------
    def hold(self, message: Received) -> Received | None:
        """Keep a running job's message invisible for a lease TTL; None if no longer ours.

        Returns the message with its new deadline, which ``due`` reads.
        """
        now = self.clock.time()
        if not self.queue.change_visibility(message, self.timing.visibility):
            return None
        return attrs.evolve(message, visible_until=now + self.timing.visibility)

    def due(self, message: Received) -> bool:
        """Say whether *message* must be held now, or could show up before two more beats."""
        return policy.needs_hold(message.visible_until, self.clock.time(),
                                 self.settings.heartbeat_seconds)

    # -- the job waits ---------------------------------------------------------
    def defer(self, request: JobRequest, message: Received,
              seconds: float | None = None) -> bool:
        """Push the message back (True), or re-publish it if SQS would soon drop it (False).

        A deferred message ages in the queue and is received again and again;
        before the retention period or the redrive count could drop it, a fresh
        copy goes in under the same job id, keeping the first submission time.
        """
        if self._republished(request, message):
            return False
        s = self.settings
        self.queue.change_visibility(message, s.defer_seconds if seconds is None else seconds)
        return True

    def park_until(self, request: JobRequest, message: Received,
                   seconds: float) -> float | None:
        """When a message parked now for at least *seconds* shows up again; None if re-published.

        Nothing is changed yet (``park`` does that, once the note is written):
        a message whose receive made it invisible for long enough already (the
        receive's visibility is the lease TTL, twice the park window by
        default) keeps that visibility and costs no call at all.
        """
        if self._republished(request, message):
            return None
        return max(message.visible_until, self.clock.time() + seconds)

    def park(self, message: Received, until: float) -> None:
        """Keep *message* invisible until *until*, unless its receive already does."""
        if until > message.visible_until:
            self.queue.change_visibility(message, max(0.0, until - self.clock.time()))

    def _republished(self, request: JobRequest, message: Received) -> bool:
        """Re-publish a message SQS would soon drop (age, receive count); True if it was."""
        s = self.settings
        age = self.clock.time() - message.sent_at
        if (age <= s.retention_seconds - s.republish_margin_seconds
                and message.receive_count < s.republish_receive_count):
            return False
        body = attrs.evolve(request, submitted_at=request.submitted_at or message.sent_at)
        new_id = self.queue.republish(message, body.to_body())
        logger.warning("re-published job %s (age %.0fs, received %s times) as %s",
                       request.job_id, age, message.receive_count, new_id,
                       extra=extra("republished", request.tenant_id, request.job_id))
        return True

    def back_off(self, message: Received) -> None:
        """Bring the message back after a deferral (its handling failed; maybe later not)."""
        self.queue.change_visibility(message, self.settings.defer_seconds)

    def retry_later(self, message: Received, failures: int) -> None:
        """Bring a failed job back after ``retry_seconds * 2^(failures-1)``."""
        self.queue.change_visibility(
            message, policy.retry_delay(self.settings.retry_seconds, failures))

    def requeue(self, message: Received) -> None:
        """Bring back a job that failed for a reason not its own (licence) after a deferral."""
        self.queue.change_visibility(message, self.settings.defer_seconds)

    def give_back(self, message: Received | str) -> bool:
        """Make the message visible now, for another worker; False if no longer ours."""
        return self.queue.change_visibility(message, 0)

    def give_back_quietly(self, message: Received | str) -> BackendError | None:
        """Give the message back if SQS lets us; return the AWS error swallowed, if any.

        For a stop, a drain or a reclaimed lease, where nothing waits on the
        answer: a message not given back comes back by itself when its
        visibility runs out, so an AWS error here costs a delay, never a job.
        """
        try:
            self.give_back(message)
        except BackendError as exc:
            return exc
        return None

    # -- the job is final ------------------------------------------------------
    def finish(self, message: Received) -> None:
        """Delete the message of a job that reached a final state."""
        self.queue.delete(message)

    def dead_letter(self, message: Received, reason: str) -> None:
        """Move a message that is no job's (invalid, or its handling kept failing) to the DLQ
        with *reason*, once, then delete it.

        Its ``imposer_dead_letter_id`` is ``message/<SQS message id>``, the
        same for every delivery of that message. The send is tried once, as a
        dead job's is: a reply lost after SQS took it is logged
        (``dead_letter_unsure``) and the message deleted, not sent again; a
        send SQS refused leaves the message to come back and try again.
        """
        identity = {"imposer_dead_letter_id": f"message/{message.message_id}"}
        try:
            self.queue.dead_letter(message, reason, identity)
        except ReplyLost as exc:
            logger.error("message %s: its dead letter %s was sent but the reply was lost; not "
                         "sending it again (%s)", message.message_id,
                         identity["imposer_dead_letter_id"], exc,
                         extra=extra("dead_letter_unsure", message.group_id,
                                     message_id=message.message_id))
            self.queue.delete(message)

    def dead_letter_job(self, jobs: JobStore, request: JobRequest, epoch: str,
                        message: Received, reason: str) -> bool:
        """Send a dead job's one DLQ message, if its record still owes it; delete *message*.

        The record owes it from the release that made the job dead; a claim
        taken first means no other host sends it meanwhile, and the send is
        tried once. Sent, the record says so and the message goes. A claim
        that outlives a lease TTL unsent (its host died, or the reply of its
        send was lost: ``dead_letter_unsure``) is taken again by the job's
        returning message, which is kept until then: no dead job is left
        without its DLQ message, and every copy carries the same
        ``imposer_dead_letter_id``. True if this call sent it.
        """
        now, hold = self.clock.time(), self.timing.ttl
        claim = dead_letter_claim(now, uuid.uuid4().hex)
        if not jobs.claim_dead_letter(request.tenant_id, request.job_id, claim,
                                      stale=dead_letter_claim(now - hold, "")):
            record = jobs.get(request.tenant_id, request.job_id)
            if record is not None and claim_is_fresh(record.dead_letter, now, hold):
                self.queue.change_visibility(message, hold)  # back when that claim is stale
            else:
                self.queue.delete(message)  # sent already: this is a returning copy
            return False
        identity = {"imposer_job_id": request.key, "imposer_epoch": epoch,
                    "imposer_dead_letter_id": f"{request.key}/{epoch}"}
        try:
            self.queue.copy_to_dlq(message, reason, identity)
        except ReplyLost as exc:
            logger.error("job %s: the reply of its dead letter %s was lost; the job's message "
                         "comes back in %.0fs and sends it again unless it was recorded sent "
                         "(%s)", request.key, identity["imposer_dead_letter_id"], hold, exc,
                         extra=extra("dead_letter_unsure", request.tenant_id, request.job_id))
            self.queue.change_visibility(message, hold)
            return True
        except BackendError:
            jobs.owe_dead_letter(request.tenant_id, request.job_id, claim)
            raise
        try:
            jobs.sent_dead_letter(request.tenant_id, request.job_id, claim)
        except BackendError as exc:  # its claim ages; only a returning message would resend
            logger.warning("job %s: its dead letter was sent but not recorded so: %s",
                           request.key, exc, extra=extra("dead_letter_record_error",
                                                         request.tenant_id, request.job_id))
        self.queue.delete(message)
        return True
