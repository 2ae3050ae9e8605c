"""Park messages at their tenant's cap; hand a freed slot to the tenant's oldest one, on any host.

With a flat deferral a capped tenant's freed slot sits idle until one of its
deferred messages happens to become visible again, and every waiting message
is received and deferred again each deferral interval. Here a message at
cap is parked instead: made invisible for the park window (default 5 min)
and noted in the waiting table (``imposer.state.waiting``). When a job of
that tenant is settled on any host, that host takes the tenant's oldest note
and starts it in the slot just freed, inside the acquire transaction, at
once and without receiving the message again: one slot per settled job.
A capped job therefore costs one write (the note and its job record's
"waiting" note, in one transaction) and its share of a Query beyond any
job's calls, however long it waits: its receive made it invisible for a
lease TTL, which covers the park window unless that is set longer (then one
visibility change more).

The three fairness layers are untouched: the hand-off goes through the same
acquire transaction, so no tenant exceeds its cap; it only fills a slot
while another stays free for the queue, or once a look at the queue or a
receive found nothing another tenant could start (a quiet tenant's message
is still received and started first; see ``Settler.promise_slot`` and
``Refiller.wake_idle``); and a parked message never leaves SQS, so if
no hand-off comes (every host of the tenant's jobs died) it simply becomes
visible when its park window ends, and is received as usual.
"""

from __future__ import annotations

import logging
from operator import attrgetter
from typing import Any, Sequence

import attrs

from imposer.clock import Clock
from imposer.errors import BackendError
from imposer.logs import extra
from imposer.models import JobRequest, Received
from imposer.settings import Settings
from imposer.state.leases import Successor
from imposer.state.waiting import Parked, WaitingStore
from imposer.worker import allocation, policy
from imposer.worker.messages import Messages
from imposer.worker.timing import LeaseTiming

logger = logging.getLogger(__name__)

#: Notes this host parked that it remembers, to give their messages back when it stops
#: (and tenants whose notes it read last).
REMEMBERED = 1000


@attrs.frozen(kw_only=True)
class Handover:
    """A settling job's slot, promised to its tenant's oldest parked job; or, a borrowed
    slot, to the parked job the borrow rule lends it to (``Settler.promise_slot``).

    The release of the settling job and the start of *successor* are one
    transaction (``LeaseStore.hand_over``): the slot passes from one job to
    the next with no acquire of its own.
    """

    note: Parked
    successor: Successor


class HandOff:
    """Park capped messages and list a tenant's oldest parked ones."""

    def __init__(self, settings: Settings, waiting: WaitingStore, messages: Messages,
                 clock: Clock, timing: LeaseTiming) -> None:
        self.settings, self.waiting, self.messages, self.clock = settings, waiting, messages, clock
        self.timing = timing
        self._mine: dict[tuple[str, str], Parked] = {}
        #: tenant -> (monotonic time read, the notes of that Query not yet taken)
        self._read: dict[str, tuple[float, list[Parked]]] = {}
        #: tenant -> when this host last parked a job of it or read notes of it
        self._parked_at: dict[str, float] = {}

    def park(self, request: JobRequest, message: Received,
             also: Sequence[dict[str, Any]] = ()) -> bool:
        """Make the message wait for a hand-off; False when it was re-published instead.

        *also* (the job record's note of why it waits) commits with the note.
        The note is written before the message's visibility is extended: a
        host that dies between the two leaves a note whose message shows up
        again when its receive's visibility ends (and is parked anew), never
        a message hidden for a park window with nothing saying where it is.
        """
        visible_at = self.messages.park_until(request, message, self.settings.park_seconds)
        if visible_at is None:
            return False
        note = Parked.of(request, message, visible_at)
        try:
            self.waiting.park(note, also)
        except BackendError as exc:  # its receive's visibility brings it back soon
            logger.warning("could not note parked job %s: %s", request.key, exc,
                           extra=extra("park_error", request.tenant_id, request.job_id))
            return True
        self._remember(note)
        self._into_read(note)
        self.seen_parked(request.tenant_id)
        try:
            self.messages.park(message, visible_at)
        except BackendError as exc:  # it shows up before its note says; received, it is parked anew
            logger.warning("could not hide parked job %s for its park window: %s", request.key,
                           exc, extra=extra("park_error", request.tenant_id, request.job_id))
        return True

    def notes(self, tenant_id: str, fresh: bool = False) -> tuple[list[Parked], bool]:
        """The tenant's most urgent parked messages (then oldest), this host's first; and if
        just read.

        The most urgent first (``allocation.in_turn``); among equals this host's oldest
        first, then the others' newest first (hosts handing off at once seldom collide).

        One Query reads up to ``policy.NOTES_READ`` notes; the hand-offs after
        it take the next of them (a claim that finds one gone costs what a
        Query would) until they run out or are older than a park window, or
        *fresh* asks.
        """
        now = self.clock.monotonic()
        read = self._read.get(tenant_id)
        if not fresh and read and read[1] and now - read[0] < self.settings.park_seconds:
            return list(read[1]), False
        notes = allocation.in_turn(self.waiting.oldest(tenant_id, policy.NOTES_READ),
                                   self.mine, attrgetter("urgency"))
        self._read[tenant_id] = (now, notes)
        if len(self._read) > REMEMBERED:
            self._read.pop(next(iter(self._read)))
        if notes:
            self.seen_parked(tenant_id)
        else:  # none left: a read for the next last slot would find none either
            self._parked_at.pop(tenant_id, None)
        return list(notes), True

    def seen_parked(self, tenant_id: str) -> None:
        """This host parked a job of the tenant, or read parked notes of it."""
        self._parked_at.pop(tenant_id, None)
        self._parked_at[tenant_id] = self.clock.monotonic()
        if len(self._parked_at) > REMEMBERED:
            self._parked_at.pop(next(iter(self._parked_at)))

    def parked_lately(self, tenant_id: str) -> bool:
        """True if this host parked a job of the tenant, or read parked notes of it,
        within a park window, and no read since found none: only then is the queue
        looked at before its job's release hands over a host's last free slot (any
        other tenant's job costs no look and no read of notes; a tenant whose notes
        another host parked gets its first hand-off here the owed way, whose read
        then counts)."""
        seen = self._parked_at.get(tenant_id)
        return seen is not None and self.clock.monotonic() - seen < self.timing.parked_window

    def parked_tenants(self) -> list[str]:
        """Tenants this host parked or read notes of lately (``parked_lately``), oldest first."""
        return [t for t in self._parked_at if self.parked_lately(t)]

    def mine(self, note: Parked) -> bool:
        """True when this host parked *note* (and has not seen it taken)."""
        return (note.tenant_id, note.order) in self._mine

    def has_notes_read(self, tenant_id: str) -> bool:
        """True while notes of the tenant's last Query are left to try."""
        return bool(self._read.get(tenant_id, (0.0, []))[1])

    def forget(self, tenant_id: str) -> None:
        """Drop what the last Query of the tenant's notes read: the next read is fresh."""
        self._read.pop(tenant_id, None)

    def claim_op(self, note: Parked) -> dict:
        """The transaction item that takes *note* with the acquire or release that starts
        its job (``WaitingStore.claim_op``)."""
        return self.waiting.claim_op(note)

    def drop(self, note: Parked) -> None:
        """Delete *note*: its job runs or ended, or its message is invalid."""
        self.waiting.drop(note)
        self.taken(note)

    def taken(self, note: Parked) -> None:
        """*note* was claimed (here or elsewhere) or dropped: never try or give it back."""
        self._mine.pop((note.tenant_id, note.order), None)
        read = self._read.get(note.tenant_id)
        if read:
            read[1][:] = [n for n in read[1] if n.order != note.order]

    def parked_here(self) -> int:
        """Messages this host parked whose park window has not ended (its backlog)."""
        now = self.clock.time()
        return sum(1 for note in list(self._mine.values()) if note.visible_at > now)

    def give_back_mine(self) -> int:
        """On stop: make the messages this host parked visible again, unless taken meanwhile.

        One Query per tenant finds which of its notes are still there (other
        hosts may have taken some), so only those cost a transaction.
        """
        now, count = self.clock.time(), 0
        by_tenant: dict[str, list[Parked]] = {}
        for note in self._mine.values():
            if note.visible_at > now:
                by_tenant.setdefault(note.tenant_id, []).append(note)
        self._mine.clear()
        for tenant, notes in by_tenant.items():
            orders = sorted(n.order for n in notes)
            try:
                present = {(n.order, n.receipt) for n in
                           self.waiting.between(tenant, orders[0], orders[-1])}
            except BackendError:
                present = {(n.order, n.receipt) for n in notes}  # try each instead
            for note in notes:
                if (note.order, note.receipt) not in present:
                    continue
                try:
                    self.waiting.claim(note, f"take back parked {note.job_id}")
                except BackendError:
                    continue  # another host took it
                if self.messages.give_back_quietly(note.receipt) is None:
                    count += 1
        return count

    def _into_read(self, note: Parked) -> None:
        """A note parked here that sorts before one the tenant's last Query read joins that
        read, in turn: hand-offs take a read's notes for up to a park window, and a rush
        job parked meanwhile must not wait for the read to run out. (A note of another
        host is seen at this host's next read; one of the default urgency sorts after
        every note read before it was parked, so it changes nothing.)"""
        read = self._read.get(note.tenant_id)
        if read and read[1] and note.order < max(n.order for n in read[1]):
            read[1][:] = allocation.in_turn([*read[1], note], self.mine, attrgetter("urgency"))

    def _remember(self, note: Parked) -> None:
        self._mine[(note.tenant_id, note.order)] = note
        if len(self._mine) > REMEMBERED:
            now = self.clock.time()
            self._mine = {k: v for k, v in self._mine.items() if v.visible_at > now}
            while len(self._mine) > REMEMBERED:
                self._mine.pop(next(iter(self._mine)))
