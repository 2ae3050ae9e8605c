"""Turn received messages into running jobs: parse, lease, launch, park, defer or borrow.

A message at its tenant's cap is parked (``deferral``, ``handoff``), never
dropped; when a job of that tenant ends, on any host, its slot goes at once to
the tenant's oldest parked job (``imposer.worker.settle``), whichever host
parked it.
"""

from __future__ import annotations

from typing import Callable

from imposer.clock import Clock
from imposer.errors import BackendError, InvalidMessage
from imposer.logs import guard
from imposer.metrics import Metrics
from imposer.models import JobRequest, Received
from imposer.state.leases import Acquisition, LeaseStore, Verdict
from imposer.worker.threads import sweep as sweeping
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.dispatch.capmemo import CapMemo
from imposer.worker.dispatch.deferral import Deferral
from imposer.worker.dispatch.duplicates import Duplicates
from imposer.worker.dispatch.handoff import HandOff
from imposer.worker.dispatch.launch import Launcher
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.receive.vetting import Vetting


class Dispatcher:
    """Everything between a received message and a job handed to the pool."""

    def __init__(self, *, host_id: str, launcher: Launcher, vet: Vetting, leases: LeaseStore,
                 deferral: Deferral, duplicates: Duplicates, handoff: HandOff,
                 metrics: Metrics, borrowing: BorrowPolicy, memo: CapMemo, clock: Clock,
                 shares: SharePolicy | None = None) -> None:
        #: This host; whether capped tenants may borrow idle slots (``BorrowPolicy``).
        self.host_id, self.borrow = host_id, borrowing.enabled
        #: Tenants found at their cap a moment ago: no transaction for them (``CapMemo``).
        self.memo = memo
        #: Fair share (IMPOSER_SHARE_HALF_LIFE); ``sharing``: it decides who takes a free slot.
        self.shares, self.sharing = shares, shares is not None and shares.enabled
        self.leases, self.metrics = leases, metrics
        self.handoff, self.borrowing = handoff, borrowing
        #: Parks, defers or gives back what does not start; settles copies of jobs that ran.
        self.deferral, self.duplicates = deferral, duplicates
        self.clock = clock
        #: Starts leased jobs in the pool; parses and checks messages.
        self.launcher, self.vet = launcher, vet
        self._paused = 0
        #: True when every message of the last batch belonged to a paused tenant (cap 0).
        self.last_batch_paused = False
        self._candidates: list[tuple[JobRequest, Received, int]] = []

    def take_batch(self, messages: list[Received], free: list[int],
                   stopping: Callable[[], bool], received_at: float | None = None) -> None:
        """Start what the free slots allow; park, defer, reject or return the rest.

        *received_at* (monotonic; default now) is when the messages were
        received: each started job's ``dispatch_ms`` counts from it.

        The receive may bring more messages than slots are free (room for
        parking, ``policy.receive_size``): one beyond the free slots is parked
        if its tenant is known to be at its cap (no slot, no transaction), and
        otherwise given back at once, visible to every host again.
        """
        received_at = self.clock.monotonic() if received_at is None else received_at
        self._paused = self.deferral.parks = 0
        for message in self.take_bursts(messages, free, stopping, received_at):
            if stopping():
                self.deferral.give_back(message)
                continue
            with self.vet.guard(message):
                if not free:
                    self.park_or_give_back(message)
                elif self.handle(message, free[0], received_at):
                    free.pop(0)
        self.lend_idle_slots(free, stopping, received_at)
        self.last_batch_paused = bool(messages) and self._paused == len(messages)

    def take_bursts(self, messages: list[Received], free: list[int],
                    stopping: Callable[[], bool],
                    received_at: float | None = None) -> list[Received]:
        """Start each tenant's burst among the messages the free slots will take, one
        transaction per tenant; return the messages left for one-by-one handling.

        A burst that cannot be taken whole (no room under the cap for all of
        it, a job of it running or final) writes nothing and is left to the
        one-by-one path, which says why for each job. *received_at* as for
        ``take_batch``.
        """
        bursts: dict[str, list[tuple[JobRequest, Received]]] = {}
        keys = set()
        if self.sharing:
            return messages  # each start is the share rule's decision, one by one
        received_at = self.clock.monotonic() if received_at is None else received_at
        for message in messages[:len(free)] if len(free) > 1 else ():
            if message.group_id is None:
                continue  # (parsed once, below, so its warning is logged once)
            try:
                request = self.vet.parse(message)
            except (InvalidMessage, BackendError):
                continue  # rejected below, or (its sender's row unread) judged again there
            if request.key not in keys and self.memo.cap(request.tenant_id) is None:
                keys.add(request.key)
                bursts.setdefault(request.tenant_id, []).append((request, message))
        taken: set[int] = set()
        for burst in (b for b in bursts.values() if len(b) > 1):
            if stopping():
                break
            with guard(burst[0][0]):
                try:
                    leases, cap = self.leases.acquire_burst(burst, self.host_id, free)
                except BackendError as exc:
                    self.launcher.acquire_failed(burst[0][0], exc, f"taking the {len(burst)} "
                                                 "jobs of its tenant's burst one by one")
                    continue
                for (request, message), lease in zip(burst, leases):
                    taken.add(id(message))  # launched, or its lease given back
                    if self.launcher.launch(request, message, [lease.slot], lease,
                                            received_at=received_at):
                        free.remove(lease.slot)
                if leases and len(leases) == cap:  # it has just filled its cap
                    self.memo.found(burst[0][0].tenant_id, cap)
        return [m for m in messages if id(m) not in taken]

    def park_or_give_back(self, message: Received) -> None:
        """No slot is free for *message*: park it if its tenant is known at its cap, or
        (fair share) would be held were a slot free, else make it visible again for
        whichever host has a slot (a held one given back would only be held when received
        again: a visibility change and a receive more for the same park)."""
        try:
            request = self.vet.parse(message)
        except InvalidMessage as exc:
            self.vet.reject(message, exc)
            return
        tenant = request.tenant_id
        cap = self.memo.cap(tenant)
        if cap:
            self.deferral.at_cap(request, message, cap)
            return
        if self.sharing:
            self.shares.seen(tenant)
            first = self.shares.yields_to(tenant, self.handoff.parked_tenants())
            if first is not None:
                self.deferral.share_park(request, message, first)
                return
        self.deferral.give_back(message)

    def known_capped(self, tenant: str, cap: int) -> None:
        """A parked start found *tenant* at its cap (``CapMemo.found``)."""
        self.memo.found(tenant, cap)

    @property
    def started(self) -> int:
        """Jobs this host started so far (``Launcher.started``)."""
        return self.launcher.started

    def parse(self, message: Received) -> JobRequest:
        """*message*'s job request; raises InvalidMessage (``Vetting.parse``)."""
        return self.vet.parse(message)

    def give_back_parked(self) -> int:
        """On stop: make the messages this host parked visible again for the others."""
        return self.handoff.give_back_mine()

    def handle(self, message: Received, slot: int, received_at: float) -> bool:
        """Start *message*'s job on *slot*, or defer, drop or reject it; True if started.

        *received_at* (monotonic) is when the message was received."""
        try:
            request = self.vet.parse(message)
        except InvalidMessage as exc:
            self.vet.reject(message, exc)
            return False
        try:
            return self.start(request, message, slot, received_at)
        except BackendError as exc:
            self.launcher.acquire_failed(request, exc)
            try:
                self.deferral.defer(request, message, None)
            except BackendError:
                pass  # it comes back when its visibility runs out
            return False

    def start(self, request: JobRequest, message: Received, slot: int, received_at: float,
              stale_retry: bool = True) -> bool:
        """Acquire the lease and launch, or route the message by the verdict.

        A tenant found at its cap less than a second ago (and with no job
        ended here since) is taken to be at cap still, without a transaction:
        cycling a capped backlog then costs half the calls.
        """
        tenant, limit = request.tenant_id, None
        known = self.memo.cap(tenant)
        if known is not None:
            acq = Acquisition(verdict=Verdict.AT_CAP, cap=known)
        else:
            if self.sharing:
                self.shares.seen(tenant)
                first, limit = self.shares.decide(tenant, self.handoff.parked_tenants())
                if first is not None:
                    self.deferral.share_park(request, message, first)
                    return False
            acq = self.leases.acquire(request, self.host_id, slot, message.sent_at,
                                      message.receipt, limit=limit)
            if acq.verdict == Verdict.AT_CAP:
                self.memo.found(tenant, acq.cap)
        if acq.verdict == Verdict.ACQUIRED:
            return self.launcher.launch(request, message, [slot], acq.lease,
                                        received_at=received_at)
        if acq.verdict == Verdict.AT_CAP:
            self._paused += acq.cap <= 0
            if self.borrow and acq.cap > 0:
                self._candidates.append((request, message, acq.cap))
            elif limit is not None and limit <= acq.cap:  # fair share's bound refused it
                self.deferral.outpaced(request, message, acq.cap, limit)
            else:
                self.deferral.at_cap(request, message, acq.cap)
        elif acq.verdict == Verdict.RUNNING:
            self.duplicates.running(request, message)
        elif acq.verdict == Verdict.DONE:
            self.duplicates.done(request, message, acq)
        elif acq.verdict == Verdict.STALE and stale_retry:
            sweeping.reclaim_expired(self.leases, self.metrics, acq.holder, self.host_id)
            return self.start(request, message, slot, received_at, stale_retry=False)
        else:
            self.deferral.defer(request, message, "waiting for a stale lease to be swept")
        return False

    def finish_duplicate(self, request: JobRequest, message: Received,
                         acq: Acquisition) -> None:
        """A parked copy of a job that ended: delete it once its end is finished
        (``Duplicates.finish``)."""
        self.duplicates.finish(request, message, acq)

    def lend_idle_slots(self, free: list[int], stopping: Callable[[], bool],
                        received_at: float) -> None:
        """After every tenant below its cap had its turn, let capped ones borrow, or defer."""
        candidates, self._candidates = self._candidates, []
        for request, message, cap in candidates:
            with guard(request):
                why_not = self.borrowing.allows(request.tenant_id, len(free))
                if why_not is None and not stopping():
                    try:
                        acq = self.leases.acquire(request, self.host_id, free[0],
                                                  message.sent_at, message.receipt, borrow=True)
                    except BackendError as exc:
                        self.launcher.acquire_failed(request, exc)
                        continue  # its message comes back when its visibility runs out
                    if acq.verdict == Verdict.ACQUIRED:
                        if self.launcher.launch(request, message, free, acq.lease,
                                                received_at=received_at):
                            self.metrics.emit("borrowed", 1, tenant_id=request.tenant_id)
                        continue
                    why_not = "the tenant dropped below its cap meanwhile"
                self.deferral.at_cap(request, message, cap, f"not borrowing: {why_not}")

    @property
    def last_batch_parks(self) -> int:
        """Messages of the last batch parked at their tenant's cap (``policy.receive_size``)."""
        return self.deferral.parks
