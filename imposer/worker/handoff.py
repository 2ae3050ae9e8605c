"""Park messages at their tenant's cap; hand a freed slot to the tenant's oldest one, on any host.

With a flat deferral a capped tenant's freed slot sits idle until one of its
deferred messages happens to become visible again, and every waiting message
is received and deferred again each deferral interval. Here a message at
cap is parked instead: made invisible for the park window (default 5 min)
and noted in the waiting table (``imposer.state.waiting``). When a job of
that tenant is settled on any host, that host takes the tenant's oldest note
and starts it in the slot just freed, inside the acquire transaction, at
once and without receiving the message again: one slot per settled job.
A capped job therefore costs one visibility change, one note and its share
of a Query beyond any job's calls, however long it waits.

The three fairness layers are untouched: the hand-off goes through the same
acquire transaction, so no tenant exceeds its cap; it only fills a slot
while another stays free for the queue, or once a receive found the queue
empty (a quiet tenant's message is still received and started first; see
``Dispatcher.wake_idle``); and a parked message never leaves SQS, so if
no hand-off comes (every host of the tenant's jobs died) it simply becomes
visible when its park window ends, and is received as usual.
"""

from __future__ import annotations

import logging

from imposer.clock import Clock
from imposer.errors import BackendError
from imposer.logs import extra
from imposer.models import JobRequest, Received
from imposer.settings import Settings
from imposer.state.waiting import Parked, WaitingStore
from imposer.worker.messages import Messages

logger = logging.getLogger(__name__)

#: Notes this host parked that it remembers, to give their messages back when it stops.
REMEMBERED = 1000


class HandOff:
    """Park capped messages and list a tenant's oldest parked ones."""

    def __init__(self, settings: Settings, waiting: WaitingStore, messages: Messages,
                 clock: Clock) -> None:
        self.settings, self.waiting, self.messages, self.clock = settings, waiting, messages, clock
        self._mine: dict[tuple[str, str], Parked] = {}

    def park(self, request: JobRequest, message: Received) -> bool:
        """Make the message wait for a hand-off; False when it was re-published instead."""
        if not self.messages.defer(request, message, self.settings.park_seconds):
            return False
        note = Parked.of(request, message, self.clock.time() + self.settings.park_seconds)
        try:
            self.waiting.park(note)
        except BackendError as exc:  # it still comes back when its window ends
            logger.warning("could not note parked job %s: %s", request.key, exc,
                           extra=extra("park_error", request.tenant_id, request.job_id))
            return True
        self._remember(note)
        return True

    def notes(self, tenant_id: str) -> list[Parked]:
        """The tenant's oldest parked messages, first submitted first."""
        return self.waiting.oldest(tenant_id)

    def needs_hold(self, note: Parked) -> bool:
        """Say whether a handed-off message must be held now, before the next heartbeat."""
        left = note.visible_at - self.clock.time()
        return left < 2 * self.settings.heartbeat_seconds + 5

    def give_back_mine(self) -> int:
        """On stop: make the messages this host parked visible again, unless taken meanwhile."""
        now, count = self.clock.time(), 0
        for note in list(self._mine.values()):
            if note.visible_at <= now:
                continue
            try:
                self.waiting.dynamo.transact([self.waiting.claim_op(note)],
                                             f"take back parked {note.job_id}")
                self.messages.give_back(note.receipt)
                count += 1
            except BackendError:
                continue  # another host took it, or its message is back already
        self._mine.clear()
        return count

    def _remember(self, note: Parked) -> None:
        self._mine[(note.tenant_id, note.order)] = note
        if len(self._mine) > REMEMBERED:
            now = self.clock.time()
            self._mine = {k: v for k, v in self._mine.items() if v.visible_at > now}
            while len(self._mine) > REMEMBERED:
                self._mine.pop(next(iter(self._mine)))
