"""The receive side of the parent's loop: what to ask for, its back-off, and work left.

The receive itself runs in a thread (``receiver``); this asks it for a
message per free slot and room for parking (``policy.receive_size``),
hands what it brought to the dispatcher, backs off when SQS fails for a
reason that may pass, and says when the queue holds nothing this host could
still take (``--exit-when-idle``, read by ``leftover``).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from imposer import backoff
from imposer.clock import Clock
from imposer.errors import BackendError, MissingResource
from imposer.logs import extra
from imposer.models import Received
from imposer.worker import policy
from imposer.worker.dispatch.capmemo import CapMemo
from imposer.worker.dispatch.dispatcher import Dispatcher
from imposer.worker.messages import Messages
from imposer.worker.dispatch.pool import Pool
from imposer.worker.receive.leftover import WorkLeft
from imposer.worker.receive.receiver import Receiver
from imposer.worker.settle.refill import Refiller

logger = logging.getLogger(__name__)


class Intake:
    """Keep the free slots asked for, and the receive's failures paced."""

    def __init__(self, *, receiver: Receiver, dispatch: Dispatcher, refill: Refiller,
                 pool: Pool, messages: Messages, left: WorkLeft, memo: CapMemo,
                 clock: Clock) -> None:
        self.receiver, self.dispatch, self.refill, self.pool = receiver, dispatch, refill, pool
        self.messages, self.left, self.clock = messages, left, clock
        #: Tenants found at their cap a moment ago (their messages leave a slot to promise).
        self.memo = memo
        self._failures = 0
        #: Monotonic time before which no receive is asked (backing off a failure).
        self.paused_until = 0.0
        #: The last receive brought nothing this host could start.
        self.empty_poll = False
        #: What a look at the queue (``look``) brought, dispatched by the next ``fill``,
        #: and when the first of it was received (its jobs' ``dispatch_ms`` count from then).
        self._looked: list[Received] = []
        self._looked_at = 0.0

    def fill(self, stopping: Callable[[], bool],
             left: Callable[[int], int | None] | None = None) -> None:
        """Dispatch what the receiver brought; ask it for one message per free slot, and
        room for as many as its last batch parked (``policy.receive_size``).

        A receive that fails for a reason that may pass backs off (0.5 s
        doubling to 30 s) while the loop keeps settling finished jobs. A
        receive that brings nothing while slots are free lets parked work of
        tenants this host knows to be waiting take them (``wake_idle``), and
        with borrowing on lends the slots beyond the reserve (``lend``). It asks
        for no more messages than *left* says may still start after the jobs started so
        far, this fill's own included (``Until.left``; None: no limit).
        """
        now = self.clock.monotonic()
        looked, self._looked = self._looked, []
        if looked:
            self.dispatch.take_batch(looked, self.pool.free(), stopping, self._looked_at)
        try:
            messages = self.receiver.take()
        except MissingResource:
            raise
        except BackendError as exc:
            self._failures += 1
            delay = backoff.doubling(0.5, self._failures - 1, cap=30.0)
            self.paused_until = now + delay
            logger.warning("could not receive: %s; trying again in %.1fs", exc, delay,
                           extra=extra("receive_error", failures=self._failures))
            return
        if messages is not None:
            self._failures = 0
            free = self.pool.free()
            self.dispatch.take_batch(messages, free, stopping)
            self.empty_poll = not messages or self.dispatch.last_batch_paused
            if not messages:  # the hand-offs owed are paid, idle slots lent
                self.refill.queue_empty(free, stopping)
            self.refill.share_fill(free, stopping)
        free = self.pool.free()
        if not free or now < self.paused_until or self.receiver.busy:
            return
        want = policy.receive_size(len(free), self.dispatch.last_batch_parks)
        most = None if left is None else left(self.dispatch.started)
        if most is not None:
            want = min(want, most)
        if want > 0:  # a hand-off owed is paid by an empty receive: no need to wait for one
            self.receiver.ask(want, poll=not self.refill.owes)

    def look(self, tenant: str) -> bool:
        """Look at the queue now, without waiting: True if it holds nothing another tenant
        could start here (no message, or only ones of tenants known to be at their cap).

        False, without looking, while a receive is outstanding or backing off.
        What the look brought is dispatched by the next ``fill``, after the
        settlements of this pass: a message another tenant can start takes
        the slot the look was for. The asking *tenant*'s own messages do not
        count: its oldest parked job comes before them.
        """
        if self.receiver.busy or self.clock.monotonic() < self.paused_until:
            return False
        want = policy.receive_size(len(self.pool.free()), self.dispatch.last_batch_parks)
        try:
            messages = self.receiver.look(want)
        except BackendError as exc:
            logger.warning("could not look at the queue: %s", exc,
                           extra=extra("receive_error", failures=self._failures))
            return False
        if messages and not self._looked:
            self._looked_at = self.clock.monotonic()
        self._looked.extend(messages)
        return self._none_for_others(messages, tenant)

    def nothing_waiting(self, tenant: str) -> bool:
        """``look``, and what earlier looks brought that no ``fill`` dispatched yet counts
        too: for a slot no release of this pass freed (a restart of parked jobs), which such a message
        would otherwise lose to *tenant*'s parked job."""
        return self.look(tenant) and self._none_for_others(self._looked, tenant)

    def restart_parked(self, stopping: Callable[[], bool]) -> None:
        """Once per read of the waiting view: start parked jobs that no hand-off reached, and
        lend idle slots to capped tenants' parked jobs when borrowing is on
        (``Refiller.restart_parked``, told what the last receive and a look find)."""
        self.refill.restart_parked(self.pool.free(), stopping, self.empty_poll,
                                   self.nothing_waiting)

    def _none_for_others(self, messages: list[Received], tenant: str) -> bool:
        return all(m.group_id == tenant or self.memo.cap(m.group_id) is not None
                   for m in messages if m.group_id is not None)

    def take_looked(self) -> list[Received]:
        """On stop: what a look brought and no ``fill`` dispatched yet (to give back)."""
        looked, self._looked = self._looked, []
        return looked

    def give_back_received(self) -> None:
        """Draining: what a receive still in flight brings goes straight back to the queue."""
        messages = self.take_looked()
        try:
            messages += self.receiver.take() or []
        except BackendError:
            pass
        for message in messages:
            self.messages.give_back_quietly(message)
        if messages:
            logger.info("draining: gave back %s message(s) a receive still in flight brought",
                        len(messages), extra=extra("drain_give_back", count=len(messages)))

    def may_wait(self, stopping: bool, most: float = 0.5) -> float:
        """How long the loop may wait on the pool before the intake has work: *most* while
        a receive is out (its answer wakes the loop) or the worker stops; with a slot free,
        only until a receive may be asked again."""
        if self.receiver.busy or stopping or not self.pool.free():
            return most
        return max(0.0, min(most, self.paused_until - self.clock.monotonic()))

    def give_back_all(self, fast: bool = False) -> None:
        """At the stop: the receive stopped (a receive in flight may answer, unless *fast*),
        and what it and a look brought given back, visible to other hosts at once."""
        for message in self.take_looked() + self.receiver.stop(0 if fast else None):
            self.messages.give_back_quietly(message)

    def threads(self) -> list[threading.Thread]:
        """The intake's thread to watch: the receiver, once it was started."""
        return [self.receiver] if self.receiver.ident is not None else []

    def idle(self) -> bool:
        """The last receive found nothing, and the queue holds nothing this host could take
        (``WorkLeft``: paused tenants' jobs in flight do not count)."""
        return self.empty_poll and self.left.none()
