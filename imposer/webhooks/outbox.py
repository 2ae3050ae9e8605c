"""Send completion webhooks from the durable outbox, from any host, on a day-long schedule.

Every worker runs one sender thread. It takes events that are due from the
outbox's index (and, at once, the events its own host just settled), claims
each attempt with a conditional write so no two hosts send it together,
sends it, and records the result on the event and the job. A failure that
may pass is tried again after the next step of the schedule (by default
5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: about a day, like the Standard
Webhooks convention); after the last step the event is marked failed and
stays listed for ``imposer webhooks redeliver``.

A succeeded job's event names the attempt whose plate was committed; the
sender makes sure the plate is promoted before it tells the tenant, so an
event never points at an output that is not there, even if the host that
settled the job died first.
"""

from __future__ import annotations

import logging
import queue
import threading

import attrs

from imposer.aws.s3 import Storage
from imposer.clock import Clock
from imposer.errors import BackendError
from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import WebhookStatus
from imposer.state import plates
from imposer.state.jobs import JobStore
from imposer.state.outbox import Event, OutboxStore
from imposer.state.tenants import TenantStore
from imposer.webhooks.delivery import WebhookSender

logger = logging.getLogger(__name__)


def parse_schedule(text: str) -> tuple[float, ...]:
    """Read ``"5,300,1800"`` into retry delays in seconds."""
    return tuple(float(part) for part in text.split(",") if part.strip())


@attrs.frozen
class Pacing:
    """When the sender acts: the delays between a failed attempt and the next
    (``IMPOSER_WEBHOOK_SCHEDULE``), and how often it polls the outbox for events of
    other hosts (``IMPOSER_WEBHOOK_POLL_SECONDS``)."""

    schedule: tuple[float, ...] = attrs.field(converter=tuple)
    poll: float

    def retries(self, attempts: int) -> bool:
        """Whether an event that failed its *attempts*-th attempt is tried again."""
        return attempts <= len(self.schedule)

    def delay(self, attempts: int) -> float:
        """Seconds after the *attempts*-th failed attempt before the next (the last step
        repeats; 0 with no schedule)."""
        return self.schedule[min(attempts, len(self.schedule)) - 1] if self.schedule else 0.0


class OutboxSender(threading.Thread):
    """The webhook sender of one host: woken by its own completions, polling for the rest."""

    def __init__(self, outbox: OutboxStore, tenants: TenantStore, jobs: JobStore,
                 storage: Storage, sender: WebhookSender, pacing: Pacing, clock: Clock, *,
                 metrics: Metrics) -> None:
        super().__init__(name="webhooks", daemon=True)
        self.outbox, self.tenants, self.jobs, self.storage = outbox, tenants, jobs, storage
        self.sender, self.pacing, self.clock = sender, pacing, clock
        self.metrics = metrics
        #: Seconds since the oldest event due at the last pass was created (0 when none was).
        self.oldest_pending = 0.0
        self._woken: queue.Queue = queue.Queue()
        self._halt = threading.Event()

    def wake(self, event_id: str) -> None:
        """Send *event_id* now (this host just settled its job)."""
        self._woken.put(event_id)

    def stop(self, timeout: float = 10.0) -> None:
        """Make one last pass (this host's fresh events go out now), then end the thread.

        Whatever is not sent within *timeout* stays in the outbox for any host.
        """
        self._halt.set()
        self._woken.put(None)
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        while True:
            try:
                self.pass_once()
            except BackendError as exc:  # AWS had a bad moment: one line, the next pass retries
                logger.warning("webhook sender pass failed: %s", exc,
                               extra=extra("webhook_error"))
            except Exception:
                logger.exception("webhook sender pass failed", extra=extra("webhook_error"))
            if self._halt.is_set():
                return
            try:
                self._woken.put(self._woken.get(timeout=self.pacing.poll))
            except queue.Empty:
                pass

    def pass_once(self) -> int:
        """Send what was woken and what is due; return how many attempts were made."""
        woken = []
        while True:
            try:
                item = self._woken.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                woken.append(item)
        events = [e for e in (self.outbox.get(i) for i in woken)
                  if e and e.status == WebhookStatus.PENDING]
        seen = {e.event_id for e in events}
        events += [e for e in self.outbox.due() if e.event_id not in seen]
        now = self.clock.time()
        self.oldest_pending = max((now - e.created_at for e in events if e.created_at),
                                  default=0.0)
        sent = 0
        for event in events:
            claimed = self.outbox.claim(event, hold=self.sender.timeout + 30)
            if claimed is not None:
                self.attempt(claimed)
                sent += 1
        return sent

    def attempt(self, event: Event) -> None:
        """Make one delivery attempt of a claimed event and record what came of it."""
        log = extra("webhook", event.tenant_id, event.job_id, event_id=event.event_id,
                    attempt=event.attempts)
        if not self._plate_ready(event):
            self.outbox.retry_at(event, self.clock.time() + self.pacing.delay(1),
                                 "plate not promoted")
            return
        config = self.tenants.get(event.tenant_id)
        result = self.sender.send(event.url, event.body,
                                  config.signing_secrets if config else (),
                                  event.event_id, config.webhook_hosts if config else ())
        detail = f"{result.detail} on attempt {event.attempts}"
        if result.status == WebhookStatus.RETRY and self.pacing.retries(event.attempts):
            self.metrics.emit("webhooks", 1, outcome=WebhookStatus.RETRY,
                              tenant_id=event.tenant_id)
            delay = self.pacing.delay(event.attempts)
            self.outbox.retry_at(event, self.clock.time() + delay, detail)
            logger.info("webhook attempt %d of %s failed (%s); next in %.0fs", event.attempts,
                        event.event_id, result.detail, delay,
                        extra={**log, "action": "webhook_retry"})
            self._note(event, WebhookStatus.RETRYING, detail)
            return
        status = result.status if result.status in (
            WebhookStatus.DELIVERED, WebhookStatus.REFUSED) else WebhookStatus.FAILED
        if status == WebhookStatus.FAILED and result.status == WebhookStatus.RETRY:
            detail = f"{result.detail} after {event.attempts} attempts"
        self.outbox.close(event, status, detail)
        self.metrics.emit("webhooks", 1, outcome=status, tenant_id=event.tenant_id)
        logger.log(logging.INFO if status == WebhookStatus.DELIVERED else logging.WARNING,
                   "webhook %s: %s", status, detail, extra={**log, "action": f"webhook_{status}"})
        self._note(event, status, detail)

    def _plate_ready(self, event: Event) -> bool:
        """For a succeeded job: promote its committed plate if nobody has yet."""
        if not (event.attempt and event.epoch and event.output):
            return True
        try:
            return plates.promote(self.storage, tenant_id=event.tenant_id, job_id=event.job_id,
                                  attempt=event.attempt, output=event.output, epoch=event.epoch)
        except BackendError as exc:
            logger.warning("could not promote the plate of %s: %s", event.job_id, exc,
                           extra=extra("promote_error", event.tenant_id, event.job_id))
            return False

    def _note(self, event: Event, status: str, detail: str) -> None:
        try:
            self.jobs.annotate(event.tenant_id, event.job_id, webhook_status=status,
                               webhook_detail=detail[:500], webhook_event=event.event_id)
        except BackendError as exc:
            logger.warning("could not record the webhook result of %s: %s", event.job_id, exc,
                           extra=extra("webhook_record_error", event.tenant_id, event.job_id))
