"""Where a message that cannot start now waits: parked at its tenant's cap, held by fair
share, or deferred.

A message at its tenant's cap is parked (``handoff``: noted in the waiting
table, hidden for the park window) for a hand-off when a slot of the tenant
frees; a paused tenant's (cap 0) is deferred with its record noted first; a
message whose job runs elsewhere, or waits for a stale lease's sweep, is
deferred with the reason on its record. Every cap deferral is counted where
the operator reads it (``cap_defer``, the contention meter, the rollups).
"""

from __future__ import annotations

import logging

from imposer.clock import Clock
from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import JobRequest, Received
from imposer.models.records import SHARE_PARK_REASON
from imposer.state.jobs import JobStore
from imposer.state.tenants import TenantStore
from imposer.worker.dispatch.contention import ContentionMeter
from imposer.worker.dispatch.handoff import HandOff
from imposer.worker.messages import Messages
from imposer.worker.threads.rollup import RollupRecorder

logger = logging.getLogger(__name__)


class Deferral:
    """Park, defer or give back the messages the dispatcher does not start."""

    def __init__(self, *, tenants: TenantStore, jobs: JobStore, messages: Messages,
                 handoff: HandOff, metrics: Metrics, contention: ContentionMeter,
                 rollups: RollupRecorder, clock: Clock) -> None:
        self.tenants, self.jobs, self.messages, self.handoff = tenants, jobs, messages, handoff
        self.metrics, self.contention, self.rollups, self.clock = (metrics, contention, rollups,
                                                                   clock)
        #: Messages parked at their tenant's cap since the dispatcher last set this to 0.
        self.parks = 0

    def at_cap(self, request: JobRequest, message: Received, cap: int,
               note: str | None = None, reason: str | None = None) -> None:
        """Park *message* at its tenant's *cap* for a hand-off (or defer it, the tenant
        paused), noting why on its job's record; *note* adds to the reason, *reason*
        replaces it."""
        self.parks += cap > 0
        self.metrics.emit("cap_defer", 1, tenant_id=request.tenant_id)
        self.contention.deferred(request.tenant_id, request.job_id)
        self.rollups.deferred(request.tenant_id, self.clock.time())
        reason = reason or f"at tenant cap: {request.tenant_id} holds all {cap} of its slots"
        if cap <= 0:  # paused: no slot of its will free, so nothing to wait for but an operator
            reason = f"tenant {request.tenant_id} is paused (cap 0)"
        if note:
            reason = f"{reason}; {note}"
        if cap <= 0:  # the record first: whoever sees the deferral (or re-publish) finds it
            self.jobs.note_waiting(request, message.sent_at, reason, deferred=True)
            self.messages.defer(request, message)
        elif not self.handoff.park(request, message, also=[
                self.jobs.waiting_op(request, message.sent_at, reason, deferred=True)]):
            self.jobs.note_waiting(request, message.sent_at, reason, deferred=True)
        logger.info("parked job %s: %s", request.job_id, reason,
                    extra=extra("cap_defer", request.tenant_id, request.job_id))

    def share_park(self, request: JobRequest, message: Received, first: str) -> None:
        """Fair share: park *message* below its tenant's cap, for *first* goes before it."""
        tenant = request.tenant_id
        cap = self.tenants.cap_for(tenant)
        why = (f"{SHARE_PARK_REASON}: {tenant} is above its weighted share of recent licence "
               f"time, and {first} is further below its own" if first != tenant else
               f"{SHARE_PARK_REASON}: {tenant} may take no slot now (weight 0, or at its cap "
               "as the share view counts its slots)")
        self.at_cap(request, message, cap, reason=why)

    def outpaced(self, request: JobRequest, message: Received, cap: int, limit: int) -> None:
        """Fair share: the acquire's bound (*limit*, the slots the decision counted plus
        one) refused *message*: another host started a job of its tenant meanwhile."""
        tenant = request.tenant_id
        self.at_cap(request, message, cap, reason=(
            f"{SHARE_PARK_REASON}: another host started a job of {tenant} since this host's "
            f"decision counted {limit - 1} of its {cap} slots"))

    def give_back(self, message: Received) -> None:
        """No slot here for *message*: visible again at once, for whichever host has one."""
        self.messages.give_back(message)

    def defer(self, request: JobRequest, message: Received, reason: str | None) -> bool:
        """Push the message back for a deferral and note why; False when re-published instead."""
        if reason:
            self.jobs.note_waiting(request, message.sent_at, reason)
        return self.messages.defer(request, message)
